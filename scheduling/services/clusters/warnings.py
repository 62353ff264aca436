"""Submit warnings from what gangweb knows of the target cluster: things that will keep the job waiting for ever.

Read from the Cluster row only (`views`: a cached view, never a call to the cluster per submit): `capacity`
(written by the watcher from the Nodes' `status.allocatable`), `priority_classes` and `runtime_classes` (written by
the probe, once a minute) and `scheduler_names` (the cluster's settings). Warnings never refuse: the cluster may
change (a node joins, an admin creates the class). Each is ``{"code", "field", "message"}``, the shape of the
other `submit_warnings`:

- `NeverFitsNode`: one pod of a pod set asks more of a resource than the largest schedulable node has
  (kube-scheduler's `NodeResourcesFit` can never place it); `NeverFitsCluster`: the whole job asks more than all
  schedulable nodes have together. Requests by `kube.resources` (kube-scheduler's `PodRequests`);
- `UnknownResource`: a pod set asks for a resource (an extended one such as `example.com/fpga`, or GPUs) that no
  schedulable node lists in `status.allocatable` (NodeResourcesFit counts it as 0 everywhere). It replaces the
  NeverFits warnings of that resource. A resource a DRA DeviceClass provides (`spec.extendedResourceName`,
  DRAExtendedResource, GA in 1.37) is not in any node's allocatable, and gangweb does not read DeviceClasses: the
  message says so, and the implicit `deviceclass.resource.kubernetes.io/` names are never warned about;
- `UnknownPriorityClass`: the job or a pod set names a PriorityClass the cluster lacks (the `Priority` admission
  plugin refuses every pod: "no PriorityClass with name x was found");
- `UnknownRuntimeClass`: a pod set names a RuntimeClass the cluster lacks (the `RuntimeClass` admission plugin
  refuses every pod);
- `SchedulerNotSeen`: the probe looked for the backend's scheduler on the cluster (its leader Lease, its Events)
  and saw none acting within GANGWEB_SCHEDULER_SEEN_WITHIN_SECONDS (observe/presence.py): the job waits until one
  runs. Unknown presence (not probed, or not readable) says nothing;
- `UnknownScheduler`: a pod set's `schedulerName` that the cluster's settings do not list (`Cluster.scheduler_names`,
  plus `default-scheduler`) and the backend does not replace: nothing may ever schedule the pods.

A list gangweb has not read yet (no probe, or its LIST was refused) says nothing: an empty `priority_classes` is
unknown (every cluster has the `system-*` classes); `runtime_classes` counts once the cluster was probed healthy.
"""
from __future__ import annotations

from django.conf import settings
from django.core.cache import cache

from ...backends import registry
from ...kube import resources, runtime_classes
from ...models import Cluster
from ...observe import capacity, presence
from ...observe.why_pending import amount

DEFAULT_SCHEDULER = "default-scheduler"
VIEW_FIELDS = ("id", "name", "capacity", "priority_classes", "runtime_classes", "scheduler_names", "health",
               "last_probe_at", "scheduler_presence")
# Resources every node offers (a cluster without them has no nodes, and NeverFits says so).
EVERY_NODE = ("cpu", "memory")
# The implicit extended resource of a DRA DeviceClass (KEP-5004): never in a node's allocatable.
DRA_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
VIEW_SECONDS = 30  # the probe refreshes the lists once a minute; a submit reads at most this stale a view


def views(cluster_ids) -> dict[int, Cluster]:
    """{cluster id: an unsaved Cluster holding only VIEW_FIELDS (never its credentials)} for `cluster_ids`, each
    remembered VIEW_SECONDS in Django's cache: a submit request costs at most one query for all its clusters, and
    none while they are remembered. Ids with no cluster are absent."""
    keys = {cid: f"gangweb:cluster-view:{cid}" for cid in set(cluster_ids)}
    cached = cache.get_many(list(keys.values()))
    found = {cid: cached[key] for cid, key in keys.items() if key in cached}
    missing = [cid for cid in keys if cid not in found]
    if missing:
        loaded = {row["id"]: row for row in Cluster.objects.filter(pk__in=missing).values(*VIEW_FIELDS)}
        cache.set_many({keys[cid]: row for cid, row in loaded.items()}, VIEW_SECONDS)
        found.update(loaded)
    return {cid: Cluster(**fields) for cid, fields in found.items() if fields}


def _pod_sets(resolved: dict) -> list[tuple[int, dict, dict]]:
    """[(index, pod set, its pod spec)] of a resolved spec, skipping entries that are not objects."""
    out = []
    for i, ps in enumerate((resolved or {}).get("podSets") or []):
        if isinstance(ps, dict):
            spec = (ps.get("template") or {}).get("spec") if isinstance(ps.get("template"), dict) else None
            out.append((i, ps, spec if isinstance(spec, dict) else {}))
    return out


def _unknown_resources(cluster: Cluster, resolved: dict, per_pod: list[dict]) -> list[dict]:
    """UnknownResource warnings: what a pod set asks (> 0) that no schedulable node offers."""
    offered = (cluster.capacity or {}).get("allocatable") or {}
    out = []
    for (i, ps, _), asks in zip(_pod_sets(resolved), per_pod, strict=False):
        for res in sorted(asks):
            if res in EVERY_NODE or res.startswith(DRA_CLASS_PREFIX) or not (asks[res] or 0) > 0 or offered.get(res):
                continue
            out.append({"code": "UnknownResource", "field": f"podSets[{i}].template.spec", "resource": res,
                        "message": f"pod set '{ps.get('name', i)}' asks {amount(res, asks[res])}, and no schedulable "
                                   f"node of cluster '{cluster.name}' offers {res} (none lists it as allocatable): "
                                   "its pods wait until such a node joins, unless a DRA DeviceClass provides it"})
    return out


