"""A cluster's capacity at a glance, for `GET /api/v1/clusters/<name>/capacity/` and the cluster page alike.

Per schedulable node (Ready and not cordoned: the nodes the watcher lists in `ClusterNodes`,
observe/capacity.node_list) and in total, per resource (GPUs, CPU cores, memory):

- `allocatable`: the node's `status.allocatable`;
- `in_use_gangweb`: what gangweb's bound, not finished pods request there, from the jobs' recorded pods
  (`cluster_usage.by_node`, the same count why_pending's NodesFragmented fact reads);
- `in_use_others`: what every other bound, not finished pod requests there, read on demand from the cluster
  (`kube.node_pods`, one paginated LIST of pods, remembered OTHERS_SECONDS per cluster); gangweb's own pods are
  left out by the names its jobs recorded. None when it cannot be read now (`others.message` says why): then
  `free` counts gangweb's pods only and is an upper bound (`free_is_upper_bound`);
- `free`: allocatable minus both, at least 0.

GPU types come from the node label `nvidia.com/gpu.product` (NVIDIA's GPU feature discovery); nodes without it are
under the product "" (unlabelled). Amounts are in the units of every answer about use (`amounts.base_in_answer`:
GPUs, CPU cores, GiB; `units` names them). The node rows are paginated (`offset`, `limit` up to MAX_LIMIT, sorted by
name); the totals and GPU types always cover every listed node.
"""
from __future__ import annotations

import logging
from decimal import Decimal

from django.core.cache import cache
from django.core.exceptions import ValidationError

from ...amounts import base_in_answer, unit_of
from ...choices import TERMINAL_PHASES, ClusterHealth
from ...db import cluster_usage
from ...kube import node_pods
from ...kube.errors import classify, describe
from ...models import Cluster, ClusterNodes, GangJob
from ...observe.capacity import MAX_NODES_LISTED

log = logging.getLogger(__name__)

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
RESOURCES = {"gpu": "nvidia.com/gpu", "cpu": "cpu", "memory": "memory"}  # answer key -> Kubernetes name
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
OTHERS_SECONDS = 30
OTHERS_TIMEOUT = (3, 10)  # (connect, read) seconds per page of the LIST: a page waits on it


