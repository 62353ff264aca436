"""Queue policies in KAI Scheduler's shape (scheduling.run.ai/v2 Queue).

Units follow KAI (`pkg/apis/scheduling/v2/resources.go`): GPUs in devices (fractions allowed), CPU in
millicores, memory in decimal megabytes (10^6 bytes). `-1` means unlimited for quota and limit.
"""
from django.db import models

UNLIMITED = -1


class QueuePolicy(models.Model):
    """One KAI queue: hierarchy, priority, and per-resource quota / limit / overQuotaWeight.

    Source of the semantics: KAI `QueueSpec` / `QueueResource`. An omitted limit in KAI means 0 (nothing can
    be allocated), so gangweb stores and sends every limit explicitly, defaulting to -1 (unlimited).
    `managed=False` marks a queue imported from a cluster that gangweb never changes or deletes.
    """

    name = models.SlugField(max_length=63, unique=True)
    display_name = models.CharField(max_length=200, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    priority = models.IntegerField(default=100)
    gpu_quota = models.FloatField(default=0)
    gpu_limit = models.FloatField(default=UNLIMITED)
    gpu_over_quota_weight = models.FloatField(default=1)
    cpu_quota = models.BigIntegerField(default=0, help_text="millicores")
    cpu_limit = models.BigIntegerField(default=UNLIMITED, help_text="millicores")
    cpu_over_quota_weight = models.FloatField(default=1)
    memory_quota = models.BigIntegerField(default=0, help_text="megabytes (10^6 bytes)")
    memory_limit = models.BigIntegerField(default=UNLIMITED, help_text="megabytes (10^6 bytes)")
    memory_over_quota_weight = models.FloatField(default=1)
    preempt_min_runtime = models.CharField(max_length=32, blank=True, help_text='duration, e.g. "10m"')
    reclaim_min_runtime = models.CharField(max_length=32, blank=True, help_text='duration, e.g. "30m"')
    clusters = models.ManyToManyField("scheduling.Cluster", blank=True, related_name="queue_policies")
    allowed_namespaces = models.JSONField(default=list, blank=True, help_text="namespaces jobs may use; empty = any")
    managed = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "queue policies"

    def __str__(self):
        return self.name
