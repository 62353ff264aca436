"""Every dashboard page renders for a logged-in admin and shows the numbers a user checks."""
import pytest

from scheduling.choices import GangPhase
from tests import builders


@pytest.fixture
def jobs(setup, admin_user):
    template, queue, cluster = setup
    return [builders.make_job(template, queue, cluster, name=f"job-{p.lower()}", phase=p, user=admin_user)
            for p in (GangPhase.QUEUED, GangPhase.RUNNING, GangPhase.FAILED)]


@pytest.mark.parametrize("url", ["/", "/queues/", "/jobs/", "/submit/", "/templates/", "/clusters/",
                                 "/templates/new/", "/clusters/new/", "/queues/new/", "/templates/llm/",
                                 "/clusters/local/", "/submit/?template=llm"])
def test_page_renders(ui, jobs, url):
    response = ui.get(url)
    assert response.status_code == 200, response.content[:500]


def test_pages_need_login(client, db):
    assert client.get("/jobs/").status_code == 302


def test_job_page_and_its_live_fragment_render(ui, jobs):
    job = jobs[1]
    page = ui.get(f"/jobs/{job.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="job-live"' in html and "Running" in html
    live = ui.get(f"/jobs/{job.pk}/live/", HTTP_HX_REQUEST="true")
    assert live.status_code == 200
    assert live.content.decode().lstrip().startswith("<div id=\"job-live\"") or 'id="job-live"' in live.content.decode()
