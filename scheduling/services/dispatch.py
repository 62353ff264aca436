"""Enqueue reconcile work after the surrounding transaction commits (never for a row that may roll back)."""
from __future__ import annotations

from django.db import transaction

BATCH = 200


def reconcile_jobs_on_commit(job_ids: list[int]) -> None:
    """Queue reconcile of these jobs once the transaction commits: one task per job for a single submit,
    batches of BATCH ids for bulk submits (so 2,000 jobs are 10 broker messages, not 2,000)."""
    from .. import tasks

    if not job_ids:
        return
    if len(job_ids) == 1:
        transaction.on_commit(lambda: tasks.reconcile_job.delay(job_ids[0]))
        return
    chunks = [job_ids[i:i + BATCH] for i in range(0, len(job_ids), BATCH)]
    transaction.on_commit(lambda: [tasks.reconcile_jobs.delay(chunk) for chunk in chunks])
