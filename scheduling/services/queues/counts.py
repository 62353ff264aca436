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

from django.db.models import Count, Q
from django.utils import timezone

from ...choices import TERMINAL_PHASES, GangPhase
from ...db import related
from ...models import Cluster, GangJob

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
