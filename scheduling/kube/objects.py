"""Dynamic access to any kind as plain dicts: list, get, create, merge-patch and delete.

Built on `ApiClient.call_api` with the REST path of an `ObjectRef` (core kinds under /api/v1, others under
/apis/<group>/<version>), so custom resources (KAI, Volcano, coscheduling PodGroups) and built-in kinds
(Workload, PodGroup, Job, Service, Pod) go through one code path and no per-kind client, and no discovery
round-trips (unlike kubernetes.dynamic). Every call counts into `requests` so tests and benchmarks can assert
request budgets. Failures: 404/409 raise ApiException (callers treat them as answers); everything else raises
kube.errors.TransientKubeError or TerminalKubeError.

LISTs are paginated (`limit` and `continue`, settings.GANGWEB_LIST_PAGE_SIZE objects a page, 500 by default): a
cluster-wide LIST of 100,000 pods is hundreds of MB in one answer, which both the API server and gangweb would hold
at once. The pages of one LIST are one consistent snapshot (the API server serves every continue at the first
page's resourceVersion); when that snapshot was compacted away meanwhile (410 Gone: the continue token expired,
after about 5 minutes of etcd compaction) the LIST starts again from the first page, at most `MAX_LIST_RESTARTS`
times, and what the pages already read is thrown away first (`on_restart`). Kubernetes API concepts, "Retrieving
large results sets in chunks".
"""
from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections import Counter as _Counter
from collections.abc import Callable, Iterator

from django.conf import settings
from kubernetes import client

from . import rbac
from .client import REQUEST_TIMEOUT
from .errors import LIST_EXPIRED, KubeError, TransientKubeError, call
from .refs import JOB, POD, SERVICE, ObjectRef  # noqa: F401 -- the built-in refs, also named from here


class RequestCounter:
    """Thread-safe counts of API requests by "VERB group/plural", e.g. {"LIST scheduling.run.ai/podgroups": 1}."""

    def __init__(self):
        self._lock = threading.Lock()
        self.counts: _Counter = _Counter()
        self.bytes_read = 0  # response bytes of the streamed (raw) answers, i.e. of every LIST

    def add_bytes(self, n: int) -> None:
        """Count `n` response bytes read."""
        with self._lock:
            self.bytes_read += n

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
            self.bytes_read = 0


requests = RequestCounter()
rbac_misses: set[str] = set()  # requests made that rbac.RULES does not grant (tests assert it stays empty)
log = logging.getLogger(__name__)


def _path(ref: ObjectRef, namespace: str | None, name: str | None = None) -> str:
    base = f"/api/{ref.version}" if not ref.group else f"/apis/{ref.group}/{ref.version}"
    if ref.namespaced and namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{ref.plural}"
    return f"{base}/{name}" if name else base


def _request(api: client.ApiClient, verb: str, ref: ObjectRef, method: str, path: str, *, query=None, body=None,
             content_type: str = "application/json", raw: bool = False, object_hook=None) -> dict:
    """One API call, counted. Returns the JSON body as a dict; with `raw`, the body decoded straight from the
    response bytes (`_preload_content=False`: no intermediate str copy), with `object_hook` applied to every JSON
    object as it is decoded (`json.loads`)."""
    requests.add(verb, ref)
    if not rbac.allowed(verb, ref.group, ref.plural):
        rbac_misses.add(f"{verb} {ref.group or 'core'}/{ref.plural}")
        log.error("kube request %s %s/%s is not in scheduling/kube/rbac.py RULES: in-cluster mode's ClusterRole "
                  "refuses it", verb, ref.group or "core", ref.plural)
    response = call(
        api.call_api, path, method, query_params=query or [], body=body,
        header_params={"Accept": "application/json", "Content-Type": content_type},
        response_types_map={200: "object", 201: "object", 202: "object"}, auth_settings=["BearerToken"],
        _return_http_data_only=True, _preload_content=not raw, _request_timeout=REQUEST_TIMEOUT,
    )
    if not raw:
        return response
    try:
        body = response.read()
        requests.add_bytes(len(body))
        return json.loads(body, object_hook=object_hook)
    finally:
        response.release_conn()


MAX_LIST_RESTARTS = 3  # a paginated LIST whose continue token expired (410) starts again at most this often


def page_size() -> int:
    """Objects per page of a LIST: settings.GANGWEB_LIST_PAGE_SIZE (at least 1)."""
    return max(1, int(getattr(settings, "GANGWEB_LIST_PAGE_SIZE", 500)))


