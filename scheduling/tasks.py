"""Celery entry points only: named, IDs in, retry policy on the decorator; the work lives in reconcile/."""
from __future__ import annotations

import logging

from celery import shared_task

log = logging.getLogger(__name__)


@shared_task(name="scheduling.reconcile_job", acks_late=True, ignore_result=True)
def reconcile_job(job_id: int) -> None:
    """Reconcile one job into its cluster (see scheduling.reconcile.jobs)."""
    from .reconcile import jobs

    jobs.reconcile_job_task(reconcile_job, job_id)


@shared_task(name="scheduling.reconcile_jobs", acks_late=True, ignore_result=True)
def reconcile_jobs(job_ids: list[int]) -> None:
    """Reconcile a batch of jobs (bulk submit)."""
    from .reconcile import jobs

    jobs.reconcile_many(job_ids)


@shared_task(name="scheduling.resync_all_clusters", ignore_result=True)
def resync_all_clusters() -> None:
    """Beat: LIST-based resync of every cluster."""
    from .reconcile import resync

    resync.resync_all()


@shared_task(name="scheduling.probe_all_clusters", ignore_result=True)
def probe_all_clusters() -> None:
    """Beat: probe health and discovery of every cluster."""
    from .reconcile import probe

    probe.probe_all()
