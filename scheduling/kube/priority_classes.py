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
    """The `value` (int32) of the PriorityClass `name`, from one LIST of the cluster (gangweb's rights list
    PriorityClasses, never get them one by one: kube/rbac.py), or None when the cluster has none of that name or
    its value is not an integer. Raises what `kube.objects.list_objects` raises."""
    for item in objects.list_objects(api, PRIORITY_CLASS, None, ""):
        if (item.get("metadata") or {}).get("name") == name:
            value = item.get("value")
            return value if isinstance(value, int) and not isinstance(value, bool) else None
    return None
