"""Start the local control plane and register it, so a newcomer can submit a job right after `make run`.

`start_and_register(stdout)` starts (or reuses) the `localcluster` control plane in the default state directory,
then `register(kubeconfig_path)` creates or updates Cluster "local" with its kubeconfig, probes it, and makes sure
a leaf queue "default" (allowed namespace "default") and a sample runtime template "sample-gang" exist, and the
Kueue demo (`ensure_kueue_demo`): leaf queue "kueue-demo" (4 GPUs quota, limit 8) under parent "kueue-pool" (8 GPUs)
and template "sample-kueue" (backend family `kueue`), whose limit the Kueue manager on the local cluster enforces. The
cluster keeps running after `runstack` stops; `python manage.py localcluster down` stops it.

`localcluster down` then `up` writes a new kubeconfig (another API server port, new certificates). runstack keeps a
`KubeconfigFollower` on that file and re-registers Cluster "local" when it changes, so the running web, worker and
watcher (which build their clients from the Cluster row) follow without a restart.
"""
from __future__ import annotations

import copy
from pathlib import Path

import yaml
from django.db import transaction

from ...kube import client as kube_client
from ...models import Cluster, QueuePolicy, RuntimeTemplate
from ...reconcile import probe
from ..templates import versions as template_versions

LOCAL_CLUSTER = "local"
DEFAULT_QUEUE = "default"
SAMPLE_TEMPLATE = "sample-gang"
# The namespace queue "default" may use. A queue allows no namespace until one is listed (docs/security.md); the
# local cluster's "default" namespace always exists and holds nothing but gangweb's sample jobs.
SAMPLE_NAMESPACE = "default"
# A 2-pod gang for the k8s-workload backend (kube-scheduler's GangScheduling plugin runs locally); kwok finishes
# each pod 120 s after it starts (localcluster's gangweb.io/sim-duration stage).
SAMPLE_SPEC = {
    "backend": "k8s-workload",
    "gang": {"scheduleTimeoutSeconds": 60},
    "podSets": [{
        "name": "worker", "replicas": 2,
        "template": {"metadata": {"annotations": {"gangweb.io/sim-duration": "120s"}},
                     "spec": {"containers": [{"name": "main", "image": "registry.example/train:1",
                                              "command": ["python", "train.py"],
                                              "resources": {"requests": {"cpu": "1", "memory": "1Gi",
                                                                         "nvidia.com/gpu": "1"},
                                                            "limits": {"nvidia.com/gpu": "1"}}}]}},
    }],
    "overridable": ["podSets.*.replicas", "podSets.*.resources", "podSets.*.env", "priorityClassName"],
}

# A job that fails, to see what gangweb says of one: the same 2-pod gang, whose containers exit with code 3 after 20
# s (localcluster's gangweb.io/sim-exit stage); its Indexed Job has backoffLimit 0, so the first exit fails the job.
SAMPLE_FAIL_TEMPLATE = "sample-fails"
SAMPLE_FAIL_SPEC = copy.deepcopy(SAMPLE_SPEC)
SAMPLE_FAIL_SPEC["podSets"][0]["template"]["metadata"]["annotations"] = {
    "gangweb.io/sim-duration": "20s", "gangweb.io/sim-exit": "3"}

