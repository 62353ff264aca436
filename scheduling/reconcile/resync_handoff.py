"""The resync hands never-dispatched jobs to batch tasks instead of passing them one by one.

A resync passes its jobs one after another in one worker process, up to its budget (GANGWEB_RESYNC_MAX_SECONDS,
240 s). Under a dispatch backlog older than the resync's grace, most of a cluster's jobs to look at are submits
whose task is still queued: in a soak at 20 submits/s a resync spent its whole 240 s on 1,374 of them (a confirming
read each, then the creates), one of the worker's two processes taken from the batches meanwhile, and finished jobs
waited up to 86 s for their clean-up. A batch (`reconcile_jobs`: one snapshot, passes from threads, claims) does
the same passes several times faster, and a submit's own task finds its job dispatched and returns.

So, when at least HAND_OFF_AT of the jobs a resync would pass were never dispatched (Submitted, run asked, no error
recorded by an earlier pass), it queues them as `reconcile_jobs` tasks of up to BATCH jobs on their shard and
stamps their `task_queued_at` (on the database's clock), so the next resyncs leave them to those tasks for their
grace, as they do a submit's own task; if those tasks are lost too, the resync after the grace hands them off
again. Fewer are passed inline as before. A job a live task claims is left to it by the batch (claims.py), and one
dispatched meanwhile is not passed again (`waiting_only`: a backlog older than the grace is handed off by every
resync until it is dispatched)."""
from __future__ import annotations

import logging

from django.db.models.functions import Now

from ..models import GangJob
from ..work import enqueue
from .jobs.coalesce import NEVER_DISPATCHED

log = logging.getLogger(__name__)

HAND_OFF_AT = enqueue.BATCH  # fewer never-dispatched jobs than one batch are passed by the resync itself


def never_dispatched(job_ids: list[int]) -> set[int]:
    """The ids among `job_ids` of jobs never dispatched: Submitted, run asked, no error recorded (`phase_reason`
    empty). One query per 10,000 ids."""
    found: set[int] = set()
    for start in range(0, len(job_ids), 10_000):
        found.update(GangJob.objects.filter(NEVER_DISPATCHED, pk__in=job_ids[start:start + 10_000])
                     .values_list("pk", flat=True))
    return found


def hand_off(job_ids) -> set[int]:
    """Queue `job_ids` as `reconcile_jobs` tasks of up to BATCH ids each (ascending), each chunk's `task_queued_at`
    stamped just before it is sent. Returns the ids queued; a chunk the broker refuses gets its stamp cleared and
    the rest are not tried (the broker is down): the resync passes those itself, as it does a backlog smaller than
    HAND_OFF_AT."""
    ids, sent = sorted(job_ids), set()
    for start in range(0, len(ids), enqueue.BATCH):
        chunk = ids[start:start + enqueue.BATCH]
        GangJob.objects.filter(pk__in=chunk).update(task_queued_at=Now())
        try:
            enqueue.send(enqueue.RECONCILE_JOBS, chunk, kwargs={"waiting_only": True})
        except Exception as exc:  # noqa: BLE001 - Redis down: kombu's OperationalError after its publish retries
            GangJob.objects.filter(pk__in=chunk).update(task_queued_at=None)
            log.warning("resync: could not queue a batch of %s jobs (%s: %s); the next resync will",
                        len(chunk), type(exc).__name__, exc)
            break
        sent.update(chunk)
    return sent
