"""Start-time estimate through the API: GET /api/v1/jobs/<id>/estimate/ and `estimated_start` of the job detail.

A cluster of 8 GPUs; team-a's finished jobs of the template ran 60 min each (Running to Succeeded, the cluster's own
times); one 8-GPU job of team-a has run 20 min. A pending 4-GPU job then starts when it ends: in 40 min. Every job
of the world was submitted over an hour ago, so the replays expect no job submitted meanwhile (arrivals: the last
test). Real PostgreSQL, no cluster (the watcher's capacity is written on the Cluster row as the watcher would)."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduling.choices import GangPhase
from scheduling.models import GangJob, PhaseTransition
from tests import builders

pytestmark = pytest.mark.django_db

CAPACITY = {"nodes": 1, "allocatable": {"nvidia.com/gpu": 8, "cpu": 64, "memory": 512 * 2**30},
            "largest": {"nvidia.com/gpu": 8, "cpu": 64, "memory": 512 * 2**30}}


def finished(template, queue, cluster, user, name, minutes, inferred=False):
    """A job that ran `minutes` (Running to Succeeded) and ended an hour or more ago."""
    job = builders.make_job(template, queue, cluster, name=name, user=user)
    start = timezone.now() - timedelta(hours=3)
    PhaseTransition.objects.create(job=job, phase=GangPhase.RUNNING, at=start, source="test")
    end = start + timedelta(minutes=minutes)
    PhaseTransition.objects.create(job=job, phase=GangPhase.SUCCEEDED, at=end, source="test", inferred=inferred)
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.SUCCEEDED, phase_changed_at=end, finished_at=end,
                                             created_at=start - timedelta(minutes=1))
    return job


@pytest.fixture
def world(admin_user):
    cluster = builders.make_cluster("local", capacity=CAPACITY)
    team_a = builders.make_queue("team-a", clusters=[cluster])
    template = builders.make_template("train", pod_sets=[builders.pod_set(replicas=1, containers=[
        builders.container(gpu=4)])])
    for i in range(5):
        finished(template, team_a, cluster, admin_user, f"done-{i}", 60)
    # Running for 20 min (make_job records Running 4 s after `at`), holding all 8 GPUs.
    big = builders.make_job(template, team_a, cluster, name="big", user=admin_user, phase=GangPhase.RUNNING,
                            at=timezone.now() - timedelta(minutes=20, seconds=4), requested_gpu=8)
    waiting = builders.make_job(template, team_a, cluster, name="waiting", user=admin_user, phase=GangPhase.QUEUED)
    GangJob.objects.filter(pk=big.pk).update(created_at=timezone.now() - timedelta(minutes=21))
    GangJob.objects.filter(pk=waiting.pk).update(created_at=timezone.now() - timedelta(hours=2))
    return {"cluster": cluster, "team_a": team_a, "template": template, "big": big, "waiting": waiting,
            "admin": admin_user}


def test_the_estimate_is_when_the_running_job_is_expected_to_end(api, world):
    data = api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").data
    assert data["status"] == "estimated"
    assert (data["p50_in_minutes"], data["p90_in_minutes"]) == (40, 40)
    assert data["p50_seconds"] == pytest.approx(40 * 60, abs=10)
    assert data["p50"] - timezone.now() == pytest.approx(timedelta(minutes=40), abs=timedelta(seconds=10))
    assert data["ahead_in_queue"] == 0
    assert data["needs"] == {"resource": "gpu", "amount": 4.0, "free_now": 0.0}
    assert data["freed_by"] == {"name": "big", "running": True,
                                "history": {"level": "same template and queue", "runs": 5, "p50_seconds": 3600.0}}
    assert data["text"].startswith("p50 in 40 min (") and "; p90 in 40 min (" in data["text"]
    assert data["evidence"] == ("jobs like big (same template and queue) ran 60 min (p50) over 5 runs and big has run "
                                "20 min; first in line in team-a; needs 4 GPUs, 0 free now, 8 once big ends")
    detail = api.get(f"/api/v1/jobs/{world['waiting'].pk}/").data["estimated_start"]
    assert detail["status"] == "estimated" and detail["p50_in_minutes"] == 40


def test_the_estimate_moves_when_the_running_job_ends(api, world):
    GangJob.objects.filter(pk=world["big"].pk).update(phase=GangPhase.SUCCEEDED, finished_at=timezone.now())
    data = api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").data
    assert data["status"] == "now" and data["p50_in_minutes"] == 0
    assert data["needs"] == {"resource": "gpu", "amount": 4.0, "free_now": 8.0}


def test_a_job_ahead_in_line_is_counted(api, world):
    later = builders.make_job(world["template"], world["team_a"], world["cluster"], name="later",
                              user=world["admin"], phase=GangPhase.QUEUED, requested_gpu=8)
    data = api.get(f"/api/v1/jobs/{later.pk}/estimate/").data
    # `waiting` (4 GPUs) starts at 40 min when big ends; 4 GPUs stay free, not the 8 `later` needs, until waiting
    # ends 60 min after: 100 min.
    assert data["ahead_in_queue"] == 1 and data["p50_in_minutes"] == 100
    assert data["freed_by"]["name"] == "waiting" and data["freed_by"]["running"] is False


def test_thin_history_is_unknown_with_the_reason(api, world):
    GangJob.objects.filter(name__startswith="done-").exclude(name__in=["done-0", "done-1"]).delete()
    data = api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").data
    assert data["status"] == "unknown" and data["p50"] is None and data["p50_in_minutes"] is None
    assert data["reason"] == ("too little history to tell when big ends: 2 finished runs with real start and end "
                              "times at best (by same template and queue), 5 needed")
    assert data["text"] == "unknown: " + data["reason"]


def test_inferred_times_are_not_history(api, world):
    GangJob.objects.filter(name__startswith="done-").delete()
    for i in range(5):
        finished(world["template"], world["team_a"], world["cluster"], world["admin"], f"guessed-{i}", 60,
                 inferred=True)
    assert api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").data["status"] == "unknown"


def test_capacity_unknown_and_too_big_for_the_cluster(api, world):
    huge = builders.make_job(world["template"], world["team_a"], world["cluster"], name="huge",
                             user=world["admin"], phase=GangPhase.QUEUED, requested_gpu=16)
    data = api.get(f"/api/v1/jobs/{huge.pk}/estimate/").data
    assert data["status"] == "never"
    assert data["text"] == ("never as things stand: the job asks 16 GPUs; the cluster's schedulable nodes have "
                            "8 GPUs in all")
    world["cluster"].capacity = {}
    world["cluster"].save()
    assert api.get(f"/api/v1/jobs/{huge.pk}/estimate/").data["status"] == "unknown"


def test_a_job_that_is_not_pending_has_no_estimate(api, world):
    data = api.get(f"/api/v1/jobs/{world['big'].pk}/estimate/").data
    assert data["status"] == "not_pending" and data["phase"] == "Running"
    assert api.get(f"/api/v1/jobs/{world['big'].pk}/").data["estimated_start"] is None
    assert "estimated_start" not in api.post("/api/v1/jobs/", builders.submit_body(
        world["template"], world["team_a"], world["cluster"], name="fresh"), format="json").data


def test_jobs_of_queues_the_reader_cannot_see_are_not_named(api, world):
    other = builders.make_queue("team-b", clusters=[world["cluster"]])
    GangJob.objects.filter(pk=world["big"].pk).update(queue=other)
    for i in range(5):
        finished(world["template"], other, world["cluster"], world["admin"], f"b-done-{i}", 60)
    sam = builders.make_user("sam")
    builders.grant(world["team_a"], "submitter", user=sam)
    api.force_authenticate(sam)
    data = api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").data
    assert data["freed_by"]["name"] == "a job of another queue"
    assert "big" not in data["evidence"]


def test_the_estimate_costs_the_same_queries_with_more_jobs(api, world):
    def count():
        with CaptureQueriesContext(connection) as ctx:
            assert api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").status_code == 200
        return len(ctx.captured_queries)

    before = count()
    for i in range(10):
        builders.make_job(world["template"], world["team_a"], world["cluster"], name=f"more-run-{i}",
                          user=world["admin"], phase=GangPhase.RUNNING)
        builders.make_job(world["template"], world["team_a"], world["cluster"], name=f"more-wait-{i}",
                          user=world["admin"], phase=GangPhase.QUEUED)
        finished(world["template"], world["team_a"], world["cluster"], world["admin"], f"more-done-{i}", 30)
    from django.core.cache import cache

    cache.clear()  # the history is remembered a minute: read it again, as the first time
    assert count() == before


def test_a_second_read_reuses_the_estimate_until_the_clusters_jobs_change(api, world, monkeypatch):
    from scheduling.services.jobs import start_estimate

    calls = []
    real = start_estimate.compute
    monkeypatch.setattr(start_estimate, "compute", lambda *a, **kw: calls.append(a[0].pk) or real(*a, **kw))
    url = f"/api/v1/jobs/{world['waiting'].pk}/estimate/"
    first = api.get(url).data
    again = api.get(url).data
    detail = api.get(f"/api/v1/jobs/{world['waiting'].pk}/").data["estimated_start"]
    assert len(calls) == 1  # within ESTIMATE_SECONDS the page's 2 s polls and the job API share one replay
    assert again["computed_at"] == first["computed_at"] and again["p50"] == first["p50"]
    assert detail["p50_in_minutes"] == first["p50_in_minutes"] == 40
    # A reader who may see fewer names has an answer of their own.
    sam = builders.make_user("sam")
    builders.grant(world["team_a"], "submitter", user=sam)
    api.force_authenticate(sam)
    api.get(url)
    assert len(calls) == 2
    api.force_authenticate(world["admin"])
    # The running job ends: the cluster's state version changes and the next read computes afresh at once.
    GangJob.objects.filter(pk=world["big"].pk).update(phase=GangPhase.SUCCEEDED, finished_at=timezone.now())
    assert api.get(url).data["status"] == "now"
    assert len(calls) == 3
    # So does a new job in line, or one being cancelled.
    builders.make_job(world["template"], world["team_a"], world["cluster"], name="newer", user=world["admin"])
    api.get(url)
    GangJob.objects.filter(name="newer").update(desired_state="Cancel")
    api.get(url)
    assert len(calls) == 5


def test_free_room_split_over_the_nodes_is_not_could_start_now(api, world):
    # The running job ends: 8 GPUs free in all, so the sums say "now". But why-pending has seen that no node has
    # room for a pod (NodesFragmented): the estimate, which places no pod on a node, must not say "now" beside it.
    GangJob.objects.filter(pk=world["big"].pk).update(phase=GangPhase.SUCCEEDED, finished_at=timezone.now())
    url = f"/api/v1/jobs/{world['waiting'].pk}/estimate/"
    assert api.get(url).data["status"] == "now"
    GangJob.objects.filter(pk=world["waiting"].pk).update(why_pending={
        "reason": "Unschedulable", "summary": "…", "blocking": [
            {"code": "NodesFragmented", "resource": "nvidia.com/gpu", "per_pod": 4, "pods": 1, "fit": 0,
             "most_free": 2, "free_total": 8, "most_free_nodes": ["n1", "n2", "n3", "n4"], "nodes": 4}]})
    data = api.get(url).data
    assert data["status"] == "unknown" and data["p50"] is None and data["p50_in_minutes"] is None
    assert data["text"].startswith("unknown: fragmented: the free room would hold it in all, but it is split over "
                                   "the nodes")
    assert "could start now" not in data["text"]
    assert api.get(f"/api/v1/jobs/{world['waiting'].pk}/").data["estimated_start"]["status"] == "unknown"


@pytest.mark.parametrize("fact, said", [
    ({"code": "SchedulerSilent", "scheduler": "kai-scheduler", "seconds": 300, "pods": 2},
     "unknown: its scheduler has not acted on its pods (see why it is pending)"),
    ({"code": "QueueOverLimit", "queue": "team-a", "resource": "nvidia.com/gpu", "in_use": 8, "limit": 8},
     "unknown: its queue is at its limit as the scheduler counts it"),
    ({"code": "QueueOverQuota", "queue": "team-a", "resource": "nvidia.com/gpu", "in_use": 8, "quota": 4},
     "unknown: its queue is over its quota as the scheduler counts it"),
    ({"code": "SomethingNew"},
     "unknown: why it is pending names a blocker (SomethingNew) this estimate does not model"),
])
def test_no_could_start_now_beside_a_why_pending_that_names_a_blocker(api, world, fact, said):
    """Issue 33 item 4: one story. Whatever blocker why-pending names, the estimate does not say "now" beside it."""
    GangJob.objects.filter(pk=world["big"].pk).update(phase=GangPhase.SUCCEEDED, finished_at=timezone.now())
    url = f"/api/v1/jobs/{world['waiting'].pk}/estimate/"
    assert api.get(url).data["status"] == "now"
    GangJob.objects.filter(pk=world["waiting"].pk).update(why_pending={
        "reason": "Unschedulable", "summary": "…", "blocking": [fact]})
    data = api.get(url).data
    assert (data["status"], data["p50"]) == ("unknown", None)
    assert data["text"].startswith(said), data["text"]


def test_a_job_whose_scheduler_is_not_seen_is_unknown_and_takes_no_room_in_others_replays(api, world):
    """Issue 33 items 3-4: the probe saw no scheduler of the waiting job's backend on the cluster."""
    from scheduling.models import Cluster

    family = GangJob.objects.get(pk=world["waiting"].pk).resolved_spec.get("backend")
    name = {"kai": "kai-scheduler"}.get(family, family)
    Cluster.objects.filter(pk=world["cluster"].pk).update(scheduler_presence={
        family: {"scheduler": name, "seen_at": None, "by": "", "read": True}})
    data = api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").data
    assert (data["status"], data["text"]) == ("unknown", f"unknown: no {name} seen on this cluster")


