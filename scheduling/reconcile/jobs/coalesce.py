"""Single submits that wait are reconciled together (issue 23 part 4): the task queued for a submit takes the other
never-dispatched jobs of its cluster along into one `reconcile_many` batch, and the tasks queued for those cost
next to nothing when their turn comes.

Why: a single submit queues one `reconcile_job` task; one full pass each (a LIST per kind, then the creates,
~0.8 s) from one worker process at a time made the queue grow past ~2.5 submits/s (bench/README.md, "Submit to
Running"), while a batch shares one snapshot across its jobs and runs their passes from threads (~8 jobs/s).
Why claims rather than a first pass that creates without a LIST: that only trims one pass (the creates remain, one
job per process at a time); a batch also shares the snapshot and overlaps the passes' round trips.

How (`reconcile_submitted`, for a task queued by the submit, `submitted=True`):

- The job's row is locked (SELECT ... FOR UPDATE, a short transaction) and looked at: gone -> nothing; cancel asked
  -> the ordinary full pass (a real change, level-triggered as ever); not Submitted any more -> nothing: a batch
  dispatched it since the task was queued, and any later change (cancel, edit) queued a task of its own, which
  carries no `submitted` and runs a full pass. A claim held by another task -> nothing: that batch reconciles it
  (should that worker die, the claim expires and the next task or the resync does it).
- Else the job is claimed, with up to BATCH - 1 other waiting jobs of its cluster, oldest first: phase Submitted,
  run asked, no error recorded by an earlier pass (a job whose pass failed is retried by its own task with backoff,
  or by the resync; it does not ride along in every batch), not claimed by a live task. They are taken with
  `FOR UPDATE SKIP LOCKED` and marked with the task's id and an expiry (`claimed_by`, `claimed_until`) in the same
  transaction, so two takers never take one job: the second skips the rows the first holds locked, and once the
  first commits, sees them claimed. On SQLite (tests, a laptop) there is no row locking, but writers are serialized.
- `reconcile_many` reconciles them (same shard: one cluster's jobs, on the queue the task was routed to); the claims
  are released at the end. The task's own job's PassResult goes back to the task, which retries or requeues as for a
  single pass.

A claim is short and renewed while the batch works (reconcile/jobs/claims.py): a redelivered task (its worker
died) has the same task id and so takes its own claims back at once; other tasks, and the periodic resync, take
them once the claim lapsed (CLAIM_SECONDS after the worker's last renewal). The cancel rules stay the passes'
(`cancelled_meanwhile`, status.py): a cancel landing while a taken job is being created still wins, and its own
task then runs a full pass.
"""
from __future__ import annotations

import logging
import os
import time
from datetime import timedelta

from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Now

from ...choices import DesiredState, GangPhase
from ...models import GangJob
from ...work.enqueue import BATCH
from . import claims
from .batch import reconcile_many
from .common import ERROR_REASONS, WAIT_SECONDS
from .passes import PassResult, reconcile_one

log = logging.getLogger(__name__)

# How `take` found the task's own job.
GONE, ASKED, DISPATCHED, TAKEN, CLAIMED = "gone", "asked", "dispatched", "taken", "claimed"


# A job never dispatched: Submitted, run asked, no error recorded by an earlier pass (whose own task retries it).
NEVER_DISPATCHED = Q(phase=GangPhase.SUBMITTED, desired_state=DesiredState.RUN, phase_reason="")


def waiting(cluster_id: int, token: str):
    """The jobs of cluster `cluster_id` a submit's batch may take: never dispatched (Submitted, run asked), no error
    recorded by an earlier pass, and not claimed by a live task other than `token`'s."""
    return GangJob.objects.filter(NEVER_DISPATCHED, cluster_id=cluster_id).filter(claims.free(token))


