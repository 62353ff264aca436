"""Deciding moves (reconcile/moves.py) on recorded numbers, no cluster: which waiting jobs move, to where, claimed
once; a lost cluster's waiting jobs switched at once with what they left there kept; running ones reported."""
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import GangJob, PhaseTransition, StrandedObjects
from scheduling.reconcile import moves
from tests import builders

pytestmark = pytest.mark.django_db
GIB = 2**30


known = builders.make_known_cluster


@pytest.fixture
def world(db, enqueued, admin_user):
    c1, c2 = known("c1", 8), known("c2", 8)
    queue = builders.make_queue("team-a", clusters=[c1, c2], move_after_seconds=300)
    template = builders.make_template("gpu4", pod_sets=[builders.pod_set(replicas=2, containers=[
        builders.container(gpu="2")])])
    return template, queue, c1, c2, admin_user


def placed(world, name, cluster, waited_s=400, phase="Queued", **fields):
    """A job gangweb placed on `cluster`, submitted `waited_s` seconds ago, in `phase`."""
    template, queue, _c1, _c2, user = world
    job = builders.make_job(template, queue, cluster, name=name, phase=phase, user=user,
                            at=timezone.now() - timedelta(seconds=waited_s))
    GangJob.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(seconds=waited_s),
                                             placement={"cluster": cluster.name, "text": "placed"}, **fields)
    job.refresh_from_db()
    return job


def test_a_job_waiting_past_the_setting_is_claimed_for_the_cluster_where_it_fits_now(world, enqueued):
    _t, _q, c1, c2, _u = world
    placed(world, "blocker", c1, phase="Running")  # c1: 4 of 8 GPUs held
    placed(world, "blocker-2", c1, phase="Running")  # c1 full
    job = placed(world, "waiting", c1)
    enqueued.clear()
    stats = moves.decide()
    job.refresh_from_db()
    assert stats["claimed"] == 1
    assert (job.cluster_id, job.move_to_id) == (c1.id, c2.id)
    assert job.move_reason.startswith("moved from c1 to c2 after 4")
    assert job.move_reason.endswith(" s waiting: c2 has 8 GPUs free; c1 has 0 GPUs free (4 GPUs more asked than it "
                                    "has)")
    assert enqueued == [[job.id]]
    assert moves.decide()["claimed"] == 0  # a move under way is not claimed twice


@pytest.mark.parametrize("case", ["named", "too-recent", "started-once", "no-setting", "nowhere-fits"])
def test_these_jobs_stay(world, case):
    template, queue, c1, c2, user = world
    placed(world, "b1", c1, phase="Running")
    placed(world, "b2", c1, phase="Running")
    if case == "named":
        job = builders.make_job(template, queue, c1, name="j", phase="Queued", user=user)
        GangJob.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(seconds=900))
    elif case == "too-recent":
        job = placed(world, "j", c1, waited_s=100)
    elif case == "started-once":
        job = placed(world, "j", c1)
        PhaseTransition.objects.create(job=job, phase="Scheduled", at=timezone.now(), attempt=0, source="test")
    elif case == "no-setting":
        queue.move_after_seconds = None
        queue.save()
        job = placed(world, "j", c1)
    else:
        placed(world, "c2-full", c2, phase="Running", requested_gpu=8)
        job = placed(world, "j", c1)
    moves.decide()
    job.refresh_from_db()
    assert (job.cluster_id, job.move_to_id) == (c1.id, None)


def test_a_switch_starts_a_new_attempt_that_says_why_and_the_old_cluster_objects_are_forgotten(world, enqueued):
    _t, _q, c1, c2, _u = world
    job = placed(world, "waiting", c1, backend_plugin="k8s-workload-v1beta1", gang_generation=2,
                 owner_uids={"waiting-abc-worker": "uid-1"}, move_to=c2, move_reason="moved from c1 to c2 after 400 "
                 "s waiting: c2 has 8 GPUs free")
    assert moves.switch(job, c2, job.move_reason)
    job.refresh_from_db()
    assert (job.cluster_id, job.move_to_id, job.phase, job.phase_reason) == (c2.id, None, "Submitted", "Moved")
    assert (job.owner_uids, job.backend_plugin, job.gang_generation) == ({}, "", 3)
    assert job.placement["moves"][0]["from"] == "c1" and job.placement["moves"][0]["to"] == "c2"
    last = PhaseTransition.objects.filter(job=job).order_by("-attempt", "-at").first()
    assert (last.phase, last.attempt, last.reason, last.source) == ("Submitted", 1, "Moved", "gangweb")
    assert last.message == "moved from c1 to c2 after 400 s waiting: c2 has 8 GPUs free"
    assert not moves.switch(job, c1, "again")  # no move claimed: nothing changes
    assert GangJob.objects.get(pk=job.pk).cluster_id == c2.id


def test_a_job_that_started_meanwhile_is_not_switched(world):
    _t, _q, c1, c2, _u = world
    job = placed(world, "waiting", c1, move_to=c2, move_reason="x")
    PhaseTransition.objects.create(job=job, phase="Running", at=timezone.now(), attempt=0, source="test")
    assert not moves.switch(job, c2, "x")
    assert GangJob.objects.get(pk=job.pk).cluster_id == c1.id


