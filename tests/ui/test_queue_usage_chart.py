"""The queue page's usage chart in the browser: a week of training runs in nlp-pretrain (gangweb's own job
timelines), the window selector swapping the chart through htmx, and the numbers the API gives; screenshot
docs/screenshots/queue-usage.png (the usage section, GANGWEB_UPDATE_SCREENSHOTS=1)."""
import os
from datetime import timedelta

import pytest

from scheduling.choices import GangPhase
from scheduling.db import clock
from scheduling.models import GangJob, PhaseTransition, QueuePolicy
from tests import builders
from tests.ui import demo
from tests.ui.browser import ARTIFACTS, DOCS_SCREENSHOTS

pytestmark = [pytest.mark.ui, pytest.mark.django_db(transaction=True)]
HOUR = 3600

# (name, GPUs, CPU millicores, memory GiB, started h ago, ended h ago) of nlp-pretrain's finished runs this week.
RUNS = [("sft-a", 8, 34000, 280, 150, 126), ("sft-b", 4, 17000, 140, 120, 100), ("pretrain-1", 12, 50000, 420, 96, 60),
        ("eval-sweep", 2, 8000, 64, 54, 50), ("pretrain-2", 8, 34000, 280, 40, 20), ("ablation", 4, 17000, 140, 14, 6)]


def week_of_runs(user):
    """nlp-pretrain's finished runs of the week (RUNS), each with its Running entry and finish time."""
    now = clock.now()
    queue = QueuePolicy.objects.get(name="nlp-pretrain")
    template = builders.make_template("week", pod_sets=[builders.pod_set(containers=[builders.container(gpu=1)])])
    for name, gpu, millicores, gib, started, ended in RUNS:
        job = builders.make_job(template, queue, queue.clusters.first(), name=name, user=user)
        PhaseTransition.objects.filter(job=job).delete()
        PhaseTransition.objects.create(job=job, phase=GangPhase.RUNNING, at=now - timedelta(hours=started))
        GangJob.objects.filter(pk=job.pk).update(
            phase=GangPhase.SUCCEEDED, finished_at=now - timedelta(hours=ended),
            phase_changed_at=now - timedelta(hours=ended), requested_gpu=gpu, requested_cpu_millicores=millicores,
            requested_memory_bytes=gib * 2**30)


def section_screenshot(page, name: str) -> None:
    """The usage section alone (as tests/ui/browser.screenshot saves a page; docs copy with
    GANGWEB_UPDATE_SCREENSHOTS=1)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.locator("section[aria-labelledby=h-usage]").screenshot(path=str(path))
    if os.environ.get("GANGWEB_UPDATE_SCREENSHOTS") == "1":
        (DOCS_SCREENSHOTS / path.name).write_bytes(path.read_bytes())


def test_the_queue_page_charts_a_week_of_use_and_swaps_the_window(admin_page, admin_user, api):
    demo.populate(admin_user)
    week_of_runs(admin_user)
    page = admin_page
    page.goto("/queues/nlp-pretrain/?window=7d")
    charts = page.locator("#usage-charts")
    assert charts.get_attribute("data-window") == "7d"
    gpu = charts.locator("[data-resource=gpu]").inner_text()
    # The busiest run (pretrain-1, 12 GPUs) is the week's peak; the GPU·h used add up the runs inside the window.
    used = sum(gpu_ * (start - end) for _, gpu_, _, _, start, end in RUNS)  # all end within 7 d; sft-a starts at 150 h
    assert "peak 12 GPUs" in gpu
    api_week = api.get("/api/v1/queues/nlp-pretrain/usage-history/?window=7d").data
    api_used = sum(b["used"]["gpu"] for b in api_week["buckets"]) / HOUR
    assert api_used == pytest.approx(used + 8 * 200 / HOUR, rel=1e-3)  # + the demo's 8-GPU job running ~200 s
    assert used == 904 and "904 GPU·h used in 7d" in gpu  # the page's number is the API's, in people's units
    assert charts.locator("polyline.chart-decayed").count() == 3
    assert charts.locator("[data-resource=gpu] polyline.chart-reported").count() == 1  # KAI's readings (demo)
    section_screenshot(page, "queue-usage")

    # The selector swaps the chart alone (htmx): 24 h shows only the last day's runs.
    page.select_option("#w", "24h")
    page.locator("#usage-charts[data-window='24h']").wait_for()
    day = page.locator("#usage-charts [data-resource=gpu]").inner_text()
    assert "peak 8 GPUs" in day and "used in 24h" in day
    page.select_option("#w", "30d")
    page.locator("#usage-charts[data-window='30d']").wait_for()
    assert page.url.endswith("/queues/nlp-pretrain/?window=7d")  # the page itself was not reloaded
    assert not page.js_errors
