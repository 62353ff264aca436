"""The Kueue objects of gangweb's queue policies (`kueue.x-k8s.io/v1beta2`; pure: no API calls, no writes).

Mapping (docs/queues.md "Kueue"; field names from Kueue v0.17.0 `apis/kueue/v1beta2`), policy amounts in KAI units
(GPU devices, CPU millicores, memory decimal MB; -1 = unlimited):

- one ResourceFlavor `gangweb-default` (no node labels, taints or tolerations) per cluster: every quota is in it;
- a policy with children in the cluster -> a **Cohort** named after it, `spec.parentName` = its parent's Cohort;
  its own quota beyond its children's is the Cohort's `nominalQuota` (Kueue: "a shared pool for the ClusterQueues
  within it"), its limit the Cohort's `borrowingLimit` (limit minus what the subtree holds; only below a parent:
  Kueue rejects a borrowing limit on a root Cohort);
- a leaf policy -> a **ClusterQueue** named after it, `spec.cohortName` = its parent; one resource group covering
  cpu, memory and nvidia.com/gpu with flavor `gangweb-default`: `nominalQuota` = quota, `borrowingLimit` = limit -
  quota (absent when the limit is -1, and always without a parent: Kueue allows borrowing only within a Cohort);
  `namespaceSelector` = `kubernetes.io/metadata.name In` the namespaces the policy and every ancestor allow;
  `preemption` = reclaimWithinCohort Any (a queue under its quota takes back what others borrowed, as KAI reclaims
  over-quota usage), withinClusterQueue LowerPriority (inside a queue, a higher-priority job may preempt) and
  borrowWithinCohort Never (a borrowing queue never preempts to borrow more: over quota, it only takes what is idle);
- the GPU over-quota weight -> `spec.fairSharing.weight` (Cohort and ClusterQueue; weight 0 is Kueue's "always at
  a disadvantage", as KAI's "no share of the surplus");
- a **LocalQueue** named after a leaf policy in each allowed namespace, `spec.clusterQueue` = the policy's name.

A resource the policy leaves unbounded (quota 0 or -1 and limit -1: the default for CPU and memory) cannot be said
in Kueue, whose quotas are all finite and which lends only what some queue's nominal quota holds: it is sent as a
nominalQuota of `UNBOUNDED` (so Kueue never holds a job back on it; kube-scheduler's node capacity decides), with a
warning. What else Kueue cannot express (queue priority, one weight per resource, minimum runtimes, fractional
GPUs, a limit without a parent) is a warning ``{"code", "field", "message"}`` as the Volcano sync's.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from decimal import Decimal

from django.core.exceptions import ValidationError

from ..kube import quantities
from ..kube.kai_units import RESOURCES, STATUS_RESOURCE_NAMES, UNLIMITED, from_quantity
from . import queue_desired as qd
from .volcano_desired import to_quantity

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
COHORT, CLUSTER_QUEUE, LOCAL_QUEUE, FLAVOR_KIND = "Cohort", "ClusterQueue", "LocalQueue", "ResourceFlavor"
PLURALS = {COHORT: "cohorts", CLUSTER_QUEUE: "clusterqueues", LOCAL_QUEUE: "localqueues",
           FLAVOR_KIND: "resourceflavors"}
FLAVOR = "gangweb-default"  # the one ResourceFlavor gangweb writes per cluster (KUEUE.md)
NAMESPACE_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
DEFAULT_PRIORITY = qd.DEFAULT_PRIORITY  # KAI's: a policy at it loses nothing to Kueue having no queue priority
COVERED = ("cpu", "memory", "gpu")  # covered resources, in this order (Kueue: every flavor lists them so)
# "No bound" for a resource the policy leaves unbounded, in KAI units: 100000 GPUs, 100000 cores, 100 TB.
UNBOUNDED = {"gpu": 100000, "cpu": 100_000_000, "memory": 100_000_000}
PREEMPTION = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
              "borrowWithinCohort": {"policy": "Never"}}  # the last is the CRD's default, said so it reads back as sent
DEFAULT_PREEMPTION = "Never"  # the CRD's default of both
DEFAULT_WEIGHT = 1.0  # the CRD's default fairSharing.weight
OWNED_KEYS = ("cohortName", "parentName", "resourceGroups", "namespaceSelector", "fairSharing", "preemption")
GPU_TOLERANCE = 1e-6
MAX_STATUS_ITEMS = 64  # the CRD's bound on flavorsUsage / resources lists


@dataclass
class Desired:
    """A policy's Kueue object: its kind (Cohort or ClusterQueue), `spec`, and warnings for what Kueue cannot say."""

    kind: str
    spec: dict
    warnings: list[dict] = field(default_factory=list)


