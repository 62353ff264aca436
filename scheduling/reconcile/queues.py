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
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from kubernetes import client
from kubernetes.client.rest import ApiException

from ..choices import ReconcileOutcome, SyncState
from ..constants import ANNOTATION_SPEC_HASH, LABEL_INSTANCE, LABEL_MANAGED_BY, MANAGED_BY_VALUE
from ..kube.client import REQUEST_TIMEOUT, api_client
from ..kube.errors import KubeError, TerminalKubeError, TransientKubeError, classify, describe
from ..kube.kai_units import RESOURCES, status_amounts
from ..models import Cluster, QueueClusterState, QueuePolicy, QueueUsageSample, ReconcileAttempt
from ..services.queues import QueueTree

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL, KIND = "scheduling.run.ai", "v2", "queues", "Queue"
DEFAULT_PRIORITY = 100  # KAI DefaultQueuePriority (pkg/common/constants/constants.go)
OPTIONAL_STRINGS = ("displayName", "parentQueue", "preemptMinRuntime", "reclaimMinRuntime")
RESOURCE_KEYS = {"quota": "quota", "limit": "limit", "overQuotaWeight": "over_quota_weight"}
# Drift entry for a Queue deleted by hand (and created again by the sync).
DELETED_BY_HAND = {"field": "(the Queue)", "expected": "present", "found": "deleted"}


# Former names of the shared kube errors, kept for callers that still use them: queue sync raises the same
# classified errors as job reconcile, so one retry policy (autoretry on TransientKubeError) covers both.
TransientSyncError = TransientKubeError
TerminalSyncError = TerminalKubeError

# Reason of the TransientKubeError raised when a pass could list the cluster but some writes failed for a transient
# reason (409, 429, 5xx, 401/403, connection); the next attempt starts from a fresh LIST.
WRITES_FAILED = "QueueWritesFailed"


def _transient(exc: ApiException) -> bool:
    return isinstance(classify(exc), TransientKubeError)


# --- the desired Queue, and field-by-field comparison -------------------------------------------------------------

def owner_labels() -> dict[str, str]:
    """Labels on every Queue gangweb creates: managed-by gangweb, and which gangweb install."""
    return {LABEL_MANAGED_BY: MANAGED_BY_VALUE, LABEL_INSTANCE: settings.GANGWEB_INSTANCE}


def is_ours(obj: dict) -> bool:
    """True when the Queue carries this gangweb install's owner labels."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in owner_labels().items())


def _number(value):
    return int(value) if float(value).is_integer() else float(value)


def desired_spec(policy: QueuePolicy, parent_name: str = "") -> dict:
    """The Queue `spec` for a policy: KAI units, every limit explicit (KAI reads an omitted limit as 0).

    Empty displayName / parentQueue / min-runtimes are left out (KAI's default is the same empty value).
    """
    spec = {"priority": policy.priority, "resources": {
        r: {"quota": _number(getattr(policy, f"{r}_quota")), "limit": _number(getattr(policy, f"{r}_limit")),
            "overQuotaWeight": _number(getattr(policy, f"{r}_over_quota_weight"))} for r in RESOURCES}}
    for key, value in (("displayName", policy.display_name), ("parentQueue", parent_name),
                       ("preemptMinRuntime", policy.preempt_min_runtime),
                       ("reclaimMinRuntime", policy.reclaim_min_runtime)):
        if value:
            spec[key] = value
    return spec


def flat_fields(spec: dict | None) -> dict:
    """A Queue spec as {field path: value} with KAI's defaults filled in, for comparison and drift records.

    ``{"displayName": "", "parentQueue": "dept", "priority": 100, "resources.gpu.quota": 4, ...}``; numbers are
    normalised (4.0 -> 4) so the API server's JSON round trip never looks like a change.
    """
    spec = spec or {}
    out = {key: spec.get(key) or "" for key in OPTIONAL_STRINGS}
    out["priority"] = spec.get("priority", DEFAULT_PRIORITY)
    resources = spec.get("resources") or {}
    for r in RESOURCES:
        for key in RESOURCE_KEYS:
            value = (resources.get(r) or {}).get(key)
            out[f"resources.{r}.{key}"] = _number(round(float(value), 9)) if value is not None else 0
    return out


def spec_hash(fields: dict) -> str:
    """Hash of flat fields: what gangweb wrote, stamped on the CR to tell hand edits from policy changes."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def diff_fields(expected: dict, found: dict) -> list[dict]:
    """Fields that differ: ``[{"field": "resources.gpu.quota", "expected": 4, "found": 6}]`` (GPU-safe compare)."""
    out = []
    for key, want in expected.items():
        got = found.get(key)
        if isinstance(want, (int, float)) and isinstance(got, (int, float)):
            if abs(want - got) <= 1e-9:
                continue
        elif want == got:
            continue
        out.append({"field": key, "expected": want, "found": got})
    return out


def _body_for(policy_spec: dict, existing: dict | None, name: str) -> dict:
    """Create body, or the existing object with gangweb's fields set (unknown fields kept, resourceVersion kept)."""
    fields_hash = spec_hash(flat_fields(policy_spec))
    if existing is None:
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
                "metadata": {"name": name, "labels": owner_labels(),
                             "annotations": {ANNOTATION_SPEC_HASH: fields_hash}},
                "spec": policy_spec}
    body = copy.deepcopy(existing)
    body.pop("status", None)
    meta = body.setdefault("metadata", {})
    meta.setdefault("labels", {}).update(owner_labels())
    meta.setdefault("annotations", {})[ANNOTATION_SPEC_HASH] = fields_hash
    spec = body.setdefault("spec", {})
    for key in OPTIONAL_STRINGS:
        spec.pop(key, None)
    for key, value in policy_spec.items():
        if key == "resources":
            resources = spec.setdefault("resources", {})
            for r, values in value.items():
                resources.setdefault(r, {}).update(values)
        else:
            spec[key] = value
    return body