def cleanup_places(limit: int) -> int:
    """How many of a submit batch's `limit` places (the task's own job's aside) its cluster's due clean-ups may take
    while other submits wait: half of them, rounded up (25 of 49 at BATCH 50). Fewer submits waiting: all."""
    return (max(limit - 1, 0) + 1) // 2


def take(job_id: int, token: str, limit: int = BATCH) -> tuple[str, list[int]]:
    """Claim job `job_id` for task `token` with the jobs of its cluster whose clean-up is due (`cleanups_waiting`)
    and other waiting jobs (oldest first), up to `limit` in all: a soak at 20 submits/s, with one of two worker
    processes in a resync, ran dispatch batches back to back for two minutes while the clean-up queue's tasks waited
    in the worker's prefetch, and finished jobs held their gang objects for up to 86 s. The clean-ups take at most
    `cleanup_places(limit)` of the places while other submits wait (hostile pass 39: a flood of one tenant's
    clean-ups took every place, and another team's submits were dispatched one per task), all of them otherwise.

    Returns (how the job was found, the claimed ids): (GONE, []) when it no longer exists, (ASKED, []) when a cancel
    is asked, (DISPATCHED, []) when it is not Submitted any more, (TAKEN, []) when another live task holds it, else
    (CLAIMED, ids: `job_id`, the other waiting jobs, then the clean-ups). One transaction: the job's row locked,
    the others locked skipping the ones another transaction holds, then one UPDATE writing the claims."""
    with transaction.atomic():
        # The claim's expiry is compared with the database's clock, read in the same statement.
        own = (GangJob.objects.select_for_update().filter(pk=job_id).annotate(db_now=Now())
               .values("cluster_id", "phase", "desired_state", "claimed_by", "claimed_until", "db_now").first())
        if own is None:
            return GONE, []
        if own["desired_state"] == DesiredState.CANCEL:
            return ASKED, []
        if own["phase"] != GangPhase.SUBMITTED:
            return DISPATCHED, []
        held = own["claimed_until"] is not None and own["claimed_until"] >= own["db_now"]
        if held and own["claimed_by"] != token:
            return TAKEN, []
        # The cluster's due clean-ups ride along (`cleanups_waiting`): whichever task of the cluster a worker runs
        # next, dispatch or clean-up, finished jobs' gang objects go with it, never behind the dispatches. But at
        # most `cleanup_places` of the places while submits wait: one tenant's jobs ending (or cancelled) by the
        # hundred must not turn every other team's submit batch into a batch of one dispatch.
        room = max(limit - 1, 0)
        ended = _along(cleanups_waiting(own["cluster_id"], token).exclude(pk=job_id), room)
        others = list(waiting(own["cluster_id"], token).exclude(pk=job_id).order_by("pk")
                      .select_for_update(skip_locked=True).values_list("pk", flat=True)
                      [:room - min(len(ended), cleanup_places(limit))])
        ended = ended[:room - len(others)]  # the rest of the places when fewer submits wait
        ids = [job_id, *others, *ended]
        claims.claim(ids, token, force=True)  # each row locked above: free of other live claims, or its own task's
        _rode(ended)
    return CLAIMED, ids


release = claims.release  # the batch's claims are claims like any other