def _warn(out: list[dict], code: str, fld: str, message: str) -> None:
    out.append({"code": code, "field": fld, "message": message})


def allowed_namespaces(policy, ancestors: list) -> list[str]:
    """The namespaces a job of `policy` may use: its own `allowed_namespaces` that every ancestor allows too
    (podspec/rules.py `check_namespace`), sorted."""
    allowed = set(policy.allowed_namespaces or [])
    for a in ancestors:
        allowed &= set(a.allowed_namespaces or [])
    return sorted(n for n in allowed if isinstance(n, str))


def namespace_selector(namespaces: list[str]) -> dict:
    """The ClusterQueue's `namespaceSelector`: those namespaces by name; none at all when the list is empty (an
    `In` needs values; every namespace has the name label, so `DoesNotExist` matches none)."""
    if not namespaces:
        return {"matchExpressions": [{"key": NAMESPACE_LABEL, "operator": "DoesNotExist"}]}
    return {"matchExpressions": [{"key": NAMESPACE_LABEL, "operator": "In", "values": sorted(namespaces)}]}


def weight_quantity(weights: dict[str, float]) -> tuple[str, list[dict]]:
    """`fairSharing.weight` from per-resource over-quota weights ``{"gpu": 2.0, "cpu": 1.0, "memory": 1.0}``: the
    GPU weight as a quantity ("2", "500m"); a CPU or memory weight that differs is a warning (Kueue has one weight
    per queue)."""
    warnings: list[dict] = []
    gpu = Decimal(str(float(weights.get("gpu", DEFAULT_WEIGHT))))
    milli = (gpu * 1000).to_integral_value(rounding="ROUND_HALF_UP")
    text = str(int(gpu)) if gpu == gpu.to_integral_value() else f"{int(milli)}m"
    if milli != gpu * 1000:
        _warn(warnings, "kueue_weight_rounded", "gpu_over_quota_weight",
              f"over-quota weight {gpu} is finer than Kueue's milli-units; sent as {text}")
    others = sorted(r for r in RESOURCES if r != "gpu" and float(weights.get(r, gpu)) != float(gpu))
    if others:
        _warn(warnings, "kueue_one_weight", f"{others[0]}_over_quota_weight",
              f"Kueue has one fair-sharing weight per queue, not one per resource: the GPU weight ({float(gpu):g}) is "
              f"used, {', '.join(others)} over-quota weight{'s' if len(others) > 1 else ''} "
              f"({', '.join(f'{float(weights[r]):g}' for r in others)}) cannot be expressed")
    return text, warnings


def _capped_quota(policy, r: str):
    """The quota Kueue holds for resource `r` (KAI units): the quota, lowered to a finite limit; None when the
    quota is -1 (unlimited) and the limit is too; UNBOUNDED when nothing bounds the resource."""
    quota, limit = getattr(policy, f"{r}_quota"), getattr(policy, f"{r}_limit")
    if limit == UNLIMITED:
        return UNBOUNDED[r] if quota in (0, UNLIMITED) else quota
    if quota == UNLIMITED or quota > limit + GPU_TOLERANCE:
        return limit
    return quota


def _resources(amounts: dict[str, tuple]) -> list[dict]:
    """One resource group with flavor FLAVOR from ``{r: (nominal, borrowing limit or None)}`` (KAI units)."""
    out = []
    for r in COVERED:
        nominal, borrowing = amounts[r]
        entry = {"name": STATUS_RESOURCE_NAMES[r], "nominalQuota": to_quantity(r, nominal)}
        if borrowing is not None:
            entry["borrowingLimit"] = to_quantity(r, borrowing)
        out.append(entry)
    return [{"coveredResources": [STATUS_RESOURCE_NAMES[r] for r in COVERED],
             "flavors": [{"name": FLAVOR, "resources": out}]}]


