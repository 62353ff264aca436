"""The RuntimeClasses of a cluster, cached on its row, for the pod overhead the cluster adds (`kube.resources`).

A pod that names a RuntimeClass with `overhead.podFixed` gets that overhead written into `spec.overhead` by the
RuntimeClass admission plugin (`plugin/pkg/admission/runtimeclass`, `setOverhead`), and kube-scheduler counts it
(`PodRequests`). gangweb counts it before the pod exists, from the cluster's RuntimeClasses (`node.k8s.io/v1`,
cluster-scoped), read by the cluster probe (one LIST a minute, `reconcile/probe.refresh_optional_facts`) and kept on
the row: `Cluster.runtime_classes` = ``{"kata": {"cpu": "250m", "memory": "128Mi"}, "runc": {}}`` (every class by
name, its `overhead.podFixed` or {}). Readers never call the cluster: a submit, a page or a reconcile pass reads the
row.

Cluster objects are untrusted input: a class whose overhead does not parse, or whose name or size is not what the
API server would have accepted, is left out (and logged) rather than counted.
"""
from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
from kubernetes import client

from . import objects
from .quantities import parse
from .refs import ObjectRef

log = logging.getLogger(__name__)
RUNTIME_CLASS = ObjectRef("node.k8s.io/v1", "RuntimeClass", "runtimeclasses", namespaced=False)
MAX_CLASSES = 1000  # far more than any cluster defines; bounds the row whatever a cluster answers
MAX_RESOURCES = 16


def read(api: client.ApiClient) -> dict[str, dict[str, str]]:
    """{RuntimeClass name: its `overhead.podFixed` as quantity strings, or {}} from one LIST of the cluster.
    Entries that are not what the API server stores (no name, a non-string quantity, too many) are dropped.
    Raises what `kube.objects.list_objects` raises (TransientKubeError, TerminalKubeError, ApiException)."""
    out: dict[str, dict[str, str]] = {}
    for item in objects.list_objects(api, RUNTIME_CLASS, None, "")[:MAX_CLASSES]:
        name = (item.get("metadata") or {}).get("name")
        fixed = (item.get("overhead") or {}).get("podFixed") or {}
        if not isinstance(name, str) or not name or len(name) > 253 or not isinstance(fixed, dict):
            continue
        if len(fixed) > MAX_RESOURCES or not all(isinstance(k, str) and isinstance(v, str) for k, v in fixed.items()):
            log.warning("RuntimeClass %s: overhead.podFixed is not a resource list; not counted", name[:253])
            continue
        out[name] = dict(fixed)
    return out


def overheads(cluster) -> dict[str, dict]:
    """{RuntimeClass name: parsed `overhead.podFixed` (Decimals, base units)} of `cluster` (a Cluster row, or None:
    {}), for `kube.resources` `runtime_classes` arguments. Classes without an overhead, or whose overhead does not
    parse, are left out. Reads `cluster.runtime_classes` (one query when a submit loaded the row without it)."""
    if cluster is None:
        return {}
    out = {}
    for name, fixed in (getattr(cluster, "runtime_classes", None) or {}).items():
        if not fixed or not isinstance(fixed, dict):
            continue
        try:
            out[name] = {res: parse(qty, f"RuntimeClass {name}.overhead.podFixed.{res}") for res, qty in fixed.items()}
        except ValidationError:
            continue
    return out


def names_runtime_class(resolved_spec: dict | None) -> bool:
    """True when some pod set of a resolved spec names a RuntimeClass (only then is a cluster's list needed)."""
    return any(isinstance(((ps.get("template") or {}).get("spec") or {}).get("runtimeClassName"), str)
               for ps in (resolved_spec or {}).get("podSets") or [] if isinstance(ps, dict))


def for_spec(cluster, resolved_spec: dict | None) -> dict[str, dict]:
    """`overheads(cluster)` when the spec names a RuntimeClass, else {} without touching the row (submits that name
    none cost no query)."""
    return overheads(cluster) if names_runtime_class(resolved_spec) else {}


def for_job(job) -> dict[str, dict]:
    """`for_spec(job.cluster, job.resolved_spec)`, reading `job.cluster` only when the spec names a RuntimeClass;
    {} for a job without a cluster (the template preview's example job)."""
    if getattr(job, "cluster_id", None) is None or not names_runtime_class(job.resolved_spec):
        return {}
    return overheads(job.cluster)
