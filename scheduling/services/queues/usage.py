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

from ...choices import RUNNING_PHASES, GangPhase
from ...db import related
from ...kube.kai_units import RESOURCES
from ...models import Cluster, GangJob
from ...models.jobs import REQUESTED_COLUMNS

ACTIVE = (GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED, *RUNNING_PHASES)
BYTES_PER_MB = 10**6
COLUMNS = REQUESTED_COLUMNS


def empty() -> dict:
    """An estimate of nothing: ``{"allocated": {res: 0.0}, "requested": {res: 0.0}, "jobs": 0}``."""
    return {"allocated": dict.fromkeys(RESOURCES, 0.0), "requested": dict.fromkeys(RESOURCES, 0.0), "jobs": 0}


def _kai(resource: str, amount) -> float:
    amount = float(amount or 0)
    return amount / BYTES_PER_MB if resource == "memory" else amount


def estimated_usage(cluster: str | None = None, queue_ids=None) -> dict[int, dict]:
    """{queue id: {"allocated": {res: amount}, "requested": {...}, "jobs": active jobs}} for the queues that have
    active jobs (in `cluster`, a cluster name, when given; among `queue_ids` when given). One `SUM … GROUP BY
    queue_id` query, read from the job_active_usage index (its key is the queue: `queue_ids` narrows the scan)."""
    rows = GangJob.objects.filter(phase__in=ACTIVE)
    if cluster:
        rows = rows.filter(cluster_id=related.key_of(Cluster, name=cluster))  # no join: issue 14
    if queue_ids is not None:
        rows = rows.filter(queue_id__in=sorted(queue_ids))
    running = Q(phase__in=RUNNING_PHASES)
    sums = {"jobs": Count("*")}  # with the sums, read from the job_active_usage index alone
    for r, column in COLUMNS.items():
        sums[f"req_{r}"] = Sum(column)
        sums[f"alloc_{r}"] = Sum(column, filter=running)
    usage = {}
    columns = [(r, f"alloc_{r}", f"req_{r}") for r in RESOURCES]
    for row in rows.order_by().values("queue_id").annotate(**sums):
        usage[row["queue_id"]] = {
            "allocated": {r: _kai(r, row[alloc]) for r, alloc, _req in columns},
            "requested": {r: _kai(r, row[req]) for r, _alloc, req in columns},
            "jobs": row["jobs"],
        }
    return usage


def rolled_up(tree, usage: dict[int, dict]) -> dict[int, dict]:
    """Each queue's estimate including its descendants' (KAI counts a child's use in its parent).

    `tree`: a queueing.tree.QueueTree; `usage`: `estimated_usage()`. Returns {queue id: estimate plus
    "own_jobs"} for the queues with active jobs and their ancestors; others have none (use `empty()`). Each
    queue with jobs is added to itself and its ancestors: linear in the queues with jobs times the tree's depth.
    """
    out: dict[int, dict] = {}
    zero = dict.fromkeys(RESOURCES, 0.0)
    for queue_id, own in usage.items():
        queue = tree.by_id.get(queue_id)
        if queue is None:
            continue
        allocated, requested, jobs = own["allocated"], own["requested"], own["jobs"]
        for q in (queue, *tree.ancestors(queue)):
            acc = out.get(q.id)
            if acc is None:  # empty() with own_jobs, without a call per queue
                acc = out[q.id] = {"allocated": zero.copy(), "requested": zero.copy(), "jobs": 0, "own_jobs": 0}
            into = acc["allocated"]
            for r in RESOURCES:
                into[r] += allocated[r]
            into = acc["requested"]
            for r in RESOURCES:
                into[r] += requested[r]
            acc["jobs"] += jobs
        out[queue.id]["own_jobs"] += jobs
    return out