def _common_warnings(policy, warnings: list[dict]) -> None:
    if int(policy.priority) != DEFAULT_PRIORITY:
        _warn(warnings, "kueue_no_queue_priority", "priority",
              f"Kueue has no queue priority (it orders queues by fair share): priority {int(policy.priority)} is "
              "not sent")
    for attr in ("preempt_min_runtime", "reclaim_min_runtime"):
        if getattr(policy, attr, ""):
            _warn(warnings, "kueue_unsupported", attr,
                  f"{attr.replace('_', ' ')} is a KAI setting with no Kueue field; Kueue ignores it")
    if any(v not in (UNLIMITED, None) and float(v) != int(float(v)) for v in (policy.gpu_quota, policy.gpu_limit)):
        _warn(warnings, "kueue_fractional_gpu", "gpu_quota",
              "pods request nvidia.com/gpu in whole devices: the fractional GPU quota or limit is sent as a "
              "milli-quantity (e.g. 500m) that no whole-device request fits into")


def _leaf_amounts(policy, parent_name: str, warnings: list[dict]) -> dict[str, tuple]:
    amounts, unbounded = {}, []
    for r in COVERED:
        quota, limit = getattr(policy, f"{r}_quota"), getattr(policy, f"{r}_limit")
        nominal = _capped_quota(policy, r)
        if nominal == UNBOUNDED[r] and limit == UNLIMITED:
            unbounded.append(r)
        elif nominal != quota:
            _warn(warnings, "kueue_quota_sent_as_limit", f"{r}_quota",
                  f"{r} quota {'-1 (unlimited)' if quota == UNLIMITED else to_quantity(r, quota)} cannot be held "
                  f"above the {r} limit {to_quantity(r, limit)}: nominalQuota is sent as the limit")
        borrowing = None if limit == UNLIMITED else max(limit - nominal, 0)
        if not parent_name and (borrowing or (limit == UNLIMITED and r not in unbounded)):
            _warn(warnings, "kueue_no_cohort", f"{r}_limit",
                  f"Kueue lends only within a Cohort and this queue has no parent: it uses at most its {r} quota "
                  f"{to_quantity(r, nominal)}, not its {r} limit")
            borrowing = None
        amounts[r] = (nominal, borrowing)
    if unbounded:
        _warn(warnings, "kueue_unbounded", f"{unbounded[0]}_limit",
              f"{', '.join(unbounded)}: quota {'and limit' if len(unbounded) == 1 else 'and limits'} leave Kueue "
              "nothing to hold (Kueue has no unlimited quota, and lends only what some queue's nominal quota holds); "
              f"sent as nominalQuota {', '.join(to_quantity(r, UNBOUNDED[r]) for r in unbounded)}, so Kueue never "
              "holds a job back on them and never reclaims them (the nodes' capacity decides)")
    return amounts


def _cohort_amounts(policy, parent_name: str, children: list, warnings: list[dict]) -> dict[str, tuple] | None:
    """The Cohort's own pool (its quota beyond its children's) and borrowing limit; None when it has neither."""
    amounts, said = {}, False
    for r in COVERED:
        limit = getattr(policy, f"{r}_limit")
        own = _capped_quota(policy, r)
        kids = [_capped_quota(k, r) for k in children]
        kids_total = sum(kids)
        if own == UNBOUNDED[r] or any(k == UNBOUNDED[r] for k in kids):
            amounts[r] = (0, None)
            continue
        if kids_total > own + GPU_TOLERANCE:
            _warn(warnings, "kueue_children_over_parent", f"{r}_quota",
                  f"Kueue guarantees each child queue its nominal quota: the children hold {to_quantity(r, kids_total)}"
                  f" of {r}, more than this queue's quota {to_quantity(r, own)}")
        held = max(own, kids_total)
        borrowing = None if limit == UNLIMITED else max(limit - held, 0)
        if borrowing is not None and not parent_name:
            if borrowing:
                _warn(warnings, "kueue_no_cohort", f"{r}_limit",
                      f"Kueue lends only within a parent Cohort and this queue has none: its subtree uses at most "
                      f"{to_quantity(r, held)} of {r}, not its {r} limit")
            borrowing = None
        pool = max(own - kids_total, 0)
        said = said or bool(pool) or borrowing is not None
        amounts[r] = (pool, borrowing)
    return amounts if said else None


