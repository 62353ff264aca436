"""Dynamic access to any kind as plain dicts: list, get, create, merge-patch and delete.

Built on `ApiClient.call_api` with the REST path of an `ObjectRef` (core kinds under /api/v1, others under
/apis/<group>/<version>), so custom resources (KAI, Volcano, coscheduling PodGroups) and built-in kinds
(Workload, PodGroup, Job, Service, Pod) go through one code path and no per-kind client, and no discovery
round-trips (unlike kubernetes.dynamic). Every call counts into `Counter` so tests and benchmarks can assert
request budgets. Failures: 404/409 raise ApiException (callers treat them as answers); everything else raises
kube.errors.TransientKubeError or TerminalKubeError.
"""
from __future__ import annotations

import json
import threading
from collections import Counter as _Counter
from collections.abc import Callable

from kubernetes import client

from ..backends.base import ObjectRef
from .client import REQUEST_TIMEOUT
from .errors import call

JOB = ObjectRef("batch/v1", "Job", "jobs")
SERVICE = ObjectRef("v1", "Service", "services")
POD = ObjectRef("v1", "Pod", "pods")


class RequestCounter:
    """Thread-safe counts of API requests by "VERB group/plural", e.g. {"LIST scheduling.run.ai/podgroups": 1}."""

    def __init__(self):
        self._lock = threading.Lock()
        self.counts: _Counter = _Counter()

    def add(self, verb: str, ref: ObjectRef) -> None:
        """Count one request."""
        with self._lock:
            self.counts[f"{verb} {ref.group or 'core'}/{ref.plural}"] += 1

    def total(self) -> int:
        """All requests counted so far."""
        return sum(self.counts.values())

    def reset(self) -> None:
        """Start counting from zero."""
        with self._lock:
            self.counts.clear()


requests = RequestCounter()


def _path(ref: ObjectRef, namespace: str | None, name: str | None = None) -> str:
    base = f"/api/{ref.version}" if not ref.group else f"/apis/{ref.group}/{ref.version}"
    if ref.namespaced and namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{ref.plural}"
    return f"{base}/{name}" if name else base


def _request(api: client.ApiClient, verb: str, ref: ObjectRef, method: str, path: str, *, query=None, body=None,
             content_type: str = "application/json", raw: bool = False) -> dict:
    """One API call, counted. Returns the JSON body as a dict; with `raw`, the body decoded straight from the
    response bytes (`_preload_content=False`: no intermediate str copy, and the bytes are released before the
    caller walks the result)."""
    requests.add(verb, ref)
    response = call(
        api.call_api, path, method, query_params=query or [], body=body,
        header_params={"Accept": "application/json", "Content-Type": content_type},
        response_types_map={200: "object", 201: "object", 202: "object"}, auth_settings=["BearerToken"],
        _return_http_data_only=True, _preload_content=not raw, _request_timeout=REQUEST_TIMEOUT,
    )
    if not raw:
        return response
    try:
        return json.loads(response.read())
    finally:
        response.release_conn()


def list_objects(api: client.ApiClient, ref: ObjectRef, namespace: str | None, label_selector: str,
                 project: Callable[[dict], dict] | None = None) -> list[dict]:
    """Objects of kind `ref` matching `label_selector`, in `namespace` or (None) across all namespaces.

    One request; each item gets `apiVersion` and `kind` filled in (list items omit them) and loses
    `metadata.managedFields`, which gangweb never reads and which is a large share of every object a resync holds
    in memory at once (bench/: resync memory per job). With `project`, each item is replaced by `project(item)`
    as soon as the body is parsed, so only the projection outlives this call (the full parse of one LIST is
    the most that is alive at once, whatever kind the caller lists next).
    """
    data = _request(api, "LIST", ref, "GET", _path(ref, namespace), query=[("labelSelector", label_selector)],
                    raw=True)
    items = data.pop("items", None) or []
    del data
    for i, item in enumerate(items):
        item.setdefault("apiVersion", ref.api_version)
        item.setdefault("kind", ref.kind)
        (item.get("metadata") or {}).pop("managedFields", None)
        if project is not None:
            items[i] = project(item)
    return items


def get(api: client.ApiClient, ref: ObjectRef, namespace: str, name: str) -> dict:
    """One object. Raises ApiException(404) when it does not exist."""
    obj = _request(api, "GET", ref, "GET", _path(ref, namespace, name))
    obj.setdefault("apiVersion", ref.api_version)
    obj.setdefault("kind", ref.kind)
    return obj


def create(api: client.ApiClient, ref: ObjectRef, body: dict) -> dict:
    """Create `body` in its metadata.namespace. Raises ApiException(409) when the name is taken."""
    return _request(api, "CREATE", ref, "POST", _path(ref, body["metadata"].get("namespace")), body=body)


def merge_patch(api: client.ApiClient, ref: ObjectRef, namespace: str, name: str, patch: dict,
                resource_version: str | None = None) -> dict:
    """JSON merge patch. With `resource_version`, the server rejects it with 409 if the object changed since
    it was read (optimistic concurrency, as an update would)."""
    if resource_version:
        patch = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": resource_version}}
    return _request(api, "PATCH", ref, "PATCH", _path(ref, namespace, name), body=patch,
                    content_type="application/merge-patch+json")


def delete(api: client.ApiClient, ref: ObjectRef, namespace: str, name: str, uid: str | None = None,
           propagation: str = "Background") -> dict | None:
    """Delete, with a UID precondition when `uid` is given (never deletes a same-named successor).

    Returns None when the object was already gone (404); a UID mismatch raises ApiException(409).
    """
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
    if uid:
        body["preconditions"] = {"uid": uid}
    try:
        return _request(api, "DELETE", ref, "DELETE", _path(ref, namespace, name), body=body)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