def status_payload(obj: dict) -> dict:
    """A Queue's status in KAI units: {"allocated": {gpu, cpu, memory}, "requested": {...}, "child_queues": []}."""
    status = obj.get("status") or {}
    return {"allocated": status_amounts(status.get("allocated")), "requested": status_amounts(status.get("requested")),
            "child_queues": sorted(status.get("childQueues") or [])}


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


# --- one pass over one cluster ---------------------------------------------------------------------------------

@dataclass
class Pass:
    """What one sync pass did: actions (short strings), errors and the states to write."""

    cluster: Cluster
    actions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    transient: list[str] = field(default_factory=list)


def _depth(name: str, observed: dict[str, dict]) -> int:
    depth, seen = 0, {name}
    parent = ((observed.get(name) or {}).get("spec") or {}).get("parentQueue")
    while parent and parent in observed and parent not in seen:
        seen.add(parent)
        depth += 1
        parent = ((observed[parent].get("spec") or {}).get("parentQueue"))
    return depth


def _import_fields(spec: dict) -> dict:
    """QueuePolicy fields from a Queue spec (KAI defaults for what is missing: a missing limit is 0)."""
    flat = flat_fields(spec)
    out = {"display_name": flat["displayName"][:200], "priority": flat["priority"],
           "preempt_min_runtime": flat["preemptMinRuntime"][:32], "reclaim_min_runtime": flat["reclaimMinRuntime"][:32]}
    for r in RESOURCES:
        for key, attr in RESOURCE_KEYS.items():
            value = flat[f"resources.{r}.{key}"]
            out[f"{r}_{attr}"] = float(value) if (r == "gpu" or key == "overQuotaWeight") else int(round(value))
    return out


def sync_cluster(cluster: Cluster, api: client.CustomObjectsApi | None = None) -> Pass:
    """One level-triggered pass over `cluster` (see the module docstring). Returns the Pass.

    Uses the shared cached client (scheduling.kube.client) unless `api` is given. Raises TransientKubeError when the
    cluster cannot be listed or a write failed for a transient reason (after recording what was done),
    TerminalKubeError when its credentials are unusable or the LIST was refused (scheduling.kube.errors.classify).
    """
    started = time.monotonic()
    result = Pass(cluster)
    try:
        if api is None:
            api = client.CustomObjectsApi(api_client(cluster))  # cached per cluster, never closed here
        listing = api.list_cluster_custom_object(GROUP, VERSION, PLURAL, _request_timeout=REQUEST_TIMEOUT)
    except Exception as exc:  # recorded on the attempt row, then re-raised, classified
        error = classify(exc)
        transient = isinstance(error, TransientKubeError)
        _record(cluster, started, ReconcileOutcome.TRANSIENT_ERROR if transient else ReconcileOutcome.TERMINAL_ERROR,
                "ListFailed", describe(exc, 2000), [])
        if error is None or error is exc:
            raise
        raise error from exc
    _sync(cluster, api, {o["metadata"]["name"]: o for o in listing.get("items", [])}, result)
    outcome = (ReconcileOutcome.TRANSIENT_ERROR if result.transient else
               ReconcileOutcome.TERMINAL_ERROR if result.errors else ReconcileOutcome.OK)
    _record(cluster, started, outcome, "QueueSync", "; ".join(result.transient + result.errors)[:4000], result.actions)
    if result.transient:
        raise TransientKubeError(WRITES_FAILED, "; ".join(result.transient)[:500])
    return result