def reconcile_submitted(job_id: int, *, task_id: str = "", retry: int = 0) -> PassResult | None:
    """What a `reconcile_job` task queued by a single submit does (module docstring): None when the job is gone; a
    full pass (`reconcile_one`) when a cancel is asked; an empty PassResult when there is nothing to do (dispatched
    since, or taken by another task's batch); else the PassResult of the job's pass in the batch it took along
    (a transient error in `error`, for the task's retry policy). `task_id` is the claim's token (a redelivered or
    retried task keeps its id, so takes its own claims back)."""
    token = claims.token_for(task_id)
    began = time.time()
    found, ids = take(job_id, token)
    # One line a take, key=value (bench/batch_log.py reads it with the batch's lines): when the task started, what
    # it found, how long the claim's transaction took and which jobs it claimed (the batch's, `job` first).
    log.info("reconcile claim: job=%s found=%s claim_s=%.3f jobs=%d ids=%s pid=%d at=%.3f", job_id, found,
             time.time() - began, len(ids), ",".join(map(str, ids)) or "-", os.getpid(), began)
    if found == GONE:
        log.info("reconcile_job: job %s no longer exists", job_id)
        return None
    if found == ASKED:
        return reconcile_one(job_id, task_id=task_id, retry=retry)
    if found != CLAIMED:
        log.debug("reconcile_job: job %s %s since its submit; nothing to do", job_id, found)
        return PassResult(reason=found)
    results: dict[int, PassResult] = {}
    try:
        with claims.renewing(token):
            reconcile_many(ids, results=results)
    finally:
        claims.release(ids, token)
    return results.get(job_id, PassResult())


# --- clean-ups ------------------------------------------------------------------------------------------------------
# The same idea for the end of jobs (issue 31, part 4): the task queued when the watch sees a job end (or a job is
# cancelled) takes along the other jobs of its cluster that wait for their clean-up, so deleting finished jobs'
# objects costs one batch (one snapshot, passes from threads) per up to BATCH jobs, as dispatching does. One pass per
# finished job, alternating with dispatch batches of 50 on a worker, left 127 finished jobs holding their gang
# objects for up to 64 s in a soak of 10 submits/s at load 13.

# A clean-up a batch took along is not taken along again for this long (`cleanups_waiting`): one that cannot finish
# yet (a finalizer someone put on its gang object, pods that take long to stop) stays due, and the oldest due went
# first: a few such jobs took the ride-along places of every batch of their cluster, each a pass that did nothing,
# while other jobs' clean-ups waited for their own tasks (hostile pass 39). Its own task's countdown is as long.
RIDE_AGAIN_SECONDS = WAIT_SECONDS


def cleanups_waiting(cluster_id: int, token: str):
    """The jobs of cluster `cluster_id` whose clean-up is due and may be taken along: finished (Succeeded, Failed)
    or asked to cancel, their objects not yet cleaned up, no error recorded by an earlier pass, not claimed by a
    live task other than `token`'s, not taken along in the last RIDE_AGAIN_SECONDS (`cleanup_rode_at`, database
    clock)."""
    return (GangJob.objects.filter(cluster_id=cluster_id, cleaned_up_at__isnull=True)
            .filter(Q(phase__in=[GangPhase.SUCCEEDED, GangPhase.FAILED]) | Q(desired_state=DesiredState.CANCEL))
            .filter(Q(cleanup_rode_at__isnull=True)
                    | Q(cleanup_rode_at__lt=Now() - timedelta(seconds=RIDE_AGAIN_SECONDS)))
            .exclude(phase_reason__in=sorted(ERROR_REASONS)).filter(claims.free(token)))


def _along(rows, limit: int) -> list[int]:
    """Up to `limit` ids of `rows` (`cleanups_waiting`) to take along: those never taken along first, then the least
    recently taken, oldest first; locked, skipping rows another transaction holds locked."""
    return list(rows.order_by(F("cleanup_rode_at").asc(nulls_first=True), "pk")
                .select_for_update(skip_locked=True).values_list("pk", flat=True)[:max(limit, 0)])


def _rode(job_ids: list[int]) -> None:
    """Note that a batch takes the clean-ups of `job_ids` along now (`cleanup_rode_at`, database clock)."""
    if job_ids:
        GangJob.objects.filter(pk__in=job_ids).update(cleanup_rode_at=Now())


HELD_SECONDS = claims.RENEW_SECONDS  # a clean-up whose job another live task holds looks again after this long


