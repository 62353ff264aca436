"""gangweb's own estimate of what each queue uses, from its active jobs' requested totals.

KAI reports a Queue's use in its status (`status.allocated` / `status.requested`, read back by the queue sync);
other schedulers (Volcano, scheduler-plugins, the Kubernetes Workload API) report nothing per queue, and KAI
reports nothing until its first sync. The estimate fills that gap and is always labelled as gangweb's:

- requested: every active job (Submitted, Dispatched, Queued, Scheduled, Running) of the queue;
- allocated: those of them placed by the scheduler (Scheduled, Running).

Amounts are KAI units (GPU devices, CPU millicores, memory MB = 10^6 bytes) from the jobs' requested-total
columns (`GangJob.requested_*`, filled at submit), summed in the database: one query whatever the number of jobs.
"""
from __future__ import annotations

from django.db.models import Count, Q, Sum

from ..choices import GangPhase
from ..kube.kai_units import RESOURCES
from ..models import GangJob

RUNNING_PHASES = (GangPhase.SCHEDULED, GangPhase.RUNNING)
ACTIVE = (GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED, *RUNNING_PHASES)
BYTES_PER_MB = 10**6
COLUMNS = {"gpu": "requested_gpu", "cpu": "requested_cpu_millicores", "memory": "requested_memory_bytes"}


def empty() -> dict:
    """An estimate of nothing: ``{"allocated": {res: 0.0}, "requested": {res: 0.0}, "jobs": 0}``."""
    return {"allocated": dict.fromkeys(RESOURCES, 0.0), "requested": dict.fromkeys(RESOURCES, 0.0), "jobs": 0}


def _kai(resource: str, amount) -> float:
    amount = float(amount or 0)
    return amount / BYTES_PER_MB if resource == "memory" else amount


def estimated_usage(cluster: str | None = None) -> dict[int, dict]:
    """{queue id: {"allocated": {res: amount}, "requested": {...}, "jobs": active jobs}} for the queues that have
    active jobs (in `cluster`, a cluster name, when given). One `SUM … GROUP BY queue_id` query."""
    rows = GangJob.objects.filter(phase__in=ACTIVE)
    if cluster:
        rows = rows.filter(cluster__name=cluster)
    running = Q(phase__in=RUNNING_PHASES)
    sums = {"jobs": Count("id")}
    for r, column in COLUMNS.items():
        sums[f"req_{r}"] = Sum(column)
        sums[f"alloc_{r}"] = Sum(column, filter=running)
    usage = {}
    for row in rows.order_by().values("queue_id").annotate(**sums):
        usage[row["queue_id"]] = {
            "allocated": {r: _kai(r, row[f"alloc_{r}"]) for r in RESOURCES},
            "requested": {r: _kai(r, row[f"req_{r}"]) for r in RESOURCES},
            "jobs": row["jobs"],
        }
    return usage


def rolled_up(children: dict, usage: dict[int, dict]) -> dict[int, dict]:
    """Every queue's estimate including its descendants' (KAI counts a child's use in its parent).

    `children`: {parent id or None: [queues with `.id`]} as `QueueTree.children`; `usage`: `estimated_usage()`.
    Returns {queue id: estimate} for every queue in `children` (queues without jobs get zeros). Linear in the
    number of queues.
    """
    out: dict[int, dict] = {}

    def total(queue) -> dict:
        own = usage.get(queue.id) or empty()
        sub = {"allocated": dict(own["allocated"]), "requested": dict(own["requested"]), "jobs": own["jobs"],
               "own_jobs": own["jobs"]}
        for kid in children.get(queue.id, []):
            k = total(kid)
            for key in ("allocated", "requested"):
                for r in RESOURCES:
                    sub[key][r] += k[key][r]
            sub["jobs"] += k["jobs"]
        out[queue.id] = sub
        return sub

    for root in children.get(None, []):
        total(root)
    return out
