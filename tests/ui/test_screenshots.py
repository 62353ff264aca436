"""Screenshots of the overview, the queue tree and a job page (docs/screenshots/, shown in the README), taken
from a realistic data set, with checks that each page shows the numbers it is about."""
import pytest

from tests.ui import demo
from tests.ui.browser import screenshot

pytestmark = [pytest.mark.ui, pytest.mark.django_db(transaction=True)]


def test_screenshots_of_overview_queue_tree_and_job(admin_page, admin_user, monkeypatch):
    from scheduling.services.jobs import events

    page = admin_page
    job = demo.populate(admin_user)
    # The demo cluster has no API server: its events come from the demo data (the live path is exercised by
    # tests/cluster/test_dashboard_flow.py).
    monkeypatch.setattr(events, "job_events", lambda j, api=None: demo.events(j) if j.pk == job.pk else [])

    page.goto("/")
    assert "Queued longer than 15m 00s" in page.inner_text("#h-stuck")
    assert "llama-70b-sft" in page.inner_text("main")
    screenshot(page, "overview")

    page.goto("/queues/")
    research = page.locator("#queue-research")
    assert "quota 32 GPUs · limit 40 GPUs · allocated 16 GPUs · requested 28 GPUs" in research.inner_text()
    assert "add up to 36 GPUs, more than the 32 GPUs quota of 'research'" in research.inner_text()
    assert "gpu_limit is 0" in page.locator("#queue-sandbox").inner_text()
    page.locator("#children-of-research > summary").click()  # children load on expand
    assert "expected 24, found 32" in page.locator("#queue-team-vision").inner_text()
    page.locator("#children-of-team-nlp > summary").click()
    page.locator("#queue-nlp-pretrain").wait_for()
    screenshot(page, "queues")

    page.goto(f"/jobs/{job.pk}/")
    assert page.locator(".timeline .dur[data-phase=Queued]").inner_text() == "46s"
    page.locator("#job-events").get_by_text("FailedScheduling").wait_for()
    screenshot(page, "job-detail")

    stuck = page.context.new_page()
    stuck.goto("/jobs/?phase=Queued&sort=-in_phase")
    stuck.get_by_role("link", name="llama-70b-sft").click()
    assert "Queue 'nlp-pretrain', nvidia.com/gpu: quota 8 GPUs, limit 12 GPUs, allocated 8 GPUs, requested 16 " \
           "GPUs; this job asks for 8 GPUs, and 4 GPUs are left under the limit." in stuck.inner_text("#job-live")
    screenshot(stuck, "job-pending")

    # The other pages, for review (test-artifacts only), each showing what it is about.
    for url, name, expect in (("/jobs/?sort=-in_phase", "jobs", "11 jobs"),
                              ("/submit/?template=llm-pretrain", "submit", "worker: nvidia.com/gpu per pod"),
                              ("/templates/llm-pretrain/", "template", "creates 5 pods"),
                              ("/clusters/local/", "cluster", "scheduling.k8s.io/v1alpha2"),
                              ("/queues/nlp-pretrain/", "queue-page", "Usage over time")):
        page.goto(url)
        assert expect in page.inner_text("main")
        screenshot(page, name, docs=False)

    # The last page visited: the usage chart, a panel per resource, and KAI's readings on the GPU panel.
    assert page.locator("polyline.chart-allocated").count() == 3
    assert page.locator("[data-resource=gpu] polyline.chart-reported").count() == 1

    # Narrow screen: nothing wider than the viewport except inside scrolling tables and code blocks.
    page.set_viewport_size({"width": 390, "height": 844})
    for url in ("/", f"/jobs/{job.pk}/", "/queues/"):
        page.goto(url)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390, url
    screenshot(page, "queues-narrow", docs=False)
    page.context.clear_cookies()
    page.goto("/accounts/login/")
    screenshot(page, "login", docs=False)
    assert not page.js_errors
