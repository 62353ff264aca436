"""The Volcano Queue (`scheduling.volcano.sh/v1beta1`, cluster-scoped) of a gangweb queue policy (pure: no API calls).

Mapping from a QueuePolicy (KAI units: GPU devices, CPU millicores, memory decimal MB; -1 = unlimited):

- `capability` (Volcano's upper bound) from the limits; a -1 (unlimited) limit leaves its resource out;
- `deserved` (what Volcano reclaims back for the queue) from the quotas; a -1 quota leaves its resource out
  (warning: Volcano has no "unlimited deserved"); a quota above a finite limit is sent as the limit (warning:
  Volcano's admission refuses deserved > capability, and KAI never allocates above the limit either);
- `guarantee.resource`: gangweb's policies have no guarantee (KAI has no such field: its quota is what Volcano
  calls `deserved`), so it is never set, and a guarantee added by hand is drift that is taken out again;
- `weight` from the GPU over-quota weight, rounded to a whole number within Volcano's 1..65535. Weight 0 ("no
  share of the surplus" in KAI) cannot be expressed: the CRD rejects 0, so the queue gets weight 1, the smallest
  share Volcano has, and a warning; fractional weights and CPU/memory weights that differ from the GPU's are
  warnings too;
- `parent` from the policy's parent (absent for a top-level queue: Volcano's `root`; a `parent: root` that
  Volcano's admission fills in is the same, not drift);
- `priority` from the policy's priority (both schedulers serve higher first);
- `reclaimable: true`: in KAI what a queue holds above its quota can always be reclaimed by other queues.

Children whose `deserved` add up to more than their parent's are a warning on the parent (`children_warnings`),
sent as the policies say. Whatever else a policy says that Volcano cannot express (preempt/reclaim minimum
runtimes, fractional GPUs, which Volcano counts in whole `nvidia.com/gpu` devices) is a warning ``{"code", "field",
"message"}`` on the queue.

Sources: docs/upstream.md, Volcano PodGroup and Queue (volcano-sh/apis
`pkg/apis/scheduling/v1beta1/types.go`); Volcano "Queue Resource Management" docs (capability, deserved,
guarantee; guarantee <= deserved <= capability).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from django.core.exceptions import ValidationError

from ..kube import quantities
from ..kube.kai_units import RESOURCES, STATUS_RESOURCE_NAMES, UNLIMITED, from_quantity
from .queue_desired import diff_fields

GROUP, VERSION, PLURAL, KIND = "scheduling.volcano.sh", "v1beta1", "queues", "Queue"
API_VERSION = f"{GROUP}/{VERSION}"
MIN_WEIGHT, MAX_WEIGHT = 1, 65535  # the CRD's bounds: 0 is rejected (Volcano v1.15)
DEFAULT_WEIGHT = 1  # Volcano's default when `weight` is left out
DEFAULT_PRIORITY = 0  # Volcano's default queue priority (int32 zero value)
ROOT_QUEUE = "root"  # Volcano's root of the queue hierarchy: a top-level queue's parent, whether said or not
QUANTITY_MAPS = ("capability", "deserved", "guarantee")
# Volcano queue fields the sync owns (others, e.g. affinity or extendClusters added by an admin, are kept).
GPU_TOLERANCE = 1e-6  # fractional GPU sums (0.1 + 0.2 vs 0.3) are not over on float rounding
OWNED_KEYS = ("weight", "priority", "parent", "reclaimable", "capability", "deserved", "guarantee")


@dataclass
class DesiredQueue:
    """A policy's Volcano Queue `spec` and the warnings for what Volcano cannot express."""

    spec: dict
    warnings: list[dict] = field(default_factory=list)


def _warn(out: list[dict], code: str, fld: str, message: str) -> None:
    out.append({"code": code, "field": fld, "message": message})


def to_quantity(resource: str, amount) -> str:
    """A KAI-unit amount as a quantity string: GPU devices ("4", "500m"), millicores ("16", "1500m"), MB ("64000M").
    """
    if resource == "gpu":
        value = Decimal(str(amount))
        return str(int(value)) if value == value.to_integral_value() else f"{int(value * 1000)}m"
    if resource == "cpu":
        return quantities.format_quantity(Decimal(int(amount)) / 1000, "cpu")
    return f"{int(amount)}M"