def list_pages(api: client.ApiClient, ref: ObjectRef, namespace: str | None, label_selector: str,
               project: Callable[[dict], dict] | None = None, *, field_selector: str = "", size: int | None = None,
               on_restart: Callable[[], None] | None = None) -> Iterator[list[dict]]:
    """The objects of kind `ref` matching `label_selector` (and `field_selector` when given), in `namespace` or (None)
    across all namespaces, one page (a list of at most `size`, default `page_size()`, objects) at a time: one request
    per page, so only one page's answer and its parse are ever alive (the caller keeps what it needs of each).

    Each item gets `apiVersion` and `kind` filled in (list items omit them) and loses `metadata.managedFields`,
    which gangweb never reads and which is a large share of every object. With `project`, each item is replaced by
    `project(item)` while the body is decoded, so at most one item's full parse is alive at a time (plus the page's
    bytes). A continue token that expired (410 Gone) calls `on_restart()` (throw away the pages already yielded)
    and lists again from the first page, at most MAX_LIST_RESTARTS times; then TransientKubeError(ListExpired).
    Other failures raise as `_request` does."""
    def finish(item: dict) -> dict:
        item.setdefault("apiVersion", ref.api_version)
        item.setdefault("kind", ref.kind)
        (item.get("metadata") or {}).pop("managedFields", None)
        return project(item) if project is not None else item

    def hook(obj: dict) -> dict:
        # JSON objects are decoded innermost first; an item of the list is the one whose metadata has a uid and a
        # resourceVersion (nested ones, e.g. a pod template's, have neither; the list's own has no uid). Projected
        # right here, each item's full parse is garbage before the next item is decoded.
        meta = obj.get("metadata")
        return finish(obj) if isinstance(meta, dict) and "uid" in meta and "resourceVersion" in meta else obj

    base = [("labelSelector", label_selector)]
    if field_selector:
        base.append(("fieldSelector", field_selector))
    base.append(("limit", str(int(size or page_size()))))
    restarts, token = 0, ""
    while True:
        query = [*base, ("continue", token)] if token else base
        try:
            data = _request(api, "LIST", ref, "GET", _path(ref, namespace), query=query,
                            raw=True, object_hook=hook if project is not None else None)
        except KubeError as exc:
            if exc.status != 410 or not token:
                raise
            restarts += 1
            if restarts > MAX_LIST_RESTARTS:
                raise TransientKubeError(
                    LIST_EXPIRED, f"the LIST of {ref.plural} outlived its snapshot {restarts} times (410 Gone: its "
                    "continue token expired before the next page was asked for); the next pass lists again",
                    410) from exc
            log.info("LIST of %s: continue token expired (410), listing again from the first page", ref.plural)
            if on_restart is not None:
                on_restart()
            token = ""
            continue
        token = str(((data.get("metadata") or {}).get("continue")) or "")
        items = data.pop("items", None) or []
        del data
        yield items if project is not None else [finish(item) for item in items]
        if not token:
            return


def list_objects(api: client.ApiClient, ref: ObjectRef, namespace: str | None, label_selector: str,
                 project: Callable[[dict], dict] | None = None, *, field_selector: str = "",
                 limit: int | None = None) -> list[dict]:
    """Objects of kind `ref` matching `label_selector` (and `field_selector` when given), in `namespace` or (None)
    across all namespaces; at most `limit` of them when given (the API server's first page, in its own order).

    Every page of the LIST (`list_pages`: one request per `page_size()` objects, a restart when the continue token
    expired), collected; each item as `list_pages` leaves it (apiVersion and kind filled in, no managedFields,
    `project(item)` with `project`). With `limit`, one request for the first page only.
    """
    if limit:
        return next(list_pages(api, ref, namespace, label_selector, project, field_selector=field_selector,
                               size=int(limit)), [])
    items: list[dict] = []
    for page in list_pages(api, ref, namespace, label_selector, project, field_selector=field_selector,
                           on_restart=items.clear):
        items.extend(page)
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


def patch_status(api: client.ApiClient, ref: ObjectRef, namespace: str, name: str, patch: dict,
                 resource_version: str | None = None) -> dict:
    """JSON merge patch of the object's `status` subresource (`.../<name>/status`), with the optimistic-concurrency
    `resource_version` as `merge_patch`. Counted and checked against the RBAC rules as "<plural>/status"."""
    if resource_version:
        patch = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": resource_version}}
    sub = dataclasses.replace(ref, plural=f"{ref.plural}/status")
    return _request(api, "PATCH", sub, "PATCH", _path(ref, namespace, name) + "/status", body=patch,
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
