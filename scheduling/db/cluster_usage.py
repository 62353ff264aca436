"""What gangweb's placed jobs hold in a cluster, for the `ClusterBusy` and `NodesFragmented` facts of why_pending.

`in_use` sums the gang totals stored on each job (`GangJob.requested_*`, filled at submit) over the cluster's
Scheduled and Running jobs: one `SUM` query. `nodes_and_use` reads the cluster's node list (`ClusterNodes`, written
by the watcher) and what gangweb's bound pods request on each node, from the jobs' last observed pods
(`GangJob.observed["pods"]`: node, phase, pod set) and their pod sets' per-pod requests (`kube.resources`). Both are
remembered for a few seconds per cluster in Django's cache, so a resync that explains many pending gangs of one
cluster asks once; a status write that moves one of the cluster's jobs into or out of Scheduled/Running drops what
is remembered once it commits (`forget`, reconcile/status.py), so the next answer counts that job. Pods gangweb
does not manage are not counted: what is left free is an upper bound.
"""
from __future__ import annotations

from django.core.cache import cache
from django.db.models import Count, Q, Sum

from ..choices import PENDING_PHASES, RUNNING_PHASES, TERMINAL_PHASES
from ..kube import runtime_classes
from ..models import Cluster, ClusterNodes, GangJob
from ..models.jobs import REQUESTED_COLUMNS as COLUMNS
from ..observe import capacity

REMEMBER_SECONDS = 5
IN_USE_KEY = "gangweb:cluster-in-use:{}"
NODES_USE_KEY = "gangweb:cluster-nodes-use:{}"


def active_sums_by_cluster(**filters) -> dict[int, dict]:
    """{cluster id: row} of gangweb's running (Scheduled, Running) and waiting (Submitted, Dispatched, Queued) jobs
    matching `filters` (e.g. `cluster_id__in=[...]`, `queue_id__in=[...]`), one `GROUP BY cluster_id` query; each row
    has "running" and "waiting" (job counts) and "use_<r>" / "wait_<r>" for r in gpu, cpu, memory (the gang totals
    of `GangJob.requested_*`: GPU devices, CPU millicores, memory bytes; None when no job counts)."""
    running, waiting = Q(phase__in=RUNNING_PHASES), Q(phase__in=PENDING_PHASES)
    sums = {"running": Count("id", filter=running), "waiting": Count("id", filter=waiting)}
    for r, column in COLUMNS.items():
        sums[f"use_{r}"] = Sum(column, filter=running)
        sums[f"wait_{r}"] = Sum(column, filter=waiting)
    rows = (GangJob.objects.filter(phase__in=[*RUNNING_PHASES, *PENDING_PHASES], **filters)
            .order_by().values("cluster_id").annotate(**sums))
    return {row["cluster_id"]: row for row in rows}


def in_use(cluster_id: int) -> dict:
    """{"nvidia.com/gpu": devices, "cpu": cores, "memory": bytes} requested by the cluster's Scheduled and
    Running jobs (base units, as `Cluster.capacity` states allocatable). Cached REMEMBER_SECONDS per cluster."""
    def compute() -> dict:
        sums = GangJob.objects.filter(cluster_id=cluster_id, phase__in=RUNNING_PHASES).aggregate(
            **{r: Sum(column) for r, column in COLUMNS.items()})  # gpu devices, cpu millicores, memory bytes
        gpu = sums["gpu"] or 0
        return {"nvidia.com/gpu": int(gpu) if float(gpu).is_integer() else gpu,
                "cpu": (sums["cpu"] or 0) / 1000, "memory": sums["memory"] or 0}

    return cache.get_or_set(IN_USE_KEY.format(cluster_id), compute, REMEMBER_SECONDS)


