"""A pending Workload's place in line, as Kueue itself reports it (Kueue's visibility API).

Kueue v0.17.0 serves `visibility.kueue.x-k8s.io/v1beta2` through the API server's aggregation layer
(`apis/visibility/v1beta2/types.go`, `pkg/visibility/storage/pending_workloads_lq.go`)::

    GET /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/<ns>/localqueues/<lq>/pendingworkloads?limit=&offset=
    GET /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/<cq>/pendingworkloads?limit=&offset=

answering a `PendingWorkloadsSummary`: ``{"items": [{"metadata": {"name", "namespace", ...}, "priority": 0,
"localQueueName": "team-a", "positionInClusterQueue": 0, "positionInLocalQueue": 0}]}`` in Kueue's order, the
positions counted from 0 (`limit` defaults to 1000, `offset` to 0).

Reads are bounded: pages of PAGE items, at most MAX_PAGES pages, each with a short timeout (TIMEOUT); answers are
cached for CACHE_SECONDS per (cluster, namespace, LocalQueue). When the API is not served (no Kueue, or its
APIService unavailable), refuses, times out or answers something else than that shape, the position is unknown
with the reason, never an error (the cluster's answer is hostile input).
"""
from __future__ import annotations

import json
import logging

from django.core.cache import cache
from kubernetes import client

from .errors import KubeError, call, classify

logger = logging.getLogger(__name__)

GROUP = "visibility.kueue.x-k8s.io"
VERSION = "v1beta2"
RESOURCE = "localqueues/pendingworkloads"  # the RBAC resource of a GET on that path (kube/rbac.py RULES)
PAGE = 500
MAX_PAGES = 4  # at most PAGE * MAX_PAGES Workloads are read for one LocalQueue
TIMEOUT = (3, 5)  # (connect, read) seconds
CACHE_SECONDS = 5
SOURCE = "Kueue visibility API"
NOT_SERVED = "the cluster does not serve Kueue's visibility API (visibility.kueue.x-k8s.io/v1beta2)"


def local_queue_path(namespace: str, local_queue: str) -> str:
    """The pendingworkloads path of LocalQueue `local_queue` in `namespace`."""
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads"


def _get(api: client.ApiClient, path: str, offset: int) -> dict:
    response = call(api.call_api, path, "GET", query_params=[("limit", PAGE), ("offset", offset)],
                    header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
                    _return_http_data_only=True, _preload_content=False, _request_timeout=TIMEOUT)
    try:
        return json.loads(response.read() or b"{}")
    finally:
        response.release_conn()


def items_of(body) -> list[dict] | None:
    """The well-formed pending workloads of one `PendingWorkloadsSummary` answer: [{"name", "namespace",
    "local_queue", "priority", "position_in_local_queue", "position_in_cluster_queue"}] (positions from 0 as Kueue
    counts); None when the answer is not that shape. An item with a missing name or a position that is not a
    non-negative integer is left out."""
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return None
    out = []
    for item in items:
        meta = item.get("metadata") if isinstance(item, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            continue
        lq, cq = item.get("positionInLocalQueue"), item.get("positionInClusterQueue")
        if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (lq, cq)):
            continue
        prio = item.get("priority")
        out.append({"name": meta["name"], "namespace": str(meta.get("namespace") or ""),
                    "local_queue": str(item.get("localQueueName") or ""),
                    "priority": prio if isinstance(prio, int) and not isinstance(prio, bool) else None,
                    "position_in_local_queue": lq, "position_in_cluster_queue": cq})
    return out


def pending(api: client.ApiClient, namespace: str, local_queue: str) -> dict:
    """The pending Workloads of one LocalQueue: ``{"status": "known", "items": [...items_of...], "complete": bool}``
    (`complete`: every pending Workload was read, not cut at PAGE * MAX_PAGES), or ``{"status": "unknown",
    "reason": "..."}``. Never raises for the cluster's failures."""
    path = local_queue_path(namespace, local_queue)
    items: list[dict] = []
    try:
        for page in range(MAX_PAGES):
            got = items_of(_get(api, path, page * PAGE))
            if got is None:
                return {"status": "unknown", "reason": f"the {SOURCE} answered something that is not a "
                                                       "PendingWorkloadsSummary"}
            items += got
            if len(got) < PAGE:
                return {"status": "known", "items": items, "complete": True}
        return {"status": "known", "items": items, "complete": False}
    except client.ApiException as exc:  # 404 (call() leaves it as an answer)
        if exc.status == 404:
            return {"status": "unknown", "reason": f"{NOT_SERVED}, or LocalQueue {namespace}/{local_queue} does "
                                                   "not exist in it"}
        return {"status": "unknown", "reason": f"the {SOURCE} failed: HTTP {exc.status}"}
    except KubeError as exc:
        if exc.status in (503,):  # the APIService is registered but the manager behind it does not answer
            return {"status": "unknown", "reason": f"{NOT_SERVED}: its APIService is unavailable (HTTP 503)"}
        return {"status": "unknown", "reason": f"the {SOURCE} could not be read: {exc}"}
    except (ValueError, UnicodeDecodeError):
        return {"status": "unknown", "reason": f"the {SOURCE} answered something that is not JSON"}
    except Exception as exc:  # noqa: BLE001 - a connection failure of any kind: unknown, never a 500
        found = classify(exc)
        if found is None:
            logger.exception("Kueue visibility API read failed")
        return {"status": "unknown", "reason": f"the {SOURCE} could not be read: {found or type(exc).__name__}"}


def pending_cached(cluster, namespace: str, local_queue: str, api: client.ApiClient | None = None) -> dict:
    """`pending` of the cluster's LocalQueue, cached for CACHE_SECONDS (`api`: the cluster's client, default
    `kube.client.api_client(cluster)`)."""
    key = f"gangweb:kueue-pending:{cluster.pk}:{namespace}:{local_queue}"
    hit = cache.get(key)
    if hit is not None:
        return hit
    if api is None:
        from .client import api_client

        try:
            api = api_client(cluster)
        except Exception as exc:  # noqa: BLE001 - no client (bad kubeconfig, address refused): unknown
            return {"status": "unknown", "reason": f"no client for cluster {cluster.name}: {type(exc).__name__}"}
    answer = pending(api, namespace, local_queue)
    cache.set(key, answer, CACHE_SECONDS)
    return answer


def position(answer: dict, workload: str, namespace: str) -> dict:
    """Where Workload `namespace/workload` stands in `answer` (`pending`): ``{"status": "known",
    "local_queue": 1, "local_queue_total": 3 | None, "cluster_queue": 2}`` (1 = next; the total only when every
    pending Workload was read), or ``{"status": "unknown", "reason"}``."""
    if answer.get("status") != "known":
        return {"status": "unknown", "reason": answer.get("reason") or f"the {SOURCE} gave no answer"}
    items = answer["items"]
    mine = next((i for i in items if i["name"] == workload and i["namespace"] == namespace), None)
    if mine is None:
        if not answer.get("complete"):
            return {"status": "unknown", "reason": f"not among the first {len(items)} pending workloads the "
                                                   f"{SOURCE} was read for"}
        return {"status": "unknown", "reason": f"the {SOURCE} does not list Workload {namespace}/{workload} as "
                                               "pending (not yet queued, or being admitted)"}
    return {"status": "known", "local_queue": mine["position_in_local_queue"] + 1,
            "local_queue_total": len(items) if answer.get("complete") else None,
            "cluster_queue": mine["position_in_cluster_queue"] + 1}