def parse_page(params) -> tuple[int, int]:
    """(offset, limit) from query parameters `offset` (default 0) and `limit` (default DEFAULT_LIMIT, 1 to
    MAX_LIMIT). Raises ValidationError naming the parameter."""
    out = []
    for key, default, low, high in (("offset", 0, 0, 10**9), ("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)):
        raw = params.get(key)
        if raw in (None, ""):
            out.append(default)
            continue
        try:
            value = int(str(raw))
        except ValueError:
            raise ValidationError({key: f"must be a whole number, got '{str(raw)[:20]}'"}) from None
        if not low <= value <= high:
            raise ValidationError({key: f"must be from {low} to {high}, got {value}"})
        out.append(value)
    return out[0], out[1]


def gangweb_pods(cluster_id: int) -> set[tuple[str, str]]:
    """(namespace, pod name) of every pod gangweb's not finished jobs in the cluster recorded (`observed.pods`)."""
    out = set()
    rows = GangJob.objects.filter(cluster_id=cluster_id).exclude(phase__in=TERMINAL_PHASES).values_list(
        "namespace", "observed")
    for namespace, observed in rows.iterator(chunk_size=500):
        for pod in (observed or {}).get("pods") or [] if isinstance(observed, dict) else []:
            if isinstance(pod, dict) and isinstance(pod.get("name"), str):
                out.add((namespace, pod["name"]))
    return out


def others_by_node(cluster: Cluster) -> tuple[dict[str, dict] | None, dict]:
    """({node: {Kubernetes resource: base amount}} requested by pods gangweb does not manage, or None when
    unknown; {"known", "message", "pods", "unreadable"}). Read from the cluster at most every OTHERS_SECONDS."""
    key = f"gangweb:cluster-others:{cluster.pk}"
    found = cache.get(key)
    if found is not None:
        return found
    if cluster.health == ClusterHealth.UNREACHABLE:
        return None, {"known": False, "message": f"unknown: cluster {cluster.name} is unreachable "
                                                 f"({(cluster.health_message or '')[:200]})", "pods": None,
                      "unreadable": None}
    from ...kube.client import api_client  # here: building a client validates the kubeconfig, only when needed

    try:
        read = node_pods.requests_by_node(api_client(cluster), gangweb_pods(cluster.pk), timeout=OTHERS_TIMEOUT)
    except node_pods.TooManyPods as exc:
        return None, {"known": False, "message": f"unknown: {exc}, more than this view reads",
                      "pods": None, "unreadable": None}
    except Exception as exc:  # noqa: BLE001 - any failure of the read means "unknown, and why", never a 500
        err = classify(exc)
        if err is None and not isinstance(exc, (OSError, ValueError)):
            log.exception("capacity of %s: reading pods failed", cluster.name)
        return None, {"known": False, "message": f"unknown: pods could not be listed: {describe(err or exc, 300)}",
                      "pods": None, "unreadable": None}
    answer = ({node: {r: float(v) for r, v in asks.items()} for node, asks in read.by_node.items()},
              {"known": True, "message": "", "pods": read.pods, "unreadable": read.unreadable})
    cache.set(key, answer, OTHERS_SECONDS)
    return answer


def _amounts(values: dict) -> dict:
    return {k: base_in_answer(k, values.get(name) or 0) for k, name in RESOURCES.items()}


def _free(allocatable: dict, gangweb: dict, others: dict | None) -> dict:
    """{Kubernetes resource: allocatable - gangweb's - others' (others' 0 when unknown), at least 0}."""
    return {name: max((allocatable.get(name) or 0) - (gangweb.get(name) or 0) - ((others or {}).get(name) or 0), 0)
            for name in RESOURCES.values()}


def _node_row(node: dict, gangweb: dict, others: dict | None, free: dict) -> dict:
    allocatable = node.get("allocatable") or {}
    return {"name": node.get("name", ""), "gpu_product": (node.get("labels") or {}).get(GPU_PRODUCT_LABEL, ""),
            "allocatable": _amounts(allocatable), "in_use_gangweb": _amounts(gangweb),
            "in_use_others": None if others is None else _amounts(others), "free": _amounts(free)}


def _add(into: dict, more: dict) -> None:
    for name in RESOURCES.values():
        into[name] = into.get(name, Decimal(0)) + Decimal(str(more.get(name) or 0))


def capacity(cluster: Cluster, offset: int = 0, limit: int = DEFAULT_LIMIT) -> dict:
    """The capacity answer of `cluster` (see the module docstring)::

        {"cluster": "local", "units": {"gpu": "GPUs", "cpu": "CPU cores", "memory": "GiB"},
         "known": true, "message": "", "observed_at": <when the watcher last listed the nodes> | null,
         "nodes": 4, "free_is_upper_bound": false,
         "others": {"known": true, "message": "", "pods": 12, "unreadable": 0},
         "totals": {"allocatable": {"gpu": 32, "cpu": 256, "memory": 1024}, "in_use_gangweb": {...},
                    "in_use_others": {...} | null, "free": {...}},
         "gpu_types": [{"product": "NVIDIA-A100-SXM4-80GB", "nodes": 4, "allocatable": 32, "in_use_gangweb": 12,
                        "in_use_others": 0 | null, "free": 20}],
         "node_rows": {"count": 4, "offset": 0, "limit": 50, "results": [{"name", "gpu_product", "allocatable",
                        "in_use_gangweb", "in_use_others", "free"}]}}

    `known` is False (and `message` says why) until the watcher has listed the cluster's nodes, or when it has
    more than observe/capacity.MAX_NODES_LISTED (or none is schedulable)."""
    units = {k: unit_of(k) for k in RESOURCES}
    row = ClusterNodes.objects.filter(cluster_id=cluster.pk).values_list("nodes", "updated_at").first()
    nodes, observed_at = (row if row else (None, None))
    base = {"cluster": cluster.name, "units": units, "observed_at": observed_at}
    if not nodes:
        # The watcher stores [] both for no schedulable node and for more than it lists; the count tells them apart.
        count = (cluster.capacity or {}).get("nodes")
        if row is None or not cluster.capacity:
            why = "unknown: gangweb's watcher has not listed this cluster's nodes yet"
        elif not count:
            why = "no schedulable nodes (Ready and not cordoned)"
        else:
            why = (f"unknown per node: {count} schedulable nodes, more than gangweb lists one by one "
                   f"({MAX_NODES_LISTED:,})")
        return {**base, "known": False, "message": why, "nodes": count, "free_is_upper_bound": True,
                "others": {"known": False, "message": "", "pods": None, "unreadable": None},
                "totals": None, "gpu_types": [],
                "node_rows": {"count": 0, "offset": offset, "limit": limit, "results": []}}
    _nodes, gangweb = cluster_usage.nodes_and_use(cluster.pk)
    others, others_state = others_by_node(cluster)
    totals = {"allocatable": {}, "in_use_gangweb": {}, "in_use_others": {}, "free": {}}
    types: dict[str, dict] = {}
    rows = []
    for node in nodes:
        if not isinstance(node, dict):  # rows are written by the watcher only; never trust a stored shape blindly
            continue
        name = node.get("name", "")
        mine = gangweb.get(name) or {}
        theirs = None if others is None else (others.get(name) or {})
        free = _free(node.get("allocatable") or {}, mine, theirs)
        full = _node_row(node, mine, theirs, free)
        rows.append(full)
        product = full["gpu_product"]
        kind = types.setdefault(product, {"product": product, "nodes": 0, "allocatable": Decimal(0),
                                          "in_use_gangweb": Decimal(0), "in_use_others": Decimal(0),
                                          "free": Decimal(0)})
        kind["nodes"] += 1
        gpu = RESOURCES["gpu"]
        for key, values in (("allocatable", node.get("allocatable") or {}), ("in_use_gangweb", mine),
                            ("in_use_others", theirs or {}), ("free", free)):
            _add(totals[key], values)
            kind[key] += Decimal(str(values.get(gpu) or 0))
    gpu_types = [{**t, **{k: base_in_answer("gpu", t[k]) for k in ("allocatable", "in_use_gangweb", "free")},
                  "in_use_others": None if others is None else base_in_answer("gpu", t["in_use_others"])}
                 for t in sorted(types.values(), key=lambda t: (t["product"] == "", t["product"]))
                 if t["allocatable"] or t["product"]]
    return {**base, "known": True, "message": "", "nodes": len(rows), "free_is_upper_bound": others is None,
            "others": others_state,
            "totals": {k: None if k == "in_use_others" and others is None else _amounts(v) for k, v in totals.items()},
            "gpu_types": gpu_types,
            "node_rows": {"count": len(rows), "offset": offset, "limit": limit, "results": rows[offset:offset + limit]}}


def totals_for(clusters: list[Cluster]) -> dict[int, dict]:
    """{cluster id: {"nodes", "allocatable", "in_use_gangweb", "free"}} for the overview, without reading any
    cluster: allocatable from `Cluster.capacity`, gangweb's use from its Scheduled and Running jobs' requested
    totals (`cluster_usage.in_use_by_cluster`, one query for all), free = the difference (an upper bound: other
    pods are not counted here). Clusters whose nodes were never listed are left out."""
    used = cluster_usage.in_use_by_cluster([c.pk for c in clusters])
    out = {}
    for c in clusters:
        cap = c.capacity or {}
        if "allocatable" not in cap:
            continue
        allocatable = cap.get("allocatable") or {}
        mine = used.get(c.pk) or {}
        free = _free(allocatable, mine, None)
        out[c.pk] = {"nodes": cap.get("nodes", 0), "allocatable": _amounts(allocatable),
                     "in_use_gangweb": _amounts(mine), "free": _amounts(free)}
    return out
