"""Issue 31, parts 1, 2 and 4 without a cluster: a task that gives up on its jobs hands them to the next resync at
once, a worker that died lets go of them when its claim lapses, and the watch queues a job's clean-up when it sees
the job end."""
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.choices import DesiredState
from scheduling.choices import GangPhase as P
from scheduling.models import GangJob
from scheduling.observe.evidence import JobObjects
from scheduling.reconcile import resync, status, watching
from scheduling.reconcile.jobs import batch, claims
from scheduling.work import enqueue
from tests import builders

pytestmark = pytest.mark.django_db


def submits(setup, user, n):
    template, queue, cluster = setup
    return [builders.make_job(template, queue, cluster, user=user) for _ in range(n)]


def test_a_bulk_batch_that_gives_up_hands_its_jobs_to_the_next_resync_at_once(setup, admin_user, enqueued):
    """The fault pass: a 100-job bulk whose API server was killed recorded "not attempted" on 73-81 jobs, and the
    resync skipped them twice more (its grace read `updated_at`, which that record had just bumped)."""
    _, _, cluster = setup
    jobs = submits(setup, admin_user, 3)
    held = submits(setup, admin_user, 1)[0]
    ids = [j.pk for j in jobs]
    assert all(GangJob.objects.filter(pk__in=ids, task_queued_at__isnull=False).values_list("pk", flat=True))
    assert set(resync.jobs_to_resync(cluster, grace_seconds=60)) == set()  # every task is still queued
    assert claims.claim([held.pk], "another-live-task") == [held.pk]

    # The cluster has no credentials: the batch cannot reach it and gives up on every job.
    counts = batch.reconcile_claimed([*ids, held.pk], task_id="bulk-task")

    assert (counts["failed"], counts["held"]) == (3, 1)
    rows = GangJob.objects.filter(pk__in=ids)
    assert {(r.claimed_by, r.claimed_until, r.task_queued_at) for r in rows} == {("", None, None)}
    assert all(r.phase_reason and r.phase == P.SUBMITTED for r in rows)  # the error is recorded on each
    assert set(resync.jobs_to_resync(cluster, grace_seconds=60)) == set(jobs)  # at once, not after the grace
    assert GangJob.objects.get(pk=held.pk).claimed_by == "another-live-task"  # left to its holder


def test_a_dead_workers_jobs_are_the_resyncs_once_their_claim_lapsed_and_a_live_one_keeps_them(setup, admin_user,
                                                                                              enqueued):
    _, _, cluster = setup
    alive, dead = submits(setup, admin_user, 2)
    assert claims.claim([alive.pk], "live-task") == [alive.pk]
    assert claims.claim([dead.pk], "killed-task") == [dead.pk]
    assert set(resync.jobs_to_resync(cluster, grace_seconds=60)) == set()
    # kill -9 of the worker's process group: no release, no more renewals. CLAIM_SECONDS later:
    GangJob.objects.filter(pk=dead.pk).update(claimed_until=timezone.now() - timedelta(seconds=1))
    assert claims.renew("live-task") == 1  # the live task's heartbeat
    assert set(resync.jobs_to_resync(cluster, grace_seconds=60)) == {dead}
    assert claims.CLAIM_SECONDS < 30 <= resync.LEASE_SECONDS  # lapses within one resync period of 30 s
    assert claims.claim([dead.pk], "redelivered-task") == [dead.pk]  # another task may take it too
    assert claims.claim([alive.pk], "redelivered-task") == []  # but not a live one's


def test_a_full_pass_claims_its_job_while_it_runs_and_lets_go_after(setup, admin_user, enqueued, monkeypatch):
    from scheduling.reconcile.jobs import passes

    _, _, cluster = setup
    job = submits(setup, admin_user, 1)[0]
    seen = []
    monkeypatch.setattr(passes, "run_pass", lambda j, **kw: seen.append(
        GangJob.objects.values_list("claimed_by", "task_queued_at").get(pk=j.pk)) or passes.PassResult())
    passes.reconcile_one(job.pk, task_id="cancel-task")
    assert seen == [("cancel-task", None)]  # claimed, and no longer "queued"
    assert GangJob.objects.values_list("claimed_by", "claimed_until").get(pk=job.pk) == ("", None)
    assert set(resync.jobs_to_resync(cluster, grace_seconds=60)) == {job}


