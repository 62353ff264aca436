"""Keep KAI Queue CRs (`scheduling.run.ai/v2`, cluster-scoped) in every cluster in line with gangweb's policies.

One pass per cluster (`sync_cluster`), level-triggered and idempotent:

1. LIST every Queue in the cluster (one request; this is also where `status` is read back).
2. Desired: every managed policy that targets the cluster (no clusters = every cluster) and its ancestors, so a
   parent always exists where its children do. Created parents first; each CR carries gangweb's owner labels
   and an annotation with the hash of the spec gangweb last wrote.
3. Existing CR owned by gangweb and different from the policy: replaced with its resourceVersion (fields
   gangweb does not manage are kept). If the CR no longer matches the hash gangweb wrote, someone edited it by
   hand: the change is put back and recorded as drift (`QueueClusterState.last_drift`: field, expected, found).
4. CRs owned by gangweb with no policy left for this cluster are deleted, children first, with a UID
   precondition; one that still has child queues in the cluster is kept and reported.
5. CRs gangweb does not own and has no policy for are imported as unmanaged policies (managed=False), shown and
   never changed or deleted. A same-named CR not owned by gangweb is never adopted: the policy shows Error.
6. `status.allocated`, `status.requested`, `status.childQueues` are stored on the per-cluster state (KAI units)
   and sampled into QueueUsageSample for usage history.

Every pass leaves a ReconcileAttempt row (kind "queue") with the actions taken.

The steps are the queue-sync engine's (reconcile/queue_sync.py), shared with the Volcano Queues
(reconcile/volcano_queues.py); this module supplies the KAI family (`KaiQueues`: the spec from
reconcile/queue_desired.py, QueueClusterState, the usage samples) and the entry points the tasks call.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Max
from kubernetes import client

from ..choices import QueueFamily
from ..kube.errors import KubeError, TerminalKubeError, TransientKubeError
from ..models import Cluster, QueueClusterState, QueuePolicy, QueueUsageSample
from ..queueing.tree import QueueTree
from . import kueue_queues, queue_sync, volcano_queues
from .queue_desired import (  # noqa: F401 - the KAI Queue's pure helpers, also read from here by callers and tests
    DEFAULT_PRIORITY,
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    desired_spec,
    diff_fields,
    flat_fields,
    import_fields,
    is_ours,
    owner_labels,
    spec_hash,
    status_payload,
)
from .queue_desired import body_for as _body_for
from .queue_sync import DELETED_BY_HAND, WRITES_FAILED, Pass, cluster_ids, desired_in, target_map  # noqa: F401

log = logging.getLogger(__name__)

# Former names of the shared kube errors, kept for callers that still use them: queue sync raises the same
# classified errors as job reconcile, so one retry policy (autoretry on TransientKubeError) covers both.
TransientSyncError = TransientKubeError
TerminalSyncError = TerminalKubeError


class KaiQueues(queue_sync.Family):
    """The KAI Queue family for the queue-sync engine (one instance per pass: it gathers the usage samples)."""

    group, version, plural = GROUP, VERSION, PLURAL
    queue_family = QueueFamily.KAI

    def __init__(self):
        self.samples: list[QueueUsageSample] = []
        self.last_sample: dict[int, object] | None = None

    def desired(self, policy, parent_name, children):
        return desired_spec(policy, parent_name), None

    def flat(self, spec):
        return flat_fields(spec)

    def body(self, name, spec, existing):
        return _body_for(spec, existing, name)

    def import_fields(self, spec):
        return import_fields(spec)

    def status(self, obj):
        return status_payload(obj)

    def on_status(self, ctx, policy, previous, status):
        """A usage sample when the scheduler reported something and it changed, or the last sample is older than
        GANGWEB_QUEUE_SAMPLE_SECONDS (nothing reported: no sample; zeros would draw an idle queue)."""
        a, r = status["allocated"], status["requested"]
        if not (a or r):
            return
        if self.last_sample is None:
            self.last_sample = dict(QueueUsageSample.objects.filter(cluster=ctx.cluster).values("policy_id").annotate(
                last=Max("at")).values_list("policy_id", "last"))
        changed = status != {k: previous.get(k) for k in status}
        last = self.last_sample.get(policy.id)
        if changed or last is None or ctx.now - last >= timedelta(seconds=settings.GANGWEB_QUEUE_SAMPLE_SECONDS):
            self.samples.append(QueueUsageSample(
                policy=policy, cluster=ctx.cluster, at=ctx.now, allocated_gpu=a.get("gpu", 0.0),
                allocated_cpu=a.get("cpu", 0), allocated_memory=a.get("memory", 0), requested_gpu=r.get("gpu", 0.0),
                requested_cpu=r.get("cpu", 0), requested_memory=r.get("memory", 0)))

    def save_extra(self, ctx):
        QueueUsageSample.objects.bulk_create(self.samples)
        QueueUsageSample.objects.filter(
            cluster=ctx.cluster,
            at__lt=ctx.now - timedelta(days=settings.GANGWEB_QUEUE_USAGE_RETENTION_DAYS)).delete()


def sync_cluster(cluster: Cluster, api: client.CustomObjectsApi | None = None) -> Pass:
    """One level-triggered pass over `cluster`'s KAI Queues (the module docstring; reconcile/queue_sync.py). Returns
    the Pass. Uses the shared cached client unless `api` is given. Raises TransientKubeError when the cluster cannot
    be listed or a write failed for a transient reason (after recording what was done), TerminalKubeError when its
    credentials are unusable or the LIST was refused (scheduling.kube.errors.classify)."""
    return queue_sync.run(cluster, KaiQueues(), api)


# --- entry points the tasks call ---------------------------------------------------------------------------------

def sync_cluster_id(cluster_id: int) -> Pass | None:
    """Sync one cluster by id: its KAI Queues, then its Volcano Queues (reconcile/volcano_queues.py), then its Kueue
    Cohorts and ClusterQueues (reconcile/kueue_queues.py; each skipped where its API is not served), each pass on its
    own, so one failing never stops the others. Returns the KAI Pass; raises the first KubeError after all ran.
    A cluster deleted meanwhile is logged and skipped."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        log.info("queue sync: cluster %s no longer exists", cluster_id)
        return None
    errors: list[KubeError] = []
    result = None
    for sync in (sync_cluster, volcano_queues.sync_cluster, kueue_queues.sync_cluster):
        try:
            done = sync(cluster)
        except KubeError as exc:
            errors.append(exc)
        else:
            result = result if sync is not sync_cluster else done
    if errors:
        raise errors[0]
    return result