def in_use_by_cluster(cluster_ids: list[int]) -> dict[int, dict]:
    """{cluster id: what `in_use` says} for many clusters in one `SUM … GROUP BY cluster` (the overview's cluster
    totals); clusters without Scheduled or Running jobs are left out (nothing in use)."""
    if not cluster_ids:
        return {}
    rows = (GangJob.objects.filter(cluster_id__in=sorted(cluster_ids), phase__in=RUNNING_PHASES).order_by()
            .values("cluster_id").annotate(**{r: Sum(column) for r, column in COLUMNS.items()}))
    return {row["cluster_id"]: {"nvidia.com/gpu": row["gpu"] or 0, "cpu": (row["cpu"] or 0) / 1000,
                                "memory": row["memory"] or 0} for row in rows}


HOLDING_POD_PHASES = ("Pending", "Running")  # a bound pod in these phases holds its node's room


def _pod_set_requests(resolved_spec: dict, overheads) -> dict[str, dict]:
    sets = [ps for ps in (resolved_spec or {}).get("podSets") or [] if isinstance(ps, dict)]
    return {str(ps.get("name", "")): asks for ps, asks in zip(sets, capacity.pod_requests(resolved_spec, overheads),
                                                              strict=False)}


def by_node(cluster_id: int) -> dict[str, dict]:
    """{node name: {resource: amount}} that gangweb's bound, not finished pods request on each node of the cluster
    (base units: cores, bytes, devices), from the non-terminal jobs with bound pods. A pod row without a pod set
    (older rows) counts as the job's smallest pod set, so the free room stays an upper bound. Only the first
    MAX_PODS_LISTED pods of a job are in its row."""
    cluster = Cluster.objects.filter(pk=cluster_id).only("runtime_classes").first()
    overheads = runtime_classes.overheads(cluster)
    used: dict[str, dict] = {}
    rows = (GangJob.objects.filter(cluster_id=cluster_id, observed__pod_counts__bound__gt=0)
            .exclude(phase__in=TERMINAL_PHASES).values_list("resolved_spec", "observed"))
    for spec, observed in rows.iterator(chunk_size=500):
        per_set = _pod_set_requests(spec, overheads)
        if not per_set:
            continue
        smallest = {r: min(a.get(r) or 0 for a in per_set.values()) for r in capacity.CHECKED}
        for pod in (observed or {}).get("pods") or []:
            if not isinstance(pod, dict) or not pod.get("node") or pod.get("phase") not in HOLDING_POD_PHASES:
                continue
            asks = per_set.get(pod.get("pod_set")) or smallest
            room = used.setdefault(str(pod["node"]), {})
            for res in capacity.CHECKED:
                if asks.get(res):
                    room[res] = room.get(res, 0) + asks[res]
    return used


def nodes_and_use(cluster_id: int) -> tuple[list[dict] | None, dict[str, dict]]:
    """(the cluster's `ClusterNodes.nodes`, or None when the watcher has not written them; `by_node`), for
    why_pending's NodesFragmented fact. Cached REMEMBER_SECONDS per cluster."""
    def compute():
        row = ClusterNodes.objects.filter(cluster_id=cluster_id).values_list("nodes", flat=True).first()
        return (row, by_node(cluster_id)) if row else (None, {})

    return cache.get_or_set(NODES_USE_KEY.format(cluster_id), compute, REMEMBER_SECONDS)


def moves_usage(before: str, after: str) -> bool:
    """True when a job going from phase `before` to `after` starts or stops counting in `in_use` (it enters or
    leaves Scheduled/Running, the phases whose requests it sums)."""
    return (before in RUNNING_PHASES) != (after in RUNNING_PHASES)


def forget(cluster_id: int) -> None:
    """Drop what is remembered of the cluster (`in_use`, `nodes_and_use`): the next call computes it anew. Called
    once a write that moved one of its jobs into or out of Scheduled/Running has committed, so an answer made
    right after does not leave that job out (or count it) for up to REMEMBER_SECONDS."""
    cache.delete_many([IN_USE_KEY.format(cluster_id), NODES_USE_KEY.format(cluster_id)])
