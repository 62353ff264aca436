"""Clusters gangweb reconciles into."""
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from ..choices import ClusterHealth
from .fields import EncryptedTextField


def default_scheduler_names() -> dict[str, str]:
    """{backend family: the pods' schedulerName} for every registered family whose plugin names its own scheduler,
    at the plugin's default: {"kai": "kai-scheduler", "coscheduling": "scheduler-plugins-scheduler",
    "volcano": "volcano"} (k8s-workload keeps the default scheduler, so it has none)."""
    from ..backends import registry

    return registry.scheduler_names()


class Cluster(models.Model):
    """A Kubernetes cluster, reached by a kubeconfig (+ context) or in-cluster service account.

    `kubeconfig` is the uploaded kubeconfig text. In Python it is plaintext (read it to build a client); in the
    database it is Fernet ciphertext (EncryptedTextField, keys from GANGWEB_ENCRYPTION_KEYS). It is never
    returned by the API or shown after upload.
    Health and discovery results (`server_version`, `served_apis` as ["group/version", ...],
    `available_backends` as registry names) are written by the probe task.
    `capacity` is what the cluster's Ready, uncordoned nodes offer (`status.allocatable`, base units), written by
    the cluster watcher when nodes change: ``{"nodes": 4, "allocatable": {"nvidia.com/gpu": 32, ...},
    "largest": {"nvidia.com/gpu": 8, ...}}`` (scheduling.observe.capacity.summarize); {} until first seen.
    `runtime_classes` is the cluster's RuntimeClasses with their `overhead.podFixed` (``{"kata": {"cpu": "250m"},
    "runc": {}}``), written by the probe; the pod overhead gangweb counts (scheduling.kube.runtime_classes).
    `priority_classes` is the sorted names of the cluster's PriorityClasses, written by the probe (for the submit
    warnings, services/clusters/warnings.py); [] until first read.
    `scheduler_presence` is {backend family: {"scheduler": schedulerName, "seen_at": ISO time or None, "by": what
    showed it ("Lease kube-system/kube-scheduler", "Event from kai-scheduler", "")}} for each available backend,
    written by the probe (kube/scheduler_presence.py; read through observe/presence.py); {} until first read.
    `scheduler_names` is {backend family: schedulerName} of the schedulers installed on this cluster (KAI's name is
    set at install, and coscheduling often runs as a profile under another name): the pods of a job on this cluster
    name it (`scheduler_name_for`). Validated as DNS-1123 subdomains (services/clusters/checks.py).
    """

    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=200, blank=True)
    kubeconfig = EncryptedTextField(blank=True, help_text="kubeconfig YAML; write-only, encrypted at rest")
    context = models.CharField(max_length=253, blank=True, help_text="kubeconfig context; empty = current")
    in_cluster = models.BooleanField(default=False, help_text="use the pod's service account instead")
    health = models.CharField(max_length=16, choices=ClusterHealth.choices, default=ClusterHealth.UNKNOWN)
    health_message = models.TextField(blank=True)
    last_probe_at = models.DateTimeField(null=True, blank=True)
    server_version = models.CharField(max_length=64, blank=True)
    served_apis = models.JSONField(default=list, blank=True)
    available_backends = models.JSONField(default=list, blank=True)
    capacity = models.JSONField(default=dict, blank=True, help_text="allocatable of schedulable nodes, base units")
    runtime_classes = models.JSONField(default=dict, blank=True,
                                       help_text="RuntimeClass name -> overhead.podFixed, as last probed")
    scheduler_names = models.JSONField(default=default_scheduler_names, blank=True,
                                       help_text="{backend family: schedulerName of that scheduler on this cluster}")
    priority_classes = models.JSONField(default=list, blank=True,
                                        help_text="PriorityClass names of the cluster, as last probed")
    scheduler_presence = models.JSONField(default=dict, blank=True,
                                          help_text="{backend family: when its scheduler was last seen}, as probed")
    # Isolation (issue 18): which shard queue carries this cluster's work (scheduling/work/routing.py; null: id modulo
    # GANGWEB_RECONCILE_SHARDS), and the client-side rate limit of its API server per process (null: the install's
    # GANGWEB_CLUSTER_QPS / GANGWEB_CLUSTER_BURST; scheduling/kube/throttle.py).
    work_shard = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="shard queue reconcile.<n> of this cluster's work; empty: id modulo shards")
    api_qps = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.1), MaxValueValidator(10000)],
                                help_text="API requests per second per gangweb process; empty: the install default")
    api_burst = models.PositiveIntegerField(null=True, blank=True,
                                            validators=[MinValueValidator(1), MaxValueValidator(100000)],
                                            help_text="requests allowed at once above api_qps; empty: the default")
    # Since when the probe has found the cluster unreachable (its first failed probe in a row; null while healthy):
    # placement does not choose it, and once GANGWEB_CLUSTER_LOST_SECONDS have passed its waiting jobs are moved
    # (reconcile/moves.py).
    unreachable_since = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def scheduler_name_for(self, family: str) -> str:
        """The schedulerName the pods of a `family` job on this cluster carry: this cluster's setting, else the
        family's plugin default ("" for a family that keeps the default scheduler, or an unknown one)."""
        from ..backends import registry

        return (self.scheduler_names or {}).get(family) or registry.scheduler_names().get(family, "")


class ClusterNodes(models.Model):
    """The schedulable nodes of a cluster, one row per cluster, written by the cluster watcher when they change:
    `nodes` = ``[{"name", "labels", "allocatable": {"nvidia.com/gpu": 8, "cpu": 64, "memory": ...}}]``
    (scheduling.observe.capacity.node_list; base units). Kept apart from `Cluster` because every observation loads
    the Cluster row and only a gang that does not fit reads this (the NodesFragmented fact of why_pending)."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="node_list")
    nodes = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"nodes of {self.cluster_id}"
