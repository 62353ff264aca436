"""The clusters side by side: per cluster its capacity, what is in use, what waits, its schedulers, its Kubernetes
version and how fresh gangweb's knowledge of it is. `GET /api/v1/clusters/summary/` and the overview page both show
`summaries()`; nothing here reads a cluster (the figures are what the probe, the cluster watcher, the queue sync and
gangweb's own job rows recorded).

Per cluster (amounts in the units of every answer about use, `amounts.base_in_answer`: GPUs, CPU cores, GiB):

- `reachability`: the last probe's verdict (`Cluster.health`, written once a minute by `scheduling.probe_cluster`),
  `stale` when that verdict is older than STALE_AFTER (the probe stopped running: no worker or no beat), `unknown`
  before the first probe;
- `capacity`: allocatable CPU cores, memory and GPUs of the schedulable nodes (Ready, not cordoned;
  `Cluster.capacity`, written by the cluster watcher, observe/capacity.summarize). Unknown (and why) until the
  watcher listed the nodes, and while the cluster is unreachable or its data stale (then `last_known` keeps what
  was last listed; before the first probe, the watcher's listing is shown);
- `in_use.gangweb`: what gangweb's Scheduled and Running jobs there request (their stored gang totals,
  `GangJob.requested_*`, the same count as `db.cluster_usage.in_use`), and `in_use.jobs` how many;
- `in_use.reported`: what the cluster's schedulers report as allocated to gangweb's queues: the sum over the leaf
  queues (jobs only go to leaves; a parent's figure would count its children twice) of each KAI or Volcano Queue's
  `status.allocated` and each Kueue ClusterQueue's reservation, as the queue sync last read them
  (`QueueClusterState.status`). Unknown when no scheduler reported one, or the cluster is unreachable or stale;
- `free`: capacity minus gangweb's in use, at least 0: an upper bound (pods gangweb does not manage, and how the
  room is split over nodes, make it smaller; the cluster page's capacity section reads them);
- `waiting`: gangweb's jobs placed on the cluster that are not running yet (Submitted, Dispatched, Queued) and
  what they request;
- `schedulers`: each served backend's scheduler seen acting or not (observe/presence.py);
- `kubernetes_version`: the API server's `/version` as last probed (None before the first probe).

Counts cover every job, not only those the reader may see, as the queue bars and the cluster capacity do: numbers,
never names. Which clusters are listed follows `access.visible_clusters`. Queries: the clusters (plus the reader's
access queries, none for a platform admin), one `GROUP BY cluster` over the active jobs, the queue states with a
status, and the queue parents: the same whatever the number of jobs, queues or clusters.
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.utils import timezone

from ...amounts import base_in_answer, for_api, in_answer, unit_of
from ...choices import ClusterHealth, QueueFamily
from ...db import cluster_usage
from ...kube import kueue_status
from ...models import Cluster, QueueClusterState, QueuePolicy
from ...observe import presence
from ..access import roles as access

# Five missed probes: `probe-clusters` runs every 60 s (settings.CELERY_BEAT_SCHEDULE). Older verdicts are stale.
STALE_AFTER = timedelta(minutes=5)
RESOURCES = {"gpu": "nvidia.com/gpu", "cpu": "cpu", "memory": "memory"}  # answer key -> Cluster.capacity key
REACHABLE, UNREACHABLE, FORBIDDEN, STALE, UNKNOWN = "reachable", "unreachable", "forbidden", "stale", "unknown"
# What the watcher and the queue sync recorded is not current: the cluster did not answer the last probe, or the probe
# itself stopped. Before the first probe (UNKNOWN) the watcher's listing is as current as it gets: shown.
NOT_CURRENT = (UNREACHABLE, STALE)
REPORTING_FAMILIES = {QueueFamily.KAI: "KAI", QueueFamily.VOLCANO: "Volcano", QueueFamily.KUEUE: "Kueue"}


def reachability(cluster: Cluster, now: datetime) -> dict:
    """{"state": reachable | unreachable | forbidden | stale | unknown, "last_probe_at": datetime | None,
    "message": why, for people} of `cluster` as of `now`, from its last probe (`health`, `health_message`,
    `last_probe_at`)."""
    at = cluster.last_probe_at
    detail = (cluster.health_message or "").strip()[:300]
    if cluster.health not in (ClusterHealth.HEALTHY, ClusterHealth.UNREACHABLE, ClusterHealth.FORBIDDEN):
        return {"state": UNKNOWN, "last_probe_at": at,
                "message": "unknown: gangweb has not probed this cluster yet" + (f" ({detail})" if detail else "")}
    age = (now - at).total_seconds() if at is not None else None
    when = f", {presence.ago(age)}" if age is not None else ""
    if age is not None and age > STALE_AFTER.total_seconds():
        return {"state": STALE, "last_probe_at": at,
                "message": f"unknown: last probed {presence.ago(age)} ({cluster.health}); the probe runs every minute, "
                           "so gangweb's worker or its beat is not running"}
    if cluster.health == ClusterHealth.UNREACHABLE:
        return {"state": UNREACHABLE, "last_probe_at": at,
                "message": f"unreachable at the last probe{when}" + (f": {detail}" if detail else "")}
    if cluster.health == ClusterHealth.FORBIDDEN:
        return {"state": FORBIDDEN, "last_probe_at": at,
                "message": f"gangweb's credentials were refused at the last probe{when}"
                           + (f": {detail}" if detail else "")}
    if age is None:  # Healthy without a probe time: a row written by hand; nothing says how current it is
        return {"state": UNKNOWN, "last_probe_at": None, "message": "unknown: no probe time recorded"}
    return {"state": REACHABLE, "last_probe_at": at, "message": f"probed {presence.ago(age)}"}


def _base_amounts(values: dict) -> dict:
    """{"gpu", "cpu", "memory"} in answer units from a {Kubernetes resource: base amount} dict (hostile values: 0)."""
    out = {}
    for key, name in RESOURCES.items():
        try:
            value = float(values.get(name) or 0)
        except (TypeError, ValueError):
            value = 0.0
        out[key] = base_in_answer(key, value if math.isfinite(value) and value > 0 else 0.0)
    return out


def _capacity(cluster: Cluster, reach: dict) -> dict:
    cap = cluster.capacity if isinstance(cluster.capacity, dict) else {}
    allocatable = cap.get("allocatable") if isinstance(cap.get("allocatable"), dict) else None
    nodes = cap.get("nodes") if isinstance(cap.get("nodes"), int) else None
    listed = None if allocatable is None else _base_amounts(allocatable)
    if listed is None:
        return {"known": False, "message": "unknown: gangweb's watcher has not listed this cluster's nodes yet",
                "nodes": None, "allocatable": None, "last_known": None}
    if reach["state"] in NOT_CURRENT:
        return {"known": False, "message": f"unknown: {_why_not_now(reach)}; the figures are as last listed",
                "nodes": None, "allocatable": None, "last_known": {"nodes": nodes, "allocatable": listed}}
    return {"known": True, "message": "" if nodes else "no schedulable nodes (Ready and not cordoned)",
            "nodes": nodes, "allocatable": listed, "last_known": None}


def _why_not_now(reach: dict) -> str:
    return {UNREACHABLE: "the cluster is unreachable", STALE: "gangweb's data of it is stale"}[reach["state"]]


def _job_figures(cluster_ids: list[int]) -> dict[int, dict]:
    """{cluster id: {"running", "waiting" (job counts), "in_use", "waiting_requested" ({resource: base amount})}}
    of gangweb's active jobs per cluster: one `GROUP BY cluster_id` query (the job_active_usage index)."""
    if not cluster_ids:
        return {}
    rows = cluster_usage.active_sums_by_cluster(cluster_id__in=sorted(cluster_ids)).values()

    def base(row, prefix):  # the columns hold GPU devices, CPU millicores and memory bytes
        return {"nvidia.com/gpu": row[f"{prefix}_gpu"] or 0, "cpu": (row[f"{prefix}_cpu"] or 0) / 1000,
                "memory": row[f"{prefix}_memory"] or 0}
    return {row["cluster_id"]: {"running": row["running"], "waiting": row["waiting"], "in_use": base(row, "use"),
                                "waiting_requested": base(row, "wait")} for row in rows}


