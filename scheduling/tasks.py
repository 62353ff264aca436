"""Celery entry points only: named, IDs in; the retry and requeue policy is here, the work lives in reconcile/.

A pass returns how it ended (`reconcile.jobs.PassResult`, like controller-runtime's Result: done, requeue after N
seconds with a reason, or an error); the task alone decides what follows: a transient error is raised for the
decorator's autoretry (backoff, jitter, a cap), a requeue is this task again after a countdown. Nothing below this
module imports it: services/ and reconcile/ queue work by task name through `scheduling.work.enqueue`.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings

from .constants import RESYNC_SOFT_TIME_LIMIT, RESYNC_TIME_LIMIT
from .kube.errors import TransientKubeError
from .reconcile import jobs, moves, probe, queues, resync
from .reconcile import row_retention as job_history
from .services.webhooks import delivery as webhook_delivery
from .services.webhooks.delivery import DeliveryRetry
from .work import enqueue

log = logging.getLogger(__name__)

MAX_WAITS = 6  # countdowns in a row while the world catches up (doubling from the pass's: ~5 min); then the resync
MAX_WAIT_COUNTDOWN = 300  # seconds: one countdown at most


# Only named transient failures (cluster unreachable, 401/403, 429, 5xx) are retried: exponential backoff from
# 2 s capped at 5 min, with jitter, at most 8 times (~15 min); after that the periodic resync keeps converging.
@shared_task(name=enqueue.RECONCILE_JOB, bind=True, acks_late=True, ignore_result=True,
             autoretry_for=(TransientKubeError,), retry_backoff=2, retry_backoff_max=300, retry_jitter=True,
             max_retries=8, soft_time_limit=120, time_limit=180)
def reconcile_job(self, job_id: int, waits: int = 0, submitted: bool = False, cleanup: bool = False) -> None:
    """Reconcile one job into its cluster (see scheduling.reconcile.jobs). `waits` counts the countdowns already
    spent waiting on the cluster (objects being deleted), so waiting stays bounded. `submitted`: queued by the
    job's single submit; then the other waiting submits of its cluster are taken along into one batch, and the
    task does nothing when a batch dispatched the job since (reconcile/jobs/coalesce.py). Every other cause
    (cancel, edit, the watch, a countdown) queues it without `submitted`: a full pass. `cleanup`: queued because the
    job ended (the watch saw it) or is cancelled; the same full pass (with the other clean-ups due in its cluster,
    taken along into one batch: reconcile/jobs/coalesce.py), routed to the shard's clean-up queue
    (scheduling/work/routing.py), so deleting a finished job's gang objects (which hold quota: on KAI a finished job's
    PodGroup counts against its queue) never waits behind the shard's dispatch backlog; its retries and countdowns
    keep it there.

    A missing job is logged and ignored. A transient error (recorded on the job by the pass) is raised for the
    autoretry, except on the last allowed retry, where it is left to the periodic resync. A requeue (waiting on the
    cluster) queues this task again after the pass's countdown, doubled per wait up to MAX_WAIT_COUNTDOWN, at most
    MAX_WAITS times; the periodic resync covers anything longer."""
    retries = self.request.retries or 0
    run = (jobs.reconcile_submitted if submitted else jobs.reconcile_cleanup if cleanup else jobs.reconcile_one)
    result = run(job_id, task_id=self.request.id or "", retry=retries)
    if result is None:
        return
    if result.transient:
        if retries >= (self.max_retries or 0):
            log.warning("reconcile_job: job %s still failing after %s retries; leaving it to the resync",
                        job_id, retries)
            return
        raise result.error
    countdown = requeue_countdown(result, waits)
    if countdown is not None:
        self.apply_async((job_id,), {"waits": waits + 1, **({"cleanup": True} if cleanup else {})},
                         countdown=countdown)


def requeue_countdown(result: jobs.PassResult, waits: int) -> int | None:
    """Seconds until the next pass of a job whose pass asked to come back (`result.requeue_after`, seconds) after
    `waits` such countdowns in a row: doubled per wait, at most MAX_WAIT_COUNTDOWN; None when the pass did not ask,
    or after MAX_WAITS (the periodic resync takes over)."""
    if result.requeue_after is None or waits >= MAX_WAITS:
        return None
    return min(result.requeue_after * 2 ** waits, MAX_WAIT_COUNTDOWN)


@shared_task(name=enqueue.RECONCILE_JOBS, bind=True, acks_late=True, ignore_result=True, soft_time_limit=900,
             time_limit=960)
def reconcile_jobs(self, job_ids: list[int], waiting_only: bool = False) -> None:
    """Reconcile a batch of jobs (bulk submit), claimed under the task's id while it runs; errors are recorded per
    job, and a job given up on is the next resync's at once (reconcile/jobs/batch.py `reconcile_claimed`).
    `waiting_only`: a batch the resync handed off, of which only the jobs not dispatched meanwhile are passed."""
    jobs.reconcile_claimed(job_ids, task_id=self.request.id or "", waiting_only=waiting_only)


# Not acknowledged late: beat sends the next one within a period, so a resync lost with its worker is not redelivered
# (a redelivered one would only find the lease held). One per cluster at a time, bounded (reconcile/resync.py).
# The beat task only fans out: each cluster's resync and probe run on that cluster's shard queue (scheduling/
# routing.py), so an API server that does not answer delays only its own.
@shared_task(name="scheduling.resync_all_clusters", ignore_result=True, acks_late=False, soft_time_limit=60,
             time_limit=90)
def resync_all_clusters() -> None:
    """Beat: queue one `resync_cluster` per cluster, then decide the round's moves of waiting jobs (reconcile/
    moves.py: a job waiting past its queue's `move_after_seconds` while another cluster fits it, the waiting jobs
    of a lost cluster); each move is carried out by a pass on the job's own shard. A failure of the moves is
    logged: the next period decides again."""
    for cluster_id in queues.cluster_ids():
        resync_cluster.delay(cluster_id)
    try:
        stats = moves.decide()
    except Exception:  # noqa: BLE001 - the resync fan-out above stands; the next period decides again
        log.exception("moves: the round failed")
        return
    if any(stats.get(k) for k in ("claimed", "moved_from_lost", "reported")):
        log.info("moves: %s", stats)


@shared_task(name="scheduling.resync_cluster", ignore_result=True, acks_late=False,
             soft_time_limit=RESYNC_SOFT_TIME_LIMIT, time_limit=RESYNC_TIME_LIMIT)
def resync_cluster(cluster_id: int) -> None:
    """LIST-based resync of one cluster, leaving recently submitted or cancelled jobs to their own task."""
    resync.resync_cluster_id(cluster_id, grace_seconds=settings.GANGWEB_RESYNC_GRACE_SECONDS)


@shared_task(name="scheduling.probe_all_clusters", ignore_result=True, soft_time_limit=60, time_limit=90)
def probe_all_clusters() -> None:
    """Beat: queue one `probe_cluster` per cluster."""
    for cluster_id in queues.cluster_ids():
        probe_cluster.delay(cluster_id)


@shared_task(name="scheduling.probe_cluster", ignore_result=True, soft_time_limit=120, time_limit=180)
def probe_cluster(cluster_id: int) -> None:
    """Probe health and discovery of one cluster (a cluster deleted meanwhile is skipped)."""
    probe.probe_cluster_id(cluster_id)


@shared_task(name=enqueue.RECONCILE_QUEUE, acks_late=True, ignore_result=True, soft_time_limit=60, time_limit=90)
def reconcile_queue(policy_id: int, extra_cluster_ids: list[int] | None = None) -> None:
    """After a write to one queue policy: queue one `sync_queues(cluster_id)` per cluster it concerns (the ones it
    targets, and `extra_cluster_ids` it targeted before), each routed to its cluster's shard queue
    (scheduling/work/routing.py) with that task's retries. This fan-out talks to no cluster, so it stays on the default
    queue; a hung API server holds only its own shard's slots."""
    for cluster_id in queues.policy_cluster_ids(policy_id, extra_cluster_ids or []):
        enqueue.send(enqueue.SYNC_QUEUES, cluster_id)