def ends(phase):
    """A stand-in for an observation that records `phase` on the job (as status.observe_objects writes it)."""
    def observe(job, backend, objects, refusals=None, recorded=None, raw=None):
        update = status.StatusUpdate.begin(job)
        update.decide(job, status.Decision(phase, timezone.now(), "test", phase, ""))
        status.write(job, update)
    return observe


@pytest.mark.parametrize("phase, desired, queued", [
    (P.SUCCEEDED, DesiredState.RUN, [{"cleanup": True}]),  # it ended: its clean-up, at once
    (P.FAILED, DesiredState.RUN, [{"cleanup": True}]),
    (P.RUNNING, DesiredState.RUN, []),  # nothing to do
    (P.RUNNING, DesiredState.CANCEL, [{"cleanup": True}]),  # being cancelled: deleting is a clean-up too
])
def test_the_watch_queues_a_jobs_clean_up_when_it_sees_it_end(setup, admin_user, sent_tasks, monkeypatch, phase,
                                                               desired, queued):
    template, queue, cluster = setup
    job = builders.make_job(template, queue, cluster, user=admin_user, phase=P.RUNNING, desired_state=desired)
    sent_tasks.clear()
    sent_tasks.options.clear()
    monkeypatch.setattr(watching.status, "observe_objects", ends(phase))
    monkeypatch.setattr(watching, "select", lambda objects, backend, job: objects)
    monkeypatch.setattr(watching, "with_database", lambda fn: fn())  # it closes connections: the test's too

    watching.observe_job(str(job.uid), JobObjects([], [], []), deleted=False)

    assert GangJob.objects.get(pk=job.pk).phase == phase
    assert sent_tasks == [(enqueue.RECONCILE_JOB, (job.pk,))] * len(queued)
    assert [o.get("kwargs") for o in sent_tasks.options] == queued
    watching.observe_job(str(job.uid), JobObjects([], [], []), deleted=False)  # seen again: once was enough
    assert len(sent_tasks) == len(queued) + (1 if phase == P.RUNNING and queued else 0)


def test_a_clean_up_takes_along_the_other_clean_ups_due_in_its_cluster(setup, admin_user, enqueued):
    """A soak of 10 submits/s left 127 finished jobs holding gang objects for up to 64 s when each clean-up was a
    pass of its own between dispatch batches of 50: a clean-up task takes the others due along, as a submit does."""
    from scheduling.reconcile.jobs import coalesce

    template, queue, cluster = setup
    other = builders.make_cluster("other")
    queue.clusters.add(other)

    def job(phase=P.RUNNING, **fields):
        made = builders.make_job(template, queue, fields.pop("cluster", cluster), user=admin_user, phase=phase)
        GangJob.objects.filter(pk=made.pk).update(**fields)
        return made.pk

    ended = job(P.SUCCEEDED)
    failed = job(P.FAILED)
    cancelling = job(desired_state=DesiredState.CANCEL)
    running = job()
    cleaned = job(P.SUCCEEDED, cleaned_up_at=timezone.now())
    erring = job(P.SUCCEEDED, phase_reason="ClusterUnreachable")  # retried by its own task, or the resync
    held = job(P.FAILED)
    elsewhere = job(P.SUCCEEDED, cluster=other)
    assert claims.claim([held], "another-live-task") == [held]

    assert coalesce.take_cleanups(failed, "t1") == (coalesce.CLAIMED, [failed, ended, cancelling])
    assert set(GangJob.objects.filter(claimed_by="t1").values_list("pk", flat=True)) == {failed, ended, cancelling}
    # Held by another live task: that task's pass cleans it up; this one takes nothing and comes back later.
    assert coalesce.take_cleanups(held, "t2") == (coalesce.TAKEN, [])
    assert GangJob.objects.get(pk=held).claimed_by == "another-live-task"
    # Cleaned up since its task was queued: nothing to do for it (the others due are t1's).
    assert coalesce.take_cleanups(cleaned, "t3") == (coalesce.DISPATCHED, [])
    assert coalesce.take_cleanups(10**9, "t3") == (coalesce.GONE, [])
    assert GangJob.objects.get(pk=running).claimed_by == GangJob.objects.get(pk=cleaned).claimed_by == ""
    assert GangJob.objects.get(pk=erring).claimed_by == GangJob.objects.get(pk=elsewhere).claimed_by == ""
    assert coalesce.reconcile_cleanup(held, task_id="t2").requeue_after == coalesce.HELD_SECONDS
    done = coalesce.reconcile_cleanup(cleaned, task_id="t3")
    assert (done.requeue_after, done.error, done.actions) == (None, None, [])

    # The cluster has no credentials: the batch gives up, and lets go of every job it took.
    claims.release([failed, ended, cancelling], "t1")
    result = coalesce.reconcile_cleanup(ended, task_id="t4")
    assert result is not None and result.error is not None
    assert not GangJob.objects.filter(claimed_by="t4").exists()


