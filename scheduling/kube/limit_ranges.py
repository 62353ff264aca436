"""The container defaults a namespace's LimitRanges add at admission, so `minResources` counts what the pods will
really request.

A container that sets no request (and no limit) for a resource gets one from the namespace's LimitRanges when the
pod is created: the LimitRanger admission plugin (`plugin/pkg/admission/limitranger`, `defaultContainerResource
Requirements` and `mergeContainerResources`) sets each `type: Container` item's `default` as the limit and its
`defaultRequest` as the request of every container and init container that lacks them. A request missing while a
limit is set was already filled from the limit by API defaulting (`SetDefaults_Pod`), before admission, so a
LimitRange default never replaces it. The stored LimitRange is itself defaulted (`SetDefaults_LimitRangeItem`:
`defaultRequest` from `default`, `default` from `max`, `defaultRequest` from `min`), so its `defaultRequest` is the
request admission adds. With several LimitRanges, each one fills only what is still missing; gangweb applies them
in name order (the admission plugin's order is its informer's, unspecified).

gangweb counts them: `defaults(api, cluster_pk, namespace)` reads the namespace's LimitRanges (one LIST, cached for
CACHE_SECONDS per cluster and namespace in Django's cache) and `with_defaults(pod_sets, defaults)` returns pod sets
whose containers carry those requests, for the request arithmetic (`kube.resources`) only: the pod templates sent
to the cluster are left as the template wrote them (admission adds the defaults itself). A LimitRange is untrusted
cluster input: entries that are not resource lists of strings are skipped. A failed read (403: the credentials may
not list LimitRanges; a server error) counts no defaults for CACHE_SECONDS and is logged; nothing fails because of
it. An unreachable cluster is the exception: raised (TransientKubeError ClusterUnreachable) and not cached, since a
pass can create nothing then anyway, and defaults cached as "none" would still count when the cluster is back (a
batch of new jobs sends this LIST before its first create: reconcile/jobs/batch.py reads no snapshot for them).
"""
from __future__ import annotations

import copy
import logging

from django.core.cache import cache

from . import objects
from .errors import CLUSTER_UNREACHABLE, TransientKubeError
from .refs import ObjectRef

log = logging.getLogger(__name__)
LIMIT_RANGE = ObjectRef("v1", "LimitRange", "limitranges")
CACHE_SECONDS = 60
MAX_RESOURCES = 16


def _resource_list(value) -> dict[str, str]:
    if not isinstance(value, dict) or len(value) > MAX_RESOURCES:
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def from_items(items: list[dict]) -> dict[str, dict[str, str]]:
    """{"limits": {...}, "requests": {...}} a container lacking them gets from these LimitRange objects (dicts as
    listed), merged in name order, the first LimitRange to set a resource winning (each fills what is missing)."""
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    for item in sorted(items, key=lambda o: str((o.get("metadata") or {}).get("name") or "")):
        for entry in (item.get("spec") or {}).get("limits") or []:
            if not isinstance(entry, dict) or entry.get("type") != "Container":
                continue
            for res, qty in _resource_list(entry.get("default")).items():
                limits.setdefault(res, qty)
            for res, qty in _resource_list(entry.get("defaultRequest")).items():
                requests.setdefault(res, qty)
    return {"limits": limits, "requests": requests}


def cache_key(cluster_pk: int, namespace: str) -> str:
    """The Django cache key of a namespace's defaults (`defaults`)."""
    return f"limitranges:{cluster_pk}:{namespace}"


def defaults(api, cluster_pk: int, namespace: str) -> dict[str, dict[str, str]]:
    """The container defaults of `namespace` in the cluster (`from_items` of its LimitRanges), cached for
    CACHE_SECONDS. A failed LIST is logged and counts no defaults (for CACHE_SECONDS too), except when the cluster
    cannot be reached: then TransientKubeError(ClusterUnreachable) is raised and nothing is cached."""
    key = cache_key(cluster_pk, namespace)
    found = cache.get(key)
    if found is not None:
        return found
    try:
        found = from_items(objects.list_objects(api, LIMIT_RANGE, namespace, ""))
    except TransientKubeError as exc:
        if exc.reason == CLUSTER_UNREACHABLE:
            raise
        found = _none_read(namespace, exc)
    except Exception as exc:  # noqa: BLE001 - optional facts: a pass must not fail because they cannot be read
        found = _none_read(namespace, exc)
    cache.set(key, found, CACHE_SECONDS)
    return found


def _none_read(namespace: str, exc: Exception) -> dict[str, dict[str, str]]:
    """No defaults, for a LIST that failed with `exc` (logged)."""
    log.warning("LimitRanges of namespace %s not read (%s); their default requests are not counted", namespace,
                type(exc).__name__)
    return {"limits": {}, "requests": {}}  # cached too: a lasting 403 costs one LIST a minute, not one a pass


def _fill(container: dict, defaults_: dict[str, dict[str, str]]) -> None:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        resources = container["resources"] = {}
    limits = dict(resources.get("limits") or {}) if isinstance(resources.get("limits"), dict) else {}
    requests = dict(resources.get("requests") or {}) if isinstance(resources.get("requests"), dict) else {}
    for res, qty in limits.items():  # API defaulting first: a limit without a request is the request
        requests.setdefault(res, qty)
    for res, qty in defaults_.get("limits", {}).items():
        limits.setdefault(res, qty)
    for res, qty in defaults_.get("requests", {}).items():
        requests.setdefault(res, qty)
    resources["limits"], resources["requests"] = limits, requests


def with_defaults(pod_sets: list[dict], defaults_: dict[str, dict[str, str]] | None) -> list[dict]:
    """Copies of `pod_sets` (`[{"name", "replicas", "template"}]`) whose containers and init containers carry the
    LimitRange defaults they lack (module docstring); `pod_sets` itself when there are none."""
    if not defaults_ or not (defaults_.get("limits") or defaults_.get("requests")):
        return pod_sets
    out = copy.deepcopy(pod_sets)
    for ps in out:
        spec = ((ps.get("template") or {}).get("spec")) if isinstance(ps, dict) else None
        if not isinstance(spec, dict):
            continue
        for key in ("initContainers", "containers"):
            for container in spec.get(key) or []:
                if isinstance(container, dict):
                    _fill(container, defaults_)
    return out