def desired(policy, parent_name: str, children: list, namespaces: list[str]) -> Desired:
    """The Kueue object of a QueuePolicy-like object (`<r>_quota`, `<r>_limit`, `<r>_over_quota_weight` for r in
    gpu/cpu/memory, `priority`, `preempt_min_runtime`, `reclaim_min_runtime`): a Cohort when `children` (its child
    policies wanted in the same cluster) is not empty, else a ClusterQueue admitting `namespaces`."""
    warnings: list[dict] = []
    weight, weight_warnings = weight_quantity({r: getattr(policy, f"{r}_over_quota_weight") for r in RESOURCES})
    if children:
        spec: dict = {"fairSharing": {"weight": weight}}
        if parent_name:
            spec["parentName"] = parent_name
        amounts = _cohort_amounts(policy, parent_name, children, warnings)
        if amounts is not None:
            spec["resourceGroups"] = _resources(amounts)
        kind = COHORT
    else:
        spec = {"resourceGroups": _resources(_leaf_amounts(policy, parent_name, warnings)),
                "namespaceSelector": namespace_selector(namespaces), "fairSharing": {"weight": weight},
                "preemption": copy.deepcopy(PREEMPTION)}
        if parent_name:
            spec["cohortName"] = parent_name
        kind = CLUSTER_QUEUE
    _common_warnings(policy, warnings)
    return Desired(kind, spec, warnings + weight_warnings)


# --- comparison ---------------------------------------------------------------------------------------------------

def _amount(resource_name: str, raw):
    """A quantity in KAI units for cpu/memory/nvidia.com/gpu; other resources and unparsable values as strings."""
    for r, name in STATUS_RESOURCE_NAMES.items():
        if name == resource_name:
            try:
                value = from_quantity(r, quantities.parse(raw, resource_name))
            except ValidationError:
                return str(raw)[:64]
            return float(value) if r == "gpu" else value
    try:
        return float(quantities.parse(raw, resource_name))
    except ValidationError:
        return str(raw)[:64]


def _weight(raw) -> float | str:
    if raw is None:
        return DEFAULT_WEIGHT
    try:
        return float(quantities.parse(raw, "weight"))
    except ValidationError:
        return str(raw)[:64]


def flat_fields(spec: dict | None) -> dict:
    """The owned fields of a Cohort or ClusterQueue spec, Kueue's defaults filled in, quantities in KAI units, for
    comparison and drift records: ``{"parentName": "", "cohortName": "dept", "fairSharing.weight": 1.0,
    "preemption.reclaimWithinCohort": "Any", ..., "namespaceSelector": "<canonical JSON>",
    "resourceGroups[0].coveredResources": "cpu,memory,nvidia.com/gpu",
    "gangweb-default/nvidia.com/gpu.nominalQuota": 4.0, "gangweb-default/nvidia.com/gpu.borrowingLimit": 4.0}``;
    an absent quota has no key. Malformed parts (a hostile edit) read as strings, so they differ and are put back."""
    spec = spec if isinstance(spec, dict) else {}
    fair = spec.get("fairSharing") if isinstance(spec.get("fairSharing"), dict) else {}
    preemption = spec.get("preemption") if isinstance(spec.get("preemption"), dict) else {}
    selector = spec.get("namespaceSelector")
    out = {"parentName": str(spec.get("parentName") or ""), "cohortName": str(spec.get("cohortName") or ""),
           "fairSharing.weight": _weight(fair.get("weight")),
           "namespaceSelector": "" if selector is None else json.dumps(selector, sort_keys=True)[:2000]}
    for key in ("reclaimWithinCohort", "withinClusterQueue"):
        out[f"preemption.{key}"] = str(preemption.get(key) or DEFAULT_PREEMPTION)
    borrow = preemption.get("borrowWithinCohort") if isinstance(preemption.get("borrowWithinCohort"), dict) else {}
    out["preemption.borrowWithinCohort.policy"] = str(borrow.get("policy") or DEFAULT_PREEMPTION)
    if borrow.get("maxPriorityThreshold") is not None:
        out["preemption.borrowWithinCohort.maxPriorityThreshold"] = str(borrow["maxPriorityThreshold"])[:32]
    groups = spec.get("resourceGroups") if isinstance(spec.get("resourceGroups"), list) else []
    for i, group in enumerate(groups[:16]):
        group = group if isinstance(group, dict) else {}
        covered = group.get("coveredResources") if isinstance(group.get("coveredResources"), list) else []
        out[f"resourceGroups[{i}].coveredResources"] = ",".join(str(c) for c in covered)[:2000]
        for flavor in (group.get("flavors") if isinstance(group.get("flavors"), list) else [])[:MAX_STATUS_ITEMS]:
            flavor = flavor if isinstance(flavor, dict) else {}
            for res in (flavor.get("resources") if isinstance(flavor.get("resources"), list) else [])[:64]:
                res = res if isinstance(res, dict) else {}
                for q in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if res.get(q) is not None:
                        out[f"{flavor.get('name')}/{res.get('name')}.{q}"] = _amount(str(res.get("name")), res[q])
    return out