def map_weight(weights: dict[str, float]) -> tuple[int, list[dict]]:
    """Volcano `weight` from per-resource over-quota weights ``{"gpu": 2.0, "cpu": 1.0, "memory": 1.0}``.

    Returns (weight in 1..65535, warnings). The GPU weight is taken (the resource gangweb's queues are about);
    0 becomes 1 (the CRD rejects 0), fractions are rounded half up, values above 65535 are capped."""
    warnings: list[dict] = []
    gpu = float(weights.get("gpu", DEFAULT_WEIGHT))
    weight = int(Decimal(str(gpu)).to_integral_value(rounding="ROUND_HALF_UP"))
    if gpu <= 0:
        weight = MIN_WEIGHT
        _warn(warnings, "volcano_weight_zero", "gpu_over_quota_weight",
              "over-quota weight 0 (no share of the surplus) cannot be expressed in Volcano, whose Queue weight is "
              "1..65535: sent as weight 1, so in Volcano this queue shares the surplus like a weight-1 queue")
    elif weight > MAX_WEIGHT:
        weight = MAX_WEIGHT
        _warn(warnings, "volcano_weight_capped", "gpu_over_quota_weight",
              f"over-quota weight {gpu:g} is above Volcano's largest Queue weight; sent as {MAX_WEIGHT}")
    elif weight != gpu:
        weight = max(weight, MIN_WEIGHT)
        _warn(warnings, "volcano_weight_rounded", "gpu_over_quota_weight",
              f"over-quota weight {gpu:g} is not a whole number; Volcano's Queue weight is, so it is sent as {weight}")
    others = sorted(r for r in RESOURCES if r != "gpu" and float(weights.get(r, gpu)) != gpu)
    if others:
        _warn(warnings, "volcano_one_weight", f"{others[0]}_over_quota_weight",
              f"Volcano has one weight per queue, not one per resource: the GPU weight ({gpu:g}) is used, "
              f"{', '.join(others)} over-quota weight{'s' if len(others) > 1 else ''} "
              f"({', '.join(f'{float(weights[r]):g}' for r in others)}) cannot be expressed")
    return weight, warnings


def deserved_amounts(policy) -> dict[str, float | int]:
    """What the Volcano Queue's `deserved` says per resource, in KAI units: the quota, lowered to a finite limit
    (Volcano's admission refuses deserved > capability, and KAI never allocates above the limit either); a -1
    (unlimited) quota has no key. ``{"gpu": 4.0, "cpu": 16000, "memory": 64000}``."""
    out = {}
    for r in RESOURCES:
        limit, quota = getattr(policy, f"{r}_limit"), getattr(policy, f"{r}_quota")
        if quota == UNLIMITED:
            continue
        out[r] = limit if limit != UNLIMITED and quota > limit + GPU_TOLERANCE else quota
    return out


def children_warnings(parent, children: list) -> list[dict]:
    """Warnings on `parent`'s Volcano Queue when its `children`'s (the child policies whose Volcano Queues are in the
    same cluster) `deserved` add up to more than its own, per resource; ``[]`` otherwise. The values are still sent
    as the policies say: no rule says which child should get less, and KAI accepts such a tree. Volcano's
    hierarchical-queue admission refuses the write that makes the sum exceed the parent's `deserved` (that child's
    sync state then shows Error with the webhook's words)."""
    out: list[dict] = []
    if not children:
        return out
    mine = deserved_amounts(parent)
    theirs = [(k.name, deserved_amounts(k)) for k in sorted(children, key=lambda k: k.name)]
    for r in RESOURCES:
        if r not in mine:
            continue  # unlimited here: already the `volcano_unlimited_quota` warning
        total = sum(Decimal(str(amounts.get(r, 0))) for _name, amounts in theirs)
        if total > Decimal(str(mine[r])) + Decimal(str(GPU_TOLERANCE)):
            name = STATUS_RESOURCE_NAMES[r]
            _warn(out, "volcano_children_over_parent", f"{r}_quota",
                  f"the `deserved` {name} of the child queues ({', '.join(n for n, _a in theirs)}) add up to "
                  f"{to_quantity(r, total)}, more than this queue's {to_quantity(r, mine[r])}; Volcano refuses a "
                  "child Queue that makes its siblings' sum exceed the parent's `deserved`, so one of them may not "
                  "be written (its sync state shows the refusal)")
    return out


def desired(policy, parent_name: str = "") -> DesiredQueue:
    """The Volcano Queue spec of a QueuePolicy-like object (attributes `<r>_quota`, `<r>_limit`,
    `<r>_over_quota_weight` for r in gpu/cpu/memory, `priority`, `preempt_min_runtime`, `reclaim_min_runtime`)."""
    warnings: list[dict] = []
    capability, deserved = {}, {}
    amounts = deserved_amounts(policy)
    for r in RESOURCES:
        name = STATUS_RESOURCE_NAMES[r]
        limit, quota = getattr(policy, f"{r}_limit"), getattr(policy, f"{r}_quota")
        if limit != UNLIMITED:
            capability[name] = to_quantity(r, limit)
        if quota == UNLIMITED:
            _warn(warnings, "volcano_unlimited_quota", f"{r}_quota",
                  f"{r} quota -1 (unlimited) has no Volcano equivalent: `deserved` leaves {name} out")
        else:
            deserved[name] = to_quantity(r, amounts[r])
            if amounts[r] != quota:
                _warn(warnings, "volcano_deserved_over_capability", f"{r}_quota",
                      f"{r} quota {to_quantity(r, quota)} is above the {r} limit {to_quantity(r, limit)}; Volcano "
                      f"refuses a Queue whose `deserved` exceeds its `capability`, so `deserved` {name} is sent as "
                      f"the limit (KAI cannot allocate above the limit either)")
        if r == "gpu" and any(v not in (UNLIMITED, None) and float(v) != int(float(v)) for v in (limit, quota)):
            _warn(warnings, "volcano_fractional_gpu", "gpu_quota",
                  "Volcano counts nvidia.com/gpu in whole devices: the fractional GPU quota or limit is sent as a "
                  "milli-quantity (e.g. 500m) that no whole-device request fits into")
    weight, weight_warnings = map_weight({r: getattr(policy, f"{r}_over_quota_weight") for r in RESOURCES})
    warnings += weight_warnings
    for attr in ("preempt_min_runtime", "reclaim_min_runtime"):
        if getattr(policy, attr, ""):
            _warn(warnings, "volcano_unsupported", attr,
                  f"{attr.replace('_', ' ')} is a KAI setting with no Volcano Queue field; Volcano ignores it")
    spec: dict = {"weight": weight, "priority": int(policy.priority), "reclaimable": True,
                  "capability": capability, "deserved": deserved}
    if parent_name:
        spec["parent"] = parent_name
    return DesiredQueue(spec, warnings)