def test_jobs_submitted_lately_to_a_queue_served_first_are_expected_ahead(api, world):
    """Issue 35 item 4: team-b (holding nothing, so served before team-a, which holds 8 GPUs) submitted six 4-GPU
    jobs of the template in the last hour (all cancelled since: what counts is that they came). At that rate, over
    the 40-min wait, jobs like them that go first bring 6/h x 40 min x 4 GPUs x 60 min = 16 GPU·h."""
    team_b = builders.make_queue("team-b", clusters=[world["cluster"]])
    for i in range(6):
        job = builders.make_job(world["template"], team_b, world["cluster"], name=f"b-{i}", user=world["admin"],
                                phase=GangPhase.CANCELLED)
        GangJob.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(minutes=5 + 9 * i))
    data = api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").data
    # At 40 min team-a and team-b both hold nothing: the tie goes to team-a by name, so the waiting job still
    # starts when big ends.
    assert data["status"] == "estimated" and data["p50_in_minutes"] == 40
    assert ("first in line in team-a, plus ~16 GPU·h expected from jobs submitted meanwhile that go first (higher "
            "priority in team-a, or queues further below their fair share) at the last hour's rate"
            in data["evidence"]), data["evidence"]
    assert "jobs submitted meanwhile" in data["method"]


def test_a_job_whose_objects_the_cluster_refused_is_unknown_never_could_start_now(api, world):
    """A fresh user's job named a missing PriorityClass: the API server refused its pods (Forbidden) and it stayed
    Submitted; its estimate said "could start now". gangweb cannot know when it starts: unknown, and why."""
    message = 'pods "x" is forbidden: no PriorityClass with name gold was found'
    GangJob.objects.filter(pk=world["waiting"].pk).update(phase_reason="Forbidden", phase_message=message)
    data = api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").data
    assert (data["status"], data["p50"]) == ("unknown", None)
    assert data["text"] == f"unknown: gangweb could not make its objects in the cluster (Forbidden: {message})"


