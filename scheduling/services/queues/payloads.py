"""The queue tree and a queue's payload as the API (GET /api/v1/queues/, /tree/), the tree page and the queue page
show them: quotas and limits, the scheduler's reported use and gangweb's estimate, sync states, warnings.
"""
from __future__ import annotations

import functools

from django.core.exceptions import ValidationError
from django.db.models import OuterRef, Subquery

from ...amounts import for_api
from ...choices import QueueFamily
from ...db import related
from ...kube.kai_units import RESOURCES, UNITS, display
from ...models import Cluster, QueueClusterState, QueuePolicy
from ...queueing.tree import QUOTA_FIELDS, ROW_FIELDS, WEIGHT_FIELDS, QueueRow, QueueTree, unlimited  # noqa: F401
from .warnings import RESOURCE_FIELDS, warnings_for


def policy_payload(policy: QueuePolicy) -> dict:
    """Per resource: quota, limit and weight in KAI units plus the same as display strings (``"64Gi"``). Each
    resource's dict is the caller's own (a copy: the tree adds the usage to it)."""
    return {r: dict(_resource_payload(r, getattr(policy, quota_field), getattr(policy, limit_field),
                                      getattr(policy, weight_field)))
            for r, quota_field, limit_field, weight_field in RESOURCE_FIELDS}


@functools.lru_cache(maxsize=1024, typed=True)  # typed: 1 and 1.0 are written differently
def _resource_payload(r: str, quota, limit, weight) -> dict:
    """One resource's part of `policy_payload`, remembered per value: the queues of a large tree mostly share their
    quotas and limits, and writing them was half of the whole tree's answer at 1,000 queues (bench/, issue 36).
    Read only: `policy_payload` copies it."""
    return {"unit": UNITS[r], "quota": for_api(quota), "limit": for_api(limit), "over_quota_weight": weight,
            "quota_display": display(r, quota), "limit_display": display(r, limit)}

def _usage_sum(states: list[QueueClusterState], key: str) -> dict | None:
    readings = [s.status.get(key) for s in states if s.status and s.status.get(key)]
    if not readings:
        return None
    return {r: sum(x.get(r, 0) for x in readings) for r in RESOURCES}