def diff(expected: dict, found: dict) -> list[dict]:
    """Owned fields that differ, over both sides' keys (a quota added by hand is drift too):
    ``[{"field": "gangweb-default/nvidia.com/gpu.nominalQuota", "expected": 4.0, "found": 6.0}]``."""
    return qd.diff_fields(expected, found, extra=True)


def body(kind: str, name: str, spec: dict, existing: dict | None) -> dict:
    """The create body of a Cohort or ClusterQueue, or the existing object with gangweb's labels, spec hash and
    owned spec keys (others, e.g. queueingStrategy or stopPolicy set by an admin, kept)."""
    fields_hash = qd.spec_hash(flat_fields(spec))
    if existing is None:
        return {"apiVersion": API_VERSION, "kind": kind,
                "metadata": {"name": name, "labels": qd.owner_labels(),
                             "annotations": {qd.ANNOTATION_SPEC_HASH: fields_hash}}, "spec": spec}
    out = copy.deepcopy(existing)
    out.pop("status", None)
    meta = out.setdefault("metadata", {})
    meta.setdefault("labels", {}).update(qd.owner_labels())
    meta.setdefault("annotations", {})[qd.ANNOTATION_SPEC_HASH] = fields_hash
    out["spec"] = {**{k: v for k, v in (existing.get("spec") or {}).items() if k not in OWNED_KEYS}, **spec}
    return out


def import_fields(spec: dict | None) -> dict:
    """QueuePolicy fields for a Cohort or ClusterQueue gangweb imports unmanaged: quota = the nominal quotas over
    every flavor, limit = quota + borrowing limits (-1 when any flavor has none, or no quota is given), every
    over-quota weight from `fairSharing.weight`; KAI units."""
    flat = flat_fields(spec)
    weight = flat["fairSharing.weight"]
    out: dict = {"priority": DEFAULT_PRIORITY}
    for r in RESOURCES:
        name = STATUS_RESOURCE_NAMES[r]
        nominal = [v for k, v in flat.items() if k.endswith(f"/{name}.nominalQuota") and isinstance(v, (int, float))]
        borrow = {k.rsplit(".", 1)[0]: v for k, v in flat.items() if k.endswith(f"/{name}.borrowingLimit")}
        quota = sum(nominal)
        unbounded = not nominal or len(borrow) < len(nominal) or not all(
            isinstance(v, (int, float)) for v in borrow.values())
        limit = UNLIMITED if unbounded else quota + sum(borrow.values())
        if unbounded and quota >= UNBOUNDED[r]:  # gangweb's own "no bound" reads back as the policy defaults
            quota = 0
        out[f"{r}_quota"] = float(quota) if r == "gpu" else int(quota)
        out[f"{r}_limit"] = float(limit) if r == "gpu" else int(limit)
        out[f"{r}_over_quota_weight"] = weight if isinstance(weight, float) else DEFAULT_WEIGHT
    return out


# --- status -------------------------------------------------------------------------------------------------------

def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _usage_list(raw) -> list[dict]:
    """A `flavorsUsage`/`flavorsReservation` list kept raw but bounded: ``[{"name": "gangweb-default",
    "resources": [{"name": "nvidia.com/gpu", "total": "4", "borrowed": "0"}]}]`` (quantities as the cluster wrote
    them, strings of at most 64 characters)."""
    out = []
    for flavor in (raw if isinstance(raw, list) else [])[:MAX_STATUS_ITEMS]:
        if not isinstance(flavor, dict):
            continue
        resources = []
        for res in (flavor.get("resources") if isinstance(flavor.get("resources"), list) else [])[:MAX_STATUS_ITEMS]:
            if isinstance(res, dict):
                resources.append({"name": str(res.get("name") or "")[:253],
                                  "total": str(res.get("total") or "0")[:64],
                                  "borrowed": str(res.get("borrowed") or "0")[:64]})
        out.append({"name": str(flavor.get("name") or "")[:253], "resources": resources})
    return out


