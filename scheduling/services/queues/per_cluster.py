"""A queue's use per cluster: one row per cluster the queue (or a queue below it) takes jobs on, for the queue page
and the queue's REST detail (`per_cluster` of GET /api/v1/queues/<name>/) alike.

Per cluster and resource, in the queue's units (KAI's: GPU devices, CPU millicores, memory MB = 10^6 bytes, as its
quota and limit; `kube.kai_units.UNITS`):

- `quota`, `limit`: the queue's own (gangweb sends the same Queue spec to every cluster it targets; -1 unlimited);
- `in_use`: what the Scheduled and Running jobs of the queue and every queue below it request there (their stored
  gang totals, `GangJob.requested_*`: gangweb's count, as the queue bars' estimate);
- `reported`: what the cluster's scheduler reports the queue holds (KAI or Volcano Queue `status.allocated`, Kueue's
  ClusterQueue reservation; `QueueClusterState.status` as the queue sync last read it), None when it reported
  nothing readable;
- `waiting`: what the queue's jobs not running yet there (Submitted, Dispatched, Queued) request.

`jobs` counts them: `running` (Scheduled, Running) and `waiting`. Which clusters: those the queue names, those the
queues below it name, every cluster when a leaf at or below it names none (it takes jobs everywhere), and any
cluster where its jobs are active (a cluster removed from the queue while jobs ran there); only those the reader may
see (`access.visible_clusters`). Counts cover every job of the queue, as the queue bars do: numbers, never names.
Queries: the queue-cluster links, the jobs grouped by cluster, the queue's states with a status, the clusters (plus
the reader's access queries): the same whatever the number of jobs or clusters.
"""
from __future__ import annotations

from ...amounts import for_api
from ...db import cluster_usage
from ...kube.kai_units import RESOURCES
from ...models import Cluster, QueueClusterState, QueuePolicy
from ..access import roles as access
from ..clusters.summary import REPORTING_FAMILIES, allocated_of
from . import decayed_usage as du
from .usage import _kai

EVERY_CLUSTER = None  # a leaf naming no cluster takes jobs on every cluster


def targeted(policy, tree, links: dict[int, set[int]]) -> set[int] | None:
    """Ids of the clusters `policy` or a queue below it takes jobs on, or EVERY_CLUSTER (None) when a leaf at or below
    it names none. `tree`: a services.queues.policies.QueueTree; `links`: {queue id: cluster ids it names}. Pure."""
    node = tree.by_id[policy.id]
    out = set(links.get(policy.id, ()))
    for q in (node, *tree.descendants(node)):
        named = links.get(q.id, set())
        if not named and not tree.children.get(q.id):
            return EVERY_CLUSTER
        out |= named
    return out


def _jobs(members: list[int]) -> dict[int, dict]:
    return cluster_usage.active_sums_by_cluster(queue_id__in=sorted(members))


def per_cluster(policy: QueuePolicy, tree, user) -> list[dict]:
    """The queue's rows by cluster name (see the module docstring)::

        [{"cluster": "gpu-west", "health": "Healthy", "targeted": true,
          "jobs": {"running": 2, "waiting": 1},
          "resources": {"gpu": {"quota": 8, "limit": 12, "in_use": 8, "reported": 8 | null, "waiting": 4},
                        "cpu": {...}, "memory": {...}}}]

    `targeted` is False for a cluster the queue no longer takes jobs on but where its jobs are still active.
    `tree`: a services.queues.policies.QueueTree holding `policy`; `user`: the reader."""
    members = du.subtrees([policy.id], tree)[policy.id]
    links: dict[int, set[int]] = {}
    for qid, cid in QueuePolicy.clusters.through.objects.filter(queuepolicy_id__in=sorted(members)).values_list(
            "queuepolicy_id", "cluster_id"):
        links.setdefault(qid, set()).add(cid)
    aims = targeted(policy, tree, links)
    jobs = _jobs(members)
    clusters = Cluster.objects.only("id", "name", "health").order_by("name")
    if aims is not EVERY_CLUSTER:
        clusters = clusters.filter(pk__in=sorted(aims | {cid for cid in jobs if cid is not None}))
    clusters = list(access.visible_clusters(user, clusters))
    reported: dict[int, dict] = {}
    states = QueueClusterState.objects.filter(policy=policy, family__in=list(REPORTING_FAMILIES)).exclude(status={})
    for cid, family, status in states.values_list("cluster_id", "family", "status"):
        allocated = allocated_of(family, status)
        if allocated is not None:  # a cluster serving two families reports each family's own queue: they add up
            into = reported.setdefault(cid, dict.fromkeys(RESOURCES, 0.0))
            for r in RESOURCES:
                into[r] += allocated[r]
    out = []
    for c in clusters:
        row = jobs.get(c.pk)
        resources = {}
        for r in RESOURCES:
            resources[r] = {"quota": for_api(getattr(policy, f"{r}_quota")),
                            "limit": for_api(getattr(policy, f"{r}_limit")),
                            "in_use": for_api(round(_kai(r, row[f"use_{r}"] if row else 0), 6)),
                            "reported": for_api(round(reported[c.pk][r], 6)) if c.pk in reported else None,
                            "waiting": for_api(round(_kai(r, row[f"wait_{r}"] if row else 0), 6))}
        out.append({"cluster": c.name, "health": c.health,
                    "targeted": aims is EVERY_CLUSTER or c.pk in aims,
                    "jobs": {"running": row["running"] if row else 0, "waiting": row["waiting"] if row else 0},
                    "resources": resources})
    return out
