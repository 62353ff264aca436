"""The desired KAI Queue of a queue policy, and what both queue families share (pure: no API calls, no writes).

Shared by the KAI and the Volcano queue sync (reconcile/queue_sync.py):

- `owner_labels()` / `is_ours(obj)`: the labels that mark a Queue as this gangweb install's;
- `spec_hash(fields)`: the hash stamped on a Queue (annotation `gangweb.io/spec-hash`) to tell a hand edit from a
  policy change;
- `diff_fields(expected, found, extra=...)`: the one flat-field comparison (numbers with a tolerance, so the API
  server's JSON round trip of a fractional GPU never reads as a change).

KAI Queue (`scheduling.run.ai/v2`, cluster-scoped; docs/upstream.md, KAI Queue; KAI `pkg/apis/scheduling/v2`):

- `desired_spec(policy, parent_name)`: the `spec` gangweb writes, every limit explicit (KAI reads an omitted limit
  as 0);
- `flat_fields(spec)`: ``{field path: value}`` with KAI's defaults filled in, for comparison and drift records;
- `body_for(spec, existing, name)`: the create body, or the existing object with gangweb's fields set;
- `import_fields(spec)`: QueuePolicy fields for a foreign Queue imported unmanaged;
- `status_payload(obj)`: `status` in KAI units.

The Volcano Queue's mapping is `reconcile/volcano_desired.py` (pure as well; it uses `diff_fields` from here).
"""
from __future__ import annotations

import copy
import hashlib
import json

from django.conf import settings

from ..constants import ANNOTATION_SPEC_HASH, LABEL_INSTANCE, LABEL_MANAGED_BY, MANAGED_BY_VALUE
from ..kube.kai_units import RESOURCES, status_amounts

GROUP, VERSION, PLURAL, KIND = "scheduling.run.ai", "v2", "queues", "Queue"
DEFAULT_PRIORITY = 100  # KAI DefaultQueuePriority (pkg/common/constants/constants.go)
OPTIONAL_STRINGS = ("displayName", "parentQueue", "preemptMinRuntime", "reclaimMinRuntime")
RESOURCE_KEYS = {"quota": "quota", "limit": "limit", "overQuotaWeight": "over_quota_weight"}
TOLERANCE = 1e-9  # two numbers this close are the same value (GPU fractions after a JSON round trip)


# --- shared by both families -------------------------------------------------------------------------------------

def owner_labels() -> dict[str, str]:
    """Labels on every Queue gangweb creates (KAI or Volcano): managed-by gangweb, and which gangweb install."""
    return {LABEL_MANAGED_BY: MANAGED_BY_VALUE, LABEL_INSTANCE: settings.GANGWEB_INSTANCE}


def is_ours(obj: dict) -> bool:
    """True when the Queue carries this gangweb install's owner labels."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in owner_labels().items())


def spec_hash(fields: dict) -> str:
    """Hash of flat fields: what gangweb wrote, stamped on the CR to tell hand edits from policy changes."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def diff_fields(expected: dict, found: dict, *, extra: bool = False) -> list[dict]:
    """Flat fields that differ: ``[{"field": "resources.gpu.quota", "expected": 4, "found": 6}]``.

    Numbers compare within `TOLERANCE` (booleans never compare as numbers). Without `extra`, only `expected`'s keys
    are compared, in its order (KAI: `flat_fields` gives every key). With `extra`, a key only `found` has is a
    difference too (expected None), listed after the expected keys, each group sorted (Volcano: a resource or a
    `guarantee` added by hand is drift)."""
    if extra:
        keys = sorted(set(expected) | set(found), key=lambda k: (k not in expected, k))
    else:
        keys = list(expected)
    out = []
    for key in keys:
        want, got = expected.get(key), found.get(key)
        if _is_number(want) and _is_number(got):
            if abs(want - got) <= TOLERANCE:
                continue
        elif want == got:
            continue
        out.append({"field": key, "expected": want, "found": got})
    return out


def describe_changes(changes: list[dict]) -> str:
    """``"resources.gpu.quota 6 → 4, priority 50 → 100"`` (found → expected), for actions and drift messages."""
    return ", ".join(f"{d['field']} {d['found']!r} → {d['expected']!r}" for d in changes)


# --- the KAI Queue -------------------------------------------------------------------------------------------------

def _number(value):
    return int(value) if float(value).is_integer() else float(value)


def desired_spec(policy, parent_name: str = "") -> dict:
    """The KAI Queue `spec` for a QueuePolicy(-like object): KAI units, every limit explicit (KAI reads an omitted
    limit as 0). Empty displayName / parentQueue / min-runtimes are left out (KAI's default is the same empty value).

    ``{"priority": 100, "parentQueue": "dept", "resources": {"gpu": {"quota": 4, "limit": -1,
    "overQuotaWeight": 1}, "cpu": {...}, "memory": {...}}}``.
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
    """A KAI Queue spec as {field path: value} with KAI's defaults filled in, for comparison and drift records.

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


def body_for(policy_spec: dict, existing: dict | None, name: str) -> dict:
    """The KAI Queue create body, or `existing` with gangweb's labels, hash and spec fields set (fields gangweb does
    not manage and the resourceVersion kept; `status` dropped; optional strings the policy no longer sets removed).
    """
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


def import_fields(spec: dict | None) -> dict:
    """QueuePolicy fields from a foreign KAI Queue spec (KAI defaults for what is missing: a missing limit is 0);
    GPUs and weights as floats, CPU millicores and memory MB as ints, strings cut to the model's lengths."""
    flat = flat_fields(spec)
    out = {"display_name": flat["displayName"][:200], "priority": flat["priority"],
           "preempt_min_runtime": flat["preemptMinRuntime"][:32], "reclaim_min_runtime": flat["reclaimMinRuntime"][:32]}
    for r in RESOURCES:
        for key, attr in RESOURCE_KEYS.items():
            value = flat[f"resources.{r}.{key}"]
            out[f"{r}_{attr}"] = float(value) if (r == "gpu" or key == "overQuotaWeight") else int(round(value))
    return out


def status_payload(obj: dict) -> dict:
    """A KAI Queue's status in KAI units: {"allocated": {gpu, cpu, memory}, "requested": {...}, "child_queues": []}.
    """
    status = obj.get("status") or {}
    return {"allocated": status_amounts(status.get("allocated")), "requested": status_amounts(status.get("requested")),
            "child_queues": sorted(status.get("childQueues") or [])}
