"""What a cluster's nodes can offer, and whether a gang could ever fit in it.

`summarize(nodes)` reduces the Node objects (core/v1) to the capacity summary stored in `Cluster.capacity`::

    {"nodes": 4,                                            # Ready nodes that accept new pods
     "allocatable": {"cpu": 256, "memory": 2199023255552, "nvidia.com/gpu": 32},   # sum over those nodes
     "largest": {"cpu": 64, "memory": 549755813888, "nvidia.com/gpu": 8}}          # the most on any one of them

Numbers are base units (CPU cores, bytes, devices) as `status.allocatable` states them: what the kubelet lets the
scheduler hand out, after system reservations. A node counts when its `Ready` condition is True and it is not
cordoned (`spec.unschedulable`).

`blocking(needs, per_pod, capacity)` says which of a gang's asks the cluster can never satisfy as it stands:
the whole gang asks more than all schedulable nodes have (`ExceedsClusterCapacity`), or one pod asks more than
the largest node has (`NoNodeFits`). Both are upper bounds: taints, node selectors, affinity and other pods only
make the room smaller, so a fact stated here is certain, while its absence does not mean the gang fits.
"""
from __future__ import annotations

from decimal import Decimal, InvalidOperation

from kubernetes.utils import parse_quantity

from ..kube import resources
from . import objects as o

EXCEEDS_CLUSTER = "ExceedsClusterCapacity"
NO_NODE_FITS = "NoNodeFits"
CLUSTER_BUSY = "ClusterBusy"
# Resources worth a capacity statement: the scheduler counts them all, but pods/ephemeral-storage rarely block.
CHECKED = ("nvidia.com/gpu", "cpu", "memory")


