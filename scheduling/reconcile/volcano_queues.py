"""Keep Volcano Queues (`scheduling.volcano.sh/v1beta1`, cluster-scoped) in line with gangweb's queue policies.

The same machinery as the KAI Queue sync (reconcile/queues.py), in every cluster whose served APIs let the
registry pick a Volcano plugin (`backends.registry.select("volcano", served)`; a cluster never probed is tried, and
a 404 on the LIST means it does not serve Volcano): one LIST, desired state from `volcano_desired`, created parents
first, gangweb's own Queues updated when the policy changed and put back (recorded as drift) when edited by hand,
stale ones deleted children first with a UID precondition, foreign ones imported as unmanaged policies and never
changed, status read back. State per policy and cluster: VolcanoQueueState (warnings included).

`missing_queue` is what the job reconcile asks before it creates a Volcano PodGroup: a PodGroup whose queue does
not exist is never scheduled by Volcano (api-changes-2026.md §3).
"""
from __future__ import annotations

import copy
import logging
import time

from django.db import transaction
from django.utils import timezone
from kubernetes import client
from kubernetes.client.rest import ApiException

from ..backends import registry
from ..choices import ReconcileOutcome, SyncState
from ..constants import ANNOTATION_SPEC_HASH
from ..kube.client import REQUEST_TIMEOUT, api_client
from ..kube.errors import KubeError, TransientKubeError, classify, describe
from ..models import Cluster, QueueClusterState, QueuePolicy, VolcanoQueueState
from ..services.queues import QueueTree
from . import queues as kai
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


def _parent(obj: dict) -> str:
    return ((obj.get("spec") or {}).get("parent")) or ""


def _depth(name: str, observed: dict[str, dict]) -> int:
    depth, seen, parent = 0, {name}, _parent(observed.get(name) or {})
    while parent and parent in observed and parent not in seen:
        seen.add(parent)
        depth += 1
        parent = _parent(observed[parent])
    return depth


def _body(name: str, spec: dict, existing: dict | None) -> dict:
    """Create body, or the existing Queue with gangweb's labels, hash and owned spec keys (others kept)."""
    fields_hash = kai.spec_hash(vd.flat_fields(spec))
    if existing is None:
        return {"apiVersion": vd.API_VERSION, "kind": vd.KIND,
                "metadata": {"name": name, "labels": kai.owner_labels(),
                             "annotations": {ANNOTATION_SPEC_HASH: fields_hash}}, "spec": spec}
    body = copy.deepcopy(existing)
    body.pop("status", None)
    meta = body.setdefault("metadata", {})
    meta.setdefault("labels", {}).update(kai.owner_labels())
    meta.setdefault("annotations", {})[ANNOTATION_SPEC_HASH] = fields_hash
    body["spec"] = vd.merged_spec(existing.get("spec"), spec)
    return body