def _amount(resource_name: str, raw):
    """A quantity of a Volcano ResourceList in KAI units for gpu/cpu/memory; other names keep their raw string."""
    for r, name in STATUS_RESOURCE_NAMES.items():
        if name == resource_name:
            try:
                value = from_quantity(r, quantities.parse(raw, resource_name))
            except ValidationError:
                return str(raw)
            return float(value) if r == "gpu" else value
    return str(raw)


def flat_fields(spec: dict | None) -> dict:
    """The owned fields of a Volcano Queue spec, Volcano's defaults filled in, quantities in KAI units, for
    comparison and drift records: ``{"weight": 2, "priority": 100, "parent": "", "reclaimable": True,
    "capability.nvidia.com/gpu": 8.0, "deserved.cpu": 16000, ...}``; an absent resource has no key."""
    spec = spec or {}
    out = {"weight": spec.get("weight", DEFAULT_WEIGHT), "priority": spec.get("priority", DEFAULT_PRIORITY),
           "parent": "" if spec.get("parent") == ROOT_QUEUE else spec.get("parent") or "",
           "reclaimable": spec.get("reclaimable", True) is not False}
    for key in QUANTITY_MAPS:
        values = spec.get(key) or {}
        if key == "guarantee":
            values = (values.get("resource") or {}) if isinstance(values, dict) else {}
        if isinstance(values, dict):
            for name, raw in values.items():
                out[f"{key}.{name}"] = _amount(name, raw)
    return out


def diff(expected: dict, found: dict) -> list[dict]:
    """Owned fields that differ, over the keys of both (a resource added by hand is drift too):
    ``[{"field": "deserved.nvidia.com/gpu", "expected": 4.0, "found": 6.0}]``; absent is None.
    (`queue_desired.diff_fields` with `extra`: the one flat-field comparison of both queue families.)"""
    return diff_fields(expected, found, extra=True)


def merged_spec(existing_spec: dict | None, spec: dict) -> dict:
    """The existing spec with the owned keys replaced by `spec`'s (an owned key `spec` lacks is removed); fields
    gangweb does not own (affinity, extendClusters, type, dequeueStrategy) are kept."""
    out = {k: v for k, v in (existing_spec or {}).items() if k not in OWNED_KEYS}
    out.update(spec)
    return out


def import_fields(spec: dict | None) -> dict:
    """QueuePolicy fields for a Volcano Queue gangweb imports unmanaged: quota from `deserved`, limit from
    `capability` (absent = -1, unlimited), every over-quota weight from `weight`, priority; KAI units."""
    flat = flat_fields(spec)
    out = {"priority": int(flat["priority"]) if isinstance(flat["priority"], int) else 0}
    for r in RESOURCES:
        name = STATUS_RESOURCE_NAMES[r]
        for attr, key, default in (("quota", "deserved", 0), ("limit", "capability", UNLIMITED)):
            value = flat.get(f"{key}.{name}", default)
            if not isinstance(value, (int, float)):
                value = default
            out[f"{r}_{attr}"] = float(value) if r == "gpu" else int(value)
        weight = flat["weight"]
        out[f"{r}_over_quota_weight"] = float(weight) if isinstance(weight, (int, float)) else 1.0
    return out


def status_payload(obj: dict) -> dict:
    """A Volcano Queue's status as gangweb stores it: ``{"state": "Open", "allocated": {"gpu": 2.0, "cpu": 4000,
    "memory": 8000}, "pending": 1, "running": 2, "inqueue": 0}`` (allocated in KAI units; {} when not reported).
    Volcano's own counters: shown next to gangweb's job phases, never taken as the only truth."""
    status = obj.get("status") or {}
    allocated = status.get("allocated")
    out: dict = {"state": str(status.get("state") or "")[:32],
                 "allocated": {} if not isinstance(allocated, dict) else {
                     r: (lambda v: v if isinstance(v, (int, float)) else 0)(
                         _amount(STATUS_RESOURCE_NAMES[r], allocated.get(STATUS_RESOURCE_NAMES[r], 0)))
                     for r in RESOURCES}}
    for key in ("pending", "running", "inqueue"):
        value = status.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            out[key] = value
    return out
