"""Queue policies in KAI Scheduler's shape (scheduling.run.ai/v2 Queue).

Units follow KAI (`pkg/apis/scheduling/v2/resources.go`): GPUs in devices (fractions allowed), CPU in
millicores, memory in decimal megabytes (10^6 bytes). `-1` means unlimited for quota and limit.
"""
from django.db import models

from ..choices import PodSecurityLevel, QueueFamily, SyncState

UNLIMITED = -1


class QueuePolicy(models.Model):
    """One KAI queue: hierarchy, priority, and per-resource quota / limit / overQuotaWeight.

    Source of the semantics: KAI `QueueSpec` / `QueueResource`. An omitted limit in KAI means 0 (nothing can
    be allocated), so gangweb stores and sends every limit explicitly, defaulting to -1 (unlimited).
    `managed=False` marks a queue imported from a cluster that gangweb never changes or deletes.
    `allowed_namespaces`, `allowed_service_accounts` and `pod_security_level` are gangweb's own (never sent to
    KAI): what pods of its jobs may use, see docs/security.md "Pod-spec policy".
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
    allowed_namespaces = models.JSONField(default=list, blank=True,
                                          help_text="namespaces jobs may use (within every ancestor's); empty = none")
    allowed_service_accounts = models.JSONField(
        default=list, blank=True, help_text="service accounts pods may run as besides 'default' (within every "
                                            "ancestor's)")
    pod_security_level = models.CharField(max_length=16, choices=PodSecurityLevel.choices,
                                          default=PodSecurityLevel.BASELINE,
                                          help_text="Pod Security Standard of its jobs; the strictest of the "
                                                    "queue's, its ancestors' and the template's applies")
    managed = models.BooleanField(default=True)
    # gangweb's own (issue 38): a job of this queue that has waited longer than this on one cluster, never started,
    # while another cluster of the queue could run it now, is moved there (reconcile/moves.py). Null: never moved.
    move_after_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="move a job that waited this long to a cluster of the queue where it fits "
                                         "now; empty: never")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "queue policies"

    def __str__(self):
        return self.name


class QueueClusterState(models.Model):
    """How one queue policy stands as one scheduler's queue object in one cluster, written by the queue sync of
    its `family` (QueueFamily): the KAI Queue (scheduling.reconcile.queues), the Volcano Queue
    (`scheduling.volcano.sh/v1beta1`, scheduling.reconcile.volcano_queues) or the Kueue Cohort/ClusterQueue
    (`kueue.x-k8s.io/v1beta2`, scheduling.reconcile.kueue_queues). A cluster may serve several: one row each.

    - `state`: SyncState. Pending until the first pass; InSync; Drifted for the pass that found a hand edit and
      put it back; Error with `message`; Imported for a cluster queue gangweb does not manage; Deleted once the
      Queue CR is gone from the cluster.
    - `last_drift`: the hand edits found by the last pass that saw drift, a list of
      ``{"field": "resources.gpu.quota", "expected": 4, "found": 6}`` (expected = gangweb's value, put back;
      found = what the cluster had). Kept after the revert, with `last_drift_at`, so it can be shown.
    - `status`: the Queue CR's `status` as last read, in KAI units:
      ``{"allocated": {"gpu": 2.0, "cpu": 4000, "memory": 8000}, "requested": {...}, "child_queues": ["a"]}``
      (GPUs in devices, CPU in millicores, memory in decimal MB), with `status_at`. For a Volcano Queue:
      ``{"state": "Open", "allocated": {"gpu", "cpu", "memory"} (KAI units), "pending": 1, "running": 2,
      "inqueue": 0}``. For Kueue: scheduling.reconcile.kueue_desired.status_payload (ClusterQueue counts, fair
      share, flavor usage raw and in KAI units, its LocalQueues' counts; Cohort fair share).
    - `warnings` (Volcano and Kueue): what the policy says that the scheduler cannot express,
      ``[{"code", "field", "message"}]`` (scheduling.reconcile.volcano_desired, kueue_desired).
    """

    policy = models.ForeignKey(QueuePolicy, on_delete=models.CASCADE, related_name="cluster_states")
    cluster = models.ForeignKey("scheduling.Cluster", on_delete=models.CASCADE, related_name="queue_states")
    family = models.CharField(max_length=16, choices=QueueFamily.choices, default=QueueFamily.KAI)
    state = models.CharField(max_length=16, choices=SyncState.choices, default=SyncState.PENDING)
    message = models.TextField(blank=True)
    warnings = models.JSONField(default=list, blank=True)
    last_synced_at = models.DateTimeField(null=True, blank=True)
    resource_version = models.CharField(max_length=64, blank=True, help_text="of the queue object as last seen")
    last_drift = models.JSONField(default=list, blank=True)
    last_drift_at = models.DateTimeField(null=True, blank=True)
    status = models.JSONField(default=dict, blank=True)
    status_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["policy_id", "cluster_id", "family"]
        constraints = [models.UniqueConstraint(fields=["policy", "cluster", "family"],
                                               name="uniq_queue_state_per_family")]

    def __str__(self):
        prefix = "" if self.family == QueueFamily.KAI else f"{self.family} "
        return f"{prefix}{self.policy_id}@{self.cluster_id}: {self.state}"


class QueueUsageSample(models.Model):
    """One reading of a Queue CR's `status.allocated` / `status.requested` in one cluster, for usage plots.

    Units are KAI's: GPUs in devices (fractions allowed), CPU in millicores, memory in decimal MB (10^6 bytes).
    A sample is written when the numbers change, and at least every GANGWEB_QUEUE_SAMPLE_SECONDS otherwise.
    """

    policy = models.ForeignKey(QueuePolicy, on_delete=models.CASCADE, related_name="usage_samples")
    cluster = models.ForeignKey("scheduling.Cluster", on_delete=models.CASCADE, related_name="queue_usage_samples")
    at = models.DateTimeField(db_index=True)
    allocated_gpu = models.FloatField(default=0)
    allocated_cpu = models.BigIntegerField(default=0, help_text="millicores")
    allocated_memory = models.BigIntegerField(default=0, help_text="megabytes (10^6 bytes)")
    requested_gpu = models.FloatField(default=0)
    requested_cpu = models.BigIntegerField(default=0, help_text="millicores")
    requested_memory = models.BigIntegerField(default=0, help_text="megabytes (10^6 bytes)")

    class Meta:
        ordering = ["policy_id", "cluster_id", "at"]
        indexes = [models.Index(fields=["policy", "cluster", "at"])]
