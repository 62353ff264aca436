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


def test_a_queued_job_page_shows_its_time_in_queue_so_far(ui, setup, admin_user):
    import re
    from datetime import timedelta

    from django.utils import timezone

    template, queue, cluster = setup
    job = builders.make_job(template, queue, cluster, name="waits", phase=GangPhase.QUEUED, user=admin_user,
                            at=timezone.now() - timedelta(minutes=5, seconds=2))  # Queued 2 s after that
    html = ui.get(f"/jobs/{job.pk}/live/", HTTP_HX_REQUEST="true").content.decode()
    stat = re.search(r'data-duration="time_in_queue">.*?<strong>(.*?)</strong>', html, re.S).group(1)
    assert re.fullmatch(r"5m 0\ds so far", re.sub(r"<[^>]+>", "", stat))  # whole seconds; the request takes some
    run = re.search(r'data-duration="run_time">.*?<strong>(.*?)</strong>', html, re.S).group(1)
    assert run == "—"


def test_a_job_page_lists_what_blocks_it_before_the_details(ui, setup, admin_user):
    from scheduling.models import GangJob

    template, queue, cluster = setup
    job = builders.make_job(template, queue, cluster, name="too-big", phase=GangPhase.QUEUED, user=admin_user)
    fact = {"code": "NoNodeFits", "resource": "nvidia.com/gpu", "per_pod": 16, "largest_node": 8, "nodes": 3,
            "message": "one pod needs 16 GPUs; the largest node has 8 allocatable"}
    GangJob.objects.filter(pk=job.pk).update(why_pending={
        "reason": "Unschedulable", "summary": "One pod needs 16 GPUs; the largest node has 8 allocatable.",
        "pods": {"bound": 0, "required": 1, "total": 1, "created": 1}, "blocking": [fact]})
    html = ui.get(f"/jobs/{job.pk}/live/", HTTP_HX_REQUEST="true").content.decode()
    assert ('<li><span class="badge neutral">NoNodeFits</span> One pod needs 16 GPUs; the largest node has 8 '
            'allocatable.</li>') in html
    assert html.index("NoNodeFits") < html.index("pods the gang needs are bound")


def test_the_job_page_numbers_attempts_as_the_api_does(ui, api, setup, admin_user):
    """A re-queued gang: the transitions table's Attempt column shows the API's `attempt` (0, then 1), not a
    1-based count that disagrees with it."""
    import re
    from datetime import timedelta

    from scheduling.models import PhaseTransition

    template, queue, cluster = setup
    job = builders.make_job(template, queue, cluster, name="again", phase=GangPhase.RUNNING, user=admin_user)
    later = job.phase_changed_at + timedelta(seconds=30)
    PhaseTransition.objects.create(job=job, phase=GangPhase.QUEUED, attempt=1, at=later, source="pod/x",
                                   reason="Requeued")
    html = ui.get(f"/jobs/{job.pk}/live/", HTTP_HX_REQUEST="true").content.decode()
    rows = re.findall(r"<tr><td>(\w+)</td><td>(\d+)</td>", html)
    api_rows = [(t["phase"], str(t["attempt"])) for t in api.get(f"/api/v1/jobs/{job.pk}/").data["timeline"]]
    assert rows == api_rows
    assert rows[-1] == ("Queued", "1") and rows[0] == ("Submitted", "0")
    # The chart above the table names the re-queued attempt by the same number (it said "#2" for attempt 1).
    assert re.findall(r'data-attempt="(\d+)">attempt (\d+)<', html) == [("1", "1")]
    assert "#2" not in html


def test_a_job_page_names_objects_that_are_not_gangwebs_and_counts_the_controller_disputes(ui, setup, admin_user):
    """Issue 30, items 5 and 7: what the pass reported (observed.foreign, pod_counts.note) is on the page."""
    from scheduling.models import GangJob

    template, queue, cluster = setup
    job = builders.make_job(template, queue, cluster, name="claimed", phase=GangPhase.QUEUED, user=admin_user)
    note = "3 active pods of Job ns/claimed-w seen, its Job controller reports 0: counting 0 of 3 pods"
    GangJob.objects.filter(pk=job.pk).update(observed={
        "pods": [], "pod_counts": {"created": 0, "bound": 0, "running": 0, "succeeded": 0, "failed": 0,
                                   "controller": {"active": 0}, "uncounted": ["forged-0"], "note": note},
        "foreign": [{"kind": "PodGroup", "apiVersion": "scheduling.run.ai/v2alpha2", "namespace": "ns",
                     "name": "copy", "uid": "u", "reason": "LookAlike", "message": "PodGroup ns/copy carries ..."}]})
    html = ui.get(f"/jobs/{job.pk}/live/", HTTP_HX_REQUEST="true").content.decode()
    assert "Objects that are not gangweb&#x27;s" in html or "Objects that are not gangweb's" in html
    assert '<span class="badge neutral">LookAlike</span> <span class="mono small">PodGroup ns/copy</span>' in html
    assert note in html and "0 created" in html
    assert "{&#x27;active&#x27;" not in html and "forged-0" not in html  # only the numbers are listed as counts
