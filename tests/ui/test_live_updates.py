"""Live parts update without a reload: the job page's timeline and the jobs list follow the job's phase.

Here the test itself records the transitions the observer would record (committed rows, as the live server
sees them); tests/ui/test_cluster_flow.py drives the same page with the real reconciler and control plane.
"""
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.choices import GangPhase
from scheduling.models import GangJob, PhaseTransition
from tests import builders

pytestmark = [pytest.mark.ui, pytest.mark.django_db(transaction=True)]


def record(job, phase, seconds_later, reason):
    """Append a transition and set the job's phase, as the observer does."""
    at = timezone.now() + timedelta(seconds=seconds_later)
    PhaseTransition.objects.create(job=job, phase=phase, at=at, source=f"PodGroup default/{job.name}",
                                   reason=reason)
    GangJob.objects.filter(pk=job.pk).update(phase=phase, phase_changed_at=at, phase_reason=reason)


def test_timeline_and_jobs_list_follow_the_phase_without_reloading(admin_page, admin_user):
    page = admin_page
    template, queue, cluster = builders.make_template("llm"), builders.make_queue("team-a"), builders.make_cluster()
    job = builders.make_job(template, queue, cluster, name="live-1", user=admin_user)

    page.goto(f"/jobs/{job.pk}/")
    page.evaluate("window.gangwebNoReload = 'still here'")  # a reload would wipe this
    assert page.locator("#job-phase").inner_text() == "Submitted"

    for phase, reason in ((GangPhase.DISPATCHED, "GangCreated"), (GangPhase.QUEUED, "WaitingForScheduler"),
                          (GangPhase.SCHEDULED, "PodGroupScheduled"), (GangPhase.RUNNING, "AllPodsRunning")):
        record(job, phase, 0, reason)
        page.locator(f"#job-phase:text-is('{phase}')").wait_for(timeout=8_000)
    bars = page.locator(".timeline .ph").all_inner_texts()
    assert bars == ["Submitted", "Dispatched", "Queued", "Scheduled", "Running"]
    assert page.evaluate("window.gangwebNoReload") == "still here"

    jobs = page.context.new_page()
    jobs.goto("/jobs/?q=live")
    jobs.evaluate("window.gangwebNoReload = 'still here'")
    assert jobs.locator("#job-table tbody .badge").inner_text() == "Running"
    record(job, GangPhase.SUCCEEDED, 1, "Completed")
    jobs.locator("#job-table tbody .badge:text-is('Succeeded')").wait_for(timeout=8_000)
    assert jobs.evaluate("window.gangwebNoReload") == "still here"

    # A finished job's page stops polling: its live block carries no hx-trigger any more.
    page.locator("#job-phase:text-is('Succeeded')").wait_for(timeout=8_000)
    assert page.locator("#job-live").get_attribute("hx-trigger") is None
    assert page.get_by_role("button", name="Resubmit").is_visible()
    assert not page.js_errors and not jobs.js_errors
