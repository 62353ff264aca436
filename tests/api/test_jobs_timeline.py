"""A job's timeline comes back in order with timestamps, sources and reasons; durations are derived from it."""
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import GangJob, PhaseTransition
from tests import builders

pytestmark = pytest.mark.django_db


def test_timeline_is_returned_in_order_with_reasons_and_durations(api, setup):
    r = api.post("/api/v1/jobs/", builders.submit_body(*setup, name="tl"), format="json")
    job = GangJob.objects.get(pk=r.data["id"])
    t0 = job.transitions.get().at
    # Written out of order on purpose: the API orders by time.
    for phase, seconds, reason in [("Running", 40, "AllPodsRunning"), ("Dispatched", 2, "ObjectsCreated"),
                                   ("Scheduled", 30, "Scheduled"), ("Queued", 3, "Unschedulable")]:
        PhaseTransition.objects.create(job=job, phase=phase, at=t0 + timedelta(seconds=seconds),
                                       source="PodGroup default/tl-abc", reason=reason)
    r = api.get(f"/api/v1/jobs/{job.id}/")
    assert [e["phase"] for e in r.data["timeline"]] == ["Submitted", "Dispatched", "Queued", "Scheduled", "Running"]
    assert [e["reason"] for e in r.data["timeline"]][1:] == ["ObjectsCreated", "Unschedulable", "Scheduled",
                                                             "AllPodsRunning"]
    assert r.data["timeline"][2]["source"] == "PodGroup default/tl-abc"
    assert r.data["durations"] == {"time_in_queue": 27.0, "time_to_schedule": 30.0, "time_to_running": 40.0,
                                   "run_time": None}


def test_phase_history_is_append_only():
    with pytest.raises(TypeError):
        PhaseTransition.objects.update(reason="x")


def test_a_saved_transition_cannot_be_rewritten(setup, admin_user):
    template, queue, cluster = setup
    job = GangJob.objects.create(name="x", template_version=template, queue=queue, cluster=cluster,
                                 resolved_spec=template.spec)
    t = PhaseTransition.objects.create(job=job, phase="Submitted", at=timezone.now())
    t.reason = "changed"
    with pytest.raises(TypeError):
        t.save()