def clusters_of(policy: QueuePolicy, tree: QueueTree, targets: dict[int, set[int]]) -> set[int]:
    """Clusters a policy belongs in: its own targets and its descendants' (no targets = every cluster)."""
    everything = None
    out: set[int] = set()
    for p in [policy, *tree.descendants(policy)]:
        if not targets.get(p.id):
            everything = everything if everything is not None else set(cluster_ids())
            out |= everything
        else:
            out |= targets[p.id]
    return out


def policy_cluster_ids(policy_id: int, extra_cluster_ids: list[int]) -> list[int]:
    """The ids of the clusters a write to policy `policy_id` must be synced into, sorted: every cluster it belongs
    in, plus `extra_cluster_ids` (clusters it was dropped from) and any cluster holding a state row for it. A policy
    deleted meanwhile gives only the extra clusters. Reads only the database (the tree, the targets, the states)."""
    ids = set(extra_cluster_ids)
    policy = QueuePolicy.objects.filter(pk=policy_id).first()
    if policy is None:
        log.info("queue reconcile: policy %s no longer exists", policy_id)
    else:
        tree = QueueTree.load()
        ids |= clusters_of(tree.by_id[policy.id], tree, target_map())
        ids |= set(QueueClusterState.objects.filter(policy_id=policy_id, family=QueueFamily.KAI)
                   .values_list("cluster_id", flat=True))
    return sorted(ids)
