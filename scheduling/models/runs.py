"""Reconcile attempts: every attempt leaves a row the dashboard can show."""
from django.db import models

from ..choices import ReconcileOutcome


class ReconcileAttempt(models.Model):
    """One reconcile pass of a job, a queue policy or a cluster resync.

    `actions` is a list of short strings naming what was done, e.g. ["create PodGroup default/x-1a2b3c"].
    `duration_ms` is wall time of the pass in milliseconds.
    """

    KIND_JOB = "job"
    KIND_QUEUE = "queue"
    KIND_RESYNC = "resync"
    KIND_PROBE = "probe"
    KINDS = [(k, k) for k in (KIND_JOB, KIND_QUEUE, KIND_RESYNC, KIND_PROBE)]

    kind = models.CharField(max_length=8, choices=KINDS)
    job = models.ForeignKey("scheduling.GangJob", null=True, blank=True, on_delete=models.CASCADE,
                            related_name="attempts")
    queue = models.ForeignKey("scheduling.QueuePolicy", null=True, blank=True, on_delete=models.CASCADE,
                              related_name="attempts")
    cluster = models.ForeignKey("scheduling.Cluster", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="attempts")
    task_id = models.CharField(max_length=64, blank=True)
    retry = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    duration_ms = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=16, choices=ReconcileOutcome.choices, default=ReconcileOutcome.OK)
    reason = models.CharField(max_length=128, blank=True)
    message = models.TextField(blank=True)
    actions = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["job", "-started_at"])]
