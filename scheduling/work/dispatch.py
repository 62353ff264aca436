"""Enqueue reconcile work after the surrounding transaction commits (never for a row that may roll back).

The enqueues are robust on-commit callbacks (Django's `robust=True`): when the broker cannot take a message
(Redis down), the error is logged and the request still answers with what it committed. The committed rows are
the record: the periodic resync reconciles every unfinished job and the periodic queue sync every queue, so the
work happens within a resync period instead (docs/architecture.md). Failing the request after the commit would
tell a client that a job it can see was not created, and a retry without an Idempotency-Key would submit it twice.
"""
from __future__ import annotations

from django.db import transaction

from . import enqueue
from .enqueue import BATCH


def reconcile_jobs_on_commit(job_ids: list[int], *, submitted: bool = False, cleanup: bool = False) -> None:
    """Queue reconcile of these jobs once the transaction commits: one task per job for a single submit,
    batches of BATCH ids for bulk submits (so 2,000 jobs are 40 broker messages, not 2,000). `submitted`: the
    jobs were just submitted; a single one's task then says so (`submitted=True`: it takes the other waiting
    submits of its cluster along, reconcile/jobs/coalesce.py). A change to an existing job (cancel, edit) leaves it
    False: its task runs a full pass. `cleanup` (a cancel): one task per job marked so, routed to its shard's
    clean-up queue, so deleting its objects never waits behind the shard's dispatch backlog
    (scheduling/work/routing.py)."""
    if not job_ids:
        return
    if cleanup:
        transaction.on_commit(lambda: [enqueue.send(enqueue.RECONCILE_JOB, job_id, kwargs={"cleanup": True})
                                       for job_id in job_ids], robust=True)
        return
    if len(job_ids) == 1:
        options = {"kwargs": {"submitted": True}} if submitted else {}
        transaction.on_commit(lambda: enqueue.send(enqueue.RECONCILE_JOB, job_ids[0], **options), robust=True)
        return
    chunks = [job_ids[i:i + BATCH] for i in range(0, len(job_ids), BATCH)]
    transaction.on_commit(lambda: [enqueue.send(enqueue.RECONCILE_JOBS, chunk) for chunk in chunks], robust=True)


def reconcile_queue_on_commit(policy_id: int, extra_cluster_ids: list[int] | None = None) -> None:
    """Queue the sync of one queue policy once the transaction commits. `extra_cluster_ids` are clusters it
    targeted before the change (so a dropped cluster gets its Queue CR deleted)."""
    transaction.on_commit(lambda: enqueue.send(enqueue.RECONCILE_QUEUE, policy_id, extra_cluster_ids or []),
                          robust=True)


def sync_queue_clusters_on_commit(cluster_ids: list[int] | None) -> None:
    """Queue a queue sync of these clusters (None: every cluster) once the transaction commits."""
    if cluster_ids is None:
        transaction.on_commit(lambda: enqueue.send(enqueue.SYNC_QUEUES), robust=True)
        return
    transaction.on_commit(lambda: [enqueue.send(enqueue.SYNC_QUEUES, cid) for cid in cluster_ids], robust=True)


def deliver_webhook_on_commit(delivery_id: int) -> None:
    """Send one webhook delivery once the transaction that created it commits."""
    transaction.on_commit(lambda: enqueue.send(enqueue.DELIVER_WEBHOOK, delivery_id), robust=True)