def allocated_of(family: str, status) -> dict | None:
    """{"gpu", "cpu", "memory"} (KAI units) a queue's stored status says is allocated, or None when it says nothing
    readable: KAI and Volcano `allocated`, Kueue's reservation (kube/kueue_status.normalized)."""
    if not isinstance(status, dict) or not status:
        return None
    allocated = kueue_status.normalized(status).get("allocated") if family == QueueFamily.KUEUE \
        else status.get("allocated")
    if not isinstance(allocated, dict):
        return None
    out = {}
    for r in RESOURCES:
        try:
            value = float(allocated.get(r) or 0)
        except (TypeError, ValueError):
            return None  # a figure that is not a number: the report is unreadable, never counted as 0
        if not math.isfinite(value) or value < 0:  # NaN or infinity would not even be valid JSON
            return None
        out[r] = value
    return out


def _reported(cluster_ids: list[int]) -> dict[int, dict]:
    """{cluster id: {"amounts": {"gpu", "cpu", "memory"} (KAI units), "families": [...], "at": latest status_at}}
    summed over the leaf queues' stored statuses; clusters without any report are absent. Two queries."""
    if not cluster_ids:
        return {}
    parents = set(QueuePolicy.objects.exclude(parent_id=None).values_list("parent_id", flat=True).distinct())
    rows = (QueueClusterState.objects.filter(cluster_id__in=sorted(cluster_ids), family__in=list(REPORTING_FAMILIES))
            .exclude(status={}).values_list("cluster_id", "policy_id", "family", "status", "status_at"))
    out: dict[int, dict] = {}
    for cluster_id, policy_id, family, status, at in rows:
        if policy_id in parents:
            continue
        allocated = allocated_of(family, status)
        if allocated is None:
            continue
        acc = out.setdefault(cluster_id, {"amounts": dict.fromkeys(RESOURCES, 0.0), "families": set(), "at": None})
        for r, v in allocated.items():
            acc["amounts"][r] += v
        acc["families"].add(family)
        if at is not None and (acc["at"] is None or at > acc["at"]):
            acc["at"] = at
    return out