def queue_tree(cluster: str | None = None, *, parent: str | None = None, depth: int | None = None,
               ids: list[int] | None = None, visible: set[int] | None = None, tree: QueueTree | None = None,
               usage: dict[int, dict] | None = None, rolled: dict[int, dict] | None = None,
               with_counts: bool = False) -> list[dict]:
    """The queue hierarchy for the tree pages and `GET /api/v1/queues/tree/`, in four queries whatever its size
    (fewer when `tree` (a read-only QueueTree.load_rows()) and `usage` (queue_usage.estimated_usage(cluster)) or
    `rolled` (queue_usage.rolled_up of it) are given). `with_counts` adds each node's `counts` (jobs pending,
    running and finished in 24 hours, its subtree's included: services/queues/counts.py), read with the usage in
    the same query (`counts.usage_and_counts`) unless `usage` or `rolled` is given (then one query more).

    Which nodes: the top-level queues, or the children of `parent` (a queue name; ValidationError({"parent"})
    when there is none), or exactly the queues `ids` in that order (search results, the overview's busiest
    queues: each a root of its own, at its real depth). `depth` levels below those are included (0 = the nodes
    alone, with `children: []`; None = everything); `children_count` tells how many a node has either way.
    `visible` (queue ids) hides every other queue, children counts included; None shows all.

    Returns root nodes (by name), each::

        {"id", "name", "display_name", "managed", "priority", "parent": name | None, "depth": 0, "leaf": bool,
         "path": ["research", "team-nlp"],           # ancestors' names, top first
         "children_count": 2,
         "clusters": ["local"],                      # names it targets; [] = every cluster
         "resources": {"gpu": {"unit": "devices", "quota": 8.0, "limit": -1, "over_quota_weight": 1.0,
                               "quota_display": "8", "limit_display": "unlimited",
                               "allocated": 2.0 | None, "requested": 3.0 | None,
                               "estimated_allocated": 2.0, "estimated_requested": 3.0}, "cpu": {...}, ...},
         "jobs": 3,                                  # active jobs in this queue itself
         "subtree_jobs": 12,                         # ... and in every queue below it
         "warnings": [{"code", "field", "message"}],
         "sync": [{"cluster", "state", "message", "last_synced_at", "last_drift", "last_drift_at", "status_at"}],
         "children": [...]}

    `allocated` / `requested` come from the Queue CR status KAI writes (KAI units; GPU devices, CPU millicores,
    memory MB): for `cluster` when given (a cluster name), else summed over the clusters that reported; None when
    no cluster has reported yet (and with schedulers that report no per-queue use). `estimated_*` are gangweb's
    own estimate from its active jobs (services/queues/usage.py), the queue's and its descendants'.
    """
    from . import counts as queue_counts
    from . import usage as queue_usage

    tree = tree or QueueTree.load_rows()
    if visible is not None and tree.visible != visible:  # warnings say nothing of the queues hidden from the reader
        tree.visible = set(visible)
        tree.sibling_sums.clear()
        tree._warnings.clear()
    shown = (lambda q: True) if visible is None else (lambda q: q.id in visible)

    def kids_of(policy_id):
        kids = tree.children.get(policy_id, [])
        return kids if visible is None else [k for k in kids if shown(k)]

    if ids is not None:
        tops = [tree.by_id[i] for i in ids if i in tree.by_id and shown(tree.by_id[i])]
    elif parent:
        top = tree.by_name.get(parent)
        if top is None or not shown(top):
            raise ValidationError({"parent": f"no queue named '{str(parent)[:63]}'"})
        tops = kids_of(top.id)
    else:
        tops = kids_of(None)

    # The policies drawn, to read their clusters and sync state only.
    drawn: list = []
    todo = [(p, 0) for p in tops]
    while todo:
        p, level = todo.pop()
        drawn.append(p)
        if depth is None or level < depth:
            todo.extend((k, level + 1) for k in kids_of(p.id))
    # Cluster names by a lookup per row, not a join (db/related.py: stale statistics, issue 14).
    by_name = {"cluster": ["name"]}
    links = QueuePolicy.clusters.through.objects.annotate(cluster_name=Subquery(
        Cluster.objects.filter(pk=OuterRef("cluster_id")).values("name")[:1]))
    states_qs = related.annotate(QueueClusterState.objects.filter(family=QueueFamily.KAI), by_name).order_by(
        related.alias("cluster", "name"))
    if len(drawn) < len(tree.by_id):  # a part of the tree: read only its rows (an IN of every id costs more)
        drawn_ids = [p.id for p in drawn]
        links = links.filter(queuepolicy_id__in=drawn_ids)
        states_qs = states_qs.filter(policy_id__in=drawn_ids)
    names: dict[int, list[str]] = {}
    for pid, cname in links.values_list("queuepolicy_id", "cluster_name"):
        names.setdefault(pid, []).append(cname)
    if cluster:
        states_qs = states_qs.filter(cluster_id=related.key_of(Cluster, name=cluster))
    states: dict[int, list[QueueClusterState]] = {}
    for st in related.attach(states_qs, by_name):
        states.setdefault(st.policy_id, []).append(st)
    counted = None
    if rolled is None and usage is None:
        # Only the jobs below the drawn queues: expanding one queue reads its subtree's jobs, not every job.
        scope = set()
        todo = list(tops)
        while todo:
            p = todo.pop()
            if p.id not in scope:
                scope.add(p.id)
                todo.extend(tree.children.get(p.id, []))
        scope = scope if len(scope) < len(tree.by_id) else None
        if with_counts:
            usage, counted = queue_counts.usage_and_counts(cluster, queue_ids=scope)
        else:
            usage = queue_usage.estimated_usage(cluster, queue_ids=scope)
    elif with_counts:
        counted = queue_counts.job_counts(cluster)
    estimates = rolled if rolled is not None else queue_usage.rolled_up(tree, usage)
    rolled_counts = queue_counts.rolled_up(tree, counted) if counted is not None else None

    nothing = {**queue_usage.empty(), "own_jobs": 0}  # read only: shared by the queues without jobs

    def node(policy, level: int, here: int) -> dict:
        mine = states.get(policy.id, [])
        allocated = _usage_sum(mine, "allocated") if mine else None
        requested = _usage_sum(mine, "requested") if mine else None
        est = estimates.get(policy.id) or nothing
        resources = policy_payload(policy)
        for r in RESOURCES:
            resources[r]["allocated"] = for_api(allocated[r]) if allocated else None
            resources[r]["requested"] = for_api(requested[r]) if requested else None
            resources[r]["estimated_allocated"] = for_api(est["allocated"][r])
            resources[r]["estimated_requested"] = for_api(est["requested"][r])
        kids = kids_of(policy.id)
        ancestors = tree.ancestors(policy)
        return {"id": policy.id, "name": policy.name, "display_name": policy.display_name, "managed": policy.managed,
                "priority": policy.priority, "parent": ancestors[0].name if ancestors else None, "depth": here,
                "leaf": not tree.children.get(policy.id), "path": [a.name for a in reversed(ancestors)],
                "children_count": len(kids), "clusters": sorted(names.get(policy.id, [])), "resources": resources,
                "jobs": est["own_jobs"], "subtree_jobs": est["jobs"],
                "warnings": warnings_for(policy, tree), "sync": [sync_payload(s) for s in mine],
                "children": [node(k, level + 1, here + 1) for k in kids] if depth is None or level < depth else [],
                **({"counts": dict(rolled_counts.get(policy.id) or queue_counts.zero())}
                   if rolled_counts is not None else {})}

    return [node(p, 0, len(tree.ancestors(p))) for p in tops]

def sync_payload(state: QueueClusterState) -> dict:
    """One cluster's sync state of a queue, as the API and the pages show it (status in KAI units)."""
    return {"cluster": state.cluster.name, "state": state.state, "message": state.message,
            "last_synced_at": state.last_synced_at, "last_drift": state.last_drift,
            "last_drift_at": state.last_drift_at, "status": state.status, "status_at": state.status_at}

def volcano_sync_payload(state) -> dict:
    """One cluster's Volcano Queue state of a queue (a QueueClusterState of family volcano): sync_payload's keys plus
    `warnings` (what Volcano cannot express, ``[{"code", "field", "message"}]``); `status` holds Volcano's state,
    counters and `allocated` in KAI units."""
    return {**sync_payload(state), "warnings": state.warnings}
