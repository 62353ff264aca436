"""Counts that do not grow with the history: the overview counts active jobs and the last 24 hours' finished
ones; the job list's count stops at a cap."""
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import GangJob
from scheduling.views import jobs as job_views
from tests import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(setup, admin_user):
    template, queue, cluster = setup
    old = timezone.now() - timedelta(days=3)
    made = {name: builders.make_job(template, queue, cluster, name=name, phase=phase, user=admin_user, at=old)
            for name, phase in (("old-running", "Running"), ("old-queued", "Queued"), ("old-done", "Succeeded"),
                                ("new-done", "Succeeded"), ("new-failed", "Failed"))}
    GangJob.objects.filter(name__startswith="new-").update(phase_changed_at=timezone.now() - timedelta(hours=2))
    return made


def test_the_overview_counts_active_jobs_of_any_age_and_jobs_finished_in_the_last_24_hours(ui, jobs):
    context = ui.get("/").context
    counts = {p["phase"]: p["n"] for p in context["phases"]}
    assert (counts["Running"], counts["Queued"], counts["Succeeded"], counts["Failed"]) == (1, 1, 1, 1)
    assert (context["active_jobs"], context["finished_jobs"]) == (2, 2)
    assert "2 active; 2 finished in the last 24 hours" in ui.get("/").content.decode()


def test_the_job_list_count_stops_at_the_cap_and_says_so(ui, jobs, monkeypatch):
    monkeypatch.setattr(job_views, "COUNT_CAP", 3)
    response = ui.get("/jobs/")
    page = response.context["page"]
    assert (page.count, page.capped, len(page.object_list)) == (3, True, 5)  # the page itself is not capped
    assert "More than 3 jobs match" in response.content.decode()
    monkeypatch.setattr(job_views, "COUNT_CAP", 5)
    page = ui.get("/jobs/").context["page"]
    assert (page.count, page.capped) == (5, False)
    assert "5 jobs" in ui.get("/jobs/").content.decode()