def _reported_answer(found: dict | None, reach: dict) -> dict:
    if found is None:
        return {"known": False, "amounts": None, "by": "", "at": None,
                "message": "unknown: no scheduler here has reported what gangweb's queues hold (KAI or Volcano "
                           "Queue, Kueue ClusterQueue status)"}
    by = ", ".join(f"{REPORTING_FAMILIES[f]} queue status" for f in sorted(found["families"]))
    amounts = {r: in_answer(r, v) for r, v in found["amounts"].items()}
    if reach["state"] in NOT_CURRENT:
        return {"known": False, "amounts": None, "by": by, "at": found["at"],
                "message": f"unknown: {_why_not_now(reach)}; the last report is not current"}
    return {"known": True, "amounts": amounts, "by": by, "at": found["at"], "message": ""}


def summarize(clusters: list[Cluster], now: datetime | None = None) -> list[dict]:
    """The summary of each of `clusters` (Cluster rows, in the order given), as the module docstring describes::

        {"name": "gpu-west", "kubernetes_version": "v1.37.2" | None, "available_backends": [...],
         "reachability": {"state": "reachable", "last_probe_at": datetime, "message": "probed 12 s ago"},
         "schedulers": {"kai": {"state": "seen", "scheduler", "seen_at", "by", "text"}},
         "capacity": {"known": true, "message": "", "nodes": 4, "allocatable": {"gpu": 32, "cpu": 256,
                      "memory": 1024}, "last_known": null},
         "in_use": {"jobs": 3, "gangweb": {"gpu": 12, "cpu": 48, "memory": 192},
                    "reported": {"known": true, "amounts": {"gpu": 12, ...} | null, "by": "KAI queue status",
                                 "at": datetime | null, "message": ""}},
         "free": {"gpu": 20, "cpu": 208, "memory": 832} | null, "free_is_upper_bound": true,
         "waiting": {"jobs": 2, "requested": {"gpu": 16, "cpu": 64, "memory": 256}}}

    Three queries (jobs, queue parents, queue states) whatever the number of clusters and jobs."""
    now = now or timezone.now()
    ids = [c.pk for c in clusters]
    jobs, reported = _job_figures(ids), _reported(ids)
    out = []
    for c in clusters:
        reach = reachability(c, now)
        cap = _capacity(c, reach)
        mine = jobs.get(c.pk) or {"running": 0, "waiting": 0, "in_use": {}, "waiting_requested": {}}
        in_use = _base_amounts(mine["in_use"])
        free = None
        if cap["known"]:  # both in answer units already, rounded to 6 decimals: the difference is exact enough
            free = {r: for_api(round(max(float(cap["allocatable"][r]) - float(in_use[r]), 0.0), 6))
                    for r in RESOURCES}
        out.append({
            "name": c.name, "kubernetes_version": c.server_version or None,
            "available_backends": list(c.available_backends or []),
            "reachability": reach,
            "schedulers": {family: p.as_dict() for family, p in presence.all_presence(c, now).items()},
            "capacity": cap,
            "in_use": {"jobs": mine["running"], "gangweb": in_use,
                       "reported": _reported_answer(reported.get(c.pk), reach)},
            "free": free, "free_is_upper_bound": True,
            "waiting": {"jobs": mine["waiting"], "requested": _base_amounts(mine["waiting_requested"])},
        })
    return out


def summaries(user, now: datetime | None = None) -> dict:
    """`GET /api/v1/clusters/summary/`: ``{"units": {"gpu": "GPUs", "cpu": "CPU cores", "memory": "GiB"},
    "clusters": [summarize()'s entries, by name]}`` for the clusters `user` may see (access.visible_clusters)."""
    clusters = list(access.visible_clusters(user, Cluster.objects.all()).order_by("name"))
    return {"units": {r: unit_of(r) for r in RESOURCES}, "clusters": summarize(clusters, now)}
