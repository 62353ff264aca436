"""How many jobs each queue has waiting, running and finished in the last 24 hours: the queue tree, the queue page
and GET /api/v1/queues/tree/ show the same numbers.

- pending: Submitted, Dispatched or Queued (the jobs of the queue's wait order, services/queues/line.py, plus any
  being cancelled);
- running: Scheduled or Running (placed by the scheduler);
- finished_24h: Succeeded, Failed or Cancelled in the last FINISHED_WINDOW (by the time the job reached that
  phase, as the overview counts them).

A parent's counts include every queue below it (only leaves take jobs). Every job counts, not only those the
reader may see, as the usage bars do: numbers, never names. One `COUNT … FILTER … GROUP BY queue_id` query over the
active jobs and the recently finished ones (read from the job_active_usage and job_phase_changed indexes, so the cost
follows the active jobs and the recent rate, not the whole history).
"""
from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Q, Sum
from django.utils import timezone

from ...choices import RUNNING_PHASES, TERMINAL_PHASES, GangPhase
from ...db import related
from ...kube.kai_units import RESOURCES
from ...models import Cluster, GangJob
from . import usage as queue_usage

FINISHED_WINDOW = timedelta(hours=24)
PENDING = (GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED)
RUNNING = (GangPhase.SCHEDULED, GangPhase.RUNNING)
KEYS = ("pending", "running", "finished_24h")


def zero() -> dict:
    """``{"pending": 0, "running": 0, "finished_24h": 0}``."""
    return dict.fromkeys(KEYS, 0)


def job_counts(cluster: str | None = None, now=None) -> dict[int, dict]:
    """{queue id: {"pending": n, "running": n, "finished_24h": n}} of each queue's own jobs, for the queues with
    any (in `cluster`, a cluster name, when given). One query."""
    since = (now or timezone.now()) - FINISHED_WINDOW
    finished = Q(phase__in=sorted(TERMINAL_PHASES), phase_changed_at__gte=since)
    rows = GangJob.objects.filter(Q(phase__in=[*PENDING, *RUNNING]) | finished)
    if cluster:
        rows = rows.filter(cluster_id=related.key_of(Cluster, name=cluster))  # no join: issue 14
    out = {}
    for queue_id, pending, running, done in rows.order_by().values("queue_id").annotate(
            pending=Count("id", filter=Q(phase__in=PENDING)), running=Count("id", filter=Q(phase__in=RUNNING)),
            finished_24h=Count("id", filter=finished)).values_list("queue_id", "pending", "running", "finished_24h"):
        out[queue_id] = {"pending": pending, "running": running, "finished_24h": done}
    return out


def usage_and_counts(cluster: str | None = None, queue_ids=None, now=None) -> tuple[dict[int, dict], dict[int, dict]]:
    """(`usage.estimated_usage(cluster, queue_ids)`, `job_counts(cluster)` of the queues `queue_ids`) from one
    `SUM … COUNT … FILTER … GROUP BY queue_id` query: both group the same active jobs by queue, and the tree pages
    need both (two scans of the active jobs were the API's whole-tree answer's largest cost at 1,000 queues,
    bench/README). `queue_ids` (None: every queue) narrows both. The usage's amounts are summed as integers (the
    requested-total columns) and converted to KAI units once per queue, as `estimated_usage` does."""
    since = (now or timezone.now()) - FINISHED_WINDOW
    active = Q(phase__in=queue_usage.ACTIVE)
    finished = Q(phase__in=sorted(TERMINAL_PHASES), phase_changed_at__gte=since)
    rows = GangJob.objects.filter(active | finished)
    if cluster:
        rows = rows.filter(cluster_id=related.key_of(Cluster, name=cluster))  # no join: issue 14
    if queue_ids is not None:
        rows = rows.filter(queue_id__in=sorted(queue_ids))
    running = Q(phase__in=RUNNING_PHASES)
    sums = {"jobs": Count("id", filter=active), "pending": Count("id", filter=Q(phase__in=PENDING)),
            "running": Count("id", filter=Q(phase__in=RUNNING)), "finished_24h": Count("id", filter=finished)}
    for r, column in queue_usage.COLUMNS.items():
        sums[f"req_{r}"] = Sum(column, filter=active)
        sums[f"alloc_{r}"] = Sum(column, filter=running)
    usage, counts = {}, {}
    kai = queue_usage._kai  # noqa: SLF001 - the one conversion of a requested-total sum, shared with fair_share.py
    for row in rows.order_by().values("queue_id").annotate(**sums):
        queue_id = row["queue_id"]
        counts[queue_id] = {"pending": row["pending"], "running": row["running"], "finished_24h": row["finished_24h"]}
        if row["jobs"]:
            usage[queue_id] = {"allocated": {r: kai(r, row[f"alloc_{r}"]) for r in RESOURCES},
                               "requested": {r: kai(r, row[f"req_{r}"]) for r in RESOURCES}, "jobs": row["jobs"]}
    return usage, counts


def rolled_up(tree, own: dict[int, dict]) -> dict[int, dict]:
    """Each queue's counts with its descendants' added (`tree`: a services.queues.policies.QueueTree; `own`:
    `job_counts`). Queues with no jobs below them are absent (use `zero()`). No query."""
    out: dict[int, dict] = {}
    for queue_id, counts in own.items():
        queue = tree.by_id.get(queue_id)
        if queue is None:
            continue
        for q in (queue, *tree.ancestors(queue)):
            acc = out.setdefault(q.id, zero())
            for k in KEYS:
                acc[k] += counts[k]
    return out


def attach(nodes: list[dict], counts: dict[int, dict]) -> None:
    """Set ``node["counts"]`` (`rolled_up` figures) on every node of a `services.queues.payloads.queue_tree` forest, in
    place."""
    for node in nodes:
        node["counts"] = dict(counts.get(node["id"]) or zero())
        attach(node["children"], counts)