@shared_task(name=enqueue.SYNC_QUEUES, acks_late=True, ignore_result=True,
             autoretry_for=(TransientKubeError,), retry_backoff=5, retry_backoff_max=300, retry_jitter=True,
             max_retries=8, soft_time_limit=120, time_limit=180)
def sync_queues(cluster_id: int | None = None) -> None:
    """Beat: with no id, queue one sync per cluster; with an id, sync every queue policy of that cluster."""
    if cluster_id is None:
        for cid in queues.cluster_ids():
            enqueue.send(enqueue.SYNC_QUEUES, cid)
        return
    queues.sync_cluster_id(cluster_id)


@shared_task(name="scheduling.notify_transitions", ignore_result=True, soft_time_limit=60, time_limit=90)
def notify_transitions() -> None:
    """Beat: turn recent timeline entries into webhook deliveries and hand each to deliver_webhook."""
    for delivery_id in webhook_delivery.scan():
        enqueue.send(enqueue.DELIVER_WEBHOOK, delivery_id)


@shared_task(name="scheduling.prune_job_history", ignore_result=True, soft_time_limit=540, time_limit=600)
def prune_job_history() -> None:
    """Beat (hourly, when GANGWEB_JOB_HISTORY_DAYS > 0): delete finished jobs older than that many days, with their
    history, in small transactions (reconcile/row_retention.py), at most GANGWEB_JOB_HISTORY_PRUNE_PER_RUN a run.
    Twice is harmless: a second run finds what the first left."""
    days = settings.GANGWEB_JOB_HISTORY_DAYS
    if days > 0:
        result = job_history.prune(timedelta(days=days), limit=settings.GANGWEB_JOB_HISTORY_PRUNE_PER_RUN)
        log.info("pruned %d finished jobs older than %s days in %d batches", result.jobs, days, result.batches)


# A receiver that fails (connection error, timeout, 408/429/5xx) is retried by Celery's autoretry with exponential
# backoff from 2 s capped at 10 min, with full jitter, 8 times (about 30 min); each attempt is written on the delivery
# row and the last marks it Failed. Routed to settings.GANGWEB_WEBHOOK_QUEUE (its own worker), with time limits just
# above one attempt's connect + read timeouts, so a slow receiver never holds a reconcile worker's slot.
@shared_task(name=enqueue.DELIVER_WEBHOOK, bind=True, acks_late=True, ignore_result=True,
             autoretry_for=(DeliveryRetry,), retry_backoff=2, retry_backoff_max=600, retry_jitter=True,
             max_retries=8, soft_time_limit=20, time_limit=30)
def deliver_webhook(self, delivery_id: int) -> None:
    """POST one webhook delivery (see scheduling.services.webhooks.delivery.deliver); raises DeliveryRetry (retried)
    unless this is the last retry."""
    webhook_delivery.deliver(delivery_id, final=self.request.retries >= self.max_retries)
