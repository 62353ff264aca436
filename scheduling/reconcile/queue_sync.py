"""One queue-sync engine for every queue family: KAI Queues (reconcile/queues.py), Volcano Queues
(reconcile/volcano_queues.py) and Kueue Cohorts/ClusterQueues (reconcile/kueue_queues.py).

A pass over one cluster is a row of small steps over one `SyncContext`, each level-triggered and idempotent:

1. `list_observed`: one LIST of the family's Queues (also where `status` is read back);
2. `apply_desired`: every managed policy that belongs in the cluster, parents first: created when missing, updated
   when the policy changed, put back and recorded as drift when edited by hand (the spec hash gangweb stamped no
   longer matches), never adopted when a same-named Queue is not gangweb's;
3. `delete_stale`: gangweb's Queues no policy wants here, children first, with a UID precondition; one that still
   has child queues in the cluster is kept and reported;
4. `import_foreign`: Queues gangweb does not own become unmanaged policies (shown, never changed or deleted), and
   imports gone from the cluster are marked Deleted;
5. `read_status`: each policy's Queue `status` from the same LIST (the family may also sample usage);
6. `save`: the touched per-(policy, cluster) state rows in one transaction.

What differs between the families (API group, the state model, desired spec and diff, the body, messages) is a
`Family` adapter; one adapter instance serves one pass. A family whose policies become objects of two kinds (Kueue:
a parent is a Cohort, a leaf a ClusterQueue) lists both (`list_objects`), names each write's resource
(`plural_of`), says when a policy's object must change kind (`replaced_kind`) and when an object must be kept
although no policy wants it (`keep_reason`: a ClusterQueue with admitted workloads); a family with further objects
(Kueue's ResourceFlavor and LocalQueues) adds its own steps (`steps`).
Every pass leaves a ReconcileAttempt row (kind "queue"). The adapter and the `Pass` live in reconcile/queue_family.py.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import NoReturn

from django.db import DatabaseError, transaction
from django.utils import timezone
from kubernetes import client
from kubernetes.client.rest import ApiException

from ..choices import ReconcileOutcome, SyncState
from ..kube.client import REQUEST_TIMEOUT, api_client
from ..kube.errors import TransientKubeError, classify, describe
from ..models import Cluster, QueueClusterState, QueuePolicy, ReconcileAttempt
from ..queueing.tree import QueueTree
from . import queue_desired as qd
from .queue_family import STATE_FIELDS, Family, Pass  # noqa: F401 - the engine's adapter, re-exported for families

log = logging.getLogger(__name__)

# Reason of the TransientKubeError raised when a pass could list the cluster but some writes failed for a transient
# reason (409, 429, 5xx, 401/403, connection); the next attempt starts from a fresh LIST.
WRITES_FAILED = "QueueWritesFailed"
# Drift entry for a Queue deleted by hand (and created again by the sync).
DELETED_BY_HAND = {"field": "(the Queue)", "expected": "present", "found": "deleted"}


@dataclass
class SyncContext:
    """One pass over one cluster: the LIST (`observed`, by name, updated as the pass writes), the policies, the
    state rows it touched, and the Pass it reports."""

    cluster: Cluster
    api: client.CustomObjectsApi
    family: Family
    observed: dict[str, dict]
    result: Pass
    now: datetime = field(default_factory=timezone.now)
    tree: QueueTree = field(default_factory=QueueTree.load)
    targets: dict[int, set[int]] = field(default_factory=lambda: target_map())
    states: dict[int, object] = field(default_factory=dict)  # stored state rows by policy id
    touched: dict[int, object] = field(default_factory=dict)  # state rows this pass changes, by policy id
    desired_names: set[str] = field(default_factory=set)
    last_status: int | None = None  # the HTTP status of the latest write that failed (`write`)

    def __post_init__(self):
        self.states = {s.policy_id: s for s in QueueClusterState.objects.filter(cluster=self.cluster,
                                                                               family=self.family.queue_family)}

    def state_of(self, policy: QueuePolicy):
        """The policy's state row in this cluster (a new unsaved one if none), marked for saving."""
        if policy.id not in self.touched:
            self.touched[policy.id] = self.states.get(policy.id) or QueueClusterState(
                policy=policy, cluster=self.cluster, family=self.family.queue_family)
        return self.touched[policy.id]

    def write(self, policy: QueuePolicy, what: str, fn, *args):
        """Call a create/replace method of CustomObjectsApi (the last argument is the body: its resource is the
        family's `plural_of` it); on failure, sort the error (transient or terminal), put it on the policy's state
        and return None."""
        family = self.family
        try:
            return fn(family.group, family.version, family.plural_of(args[-1]), *args,
                      _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            message = f"{what}{family.write_label}: {exc.status} {exc.reason}"
            detail = describe(exc, 300) if exc.status in family.detail_statuses else ""
            # 409: changed under us (`_update` reads it again and retries), else the next pass sees the new version.
            self.last_status = exc.status
            (self.result.transient if exc.status == 409 or _transient(exc) else self.result.errors).append(
                f"{policy.name}: {message}")
            st = self.state_of(policy)
            st.state, st.message = SyncState.ERROR, f"{message}{': ' + detail if detail else ''}"[:2000]
        except OSError as exc:
            self.result.transient.append(f"{policy.name}: {what}: {describe(exc)}")
            st = self.state_of(policy)
            st.state, st.message = SyncState.ERROR, f"{what}{family.write_label}: {describe(exc)}"[:2000]
        return None

    def depth(self, name: str) -> int:
        """How many observed ancestors the observed Queue `name` has (stops at a missing parent or a cycle)."""
        depth, seen, parent = 0, {name}, self.family.parent_of(self.observed.get(name) or {})
        while parent and parent in self.observed and parent not in seen:
            seen.add(parent)
            depth += 1
            parent = self.family.parent_of(self.observed[parent])
        return depth


def _transient(exc: ApiException) -> bool:
    return isinstance(classify(exc), TransientKubeError)


# --- which policies belong in which cluster ----------------------------------------------------------------------

def target_map() -> dict[int, set[int]]:
    """{policy id: cluster ids it names} (one query); a policy absent from the map names none (= every cluster)."""
    out: dict[int, set[int]] = {}
    for pid, cid in QueuePolicy.clusters.through.objects.values_list("queuepolicy_id", "cluster_id"):
        out.setdefault(pid, set()).add(cid)
    return out


def desired_in(cluster_id: int, tree: QueueTree, targets: dict[int, set[int]]) -> list[QueuePolicy]:
    """Managed policies that belong in the cluster, with their managed ancestors, parents before children."""
    wanted: dict[int, QueuePolicy] = {}
    for p in tree.by_id.values():
        if p.managed and (not targets.get(p.id) or cluster_id in targets[p.id]):
            wanted[p.id] = p
            for a in tree.ancestors(p):
                if a.managed:
                    wanted[a.id] = a
    return sorted(wanted.values(), key=lambda q: (len(tree.ancestors(q)), q.name))


def cluster_ids() -> list[int]:
    """Every registered cluster's id."""
    return list(Cluster.objects.order_by("id").values_list("id", flat=True))


# --- the pass ------------------------------------------------------------------------------------------------------

def run(cluster: Cluster, family: Family, api: client.CustomObjectsApi | None = None) -> Pass | None:
    """One level-triggered pass of `family` over `cluster` (the module docstring's steps). Returns the Pass, or None
    when the family is absent there (`absent_on_404`; nothing recorded).

    Uses the shared cached client (scheduling.kube.client) unless `api` is given. Records a ReconcileAttempt, then
    raises TransientKubeError when the cluster cannot be listed or a write failed for a transient reason,
    TerminalKubeError when its credentials are unusable or the LIST was refused (scheduling.kube.errors.classify).
    """
    started = time.monotonic()
    if api is None:
        try:
            api = client.CustomObjectsApi(api_client(cluster))  # cached per cluster, never closed here
        except Exception as exc:  # recorded on the attempt row, then re-raised, classified
            _list_failed(cluster, family, started, exc)
    observed = list_observed(cluster, family, api, started)
    if observed is None:
        return None
    try:
        ctx = SyncContext(cluster, api, family, observed, Pass(cluster))
        for step in family.steps(STEPS):
            step(ctx)
    except Exception as exc:  # no exception leaves a pass unrecorded (e.g. a malformed object from the cluster)
        _record_failure(cluster, family, started, exc)
        raise
    result = ctx.result
    outcome = (ReconcileOutcome.TRANSIENT_ERROR if result.transient else
               ReconcileOutcome.TERMINAL_ERROR if result.errors else ReconcileOutcome.OK)
    record(cluster, started, outcome, family.reason, "; ".join(result.transient + result.errors)[:4000],
           [f"{family.action_prefix}{a}" for a in result.actions])
    if result.transient:
        raise TransientKubeError(WRITES_FAILED, "; ".join(result.transient)[:500])
    return result


def record(cluster, started: float, outcome, reason: str, message: str, actions: list[str], policy=None) -> None:
    """The ReconcileAttempt row of a queue pass (kind "queue"; `started` from time.monotonic())."""
    ReconcileAttempt.objects.create(kind=ReconcileAttempt.KIND_QUEUE, cluster=cluster, queue=policy, outcome=outcome,
                                    reason=reason, message=message, actions=actions[:500],
                                    duration_ms=int((time.monotonic() - started) * 1000))


def _record_failure(cluster: Cluster, family: Family, started: float, exc: BaseException) -> None:
    """Record a pass that raised after its LIST (reason QueueSyncFailed; the exception's type only, as
    `kube.errors.describe` words it). A database that is down too is only logged: the caller re-raises `exc`."""
    try:
        record(cluster, started, ReconcileOutcome.TERMINAL_ERROR, "QueueSyncFailed",
               f"{family.noun}s: {describe(exc, 1900)}", [])
    except DatabaseError:
        log.warning("queue sync of cluster %s failed and could not be recorded", cluster.pk, exc_info=True)


def _list_failed(cluster: Cluster, family: Family, started: float, exc: BaseException) -> NoReturn:
    error = classify(exc)
    transient = isinstance(error, TransientKubeError)
    record(cluster, started, ReconcileOutcome.TRANSIENT_ERROR if transient else ReconcileOutcome.TERMINAL_ERROR,
           "ListFailed", family.list_failed_message(exc), [])
    if error is None or error is exc:
        raise exc
    raise error from exc


def list_observed(cluster: Cluster, family: Family, api, started: float) -> dict[str, dict] | None:
    """Step 1: the family's Queues in the cluster by name, or None when the family's API is absent (404 with
    `absent_on_404`). A failed LIST is recorded and raised, classified."""
    try:
        items = family.list_objects(api)
    except ApiException as exc:
        if exc.status == 404 and family.absent_on_404:
            return None
        _list_failed(cluster, family, started, exc)
    except Exception as exc:  # recorded on the attempt row, then re-raised, classified
        _list_failed(cluster, family, started, exc)
    return {o["metadata"]["name"]: o for o in items}


# --- step 2: create, update, put back --------------------------------------------------------------------------

def apply_desired(ctx: SyncContext) -> None:
    """Step 2: create or update the Queue of every managed policy that belongs in the cluster, parents first."""
    desired = desired_in(ctx.cluster.id, ctx.tree, ctx.targets)
    ctx.desired_names = {p.name for p in desired}
    kids: dict[int, list] = {}
    for p in desired:
        kids.setdefault(p.parent_id, []).append(p)
    for policy in desired:
        parent = ctx.tree.by_id.get(policy.parent_id)
        spec, warnings = ctx.family.desired(policy, parent.name if parent else "", kids.get(policy.id, []))
        st = ctx.state_of(policy)
        st.last_synced_at = ctx.now
        if warnings is not None:
            st.warnings = warnings
        obj = ctx.observed.get(policy.name)
        if obj is None:
            _create(ctx, policy, spec, st)
        elif not qd.is_ours(obj):
            st.state = SyncState.ERROR
            st.message = (f"a {ctx.family.noun} named '{policy.name}' already exists in the cluster and is not "
                          "managed by this gangweb; it is not adopted (rename the policy or delete that Queue)")
            ctx.result.errors.append(f"{policy.name}: exists, not ours")
        elif obj["metadata"].get("deletionTimestamp"):
            st.state, st.message = SyncState.PENDING, ctx.family.pending_message
        elif ctx.family.replaced_kind(policy.name, obj):
            _replace_kind(ctx, policy, obj, st)
        else:
            _update(ctx, policy, spec, obj, st)


def _replace_kind(ctx: SyncContext, policy, obj: dict, st) -> None:
    """The policy's object is of another kind than the one it needs now (a Kueue ClusterQueue whose policy got
    children): deleted with a UID precondition unless the family keeps it; the new one is created by a later pass,
    once the old one is gone. (No child check here, unlike `delete_stale`: the new kind's children name the policy
    too, and a Kueue Cohort whose members are going is harmless to delete: Kueue treats a missing one as implicit.)"""
    old = ctx.family.kind_name(obj)
    reason = ctx.family.keep_reason(obj)
    if reason:
        st.state, st.message = SyncState.ERROR, f"its {old} is kept ({reason}); it is replaced once that is over"
        ctx.result.errors.append(f"{policy.name}: {old} kept, {reason}")
        return
    if _delete(ctx, policy.name):
        ctx.observed.pop(policy.name, None)
        st.state = SyncState.PENDING
        st.message = f"its {old} is deleted (the policy needs another kind now); the new one is created once it is gone"


def _create(ctx: SyncContext, policy, spec: dict, st) -> None:
    body = ctx.family.body(policy.name, spec, None)
    created = ctx.write(policy, "create", ctx.api.create_cluster_custom_object, body)
    if created is None:
        return
    kind = ctx.family.kind_name(created)
    ctx.observed[policy.name] = created
    # It was there at the last pass and gangweb did not delete it: someone deleted it by hand.
    if st.pk is not None and st.resource_version and st.state in (SyncState.IN_SYNC, SyncState.DRIFTED):
        st.state, st.last_drift, st.last_drift_at = SyncState.DRIFTED, [DELETED_BY_HAND], ctx.now
        st.message = "deleted in the cluster; created again"
        ctx.result.actions.append(f"recreate {kind} {policy.name} (deleted in the cluster)")
    else:
        st.state, st.message = SyncState.IN_SYNC, ""
        ctx.result.actions.append(f"create {kind} {policy.name}")
    st.resource_version = created["metadata"].get("resourceVersion", "")


CONFLICT_RETRIES = 3  # a replace answered 409 (the scheduler wrote the object's status meanwhile): read, try again


def _update(ctx: SyncContext, policy, spec: dict, obj: dict, st, retries: int = CONFLICT_RETRIES) -> None:
    """Put the observed object `obj` of `policy` back to `spec` when its managed fields differ (a replace carrying
    its resourceVersion). A 409 (its scheduler, e.g. Kueue's ClusterQueue controller, wrote its status since the
    LIST) is read again and retried up to `retries` times within the pass, so a hand edit is reverted in one pass."""
    family = ctx.family
    want, found = family.flat(spec), family.flat(obj.get("spec"))
    changes = family.diff(want, found)
    stamped = (obj["metadata"].get("annotations") or {}).get(qd.ANNOTATION_SPEC_HASH)
    if not changes and stamped == qd.spec_hash(want):
        st.state, st.message = SyncState.IN_SYNC, ""
        st.resource_version = obj["metadata"].get("resourceVersion", "")
        return
    hand_edit = bool(changes) and stamped != qd.spec_hash(found)
    ctx.last_status = None
    replaced = ctx.write(policy, "update", ctx.api.replace_cluster_custom_object, policy.name,
                         family.body(policy.name, spec, obj))
    if replaced is None:
        fresh = _read_again(ctx, obj) if ctx.last_status == 409 and retries > 0 else None
        if fresh is not None:
            ctx.result.transient.pop()  # the conflict is resolved here, not left to the next pass
            _update(ctx, policy, spec, fresh, st, retries - 1)
        return
    replaced.setdefault("status", obj.get("status"))
    ctx.observed[policy.name] = replaced
    st.resource_version = replaced["metadata"].get("resourceVersion", "")
    said, kind = qd.describe_changes(changes), family.kind_name(obj)
    if hand_edit:
        st.state, st.last_drift, st.last_drift_at = SyncState.DRIFTED, changes, ctx.now
        st.message = f"edited in the cluster; put back: {said}"
        ctx.result.actions.append(f"revert drift on {kind} {policy.name}: {said}")
    else:
        st.state, st.message = SyncState.IN_SYNC, ""
        ctx.result.actions.append(f"update {kind} {policy.name}: {said or 'owner annotation'}")


def _read_again(ctx: SyncContext, obj: dict) -> dict | None:
    """The cluster-scoped object `obj` as it is now (GET), or None when it cannot be read (gone, or an error: the
    conflict then stays recorded for the next pass)."""
    family = ctx.family
    try:
        fresh = ctx.api.get_cluster_custom_object(family.group, family.version, family.plural_of(obj),
                                                  obj["metadata"]["name"], _request_timeout=REQUEST_TIMEOUT)
    except (ApiException, OSError):
        return None
    return fresh if isinstance(fresh, dict) and fresh.get("kind") == obj.get("kind") else None


# --- step 3: delete ----------------------------------------------------------------------------------------------

def delete_stale(ctx: SyncContext) -> None:
    """Step 3: delete gangweb's Queues no policy wants here, children first; never one that still has children
    or that the family keeps (`keep_reason`)."""
    stale = sorted((n for n, o in ctx.observed.items() if qd.is_ours(o) and n not in ctx.desired_names),
                   key=lambda n: (-ctx.depth(n), n))
    gone: set[str] = set()
    for name in stale:
        kids = sorted(n for n, o in ctx.observed.items()
                      if n not in gone and n != name and ctx.family.parent_of(o) == name)
        policy = ctx.tree.by_name.get(name)
        if kids:
            ctx.result.errors.append(f"{name}: kept, child queues {', '.join(kids)} still use it")
            if policy is not None:
                st = ctx.state_of(policy)
                st.state, st.message = SyncState.ERROR, f"not deleted: child queues {', '.join(kids)} still use it"
            continue
        reason = ctx.family.keep_reason(ctx.observed[name])
        if reason:
            ctx.result.errors.append(f"{name}: kept, {reason}")
            if policy is not None:
                st = ctx.state_of(policy)
                st.state, st.message = SyncState.ERROR, f"not deleted: {reason}"
            continue
        if not _delete(ctx, name):
            continue
        gone.add(name)
        if policy is not None:
            st = ctx.state_of(policy)
            st.state, st.message, st.last_synced_at, st.status = SyncState.DELETED, "", ctx.now, {}
    for name in gone:
        ctx.observed.pop(name, None)


def _delete(ctx: SyncContext, name: str) -> bool:
    """Delete one Queue with a UID precondition; True when it is gone or going (a Queue already terminating is not
    deleted again)."""
    obj, family = ctx.observed[name], ctx.family
    if obj["metadata"].get("deletionTimestamp"):
        return True
    try:
        ctx.api.delete_cluster_custom_object(family.group, family.version, family.plural_of(obj), name,
                                             body=client.V1DeleteOptions(preconditions=client.V1Preconditions(
                                                 uid=obj["metadata"]["uid"])), _request_timeout=REQUEST_TIMEOUT)
    except ApiException as exc:
        if exc.status != 404:
            (ctx.result.transient if _transient(exc) or exc.status == 409 else ctx.result.errors).append(
                f"{name}: delete{family.write_label}: {exc.status} {exc.reason}")
            return False
    ctx.result.actions.append(f"delete {family.kind_name(obj)} {name}")
    return True


# --- step 4: import ----------------------------------------------------------------------------------------------

def import_foreign(ctx: SyncContext) -> None:
    """Step 4: import Queues gangweb does not own as unmanaged policies, parents first (refreshing ones imported
    before), then mark imports gone from the cluster as Deleted."""
    protected = ctx.family.protected_imports()
    imported_ids = set()
    foreign = sorted((n for n, o in ctx.observed.items() if not qd.is_ours(o)), key=lambda n: (ctx.depth(n), n))
    for name in foreign:
        policy = _import_one(ctx, name, protected)
        if policy is not None:
            imported_ids.add(policy.id)
    linked = None
    for policy in ctx.tree.by_id.values():
        if not policy.managed and policy.id not in imported_ids and policy.id in ctx.states \
                and ctx.states[policy.id].state != SyncState.DELETED:
            st = ctx.state_of(policy)
            st.state, st.message, st.status, st.last_synced_at = SyncState.DELETED, "gone from the cluster", {}, ctx.now
            linked = ctx.family.still_linked(ctx.cluster) if linked is None else linked
            if policy.id not in linked:
                policy.clusters.remove(ctx.cluster)


def _import_one(ctx: SyncContext, name: str, protected: set[int]):
    """Import or refresh the foreign Queue `name`; returns its policy, or None when it is not imported."""
    policy = ctx.tree.by_name.get(name)
    if policy is not None and policy.managed:
        if policy.name not in ctx.desired_names:
            st = ctx.state_of(policy)
            st.state = SyncState.ERROR
            st.message = f"a {ctx.family.noun} named '{name}' exists in the cluster, not managed by this gangweb"
        return None
    if len(name) > QueuePolicy._meta.get_field("name").max_length:
        ctx.result.errors.append(f"{name[:80]}: not imported, the name is longer than gangweb's 63 characters")
        return None
    obj = ctx.observed[name]
    fields = ctx.family.import_fields(obj.get("spec"))
    parent_name = ctx.family.parent_of(obj)
    fields["parent"] = ctx.tree.by_name.get(parent_name)
    if policy is None:
        policy = QueuePolicy.objects.create(name=name, managed=False, **fields)
        ctx.tree.by_name[name] = ctx.tree.by_id[policy.id] = policy
        ctx.result.actions.append(f"import Queue {name} as unmanaged")
    elif policy.id not in protected and any(getattr(policy, k) != v for k, v in fields.items()):
        for k, v in fields.items():
            setattr(policy, k, v)
        policy.save()
    if ctx.cluster.id not in ctx.targets.get(policy.id, set()):
        policy.clusters.add(ctx.cluster)
    st = ctx.state_of(policy)
    st.state, st.last_synced_at = SyncState.IMPORTED, ctx.now
    if "warnings" in ctx.family.state_fields:
        st.warnings = []
    st.resource_version = obj["metadata"].get("resourceVersion", "")
    orphan = parent_name and parent_name not in ctx.observed
    st.message = f"imported; parent '{parent_name}' is not in this cluster" if orphan else \
        "imported from the cluster; gangweb shows it and never changes or deletes it"
    return policy


# --- steps 5 and 6: status, save ---------------------------------------------------------------------------------

def read_status(ctx: SyncContext) -> None:
    """Step 5: each policy's Queue status from the same LIST (not for a managed policy's Queue that is not
    gangweb's or not wanted here)."""
    for name, obj in ctx.observed.items():
        policy = ctx.tree.by_name.get(name)
        if policy is None or (policy.managed and (name not in ctx.desired_names or not qd.is_ours(obj))):
            continue
        st = ctx.state_of(policy)
        previous, status = st.status, ctx.family.status(obj)
        st.status, st.status_at = status, ctx.now
        ctx.family.on_status(ctx, policy, previous, status)


def save(ctx: SyncContext) -> None:
    """Step 6: write the touched state rows (and the family's extra rows) in one transaction."""
    fields = list(ctx.family.state_fields)
    with transaction.atomic():
        # Upsert: a concurrent pass over the same cluster (beat and a policy change) may have created the row.
        QueueClusterState.objects.bulk_create([s for s in ctx.touched.values() if s.pk is None],
                                              update_conflicts=True, unique_fields=["policy", "cluster", "family"],
                                              update_fields=fields)
        existing = [s for s in ctx.touched.values() if s.pk is not None]
        if existing:
            QueueClusterState.objects.bulk_update(existing, fields)
        ctx.family.save_extra(ctx)


# The steps of a pass after its LIST, in order (the module docstring).
STEPS = (apply_desired, delete_stale, import_foreign, read_status, save)
