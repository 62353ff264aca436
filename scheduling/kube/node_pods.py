"""What the pods bound to a cluster's nodes request, per node, from one paginated LIST of pods.

The cluster watcher watches only gangweb's own pods (by label); the capacity view also needs what every other pod
holds on the nodes, as `kubectl describe node` sums it under "Allocated resources". This module reads it on
demand: `LIST pods` across namespaces with `fieldSelector=spec.nodeName!=,status.phase!=Succeeded,
status.phase!=Failed` (bound and not finished: what kube-scheduler counts against a node's allocatable), in pages
of PAGE_SIZE, at most MAX_PODS pods (a bigger cluster is answered with TooManyPods rather than a slow page).

Each pod counts as kube-scheduler counts it (`resources.pod_requests`: init containers' peaks, sidecars, pod-level
resources, the pod's own `spec.overhead` that admission set). A pod whose spec cannot be read is skipped and
counted in `unreadable`. Amounts are base units (GPU devices, CPU cores, bytes) as Decimals.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal

from kubernetes import client

from . import resources
from .client import REQUEST_TIMEOUT

PAGE_SIZE = 500
MAX_PODS = 20_000
BOUND_AND_NOT_FINISHED = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
COUNTED = ("nvidia.com/gpu", "cpu", "memory")


class TooManyPods(Exception):
    """The cluster has more bound pods than the on-demand read takes (MAX_PODS)."""


@dataclass
class NodePods:
    """`by_node`: {node name: {resource: Decimal}} of the pods not skipped; `pods`: pods counted; `skipped`:
    pods left out because the caller named them (gangweb's own); `unreadable`: pods whose spec could not be read."""

    by_node: dict[str, dict[str, Decimal]] = field(default_factory=dict)
    pods: int = 0
    skipped: int = 0
    unreadable: int = 0


def requests_by_node(api: client.ApiClient, skip: set[tuple[str, str]], max_pods: int = MAX_PODS,
                     timeout=REQUEST_TIMEOUT) -> NodePods:
    """The requests of the bound, not finished pods per node, leaving out the pods whose (namespace, name) is in
    `skip`; `timeout` is (connect, read) seconds per page. Raises TooManyPods past `max_pods` pods, and what the
    kubernetes client raises (ApiException, urllib3 errors: the caller classifies them with `errors.classify`)."""
    core = client.CoreV1Api(api)
    out = NodePods()
    seen = 0
    token = None
    while True:
        kwargs = {"field_selector": BOUND_AND_NOT_FINISHED, "limit": PAGE_SIZE, "_preload_content": False,
                  "_request_timeout": timeout}
        if token:
            kwargs["_continue"] = token
        body = json.loads(core.list_pod_for_all_namespaces(**kwargs).data)
        items = body.get("items") if isinstance(body, dict) else None
        for pod in items if isinstance(items, list) else []:
            seen += 1
            if seen > max_pods:
                raise TooManyPods(f"more than {max_pods} bound pods")
            _count(pod, skip, out)
        token = ((body.get("metadata") or {}).get("continue") if isinstance(body, dict) else None) or None
        if not token:
            return out


def _count(pod, skip: set[tuple[str, str]], out: NodePods) -> None:
    meta = pod.get("metadata") if isinstance(pod, dict) else None
    spec = pod.get("spec") if isinstance(pod, dict) else None
    if not isinstance(meta, dict) or not isinstance(spec, dict) or not isinstance(spec.get("nodeName"), str):
        out.unreadable += 1
        return
    if (str(meta.get("namespace", "")), str(meta.get("name", ""))) in skip:
        out.skipped += 1
        return
    try:
        asks = resources.pod_requests(spec)
    except resources.UNREADABLE:
        out.unreadable += 1
        return
    room = out.by_node.setdefault(spec["nodeName"][:253], {})
    for res in COUNTED:
        if asks.get(res):
            room[res] = room.get(res, Decimal(0)) + asks[res]
    out.pods += 1