# The Kueue demo. The queue sync makes "kueue-pool" a Cohort holding 8 - 4 = 4 GPUs of its own and "kueue-demo" a
# ClusterQueue in it with nominalQuota 4 and borrowingLimit 4 (reconcile/kueue_desired.py): Kueue admits its jobs up
# to 4 GPUs on its quota and 4 more borrowed from the pool, never more. A leaf without a parent would get no
# borrowingLimit (Kueue lends only within a Cohort), so its limit would not hold: hence the parent.
KUEUE_PARENT = "kueue-pool"
KUEUE_QUEUE = "kueue-demo"
KUEUE_TEMPLATE = "sample-kueue"
KUEUE_PARENT_FIELDS = {"display_name": "Kueue pool", "gpu_quota": 8, "gpu_limit": 8}
KUEUE_QUEUE_FIELDS = {"display_name": "Kueue demo", "gpu_quota": 4, "gpu_limit": 8}
_KUEUE_POD = {"metadata": {"annotations": {"gangweb.io/sim-duration": "300s"}},
              "spec": {"containers": [{"name": "main", "image": "registry.example/train:1",
                                       "command": ["python", "train.py"],
                                       "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                                                     "limits": {"nvidia.com/gpu": "1"}}}]}}
# A 4-GPU gang of two pod sets (1 launcher + 3 workers, 1 GPU each) for the kueue family: one Workload per job,
# admitted whole by Kueue, placed by kube-scheduler; kwok ends each pod 5 minutes after it starts.
KUEUE_SPEC = {
    "backend": "kueue",
    "podSets": [{"name": "launcher", "replicas": 1, "template": copy.deepcopy(_KUEUE_POD)},
                {"name": "worker", "replicas": 3, "template": copy.deepcopy(_KUEUE_POD)}],
    "overridable": ["podSets.*.replicas", "podSets.*.resources", "podSets.*.env", "priorityClassName"],
}


def ensure_kueue_demo(cluster: Cluster, namespace: str = SAMPLE_NAMESPACE) -> QueuePolicy:
    """Make sure queue "kueue-pool" (8 GPUs) with its leaf "kueue-demo" (quota 4, limit 8 GPUs), both on `cluster`
    and allowing `namespace`, and template "sample-kueue" exist; existing ones are left as an admin edited them
    (only the cluster and namespace are added). Returns the leaf. The queue sync writes them as Kueue objects on a
    cluster serving kueue.x-k8s.io/v1beta2."""
    parent, _ = QueuePolicy.objects.get_or_create(name=KUEUE_PARENT, defaults={
        **KUEUE_PARENT_FIELDS, "allowed_namespaces": [namespace]})
    leaf, _ = QueuePolicy.objects.get_or_create(name=KUEUE_QUEUE, defaults={
        **KUEUE_QUEUE_FIELDS, "parent": parent, "allowed_namespaces": [namespace]})
    for queue in (parent, leaf):
        if namespace not in (queue.allowed_namespaces or []):
            queue.allowed_namespaces = [*(queue.allowed_namespaces or []), namespace]
            queue.save(update_fields=["allowed_namespaces"])
        queue.clusters.add(cluster)
    if not RuntimeTemplate.objects.filter(name=KUEUE_TEMPLATE).exists():
        template_versions.create_template(None, KUEUE_TEMPLATE, "2-pod-set gang of 4 GPUs, admitted by Kueue",
                                         KUEUE_SPEC)
    return leaf


def register(kubeconfig_path: str | Path, stdout=None) -> Cluster:
    """Create or update Cluster "local" from a kubeconfig file, probe it, and ensure queue "default" (synced to
    it) and templates "sample-gang" and "sample-fails" exist, and the Kueue demo (`ensure_kueue_demo`). Returns
    the probed Cluster."""
    text = Path(kubeconfig_path).read_text()
    with transaction.atomic():
        cluster, _ = Cluster.objects.update_or_create(
            name=LOCAL_CLUSTER, defaults={"kubeconfig": text, "context": "", "in_cluster": False,
                                          "description": "local control plane (localcluster, kwok nodes)"})
        queue, _ = QueuePolicy.objects.get_or_create(name=DEFAULT_QUEUE, defaults={
            "display_name": "Default", "allowed_namespaces": [SAMPLE_NAMESPACE]})
        if not queue.allowed_namespaces:  # made before queues allowed no namespace by default
            queue.allowed_namespaces = [SAMPLE_NAMESPACE]
            queue.save(update_fields=["allowed_namespaces"])
        queue.clusters.add(cluster)
        for name, description, spec in (
                (SAMPLE_TEMPLATE, "2-pod gang that runs for 2 minutes", SAMPLE_SPEC),
                (SAMPLE_FAIL_TEMPLATE, "2-pod gang whose containers exit with code 3 after 20 s", SAMPLE_FAIL_SPEC)):
            if not RuntimeTemplate.objects.filter(name=name).exists():
                template_versions.create_template(None, name, description, spec)
        ensure_kueue_demo(cluster)
    kube_client.forget(cluster.pk)
    cluster = probe.probe_cluster(cluster)
    if stdout is not None:
        stdout.write(f"local cluster: registered as '{LOCAL_CLUSTER}' ({cluster.health}, {cluster.server_version}, "
                     f"backends {', '.join(cluster.available_backends) or 'none'})\n")
    return cluster


def start_and_register(stdout) -> Cluster:
    """Start the local control plane with Kueue (reusing a running one; Kueue is added to one started without it)
    and register it. Raises localcluster's BinariesMissing (naming localcluster/build.sh) / ClusterStartError when
    it cannot start; runstack reports that and carries on."""
    import localcluster

    def progress(message: str) -> None:
        stdout.write(f"local cluster: {message}\n")

    cluster = localcluster.up(localcluster.ClusterConfig(kueue=True), progress=progress)
    return register(cluster.kubeconfig, stdout)


def kubeconfig_path() -> Path:
    """Where `localcluster up` writes the kubeconfig of the default local cluster (`<state dir>/kubeconfig`)."""
    import localcluster

    return localcluster.ClusterConfig().state_dir / "kubeconfig"


class KubeconfigFollower:
    """Re-registers Cluster "local" when the local cluster's kubeconfig file changes. `check()` costs a `stat` while
    nothing changed, so runstack calls it every few seconds."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.seen = self._mtime()

    def _mtime(self) -> int | None:
        try:
            return self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return None

    def check(self, stdout=None) -> Cluster | None:
        """When the file changed since the last check and differs from Cluster "local"'s kubeconfig, register it
        again (`register`: stored, old clients dropped, probed) and return the Cluster; else None. Nothing happens
        while the file is missing (the cluster is down), when it does not parse yet (caught mid-write: read again
        next time), or when there is no Cluster "local" (an admin deleted it: not brought back)."""
        mtime = self._mtime()
        if mtime is None or mtime == self.seen:
            return None
        try:
            text = self.path.read_text()
            doc = yaml.safe_load(text)
            complete = isinstance(doc, dict) and "current-context" in doc
        except (OSError, yaml.YAMLError):
            complete = False
        if not complete:
            return None
        self.seen = mtime
        stored = Cluster.objects.filter(name=LOCAL_CLUSTER).values_list("kubeconfig", flat=True).first()
        if stored is None or stored == text:
            return None
        if stdout is not None:
            stdout.write("local cluster: its kubeconfig changed (restarted?); registering it again\n")
        return register(self.path, stdout)