def test_a_clean_up_task_whose_job_is_cleaned_up_but_due_for_removal_still_passes_it(setup, admin_user, enqueued):
    """Hostile pass 39: a template with `retentionSeconds: 0` (or a short one) has its Indexed Jobs and pods
    deleted by the clean-up pass that marks it cleaned up; that pass waits for them (a countdown, `cleanup` kept),
    and the task that comes back found the job cleaned up and did nothing, so `objects_removed_at` (and a pod left
    without its Job) waited for the capped resync's turn. A clean-up task whose job's retention is over and whose
    objects are not removed yet passes it; one whose retention is still running costs no pass, as before."""
    from scheduling.reconcile.jobs import coalesce

    template, queue, cluster = setup
    now = timezone.now()
    removing = builders.make_job(template, queue, cluster, phase=P.SUCCEEDED, user=admin_user).pk
    GangJob.objects.filter(pk=removing).update(cleaned_up_at=now, remove_after=now - timedelta(seconds=1))
    kept = builders.make_job(template, queue, cluster, phase=P.SUCCEEDED, user=admin_user).pk
    GangJob.objects.filter(pk=kept).update(cleaned_up_at=now, remove_after=now + timedelta(hours=1))
    removed = builders.make_job(template, queue, cluster, phase=P.SUCCEEDED, user=admin_user).pk
    GangJob.objects.filter(pk=removed).update(cleaned_up_at=now, remove_after=now - timedelta(seconds=1),
                                              objects_removed_at=now)

    assert coalesce.take_cleanups(removing, "t1") == (coalesce.CLAIMED, [removing])
    assert coalesce.take_cleanups(kept, "t2") == (coalesce.DISPATCHED, [])
    assert coalesce.take_cleanups(removed, "t3") == (coalesce.DISPATCHED, [])


def test_a_clean_up_that_cannot_finish_does_not_ride_along_every_batch_ahead_of_newer_ones(setup, admin_user,
                                                                                          enqueued):
    """Hostile pass 39: a job whose clean-up cannot finish (a tenant's finalizer on its gang object, pods that take
    an hour to stop) stays due, and the oldest due clean-ups rode along first: a few such jobs took the ride-along
    places of every batch of the cluster, each a pass that did nothing, and other teams' newly finished jobs never
    rode along. A clean-up taken along is not taken along again for RIDE_AGAIN_SECONDS, and those never taken along
    go first; its own task still takes it whenever it comes."""
    from scheduling.reconcile.jobs import coalesce

    template, queue, cluster = setup
    stuck = [builders.make_job(template, queue, cluster, phase=P.SUCCEEDED, user=admin_user).pk for _ in range(2)]
    first = coalesce.take_cleanups(stuck[0], "t1", limit=2)
    assert first == (coalesce.CLAIMED, stuck)
    claims.release(stuck, "t1")  # their passes found the objects still there: still due
    newer = [builders.make_job(template, queue, cluster, phase=P.FAILED, user=admin_user).pk for _ in range(2)]
    # The next batches take the newer ones along; the stuck ones wait their turn (or their own task).
    assert coalesce.take_cleanups(newer[0], "t2", limit=3) == (coalesce.CLAIMED, [newer[0], newer[1]])
    claims.release(newer, "t2")
    # Its own task still takes a job whenever it comes; the others were just passed.
    assert coalesce.take_cleanups(stuck[1], "t3", limit=3) == (coalesce.CLAIMED, [stuck[1]])
    claims.release([stuck[1]], "t3")
    # Once RIDE_AGAIN_SECONDS have passed they ride along again, the least recently taken first (the newer ones
    # were just taken along: not yet).
    for pk, late in ((stuck[0], 1), (stuck[1], 5)):
        GangJob.objects.filter(pk=pk).update(
            cleanup_rode_at=timezone.now() - timedelta(seconds=coalesce.RIDE_AGAIN_SECONDS + late))
    waiting = builders.make_job(template, queue, cluster, user=admin_user).pk
    assert coalesce.take(waiting, "t4", limit=4) == (coalesce.CLAIMED, [waiting, stuck[1], stuck[0]])