def _totals(usage: list[dict], key: str) -> dict:
    """{gpu, cpu, memory} summed over flavors in KAI units (an unparsable quantity counts as nothing)."""
    out: dict = {r: (0.0 if r == "gpu" else 0) for r in RESOURCES}
    for flavor in usage:
        for res in flavor["resources"]:
            for r, name in STATUS_RESOURCE_NAMES.items():
                if res["name"] == name:
                    value = _amount(name, res[key])
                    if isinstance(value, (int, float)):
                        out[r] += value
    return out


def status_payload(obj: dict) -> dict:
    """A Cohort's or ClusterQueue's status as gangweb stores it (QueueClusterState.status, family kueue).

    ClusterQueue: ``{"kind": "ClusterQueue", "pending_workloads": 1, "reserving_workloads": 2,
    "admitted_workloads": 2, "weighted_share": 0 (None when fair sharing is off), "active": "True",
    "active_reason": "Ready", "flavors_reservation": [...], "flavors_usage": [...] (`_usage_list`),
    "allocated": {"gpu": 4.0, "cpu": 8000, "memory": 16000} (flavorsUsage totals, KAI units),
    "reserved": {...} (flavorsReservation totals), "borrowed": {...} (flavorsUsage borrowed)}``.
    Cohort: ``{"kind": "Cohort", "weighted_share": 0 or None}``. A count the cluster did not report (or reported
    as nonsense) is None: unknown, never 0."""
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    fair = status.get("fairSharing") if isinstance(status.get("fairSharing"), dict) else {}
    share = _count(fair.get("weightedShare"))
    if obj.get("kind") == COHORT:
        return {"kind": COHORT, "weighted_share": share}
    usage, reservation = _usage_list(status.get("flavorsUsage")), _usage_list(status.get("flavorsReservation"))
    active = next((c for c in (status.get("conditions") or []) if isinstance(c, dict) and c.get("type") == "Active"),
                  {})
    return {"kind": CLUSTER_QUEUE, "pending_workloads": _count(status.get("pendingWorkloads")),
            "reserving_workloads": _count(status.get("reservingWorkloads")),
            "admitted_workloads": _count(status.get("admittedWorkloads")), "weighted_share": share,
            "active": str(active.get("status") or "")[:16], "active_reason": str(active.get("reason") or "")[:128],
            "flavors_reservation": reservation, "flavors_usage": usage, "allocated": _totals(usage, "total"),
            "reserved": _totals(reservation, "total"), "borrowed": _totals(usage, "borrowed")}


def workloads_held(obj: dict) -> str:
    """Why a ClusterQueue or LocalQueue must not be deleted now: "" when its status says no workload holds quota
    in it; else "2 workloads admitted, 1 reserving quota" (or "its workload counts are unreadable" for counts that
    are not numbers: unknown is never taken for none)."""
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    said = []
    for key, words in (("admittedWorkloads", "admitted"), ("reservingWorkloads", "reserving quota")):
        raw = status.get(key)
        if raw is None:
            continue
        count = _count(raw)
        if count is None:
            return "its workload counts are unreadable"
        if count:
            said.append(f"{count} workload{'s' if count != 1 else ''} {words}")
    return ", ".join(said)


# --- LocalQueue and ResourceFlavor ----------------------------------------------------------------------------------

def local_queue_body(name: str, namespace: str) -> dict:
    """A LocalQueue `name` in `namespace` pointing at ClusterQueue `name` (`spec.clusterQueue` is immutable)."""
    return {"apiVersion": API_VERSION, "kind": LOCAL_QUEUE,
            "metadata": {"name": name, "namespace": namespace, "labels": qd.owner_labels()},
            "spec": {"clusterQueue": name}}


def flavor_body(existing: dict | None = None) -> dict:
    """The ResourceFlavor FLAVOR: no node labels, taints, tolerations or topology (pods go wherever kube-scheduler
    puts them); the existing one with its spec emptied again when edited."""
    if existing is None:
        return {"apiVersion": API_VERSION, "kind": FLAVOR_KIND,
                "metadata": {"name": FLAVOR, "labels": qd.owner_labels()}, "spec": {}}
    out = copy.deepcopy(existing)
    out.pop("status", None)
    out.setdefault("metadata", {}).setdefault("labels", {}).update(qd.owner_labels())
    out["spec"] = {}
    return out