def sync_cluster(cluster: Cluster, api: client.CustomObjectsApi | None = None) -> kai.Pass | None:
    """One pass over `cluster`'s Volcano Queues. Returns the Pass, or None when the cluster does not serve Volcano
    (nothing recorded). Raises TransientKubeError / TerminalKubeError as reconcile.queues.sync_cluster does, after
    recording a ReconcileAttempt (kind "queue", reason VolcanoQueueSync or ListFailed)."""
    if serves_volcano(cluster) is False:
        return None
    started = time.monotonic()
    result = kai.Pass(cluster)
    try:
        if api is None:
            api = client.CustomObjectsApi(api_client(cluster))
        listing = api.list_cluster_custom_object(G, V, P, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as exc:
        if exc.status == 404:  # the Volcano Queue API is not served (a cluster never probed)
            return None
        return _list_failed(cluster, started, exc)
    except Exception as exc:  # recorded on the attempt row, then re-raised, classified
        return _list_failed(cluster, started, exc)
    _sync(cluster, api, {o["metadata"]["name"]: o for o in listing.get("items", [])}, result)
    outcome = (ReconcileOutcome.TRANSIENT_ERROR if result.transient else
               ReconcileOutcome.TERMINAL_ERROR if result.errors else ReconcileOutcome.OK)
    kai._record(cluster, started, outcome, REASON, "; ".join(result.transient + result.errors)[:4000],
                [f"volcano: {a}" for a in result.actions])
    if result.transient:
        raise TransientKubeError(kai.WRITES_FAILED, "; ".join(result.transient)[:500])
    return result


def _list_failed(cluster, started, exc):
    error = classify(exc)
    transient = isinstance(error, TransientKubeError)
    kai._record(cluster, started, ReconcileOutcome.TRANSIENT_ERROR if transient else ReconcileOutcome.TERMINAL_ERROR,
                "ListFailed", f"Volcano Queues: {describe(exc, 1900)}", [])
    if error is None or error is exc:
        raise exc
    raise error from exc


def _sync(cluster: Cluster, api, observed: dict[str, dict], result: kai.Pass) -> None:  # noqa: C901 - one pass
    now = timezone.now()
    tree = QueueTree.load()
    targets = kai.target_map()
    states = {s.policy_id: s for s in VolcanoQueueState.objects.filter(cluster=cluster)}
    touched: dict[int, VolcanoQueueState] = {}

    def state_of(policy: QueuePolicy) -> VolcanoQueueState:
        if policy.id not in touched:
            touched[policy.id] = states.get(policy.id) or VolcanoQueueState(policy=policy, cluster=cluster)
        return touched[policy.id]

    def write(policy: QueuePolicy, what: str, fn, *args):
        try:
            return fn(G, V, P, *args, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            message = f"{what} Volcano Queue: {exc.status} {exc.reason}"
            detail = describe(exc, 300) if exc.status in (400, 403, 422) else ""
            (result.transient if exc.status == 409 or kai._transient(exc) else result.errors).append(
                f"{policy.name}: {message}")
            st = state_of(policy)
            st.state, st.message = SyncState.ERROR, f"{message}{': ' + detail if detail else ''}"[:2000]
        except OSError as exc:
            result.transient.append(f"{policy.name}: {what}: {describe(exc)}")
            st = state_of(policy)
            st.state, st.message = SyncState.ERROR, f"{what} Volcano Queue: {describe(exc)}"[:2000]
        return None

    # Create and update, parents first.
    desired = kai.desired_in(cluster.id, tree, targets)
    desired_names = {p.name for p in desired}
    for policy in desired:
        parent = tree.by_id.get(policy.parent_id)
        want_q = vd.desired(policy, parent.name if parent else "")
        want = vd.flat_fields(want_q.spec)
        obj = observed.get(policy.name)
        st = state_of(policy)
        st.last_synced_at, st.warnings = now, want_q.warnings
        if obj is None:
            created = write(policy, "create", api.create_cluster_custom_object, _body(policy.name, want_q.spec, None))
            if created is not None:
                observed[policy.name] = created
                if st.pk is not None and st.resource_version and st.state in (SyncState.IN_SYNC, SyncState.DRIFTED):
                    st.state, st.last_drift, st.last_drift_at = SyncState.DRIFTED, [kai.DELETED_BY_HAND], now
                    st.message = "deleted in the cluster; created again"
                    result.actions.append(f"recreate Queue {policy.name} (deleted in the cluster)")
                else:
                    st.state, st.message = SyncState.IN_SYNC, ""
                    result.actions.append(f"create Queue {policy.name}")
                st.resource_version = created["metadata"].get("resourceVersion", "")
            continue
        if not kai.is_ours(obj):
            st.state = SyncState.ERROR
            st.message = (f"a Volcano Queue named '{policy.name}' already exists in the cluster and is not managed by "
                          "this gangweb; it is not adopted (rename the policy or delete that Queue)")
            result.errors.append(f"{policy.name}: exists, not ours")
            continue
        if obj["metadata"].get("deletionTimestamp"):
            st.state, st.message = SyncState.PENDING, "the Volcano Queue is being deleted; created again once gone"
            continue
        found = vd.flat_fields(obj.get("spec"))
        changes_found = vd.diff(want, found)
        stamped = (obj["metadata"].get("annotations") or {}).get(ANNOTATION_SPEC_HASH)
        if not changes_found and stamped == kai.spec_hash(want):
            st.state, st.message = SyncState.IN_SYNC, ""
            st.resource_version = obj["metadata"].get("resourceVersion", "")
            continue
        hand_edit = bool(changes_found) and stamped != kai.spec_hash(found)
        replaced = write(policy, "update", api.replace_cluster_custom_object, policy.name,
                         _body(policy.name, want_q.spec, obj))
        if replaced is None:
            continue
        replaced.setdefault("status", obj.get("status"))
        observed[policy.name] = replaced
        st.resource_version = replaced["metadata"].get("resourceVersion", "")
        changes = ", ".join(f"{d['field']} {d['found']!r} → {d['expected']!r}" for d in changes_found)
        if hand_edit:
            st.state, st.last_drift, st.last_drift_at = SyncState.DRIFTED, changes_found, now
            st.message = f"edited in the cluster; put back: {changes}"
            result.actions.append(f"revert drift on Queue {policy.name}: {changes}")
        else:
            st.state, st.message = SyncState.IN_SYNC, ""
            result.actions.append(f"update Queue {policy.name}: {changes or 'owner annotation'}")

    # Delete gangweb's Queues no policy wants here, children first; never one that still has children.
    stale = sorted((n for n, o in observed.items() if kai.is_ours(o) and n not in desired_names),
                   key=lambda n: (-_depth(n, observed), n))
    gone: set[str] = set()
    for name in stale:
        obj = observed[name]
        kids = sorted(n for n, o in observed.items() if n not in gone and n != name and _parent(o) == name)
        policy = tree.by_name.get(name)
        if kids:
            result.errors.append(f"{name}: kept, child queues {', '.join(kids)} still use it")
            if policy is not None:
                st = state_of(policy)
                st.state, st.message = SyncState.ERROR, f"not deleted: child queues {', '.join(kids)} still use it"
            continue
        if not obj["metadata"].get("deletionTimestamp"):
            try:
                api.delete_cluster_custom_object(G, V, P, name, body=client.V1DeleteOptions(
                    preconditions=client.V1Preconditions(uid=obj["metadata"]["uid"])),
                    _request_timeout=REQUEST_TIMEOUT)
            except ApiException as exc:
                if exc.status != 404:
                    (result.transient if kai._transient(exc) or exc.status == 409 else result.errors).append(
                        f"{name}: delete Volcano Queue: {exc.status} {exc.reason}")
                    continue
            result.actions.append(f"delete Queue {name}")
        gone.add(name)
        if policy is not None:
            st = state_of(policy)
            st.state, st.message, st.last_synced_at, st.status = SyncState.DELETED, "", now, {}
    for name in gone:
        observed.pop(name, None)

    # Import Queues gangweb does not own, parents first. A policy imported from KAI Queues keeps the fields read
    # from its KAI Queue (both syncs would otherwise overwrite each other); only Volcano-only imports are refreshed.
    kai_imported = set(QueueClusterState.objects.filter(policy__managed=False).values_list("policy_id", flat=True))
    imported_ids = set()
    for name in sorted((n for n, o in observed.items() if not kai.is_ours(o)), key=lambda n: (_depth(n, observed), n)):
        policy = tree.by_name.get(name)
        if policy is not None and policy.managed:
            if policy.name not in desired_names:
                st = state_of(policy)
                st.state = SyncState.ERROR
                st.message = f"a Volcano Queue named '{name}' exists in the cluster, not managed by this gangweb"
            continue
        if len(name) > QueuePolicy._meta.get_field("name").max_length:
            result.errors.append(f"{name[:80]}: not imported, the name is longer than gangweb's 63 characters")
            continue
        fields = vd.import_fields(observed[name].get("spec"))
        parent_name = _parent(observed[name])
        fields["parent"] = tree.by_name.get(parent_name)
        if policy is None:
            policy = QueuePolicy.objects.create(name=name, managed=False, **fields)
            tree.by_name[name] = tree.by_id[policy.id] = policy
            result.actions.append(f"import Queue {name} as unmanaged")
        elif policy.id not in kai_imported and any(getattr(policy, k) != v for k, v in fields.items()):
            for k, v in fields.items():
                setattr(policy, k, v)
            policy.save()
        if cluster.id not in targets.get(policy.id, set()):
            policy.clusters.add(cluster)
        imported_ids.add(policy.id)
        st = state_of(policy)
        st.state, st.last_synced_at, st.warnings = SyncState.IMPORTED, now, []
        st.resource_version = observed[name]["metadata"].get("resourceVersion", "")
        orphan = parent_name and parent_name not in observed
        st.message = f"imported; parent '{parent_name}' is not in this cluster" if orphan else \
            "imported from the cluster; gangweb shows it and never changes or deletes it"
    kai_here = set(QueueClusterState.objects.filter(cluster=cluster, state=SyncState.IMPORTED)
                   .values_list("policy_id", flat=True))
    for policy in tree.by_id.values():
        if not policy.managed and policy.id not in imported_ids and policy.id in states \
                and states[policy.id].state != SyncState.DELETED:
            st = state_of(policy)
            st.state, st.message, st.status, st.last_synced_at = SyncState.DELETED, "gone from the cluster", {}, now
            if policy.id not in kai_here:  # its KAI Queue still links it to the cluster
                policy.clusters.remove(cluster)

    # Status read back from the same LIST.
    for name, obj in observed.items():
        policy = tree.by_name.get(name)
        if policy is None or (policy.managed and (name not in desired_names or not kai.is_ours(obj))):
            continue
        st = state_of(policy)
        st.status, st.status_at = vd.status_payload(obj), now
    with transaction.atomic():
        fields = ["state", "message", "warnings", "last_synced_at", "resource_version", "last_drift", "last_drift_at",
                  "status", "status_at"]
        VolcanoQueueState.objects.bulk_create([s for s in touched.values() if s.pk is None], update_conflicts=True,
                                              unique_fields=["policy", "cluster"], update_fields=fields)
        existing = [s for s in touched.values() if s.pk is not None]
        if existing:
            VolcanoQueueState.objects.bulk_update(existing, fields)


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
    state = VolcanoQueueState.objects.filter(policy__name=queue_name, cluster=cluster).values_list(
        "state", "message").first()
    detail = f"; its sync state is {state[0]}: {state[1]}" if state and state[1] else (
        f"; its sync state is {state[0]}" if state else
        "; no queue policy of that name belongs in this cluster (check the policy's clusters)")
    return (f"Volcano Queue '{queue_name}' {why} in cluster {cluster.name}, and Volcano never schedules a PodGroup "
            f"whose queue is missing: the PodGroup is created once the queue sync has created it{detail}")