def _number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def schedulable(node: dict) -> bool:
    """True when the node is Ready and not cordoned (the scheduler may place new pods on it)."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    return o.condition_true(node, "Ready") is not None


def summarize(nodes: list[dict]) -> dict:
    """The capacity summary of a list of Node dicts (see the module docstring); resources sorted by name."""
    total: dict[str, Decimal] = {}
    largest: dict[str, Decimal] = {}
    count = 0
    for node in nodes:
        if not schedulable(node):
            continue
        count += 1
        for res, qty in (o.status(node).get("allocatable") or {}).items():
            try:
                amount = parse_quantity(qty)
            except (ValueError, TypeError, InvalidOperation):
                continue
            total[res] = total.get(res, Decimal(0)) + amount
            largest[res] = max(largest.get(res, Decimal(0)), amount)
    return {"nodes": count, "allocatable": {r: _number(total[r]) for r in sorted(total)},
            "largest": {r: _number(largest[r]) for r in sorted(largest)}}


def pod_requests(resolved_spec: dict, runtime_classes: resources.RuntimeClasses | None = None) -> list[dict]:
    """What one pod of each pod set asks, in base units (cores, bytes, devices): [{resource: amount}], in pod-set
    order; as kube-scheduler counts a pod (`kube.resources.per_pod`: sidecars, init peaks, pod-level resources,
    overhead with `runtime_classes`). A pod set that cannot be read asks nothing ({})."""
    out = []
    for i, ps in enumerate(resolved_spec.get("podSets") or []):
        try:
            asks = resources.pod_requests(((ps.get("template") or {}).get("spec")) or {}, runtime_classes,
                                          f"podSets[{i}].template.spec")
        except resources.UNREADABLE:
            asks = {}
        out.append(resources.as_numbers(asks))
    return out


def blocking(needs: dict, per_pod: list[dict], capacity: dict | None) -> list[dict]:
    """Facts that keep the gang out of this cluster for good (until nodes are added), GPUs first.

    - `needs`: what the whole gang asks per resource (base units); `per_pod`: what one pod of each pod set asks;
    - `capacity`: `Cluster.capacity` (see `summarize`), or None/{} when unknown (then nothing is stated).

    Returns [{"code": "ExceedsClusterCapacity", "resource", "needs", "available", "nodes"} |
    {"code": "NoNodeFits", "resource", "per_pod", "largest_node", "nodes"}], at most one per resource.
    """
    if not capacity or "allocatable" not in capacity:
        return []
    total, largest, nodes = capacity.get("allocatable") or {}, capacity.get("largest") or {}, capacity.get("nodes", 0)
    facts = []
    for res in CHECKED:
        asked = needs.get(res) or 0
        if asked <= 0:
            continue
        have = total.get(res, 0)
        if asked > have:
            facts.append({"code": EXCEEDS_CLUSTER, "resource": res, "needs": asked, "available": have,
                          "nodes": nodes})
            continue
        biggest_pod = max((p.get(res) or 0 for p in per_pod), default=0)
        if biggest_pod > largest.get(res, 0):
            facts.append({"code": NO_NODE_FITS, "resource": res, "per_pod": biggest_pod,
                          "largest_node": largest.get(res, 0), "nodes": nodes})
    return facts


def busy(needs: dict, capacity: dict | None, in_use: dict | None) -> list[dict]:
    """Facts for a gang that fits the cluster in total but not next to what gangweb's placed jobs hold now.

    - `needs`: what the whole gang asks per resource (base units: CPU cores, memory bytes, GPU devices);
    - `capacity`: `Cluster.capacity` (see `summarize`); `in_use`: what gangweb's Scheduled and Running jobs in
      the cluster request, same keys and units (`db.cluster_usage.in_use`).

    Returns [{"code": "ClusterBusy", "resource", "needs", "allocatable", "in_use", "free"}] for each checked
    resource where needs > allocatable - in_use (`free` is that difference, at least 0), GPUs first; [] when
    capacity or in_use is unknown. `free` is an upper bound: pods gangweb does not manage, and how the free
    room is split over nodes, only make it smaller.
    """
    if not capacity or "allocatable" not in capacity or in_use is None:
        return []
    total, facts = capacity.get("allocatable") or {}, []
    for res in CHECKED:
        asked, have = needs.get(res) or 0, total.get(res, 0)
        if asked <= 0 or asked > have:  # nothing asked, or never fits (ExceedsClusterCapacity says so)
            continue
        held = in_use.get(res) or 0
        if asked > have - held:
            facts.append({"code": CLUSTER_BUSY, "resource": res, "needs": asked, "allocatable": have,
                          "in_use": held, "free": max(have - held, 0)})
    return facts


MAX_NODES_LISTED = 5000  # per-node rows kept for the fragmentation fact; a bigger cluster states none
MAX_LABELS = 64


def node_list(nodes: list[dict]) -> list[dict] | None:
    """The schedulable nodes, each reduced to what the fragmentation fact reads, sorted by name:
    [{"name", "labels": {...}, "allocatable": {res: amount}}] (CHECKED resources only, base units; at most
    MAX_LABELS labels). None when there are more than MAX_NODES_LISTED schedulable nodes (then no per-node facts)."""
    out = []
    for node in nodes:
        if not schedulable(node):
            continue
        meta = o.meta(node)
        allocatable = {}
        for res in CHECKED:
            try:
                allocatable[res] = _number(parse_quantity((o.status(node).get("allocatable") or {}).get(res, "0")))
            except (ValueError, TypeError, InvalidOperation):
                continue
        labels = meta.get("labels") or {}
        out.append({"name": str(meta.get("name", ""))[:253],
                    "labels": {str(k): str(v) for k, v in list(labels.items())[:MAX_LABELS]},
                    "allocatable": allocatable})
        if len(out) > MAX_NODES_LISTED:
            return None
    return sorted(out, key=lambda n: n["name"])


def _eligible(node: dict, selector: dict) -> bool:
    labels = node.get("labels") or {}
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def fragmented(waiting: list[tuple[dict, dict, int]], nodes: list[dict] | None, used: dict[str, dict]) -> list[dict]:
    """NodesFragmented facts: pods that fit the nodes' free room in total but not split as it is over the nodes.

    - `waiting`: per pod set, (what one pod asks {res: amount}, its `nodeSelector` {label: value}, how many of its
      pods still wait to be placed);
    - `nodes`: `node_list` of the cluster (None or [] when unknown: nothing is stated);
    - `used`: {node name: {res: amount}} that gangweb's bound pods request on each node.

    For each CHECKED resource and pod set whose pods ask it, over the nodes its nodeSelector allows: the free room
    per node (allocatable - used, at least 0), how many of its pods fit (sum over nodes of free // need), the most
    free on one node and which nodes have that much. A fact when fewer fit than wait although the free room in
    all would hold them: {"code": "NodesFragmented", "resource", "per_pod", "pods", "fit", "most_free",
    "most_free_nodes": [names], "free_total", "nodes"}. Upper bound: node affinity, taints and pods gangweb does
    not manage only make the room smaller (the sentence says so).
    """
    if not nodes:
        return []
    facts = []
    for res in CHECKED:
        for per_pod, selector, count in waiting:
            need = per_pod.get(res) or 0
            if need <= 0 or count <= 0:
                continue
            free = {n["name"]: max((n["allocatable"].get(res) or 0) - (used.get(n["name"], {}).get(res) or 0), 0)
                    for n in nodes if _eligible(n, selector)}
            if not free:
                continue
            total = sum(free.values())
            fit = sum(int(f // need) for f in free.values())
            if fit >= count or total < need * count:  # fits, or simply too little room (ClusterBusy's case)
                continue
            most = max(free.values())
            facts.append({"code": "NodesFragmented", "resource": res, "per_pod": need, "pods": count, "fit": fit,
                          "most_free": _number(Decimal(str(most))), "free_total": _number(Decimal(str(total))),
                          "most_free_nodes": sorted(n for n, f in free.items() if f == most), "nodes": len(free)})
            break
    return facts