def take_cleanups(job_id: int, token: str, limit: int = BATCH) -> tuple[str, list[int]]:
    """Claim job `job_id` for task `token` when its clean-up is due, with up to `limit` - 1 other jobs of its cluster
    whose clean-up is due (`cleanups_waiting`, oldest first, skipping rows another transaction holds locked).

    Returns (how the job was found, the claimed ids): (GONE, []) when it no longer exists; (CLAIMED, ids with
    `job_id` first) when its clean-up is due (not cleaned up yet, finished or asked to cancel; or finished, its
    retention over and its Jobs and pods not removed yet: reconcile/retention.py; an error recorded by an earlier
    pass does not stop its own task); (TAKEN, ids) when another live task holds it (that task's pass
    does it; the caller looks again, HELD_SECONDS later); (DISPATCHED, ids) when nothing is left to do for it (its
    clean-up ran since the task was queued: one task is queued per end and per confirmation, and an earlier batch
    takes most jobs along). In the last two, `ids` are the other due jobs, taken along all the same, [] when none.
    One transaction, the job's row locked, the claims' expiry compared on the database's clock."""
    with transaction.atomic():
        own = (GangJob.objects.select_for_update().filter(pk=job_id).annotate(db_now=Now())
               .values("cluster_id", "phase", "desired_state", "cleaned_up_at", "objects_removed_at",
                       "remove_after", "claimed_by", "claimed_until", "db_now").first())
        if own is None:
            return GONE, []
        ended = own["phase"] in (GangPhase.SUCCEEDED, GangPhase.FAILED)
        # Cleaned up, but its retention is over and its Jobs and pods not removed yet (a template's short
        # `retentionSeconds`: the pass that cleaned it up deletes them and comes back with `cleanup`): a pass is due.
        removing = (ended and own["objects_removed_at"] is None and own["remove_after"] is not None
                    and own["remove_after"] <= own["db_now"])
        due = removing or own["cleaned_up_at"] is None and (ended or own["desired_state"] == DesiredState.CANCEL)
        held = (own["claimed_until"] is not None and own["claimed_until"] >= own["db_now"]
                and own["claimed_by"] != token)
        found = CLAIMED if due and not held else TAKEN if due else DISPATCHED
        mine = [job_id] if found == CLAIMED else []
        others = _along(cleanups_waiting(own["cluster_id"], token).exclude(pk=job_id), limit - len(mine))
        ids = [*mine, *others]
        claims.claim(ids, token, force=True)
        _rode(ids)  # its own job too: just passed, its own countdown follows
    return found, ids


def reconcile_cleanup(job_id: int, *, task_id: str = "", retry: int = 0) -> PassResult | None:
    """What a `reconcile_job` task queued for a clean-up (`cleanup=True`: the watch saw the job end, or a cancel)
    does: the job and up to BATCH - 1 other jobs of its cluster whose clean-up is due, claimed under `task_id` and
    reconciled in one `reconcile_many` batch (the ordinary passes: a finished job's objects go once none of its pods
    is alive, a cancelled job's all of them). A job cleaned up since the task was queued costs no pass (a soak of
    20 submits/s queued ~2 clean-ups per job, each a full pass of a job already done, and starved the dispatches
    sharing the worker); a job another live task holds comes back after HELD_SECONDS (`requeue_after`). Returns the
    job's PassResult (a transient error in `error`, a countdown in `requeue_after`, for the task's policy), None when
    the job is gone."""
    token = claims.token_for(task_id)
    found, ids = take_cleanups(job_id, token)
    if found == GONE:
        log.info("reconcile_job: job %s no longer exists", job_id)
        return None
    results: dict[int, PassResult] = {}
    if ids:
        try:
            with claims.renewing(token):
                reconcile_many(ids, results=results)
        finally:
            claims.release(ids, token)
    if found == TAKEN:
        return PassResult(reason=found, requeue_after=HELD_SECONDS)
    if found == DISPATCHED:
        log.debug("reconcile_job: job %s cleaned up since its clean-up was queued", job_id)
        return PassResult(reason="done")
    return results.get(job_id, PassResult())