def test_a_lost_clusters_waiting_jobs_move_at_once_and_its_running_ones_are_reported(world, enqueued):
    _t, _q, c1, c2, _u = world
    c1.health, c1.unreachable_since = "Unreachable", timezone.now() - timedelta(seconds=700)
    c1.save()
    waiting = placed(world, "waiting", c1, waited_s=60, backend_plugin="k8s-workload-v1beta1",
                     owner_uids={"waiting-abc-worker": "uid-1"})
    running = placed(world, "running", c1, phase="Running")
    stats = moves.decide()
    assert (stats["moved_from_lost"], stats["reported"]) == (1, 1)
    waiting.refresh_from_db()
    assert waiting.cluster_id == c2.id and waiting.phase_message.startswith(
        "moved from c1 to c2: c1 has been unreachable for 70")
    stranded = StrandedObjects.objects.get(job=waiting)
    assert (stranded.cluster_id, stranded.owner_uids, stranded.deleted_at) == (c1.id, {"waiting-abc-worker": "uid-1"},
                                                                               None)
    running.refresh_from_db()
    assert (running.cluster_id, running.phase, running.phase_reason) == (c1.id, "Running", "ClusterLost")
    assert running.phase_message.startswith("phase unknown: cluster c1 has been unreachable for 70")
    assert moves.decide()["moved_from_lost"] == 0  # idempotent


def test_a_move_under_way_holds_its_room_at_the_target_for_the_next_round(world, enqueued):
    """c1 full, c2 with room for one 4-GPU job: the first round claims the oldest waiting job for c2; while that
    move is under way (the job still on c1, its objects being deleted), the next round claims no other job for c2
    (before, the claimed job was counted only on c1, so round two sent a second job into the same 4 GPUs)."""
    _t, _q, c1, c2, _u = world
    placed(world, "b1", c1, phase="Running")
    placed(world, "b2", c1, phase="Running")
    placed(world, "c2-half", c2, phase="Running")
    first = placed(world, "first", c1, waited_s=500)
    second = placed(world, "second", c1, waited_s=400)
    assert moves.decide()["claimed"] == 1
    assert moves.decide()["claimed"] == 0
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.cluster_id, first.move_to_id, second.move_to_id) == (c1.id, c2.id, None)
    from scheduling.placement.numbers import Numbers
    where = Numbers([c1, c2], timezone.now()).wheres[c2.id]
    assert (where.held.gpu, where.waiting.gpu) == (4, 4)  # what a submit meanwhile reads of c2: full


def test_a_cluster_that_answered_again_since_the_round_began_keeps_its_waiting_job(world, enqueued):
    """The round read c1 as lost; its probe found it healthy again before the switch (unreachable_since cleared):
    the job stays on c1 and nothing is recorded as stranded (before, it was moved while its objects on c1 could
    start)."""
    _t, _q, c1, c2, _u = world
    job = placed(world, "waiting", c1, waited_s=60, backend_plugin="k8s-workload-v1beta1",
                 owner_uids={"waiting-abc-worker": "uid-1"})
    job = GangJob.objects.select_related("cluster").get(pk=job.pk)
    assert not moves.switch(job, c2, "moved from c1 to c2: c1 has been unreachable for 700 s", stranded=True)
    job.refresh_from_db()
    assert (job.cluster_id, StrandedObjects.objects.count()) == (c1.id, 0)


def test_jobs_not_due_yet_do_not_take_the_rounds_places_of_those_that_are(world, enqueued, monkeypatch):
    """A round looks at MAX_MOVES jobs, the oldest first. Older jobs of a queue with a longer setting, and a job
    that moved a moment ago (submitted long before), are not due: they must not fill those places while a job of
    a queue with a short setting is (before, the candidates were every job older than the smallest setting, so
    the same not-yet-due jobs were looked at and skipped every round, and the due one never moved)."""
    template, queue, c1, c2, user = world
    monkeypatch.setattr(moves, "MAX_MOVES", 2)
    placed(world, "b1", c1, phase="Running")
    placed(world, "b2", c1, phase="Running")
    patient = builders.make_queue("patient", clusters=[c1, c2], move_after_seconds=7 * 24 * 3600)
    for name in ("old-1", "old-2"):
        job = builders.make_job(template, patient, c1, name=name, phase="Queued", user=user)
        GangJob.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(days=1),
                                                 placement={"cluster": "c1", "text": "placed"})
    just_moved = placed(world, "just-moved", c1, waited_s=86000)
    PhaseTransition.objects.create(job=just_moved, phase="Submitted", at=timezone.now() - timedelta(seconds=5),
                                   attempt=1, source="gangweb", reason=moves.MOVED, message="moved")
    due = placed(world, "due", c1, waited_s=400)
    assert moves.decide()["claimed"] == 1
    assert GangJob.objects.get(pk=due.pk).move_to_id == c2.id


def test_a_job_whose_claimed_move_is_stuck_on_a_cluster_that_is_then_lost_is_taken_up(world, enqueued):
    """A move was claimed while c1 answered; c1 then stopped answering, so the pass that deletes there cannot
    finish. Once c1 counts as lost, the job goes to c2 with what it left on c1 kept as stranded (before, the lost
    path skipped jobs with a move under way: it waited on c1 until c1 came back)."""
    _t, _q, c1, c2, _u = world
    job = placed(world, "waiting", c1, backend_plugin="k8s-workload-v1beta1", owner_uids={"waiting-abc-worker": "u"},
                 move_to=c2, move_reason="moved from c1 to c2 after 400 s waiting")
    c1.health, c1.unreachable_since = "Unreachable", timezone.now() - timedelta(seconds=700)
    c1.save()
    assert moves.decide()["moved_from_lost"] == 1
    job.refresh_from_db()
    assert (job.cluster_id, job.move_to_id, job.phase_reason) == (c2.id, None, "Moved")
    assert job.phase_message.startswith("moved from c1 to c2: c1 has been unreachable for 70")
    assert job.phase_message.endswith("(c2 has 8 GPUs free)")  # its own claimed room is not counted twice
    assert StrandedObjects.objects.get(job=job).owner_uids == {"waiting-abc-worker": "u"}
