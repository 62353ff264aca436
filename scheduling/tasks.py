"""Celery entry points only: named, IDs in, retry policy on the decorator; the work lives in reconcile/."""
from __future__ import annotations

import logging

from celery import shared_task

from .constants import RESYNC_SOFT_TIME_LIMIT, RESYNC_TIME_LIMIT
from .kube.errors import TransientKubeError
from .services.errors import DeliveryRetry

log = logging.getLogger(__name__)


# Only named transient failures (cluster unreachable, 401/403, 429, 5xx) are retried: exponential backoff from
# 2 s capped at 5 min, with jitter, at most 8 times (~15 min); after that the periodic resync keeps converging.
@shared_task(name="scheduling.reconcile_job", bind=True, acks_late=True, ignore_result=True,
             autoretry_for=(TransientKubeError,), retry_backoff=2, retry_backoff_max=300, retry_jitter=True,
             max_retries=8, soft_time_limit=120, time_limit=180)
def reconcile_job(self, job_id: int, waits: int = 0) -> None:
    """Reconcile one job into its cluster (see scheduling.reconcile.jobs). `waits` counts the countdowns already
    spent waiting on the cluster (objects being deleted), so waiting stays bounded."""
    from .reconcile import jobs

    jobs.reconcile_job_task(self, job_id, waits)


@shared_task(name="scheduling.reconcile_jobs", acks_late=True, ignore_result=True, soft_time_limit=900,
             time_limit=960)
def reconcile_jobs(job_ids: list[int]) -> None:
    """Reconcile a batch of jobs (bulk submit); errors are recorded per job and left to the resync."""
    from .reconcile import jobs

    jobs.reconcile_many(job_ids)


# Not acknowledged late: beat sends the next one within a period, so a resync lost with its worker is not redelivered
# (a redelivered one would only find the lease held). One per cluster at a time, bounded (reconcile/resync.py).
# The beat task only fans out: each cluster's resync and probe run on that cluster's shard queue (scheduling/
# routing.py), so an API server that does not answer delays only its own.
@shared_task(name="scheduling.resync_all_clusters", ignore_result=True, acks_late=False, soft_time_limit=60,
             time_limit=90)
def resync_all_clusters() -> None:
    """Beat: queue one `resync_cluster` per cluster."""
    from .reconcile import queues

    for cluster_id in queues.cluster_ids():
        resync_cluster.delay(cluster_id)


@shared_task(name="scheduling.resync_cluster", ignore_result=True, acks_late=False,
             soft_time_limit=RESYNC_SOFT_TIME_LIMIT, time_limit=RESYNC_TIME_LIMIT)
def resync_cluster(cluster_id: int) -> None:
    """LIST-based resync of one cluster, leaving recently submitted or cancelled jobs to their own task."""
    from django.conf import settings

    from .reconcile import resync

    resync.resync_cluster_id(cluster_id, grace_seconds=settings.GANGWEB_RESYNC_GRACE_SECONDS)


@shared_task(name="scheduling.probe_all_clusters", ignore_result=True, soft_time_limit=60, time_limit=90)
def probe_all_clusters() -> None:
    """Beat: queue one `probe_cluster` per cluster."""
    from .reconcile import queues

    for cluster_id in queues.cluster_ids():
        probe_cluster.delay(cluster_id)


@shared_task(name="scheduling.probe_cluster", ignore_result=True, soft_time_limit=120, time_limit=180)
def probe_cluster(cluster_id: int) -> None:
    """Probe health and discovery of one cluster (a cluster deleted meanwhile is skipped)."""
    from .reconcile import probe

    probe.probe_cluster_id(cluster_id)


@shared_task(name="scheduling.reconcile_queue", acks_late=True, ignore_result=True,
             autoretry_for=(TransientKubeError,), retry_backoff=5, retry_backoff_max=300, retry_jitter=True,
             max_retries=8, soft_time_limit=120, time_limit=180)
def reconcile_queue(policy_id: int, extra_cluster_ids: list[int] | None = None) -> None:
    """Sync one queue policy's clusters (the ones it targets, and `extra_cluster_ids` it targeted before)."""
    from .reconcile import queues

    queues.reconcile_policy(policy_id, extra_cluster_ids or [])


@shared_task(name="scheduling.sync_queues", acks_late=True, ignore_result=True,
             autoretry_for=(TransientKubeError,), retry_backoff=5, retry_backoff_max=300, retry_jitter=True,
             max_retries=8, soft_time_limit=120, time_limit=180)
def sync_queues(cluster_id: int | None = None) -> None:
    """Beat: with no id, queue one sync per cluster; with an id, sync every queue policy of that cluster."""
    from .reconcile import queues

    if cluster_id is None:
        for cid in queues.cluster_ids():
            sync_queues.delay(cid)
        return
    queues.sync_cluster_id(cluster_id)


@shared_task(name="scheduling.notify_transitions", ignore_result=True, soft_time_limit=60, time_limit=90)
def notify_transitions() -> None:
    """Beat: turn recent timeline entries into webhook deliveries and hand each to deliver_webhook."""
    from .services import notifications

    for delivery_id in notifications.scan():
        deliver_webhook.delay(delivery_id)


# A receiver that fails (connection error, timeout, 408/429/5xx) is retried by Celery's autoretry with exponential
# backoff from 2 s capped at 10 min, with full jitter, 8 times (about 30 min); each attempt is written on the delivery
# row and the last marks it Failed. Routed to settings.GANGWEB_WEBHOOK_QUEUE (its own worker), with time limits just
# above one attempt's connect + read timeouts, so a slow receiver never holds a reconcile worker's slot.
@shared_task(name="scheduling.deliver_webhook", bind=True, acks_late=True, ignore_result=True,
             autoretry_for=(DeliveryRetry,), retry_backoff=2, retry_backoff_max=600, retry_jitter=True,
             max_retries=8, soft_time_limit=20, time_limit=30)
def deliver_webhook(self, delivery_id: int) -> None:
    """POST one webhook delivery (see scheduling.services.notifications.deliver); raises DeliveryRetry (retried)
    unless this is the last retry."""
    from .services import notifications

    notifications.deliver(delivery_id, final=self.request.retries >= self.max_retries)