def test_the_clusters_placed_and_pending_jobs_are_read_once_per_state_and_shared_by_its_jobs(api, world, monkeypatch):
    from scheduling.services.jobs import start_estimate

    reads = {"placed": 0, "pending": 0}
    real_running, real_pending = start_estimate._running_rows, start_estimate._pending_rows
    monkeypatch.setattr(start_estimate, "_running_rows",
                        lambda *a: reads.__setitem__("placed", reads["placed"] + 1) or real_running(*a))
    monkeypatch.setattr(start_estimate, "_pending_rows",
                        lambda *a: reads.__setitem__("pending", reads["pending"] + 1) or real_pending(*a))
    other = builders.make_queue("team-b", clusters=[world["cluster"]])
    GangJob.objects.filter(pk=world["big"].pk).update(queue=other)
    for i in range(5):
        finished(world["template"], other, world["cluster"], world["admin"], f"b-done-{i}", 60)
    later = builders.make_job(world["template"], world["team_a"], world["cluster"], name="later",
                              user=world["admin"], phase=GangPhase.QUEUED, requested_gpu=8)
    first = api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").data
    assert first["freed_by"]["name"] == "big" and first["p50_in_minutes"] == 40
    assert reads == {"placed": 1, "pending": 1}
    # Another waiting job of the same cluster state: its own replay, from the rows already read.
    second = api.get(f"/api/v1/jobs/{later.pk}/estimate/").data
    assert second["ahead_in_queue"] == 1 and second["p50_in_minutes"] == 100
    assert second["freed_by"]["name"] == "waiting"
    assert reads == {"placed": 1, "pending": 1}
    # A reader who may not see team-b's names gets them hidden, from the same shared rows.
    sam = builders.make_user("sam")
    builders.grant(world["team_a"], "submitter", user=sam)
    api.force_authenticate(sam)
    hidden = api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").data
    assert hidden["freed_by"]["name"] == "a job of another queue" and "big" not in hidden["evidence"]
    assert reads == {"placed": 1, "pending": 1}
    # The running job ends: a new state version, so the rows are read again and the answer moves.
    GangJob.objects.filter(pk=world["big"].pk).update(phase=GangPhase.SUCCEEDED, finished_at=timezone.now())
    assert api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").data["status"] == "now"
    assert reads == {"placed": 2, "pending": 2}


def test_a_pending_jobs_queue_edit_shows_in_the_next_first_look_at_another_job(api, world):
    """Hostile pass 39: the placed and pending rows are shared per cluster state version, which an edit of a pending
    job (its queue, its priority class: `lifecycle.update`, which counts `spec_revision` up) did not change, so
    another job's first look replayed the old line for up to ESTIMATE_SECONDS (and that answer was kept as long
    again). The edit changes the version: the next first look reads the line afresh."""
    from django.db.models import F

    later = builders.make_job(world["template"], world["team_a"], world["cluster"], name="later",
                              user=world["admin"], phase=GangPhase.QUEUED, requested_gpu=8)
    assert api.get(f"/api/v1/jobs/{world['waiting'].pk}/estimate/").data["ahead_in_queue"] == 0
    other = builders.make_queue("team-b", clusters=[world["cluster"]])
    # What `lifecycle.update` writes when `waiting`'s submitter moves it to team-b.
    GangJob.objects.filter(pk=world["waiting"].pk).update(queue=other, spec_revision=F("spec_revision") + 1)
    assert api.get(f"/api/v1/jobs/{later.pk}/estimate/").data["ahead_in_queue"] == 0  # `waiting` is not in team-a