def _record(cluster, started, outcome, reason, message, actions, policy=None):
    ReconcileAttempt.objects.create(kind=ReconcileAttempt.KIND_QUEUE, cluster=cluster, queue=policy, outcome=outcome,
                                    reason=reason, message=message, actions=actions[:500],
                                    duration_ms=int((time.monotonic() - started) * 1000))


def _sync(cluster: Cluster, api, observed: dict[str, dict], result: Pass) -> None:
    now = timezone.now()
    tree = QueueTree.load()
    targets = target_map()
    states = {s.policy_id: s for s in QueueClusterState.objects.filter(cluster=cluster)}
    touched: dict[int, QueueClusterState] = {}

    def state_of(policy: QueuePolicy) -> QueueClusterState:
        if policy.id not in touched:
            touched[policy.id] = states.get(policy.id) or QueueClusterState(policy=policy, cluster=cluster)
        return touched[policy.id]

    def write(policy: QueuePolicy, what: str, fn, *args):
        try:
            return fn(GROUP, VERSION, PLURAL, *args, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            message = f"{what}: {exc.status} {exc.reason}"
            if exc.status == 409:  # changed under us: the next pass sees the new version
                result.transient.append(f"{policy.name}: {message}")
            elif _transient(exc):
                result.transient.append(f"{policy.name}: {message}")
            else:
                result.errors.append(f"{policy.name}: {message}")
            st = state_of(policy)
            st.state, st.message = SyncState.ERROR, message[:2000]
        except OSError as exc:
            result.transient.append(f"{policy.name}: {what}: {describe(exc)}")
            st = state_of(policy)
            st.state, st.message = SyncState.ERROR, f"{what}: {describe(exc)}"[:2000]
        return None

    # 1-3: create and update, parents first.
    desired = desired_in(cluster.id, tree, targets)
    desired_names = {p.name for p in desired}
    for policy in desired:
        parent = tree.by_id.get(policy.parent_id)
        spec = desired_spec(policy, parent.name if parent else "")
        want = flat_fields(spec)
        obj = observed.get(policy.name)
        st = state_of(policy)
        st.last_synced_at = now
        if obj is None:
            created = write(policy, "create", api.create_cluster_custom_object, _body_for(spec, None, policy.name))
            if created is not None:
                observed[policy.name] = created
                # It was there at the last pass and gangweb did not delete it: someone deleted it by hand.
                if st.pk is not None and st.resource_version and st.state in (SyncState.IN_SYNC, SyncState.DRIFTED):
                    st.state, st.last_drift, st.last_drift_at = SyncState.DRIFTED, [DELETED_BY_HAND], now
                    st.message = "deleted in the cluster; created again"
                    result.actions.append(f"recreate Queue {policy.name} (deleted in the cluster)")
                else:
                    st.state, st.message = SyncState.IN_SYNC, ""
                    result.actions.append(f"create Queue {policy.name}")
                st.resource_version = created["metadata"].get("resourceVersion", "")
            continue
        if not is_ours(obj):
            st.state = SyncState.ERROR
            st.message = (f"a Queue named '{policy.name}' already exists in the cluster and is not managed by this "
                          "gangweb; it is not adopted (rename the policy or delete that Queue)")
            result.errors.append(f"{policy.name}: exists, not ours")
            continue
        if obj["metadata"].get("deletionTimestamp"):
            st.state, st.message = SyncState.PENDING, "the Queue is being deleted; it is created again once gone"
            continue
        found = flat_fields(obj.get("spec"))
        diff = diff_fields(want, found)
        stamped = (obj["metadata"].get("annotations") or {}).get(ANNOTATION_SPEC_HASH)
        if not diff and stamped == spec_hash(want):
            st.state, st.message = SyncState.IN_SYNC, ""
            st.resource_version = obj["metadata"].get("resourceVersion", "")
            continue
        hand_edit = bool(diff) and stamped != spec_hash(found)
        replaced = write(policy, "update", api.replace_cluster_custom_object, policy.name,
                         _body_for(spec, obj, policy.name))
        if replaced is None:
            continue
        replaced.setdefault("status", obj.get("status"))
        observed[policy.name] = replaced
        st.resource_version = replaced["metadata"].get("resourceVersion", "")
        changes = ", ".join(f"{d['field']} {d['found']!r} → {d['expected']!r}" for d in diff)
        if hand_edit:
            st.state = SyncState.DRIFTED
            st.last_drift, st.last_drift_at = diff, now
            st.message = f"edited in the cluster; put back: {changes}"
            result.actions.append(f"revert drift on Queue {policy.name}: {changes}")
        else:
            st.state, st.message = SyncState.IN_SYNC, ""
            result.actions.append(f"update Queue {policy.name}: {changes or 'owner annotation'}")

    # 4: delete gangweb's Queues that no policy wants here, children first; never one that still has children.
    stale = sorted((n for n, o in observed.items() if is_ours(o) and n not in desired_names),
                   key=lambda n: (-_depth(n, observed), n))
    gone: set[str] = set()
    for name in stale:
        obj = observed[name]
        kids = sorted(n for n, o in observed.items() if n not in gone and n != name
                      and (o.get("spec") or {}).get("parentQueue") == name)
        policy = tree.by_name.get(name)
        if kids:
            result.errors.append(f"{name}: kept, child queues {', '.join(kids)} still use it")
            if policy is not None:
                st = state_of(policy)
                st.state, st.message = SyncState.ERROR, f"not deleted: child queues {', '.join(kids)} still use it"
            continue
        if obj["metadata"].get("deletionTimestamp"):
            gone.add(name)
            continue
        uid = obj["metadata"]["uid"]
        try:
            api.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name, body=client.V1DeleteOptions(
                preconditions=client.V1Preconditions(uid=uid)), _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:
                (result.transient if _transient(exc) or exc.status == 409 else result.errors).append(
                    f"{name}: delete: {exc.status} {exc.reason}")
                continue
        gone.add(name)
        result.actions.append(f"delete Queue {name}")
        if policy is not None:
            st = state_of(policy)
            st.state, st.message, st.last_synced_at, st.status = SyncState.DELETED, "", now, {}
    for name in gone:
        observed.pop(name, None)

    # 5: import Queues gangweb does not own, parents first; refresh ones imported before.
    imported_ids = set()
    foreign = sorted((n for n, o in observed.items() if not is_ours(o)), key=lambda n: (_depth(n, observed), n))
    for name in foreign:
        policy = tree.by_name.get(name)
        if policy is not None and policy.managed:
            if policy.name not in desired_names:
                st = state_of(policy)
                st.state = SyncState.ERROR
                st.message = f"a Queue named '{name}' exists in the cluster, not managed by this gangweb"
            continue
        if len(name) > QueuePolicy._meta.get_field("name").max_length:
            result.errors.append(f"{name[:80]}: not imported, the name is longer than gangweb's 63 characters")
            continue
        fields = _import_fields(observed[name].get("spec"))
        parent_name = (observed[name].get("spec") or {}).get("parentQueue") or ""
        fields["parent"] = tree.by_name.get(parent_name)
        if policy is None:
            policy = QueuePolicy.objects.create(name=name, managed=False, **fields)
            tree.by_name[name] = tree.by_id[policy.id] = policy
            result.actions.append(f"import Queue {name} as unmanaged")
        elif any(getattr(policy, k) != v for k, v in fields.items()):
            for k, v in fields.items():
                setattr(policy, k, v)
            policy.save()
        if cluster.id not in targets.get(policy.id, set()):
            policy.clusters.add(cluster)
        imported_ids.add(policy.id)
        st = state_of(policy)
        st.state, st.last_synced_at = SyncState.IMPORTED, now
        st.resource_version = observed[name]["metadata"].get("resourceVersion", "")
        orphan = parent_name and parent_name not in observed
        st.message = f"imported; parent '{parent_name}' is not in this cluster" if orphan else \
            "imported from the cluster; gangweb shows it and never changes or deletes it"
    for policy in tree.by_id.values():
        if not policy.managed and policy.id not in imported_ids and policy.id in states \
                and states[policy.id].state != SyncState.DELETED:
            st = state_of(policy)
            st.state, st.message, st.status, st.last_synced_at = SyncState.DELETED, "gone from the cluster", {}, now
            policy.clusters.remove(cluster)

    # 6: status read back from the same LIST, and usage samples.
    samples = []
    last_sample = dict(QueueUsageSample.objects.filter(cluster=cluster).values("policy_id").annotate(
        last=Max("at")).values_list("policy_id", "last"))
    every = timedelta(seconds=settings.GANGWEB_QUEUE_SAMPLE_SECONDS)
    for name, obj in observed.items():
        policy = tree.by_name.get(name)
        if policy is None or (policy.managed and (name not in desired_names or not is_ours(obj))):
            continue
        st = state_of(policy)
        status = status_payload(obj)
        changed = status != {k: st.status.get(k) for k in status}
        st.status, st.status_at = status, now
        a, r = status["allocated"], status["requested"]
        if not (a or r):
            continue  # the scheduler reported nothing: no sample (zeros would draw an idle queue)
        if changed or last_sample.get(policy.id) is None or now - last_sample[policy.id] >= every:
            samples.append(QueueUsageSample(
                policy=policy, cluster=cluster, at=now, allocated_gpu=a.get("gpu", 0.0),
                allocated_cpu=a.get("cpu", 0), allocated_memory=a.get("memory", 0), requested_gpu=r.get("gpu", 0.0),
                requested_cpu=r.get("cpu", 0), requested_memory=r.get("memory", 0)))
    with transaction.atomic():
        fields = ["state", "message", "last_synced_at", "resource_version", "last_drift", "last_drift_at", "status",
                  "status_at"]
        # Upsert: a concurrent pass over the same cluster (beat and a policy change) may have created the row.
        QueueClusterState.objects.bulk_create([s for s in touched.values() if s.pk is None], update_conflicts=True,
                                              unique_fields=["policy", "cluster"], update_fields=fields)
        existing = [s for s in touched.values() if s.pk is not None]
        if existing:
            QueueClusterState.objects.bulk_update(existing, fields)
        QueueUsageSample.objects.bulk_create(samples)
        QueueUsageSample.objects.filter(
            cluster=cluster, at__lt=now - timedelta(days=settings.GANGWEB_QUEUE_USAGE_RETENTION_DAYS)).delete()


# --- entry points the tasks call ---------------------------------------------------------------------------------

def sync_cluster_id(cluster_id: int) -> Pass | None:
    """Sync one cluster by id: its KAI Queues, then its Volcano Queues (reconcile/volcano_queues.py; skipped where
    Volcano is not served), each pass on its own, so one failing never stops the other. Returns the KAI Pass;
    raises the first KubeError of the two after both ran. A cluster deleted meanwhile is logged and skipped."""
    from . import volcano_queues

    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        log.info("queue sync: cluster %s no longer exists", cluster_id)
        return None
    errors: list[KubeError] = []
    result = None
    for sync in (sync_cluster, volcano_queues.sync_cluster):
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


def reconcile_policy(policy_id: int, extra_cluster_ids: list[int]) -> None:
    """Sync every cluster a policy belongs in, plus `extra_cluster_ids` (clusters it was dropped from) and any
    cluster holding a state row for it. A policy deleted meanwhile syncs only the extra clusters."""
    ids = set(extra_cluster_ids)
    policy = QueuePolicy.objects.filter(pk=policy_id).first()
    if policy is None:
        log.info("queue reconcile: policy %s no longer exists", policy_id)
    else:
        tree = QueueTree.load()
        ids |= clusters_of(tree.by_id[policy.id], tree, target_map())
        ids |= set(QueueClusterState.objects.filter(policy_id=policy_id).values_list("cluster_id", flat=True))
    failures: list[TransientKubeError] = []
    for cid in sorted(ids):
        try:
            sync_cluster_id(cid)
        except TransientKubeError as exc:
            failures.append(exc)
        except TerminalKubeError as exc:
            log.warning("queue reconcile of policy %s: cluster %s: %s", policy_id, cid, exc)
    if failures:
        raise TransientKubeError(failures[0].reason, "; ".join(str(f) for f in failures)[:500])
