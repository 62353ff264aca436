"""The PriorityClass names of a cluster, cached on its row for the submit warnings (services/clusters/warnings.py).

A pod naming a PriorityClass the cluster lacks is refused by the `Priority` admission plugin ("no PriorityClass
with name x was found", `plugin/pkg/admission/priority`), so its Job never gets pods. gangweb warns at submit from
the names the cluster probe read (one LIST a minute, `reconcile/probe.py`): `Cluster.priority_classes` =
``["high", "system-cluster-critical", ...]`` (sorted). Readers never call the cluster.

Cluster objects are untrusted input: names that are not strings of at most 253 characters are left out, and at
most MAX_CLASSES are kept.
"""
from __future__ import annotations

from kubernetes import client

from . import objects
from .refs import ObjectRef

PRIORITY_CLASS = ObjectRef("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", namespaced=False)
MAX_CLASSES = 1000


def read(api: client.ApiClient) -> list[str]:
    """The sorted PriorityClass names from one LIST of the cluster. Raises what `kube.objects.list_objects`
    raises (TransientKubeError, TerminalKubeError, ApiException)."""
    names = set()
    for item in objects.list_objects(api, PRIORITY_CLASS, None, "")[:MAX_CLASSES]:
        name = (item.get("metadata") or {}).get("name")
        if isinstance(name, str) and 0 < len(name) <= 253:
            names.add(name)
    return sorted(names)



def value_of(api: client.ApiClient, name: str) -> int | None:
    """The `value` (int32) a pod of PriorityClass `name` gets, from one LIST of the cluster (gangweb's rights list
    PriorityClasses, never get them one by one: kube/rbac.py): that class's value, or None when the cluster has
    no class of that name (or its value is not an integer). With `name` "", the value of a pod that names no class:
    the lowest value among the `globalDefault` classes, else 0 (the Priority admission plugin's rule; Kueue's
    `pkg/util/priority` `getDefaultPriority` takes the same). Raises what `kube.objects.list_objects` raises."""
    defaults = []
    for item in objects.list_objects(api, PRIORITY_CLASS, None, ""):
        value = item.get("value")
        value = value if isinstance(value, int) and not isinstance(value, bool) else None
        if name and (item.get("metadata") or {}).get("name") == name:
            return value
        if not name and item.get("globalDefault") is True and value is not None:
            defaults.append(value)
    if name:
        return None
    return min(defaults) if defaults else 0
