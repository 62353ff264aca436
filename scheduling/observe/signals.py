"""Metrics fed from the rows the reconcile already writes: every reconcile pass leaves a ReconcileAttempt row
(house rule 8), so its duration and outcome are observed here, whichever code path wrote it (a Celery task, a
bulk batch, the resync), without the reconcile code knowing about Prometheus.
"""
from __future__ import annotations

from django.db.models.signals import post_save
from django.dispatch import receiver

from ..choices import ReconcileOutcome
from ..models import GangJob, ReconcileAttempt
from . import metrics


@receiver(post_save, sender=ReconcileAttempt, dispatch_uid="gangweb-reconcile-metrics")
def observe_reconcile_attempt(sender, instance: ReconcileAttempt, created: bool, **kwargs) -> None:
    """Observe `gangweb_reconcile_duration_seconds` and count `gangweb_reconcile_errors_total` for a new job
    attempt (from the attempt's job when it comes with its cluster loaded, else one small query for the cluster name
    and backend)."""
    if not created or instance.kind != ReconcileAttempt.KIND_JOB or instance.job_id is None:
        return
    job = instance.job if ReconcileAttempt.job.is_cached(instance) else None
    if job is not None and GangJob.cluster.is_cached(job):
        # The reconcile passes create their attempt with the job they hold, its cluster loaded: no query.
        cluster, backend = job.cluster.name, job.backend_plugin
    else:
        row = GangJob.objects.filter(pk=instance.job_id).values_list("cluster__name", "backend_plugin").first()
        cluster, backend = row if row else ("", "")
    backend = backend or "none"
    metrics.RECONCILE_DURATION.labels(cluster, backend).observe(instance.duration_ms / 1000)
    if instance.outcome != ReconcileOutcome.OK:
        metrics.RECONCILE_ERRORS.labels(cluster, backend, instance.reason or instance.outcome).inc()
