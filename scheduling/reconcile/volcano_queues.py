"""Keep Volcano Queues (`scheduling.volcano.sh/v1beta1`, cluster-scoped) in line with gangweb's queue policies.

The same engine as the KAI Queue sync (reconcile/queue_sync.py; `VolcanoQueues` is the family adapter), in every
cluster whose served APIs let the registry pick a Volcano plugin (`backends.registry.select("volcano", served)`; a
cluster never probed is tried, and a 404 on the LIST means it does not serve Volcano): one LIST, desired state from
`volcano_desired`, created parents first, gangweb's own Queues updated when the policy changed and put back
(recorded as drift) when edited by hand, stale ones deleted children first with a UID precondition, foreign ones
imported as unmanaged policies and never changed, status read back. State per policy and cluster: QueueClusterState,
family volcano (warnings included).

`missing_queue` is what the job reconcile asks before it creates a Volcano PodGroup: a PodGroup whose queue does
not exist is never scheduled by Volcano (docs/upstream.md, Volcano PodGroup and Queue).
"""
from __future__ import annotations

import copy
import logging

from kubernetes import client
from kubernetes.client.rest import ApiException

from ..backends import registry
from ..choices import QueueFamily, SyncState
from ..kube.client import REQUEST_TIMEOUT
from ..kube.errors import KubeError, describe
from ..models import Cluster, QueueClusterState
from . import queue_desired as qd
from . import queue_sync
from . import volcano_desired as vd

log = logging.getLogger(__name__)
G, V, P = vd.GROUP, vd.VERSION, vd.PLURAL
REASON = "VolcanoQueueSync"


def serves_volcano(cluster: Cluster) -> bool | None:
    """True when the cluster's last probe lets the registry pick a Volcano plugin, False when it does not, None
    when the cluster was never probed (then the LIST decides)."""
    served = set(cluster.served_apis or [])
    if not served:
        return None
    return registry.select("volcano", served) is not None


def _body(name: str, spec: dict, existing: dict | None) -> dict:
    """Create body, or the existing Queue with gangweb's labels, hash and owned spec keys (others kept)."""
    fields_hash = qd.spec_hash(vd.flat_fields(spec))
    if existing is None:
        return {"apiVersion": vd.API_VERSION, "kind": vd.KIND,
                "metadata": {"name": name, "labels": qd.owner_labels(),
                             "annotations": {qd.ANNOTATION_SPEC_HASH: fields_hash}}, "spec": spec}
    body = copy.deepcopy(existing)
    body.pop("status", None)
    meta = body.setdefault("metadata", {})
    meta.setdefault("labels", {}).update(qd.owner_labels())
    meta.setdefault("annotations", {})[qd.ANNOTATION_SPEC_HASH] = fields_hash
    body["spec"] = vd.merged_spec(existing.get("spec"), spec)
    return body


class VolcanoQueues(queue_sync.Family):
    """The Volcano Queue family for the queue-sync engine: state in QueueClusterState rows of family volcano (with
    warnings)."""

    group, version, plural = G, V, P
    reason = REASON
    noun = "Volcano Queue"
    write_label = " Volcano Queue"
    detail_statuses = (400, 403, 422)  # the admission webhook's or the CRD schema's words are worth showing
    pending_message = "the Volcano Queue is being deleted; created again once gone"
    action_prefix = "volcano: "
    absent_on_404 = True  # the Volcano Queue API is not served (a cluster never probed)
    parent_key = "parent"
    queue_family = QueueFamily.VOLCANO
    state_fields = ("state", "message", "warnings", "last_synced_at", "resource_version", "last_drift",
                    "last_drift_at", "status", "status_at")

    def list_failed_message(self, exc):
        return f"Volcano Queues: {describe(exc, 1900)}"

    def desired(self, policy, parent_name, children):
        queue = vd.desired(policy, parent_name)
        return queue.spec, queue.warnings + vd.children_warnings(policy, children)

    def flat(self, spec):
        return vd.flat_fields(spec)

    def diff(self, want, found):
        return vd.diff(want, found)

    def body(self, name, spec, existing):
        return _body(name, spec, existing)

    def import_fields(self, spec):
        return vd.import_fields(spec)

    def status(self, obj):
        return vd.status_payload(obj)

    def protected_imports(self):
        # A policy imported from KAI Queues keeps the fields read from its KAI Queue (both syncs would otherwise
        # overwrite each other); only Volcano-only imports are refreshed.
        return set(QueueClusterState.objects.filter(policy__managed=False, family=QueueFamily.KAI)
                   .values_list("policy_id", flat=True))

    def still_linked(self, cluster):
        # Its KAI Queue still links it to the cluster.
        return set(QueueClusterState.objects.filter(cluster=cluster, family=QueueFamily.KAI, state=SyncState.IMPORTED)
                   .values_list("policy_id", flat=True))


def sync_cluster(cluster: Cluster, api: client.CustomObjectsApi | None = None) -> queue_sync.Pass | None:
    """One pass over `cluster`'s Volcano Queues. Returns the Pass, or None when the cluster does not serve Volcano
    (nothing recorded). Raises TransientKubeError / TerminalKubeError as reconcile.queues.sync_cluster does, after
    recording a ReconcileAttempt (kind "queue", reason VolcanoQueueSync or ListFailed)."""
    if serves_volcano(cluster) is False:
        return None
    return queue_sync.run(cluster, VolcanoQueues(), api)


# --- what the job reconcile asks -----------------------------------------------------------------------------

def _exists(api: client.CustomObjectsApi, name: str) -> tuple[bool, str]:
    """(present and alive, why not). Raises ApiException other than 404."""
    try:
        obj = api.get_cluster_custom_object(G, V, P, name, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as exc:
        if exc.status == 404:
            return False, "does not exist"
        raise
    if obj["metadata"].get("deletionTimestamp"):
        return False, "is being deleted"
    return True, ""


def missing_queue(cluster: Cluster, api_client_, queue_name: str) -> str | None:
    """Before a Volcano PodGroup naming `queue_name` is created in `cluster`: None when its Volcano Queue exists;
    otherwise one sync pass of the cluster's Volcano Queues (which creates it when a policy wants it there) and a
    second look. Returns the message saying why the queue is still missing (the job waits, with reason
    VolcanoQueueMissing), naming the queue, the cluster and the sync state's message. Raises ApiException (other
    than 404) from the GET, classified by the caller."""
    api = client.CustomObjectsApi(api_client_)
    present, why = _exists(api, queue_name)
    if present:
        return None
    try:
        sync_cluster(cluster, api)
    except KubeError as exc:
        log.info("volcano queue sync for %s before a PodGroup: %s", cluster.name, exc)
    present, why = _exists(api, queue_name)
    if present:
        return None
    state = QueueClusterState.objects.filter(policy__name=queue_name, cluster=cluster,
                                             family=QueueFamily.VOLCANO).values_list(
        "state", "message").first()
    detail = f"; its sync state is {state[0]}: {state[1]}" if state and state[1] else (
        f"; its sync state is {state[0]}" if state else
        "; no queue policy of that name belongs in this cluster (check the policy's clusters)")
    return (f"Volcano Queue '{queue_name}' {why} in cluster {cluster.name}, and Volcano never schedules a PodGroup "
            f"whose queue is missing: the PodGroup is created once the queue sync has created it{detail}")
