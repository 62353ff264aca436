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
    durations = r.data["durations"]
    assert {k: v["duration_s"] for k, v in durations.items() if not v["ongoing"]} == {
        "time_in_queue": 27.0, "time_to_schedule": 30.0, "time_to_running": 40.0}
    assert durations["run_time"]["ongoing"] is True  # still running: it counts until now


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


def test_a_queued_job_shows_its_time_in_queue_so_far_as_ongoing(api, setup):
    r = api.post("/api/v1/jobs/", builders.submit_body(*setup, name="waiting"), format="json")
    job = GangJob.objects.get(pk=r.data["id"])
    t0 = timezone.now() - timedelta(minutes=10)
    PhaseTransition.objects.filter(job=job).delete()  # rewind the submit time: ten minutes ago
    for phase, seconds in [("Submitted", 0), ("Dispatched", 2), ("Queued", 5)]:
        PhaseTransition.objects.create(job=job, phase=phase, at=t0 + timedelta(seconds=seconds), reason=phase)
    data = api.get(f"/api/v1/jobs/{job.id}/").data
    in_queue = data["durations"]["time_in_queue"]
    assert in_queue["ongoing"] is True
    assert 595 <= in_queue["duration_s"] <= 595 + 60  # queued 5 s after t0, ten minutes ago
    assert data["durations"]["time_to_schedule"]["ongoing"] is True
    assert data["durations"]["time_to_schedule"]["duration_s"] >= 600
    assert data["durations"]["run_time"] is None  # not started
    timeline = data["timeline"]
    assert [(e["phase"], e["duration_s"], e["ongoing"]) for e in timeline[:2]] == [
        ("Submitted", 2.0, False), ("Dispatched", 3.0, False)]
    assert timeline[2]["phase"] == "Queued" and timeline[2]["ongoing"] is True
    assert timeline[2]["duration_s"] == pytest.approx(in_queue["duration_s"], abs=0.01)
    entries = api.get(f"/api/v1/jobs/{job.id}/timeline/").data
    assert [(e["phase"], e["ongoing"]) for e in entries] == [("Submitted", False), ("Dispatched", False),
                                                             ("Queued", True)]


def test_a_finished_job_has_no_ongoing_duration(api, setup):
    r = api.post("/api/v1/jobs/", builders.submit_body(*setup, name="done"), format="json")
    job = GangJob.objects.get(pk=r.data["id"])
    t0 = job.transitions.get().at
    for phase, seconds in [("Queued", 3), ("Scheduled", 30), ("Running", 40), ("Succeeded", 100)]:
        PhaseTransition.objects.create(job=job, phase=phase, at=t0 + timedelta(seconds=seconds), reason=phase)
    data = api.get(f"/api/v1/jobs/{job.id}/").data
    assert data["durations"] == {"time_in_queue": {"duration_s": 27.0, "ongoing": False, "inferred": False},
                                 "time_to_schedule": {"duration_s": 30.0, "ongoing": False, "inferred": False},
                                 "time_to_running": {"duration_s": 40.0, "ongoing": False, "inferred": False},
                                 "run_time": {"duration_s": 60.0, "ongoing": False, "inferred": False}}
    assert [(e["phase"], e["duration_s"], e["ongoing"]) for e in data["timeline"]] == [
        ("Submitted", 3.0, False), ("Queued", 27.0, False), ("Scheduled", 10.0, False), ("Running", 60.0, False),
        ("Succeeded", None, False)]


def test_an_inferred_time_is_marked_in_the_api_and_on_the_job_page(api, setup, client, admin_user):
    """A Running time gangweb could only infer (no container startedAt): `inferred: true` on the entry and on the
    spans it ends, "inferred" on the job page; the cluster's own times are not marked."""
    r = api.post("/api/v1/jobs/", builders.submit_body(*setup, name="guessed"), format="json")
    job = GangJob.objects.get(pk=r.data["id"])
    t0 = job.transitions.get().at
    for phase, seconds, inferred in [("Queued", 3, False), ("Scheduled", 30, False), ("Running", 40, True)]:
        PhaseTransition.objects.create(job=job, phase=phase, at=t0 + timedelta(seconds=seconds), reason=phase,
                                       inferred=inferred)
    data = api.get(f"/api/v1/jobs/{job.id}/").data
    assert [(e["phase"], e["inferred"]) for e in data["timeline"]] == [
        ("Submitted", False), ("Queued", False), ("Scheduled", False), ("Running", True)]
    assert data["durations"]["time_to_running"] == {"duration_s": 40.0, "ongoing": False, "inferred": True}
    assert data["durations"]["time_to_schedule"]["inferred"] is False
    assert data["durations"]["run_time"]["inferred"] is True
    assert [e["inferred"] for e in api.get(f"/api/v1/jobs/{job.id}/timeline/").data] == [False, False, False, True]
    client.force_login(admin_user)
    page = client.get(f"/jobs/{job.id}/").content.decode()
    assert page.count('<tr class="inferred">') == 1 and "(inferred)" in page


def test_a_job_cancelled_while_queued_waited_until_it_was_cancelled(api, setup):
    r = api.post("/api/v1/jobs/", builders.submit_body(*setup, name="gave-up"), format="json")
    job = GangJob.objects.get(pk=r.data["id"])
    t0 = job.transitions.get().at
    for phase, seconds in [("Queued", 3), ("Cancelled", 63)]:
        PhaseTransition.objects.create(job=job, phase=phase, at=t0 + timedelta(seconds=seconds), reason=phase)
    durations = api.get(f"/api/v1/jobs/{job.id}/").data["durations"]
    assert durations == {"time_in_queue": {"duration_s": 60.0, "ongoing": False, "inferred": False},
                         "time_to_schedule": None, "time_to_running": None, "run_time": None}


def test_job_detail_reads_the_timeline_once_however_long_it_is(api, setup):
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = []
    for name, phases in [("short", ["Dispatched"]), ("long", ["Dispatched", "Queued", "Scheduled", "Running"])]:
        r = api.post("/api/v1/jobs/", builders.submit_body(*setup, name=name), format="json")
        job = GangJob.objects.get(pk=r.data["id"])
        t0 = job.transitions.get().at
        for i, phase in enumerate(phases, 1):
            PhaseTransition.objects.create(job=job, phase=phase, at=t0 + timedelta(seconds=i), reason=phase)
        cache.clear()  # the start estimate's history is remembered a minute: both reads start without it
        with CaptureQueriesContext(connection) as queries:
            data = api.get(f"/api/v1/jobs/{job.id}/").data
        assert len(data["timeline"]) == len(phases) + 1 and data["timeline"][-1]["ongoing"] is True
        counts.append(len(queries))
    assert counts[0] == counts[1]
    # The job's timeline, read once (the start estimate's queries read other jobs' Running times in subqueries).
    assert sum('WHERE "scheduling_phasetransition"."job_id" IN' in q["sql"] for q in queries.captured_queries) == 1