def _fit_warnings(cluster: Cluster, resolved: dict) -> list[dict]:
    cap = cluster.capacity or {}
    if not cap.get("allocatable"):
        return []
    overheads = runtime_classes.for_spec(cluster, resolved)
    per_pod = capacity.pod_requests(resolved, overheads)
    try:
        whole = resources.as_numbers(resources.spec_requests(resolved, overheads))
    except resources.UNREADABLE:
        whole = {}
    out = _unknown_resources(cluster, resolved, per_pod)
    unknown = {w.pop("resource") for w in out}
    for f in capacity.blocking(whole, per_pod, cap):
        res = f["resource"]
        if res in unknown:  # "no node offers it" says more than "0 together"
            continue
        if f["code"] == capacity.EXCEEDS_CLUSTER:
            out.append({"code": "NeverFitsCluster", "field": "podSets",
                        "message": f"the job asks {amount(res, f['needs'])} in all; the schedulable nodes of cluster "
                                   f"'{cluster.name}' have {amount(res, f['available'])} together, so it waits "
                                   "until nodes are added"})
            continue
        for (i, ps, _), asks in zip(_pod_sets(resolved), per_pod, strict=False):
            if (asks.get(res) or 0) > (cap.get("largest") or {}).get(res, 0):
                out.append({"code": "NeverFitsNode", "field": f"podSets[{i}].template.spec",
                            "message": f"one pod of pod set '{ps.get('name', i)}' asks {amount(res, asks[res])}; "
                                       f"the largest node of cluster '{cluster.name}' has "
                                       f"{amount(res, f['largest_node'])} allocatable, so it waits until a bigger "
                                       "node joins"})
    return out


def _class_warnings(cluster: Cluster, resolved: dict, priority_class_name: str) -> list[dict]:
    out = []
    known_priorities = set(cluster.priority_classes or [])
    if known_priorities:
        named = [("priority_class_name", priority_class_name)] if priority_class_name else []
        named += [(f"podSets[{i}].template.spec.priorityClassName", spec.get("priorityClassName"))
                  for i, _, spec in _pod_sets(resolved) if not priority_class_name]
        for field, name in named:
            if isinstance(name, str) and name and name not in known_priorities:
                out.append({"code": "UnknownPriorityClass", "field": field,
                            "message": f"cluster '{cluster.name}' has no PriorityClass '{name}': its API server "
                                       "will refuse to create the job's pods until one is created"})
    if cluster.last_probe_at is not None and cluster.health == "Healthy":
        known_runtimes = set(cluster.runtime_classes or {})
        for i, _, spec in _pod_sets(resolved):
            name = spec.get("runtimeClassName")
            if isinstance(name, str) and name and name not in known_runtimes:
                out.append({"code": "UnknownRuntimeClass", "field": f"podSets[{i}].template.spec.runtimeClassName",
                            "message": f"cluster '{cluster.name}' has no RuntimeClass '{name}': its API server will "
                                       "refuse to create the job's pods until one is created"})
    return out


def _scheduler_warnings(cluster: Cluster, resolved: dict, family: str) -> list[dict]:
    if cluster.scheduler_name_for(family):  # the backend stamps its scheduler's name on every pod
        return []
    known = {DEFAULT_SCHEDULER, *(v for v in (cluster.scheduler_names or {}).values() if isinstance(v, str))}
    out = []
    for i, _, spec in _pod_sets(resolved):
        name = spec.get("schedulerName")
        if isinstance(name, str) and name and name not in known:
            out.append({"code": "UnknownScheduler", "field": f"podSets[{i}].template.spec.schedulerName",
                        "message": f"the pods name scheduler '{name}', which cluster '{cluster.name}' does not list "
                                   f"(it lists {', '.join(sorted(known))}): nothing may ever schedule them"})
    return out


def _presence_warnings(cluster: Cluster, family: str) -> list[dict]:
    if not family:
        return []
    seen = presence.presence(cluster, family)
    if not seen.silent:
        return []
    last = f"; last seen {seen.seen_at.isoformat(timespec='seconds')} ({seen.by})" if seen.seen_at else ""
    return [{"code": "SchedulerNotSeen", "field": "template",
             "message": f"no {seen.scheduler} seen on cluster '{cluster.name}' (no leader Lease renewed and no "
                        f"Event from it in the last {settings.GANGWEB_SCHEDULER_SEEN_WITHIN_SECONDS} s{last}): the "
                        f"{family} job is accepted and waits until that scheduler runs"}]


def submit_warnings(cluster: Cluster, resolved: dict, priority_class_name: str = "", family: str = "") -> list[dict]:
    """Warnings for a job about to be submitted to `cluster` (see the module docstring).

    - `resolved`: the job's resolved spec (`{"podSets": [{"name", "replicas", "template"}], ...}`), validated;
    - `priority_class_name`: the job's own (it replaces the pod templates' when set); `family`: the template's
      backend ("kai", "k8s-workload", ...).

    Returns [{"code", "field", "message"}], [] when nothing is known against the job. Raises nothing for a spec
    that passed validation.
    """
    if family not in registry.family_names():
        family = ""
    return [*_fit_warnings(cluster, resolved), *_class_warnings(cluster, resolved, priority_class_name),
            *_scheduler_warnings(cluster, resolved, family), *_presence_warnings(cluster, family)]
