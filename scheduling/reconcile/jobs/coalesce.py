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

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now

from ...choices import DesiredState, GangPhase
from ...models import GangJob
from ...work.enqueue import BATCH
from . import claims
from .batch import reconcile_many
from .common import ERROR_REASONS
from .passes import PassResult, reconcile_one

log = logging.getLogger(__name__)

# How `take` found the task's own job.
GONE, ASKED, DISPATCHED, TAKEN, CLAIMED = "gone", "asked", "dispatched", "taken", "claimed"


def waiting(cluster_id: int, token: str):
    """The jobs of cluster `cluster_id` a submit's batch may take: never dispatched (Submitted, run asked), no error
    recorded by an earlier pass, and not claimed by a live task other than `token`'s."""
    return GangJob.objects.filter(cluster_id=cluster_id, phase=GangPhase.SUBMITTED, desired_state=DesiredState.RUN,
                                  phase_reason="").filter(claims.free(token))


def take(job_id: int, token: str, limit: int = BATCH) -> tuple[str, list[int]]:
    """Claim job `job_id` for task `token` with up to `limit` - 1 other waiting jobs of its cluster (oldest first).

    Returns (how the job was found, the claimed ids with `job_id` first): (GONE, []) when it no longer exists,
    (ASKED, []) when a cancel is asked, (DISPATCHED, []) when it is not Submitted any more, (TAKEN, []) when another
    live task holds it, else (CLAIMED, ids). One transaction: the job's row locked, the others locked skipping the
    ones another transaction holds, then one UPDATE writing the claims."""
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
        others = list(waiting(own["cluster_id"], token).exclude(pk=job_id).order_by("pk")
                      .select_for_update(skip_locked=True).values_list("pk", flat=True)[:max(limit - 1, 0)])
        ids = [job_id, *others]
        GangJob.objects.filter(pk__in=ids).update(claimed_by=token, claimed_until=claims.expiry(),
                                                  task_queued_at=None)
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

def cleanups_waiting(cluster_id: int, token: str):
    """The jobs of cluster `cluster_id` whose clean-up is due: finished (Succeeded, Failed) or asked to cancel, their
    objects not yet cleaned up, no error recorded by an earlier pass, not claimed by a live task other than
    `token`'s."""
    return (GangJob.objects.filter(cluster_id=cluster_id, cleaned_up_at__isnull=True)
            .filter(Q(phase__in=[GangPhase.SUCCEEDED, GangPhase.FAILED]) | Q(desired_state=DesiredState.CANCEL))
            .exclude(phase_reason__in=sorted(ERROR_REASONS)).filter(claims.free(token)))


def take_cleanups(job_id: int, token: str, limit: int = BATCH) -> list[int]:
    """Claim job `job_id` for task `token` (whoever else holds it: its clean-up is never skipped) with up to
    `limit` - 1 other jobs of its cluster whose clean-up is due (`cleanups_waiting`, oldest first, skipping rows
    another transaction holds locked). Returns the claimed ids, `job_id` first; [] when the job no longer exists."""
    with transaction.atomic():
        own = GangJob.objects.select_for_update().filter(pk=job_id).values("cluster_id").first()
        if own is None:
            return []
        others = list(cleanups_waiting(own["cluster_id"], token).exclude(pk=job_id).order_by("pk")
                      .select_for_update(skip_locked=True).values_list("pk", flat=True)[:max(limit - 1, 0)])
        ids = [job_id, *others]
        GangJob.objects.filter(pk__in=ids).update(claimed_by=token, claimed_until=claims.expiry(),
                                                  task_queued_at=None)
    return ids


def reconcile_cleanup(job_id: int, *, task_id: str = "", retry: int = 0) -> PassResult | None:
    """What a `reconcile_job` task queued for a clean-up (`cleanup=True`: the watch saw the job end, or a cancel)
    does: the job and up to BATCH - 1 other jobs of its cluster whose clean-up is due, claimed under `task_id` and
    reconciled in one `reconcile_many` batch (the ordinary passes: a finished job's objects go once none of its pods
    is alive, a cancelled job's all of them). Returns the job's PassResult (a transient error in `error`, a countdown
    in `requeue_after`, for the task's policy), None when the job is gone."""
    token = claims.token_for(task_id)
    ids = take_cleanups(job_id, token)
    if not ids:
        log.info("reconcile_job: job %s no longer exists", job_id)
        return None
    results: dict[int, PassResult] = {}
    try:
        with claims.renewing(token):
            reconcile_many(ids, results=results)
    finally:
        claims.release(ids, token)
    return results.get(job_id, PassResult())
