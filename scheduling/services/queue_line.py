"""A pending job's place in line: how many jobs its scheduler would consider before it (kueue #4046).

The order is KAI's job order (shared/reference/kai.md §5.3, api-changes-2026.md §5; KAI `plugins/priority`
`JobOrderFn`, then `framework/session_plugins.go`: creation time, then UID): **higher priority first, then the
job queued earliest, then the lower id**. The other backends gangweb drives use the same order for pending gangs:
Volcano's `priority` plugin then the PodGroup's creation time, and kube-scheduler's `PrioritySort` (pod priority,
then the time the pod entered the queue) for the Kubernetes Workload API and coscheduling. Lines are per cluster
(each cluster has its own scheduler) and:

- `queue`: among the pending jobs of the same queue;
- `parent`: among the pending jobs of every queue under the same parent (the queue and its siblings), merged in
  that order. KAI takes queues in turn by how far each is below its fair share (kai.md §1.5), so this is the order
  within the parent ignoring which queue is served first: a guide, not a promise. None for a top-level queue.

Simplifications, stated in the API's `order` field:

- a job's priority is its PriorityClass's value, which gangweb does not read from the cluster: KAI's built-in
  classes count with their documented values (`train` 50, `build-preemptible` 75, `build` 100, `inference` 125;
  kai.md §2.2) and any other class, or none, as KAI's default 50 (`DefaultPodGroupPriority`);
- "queued" is the job's submit time (`created_at`): its PodGroup is created when gangweb dispatches it, in submit
  order.

Pending means Submitted, Dispatched or Queued, and not being cancelled. One aggregate query for one job; one
window-function query for a queue's whole line.
"""
from __future__ import annotations

from django.db.models import Case, Count, F, IntegerField, Max, OuterRef, Q, Subquery, Value, When, Window
from django.db.models.functions import RowNumber

from ..choices import DesiredState, GangPhase
from ..models import Cluster, GangJob, QueuePolicy
from . import access

PENDING = (GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED)
# KAI's built-in PriorityClasses (docs/priority/README.md) and its default for a PodGroup without one.
KAI_PRIORITY_VALUES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
DEFAULT_PRIORITY = 50
ORDER = ("priority (KAI built-in PriorityClass values; other classes count as 50), then submit time, then id; "
         "per cluster")
LINE_SHOWN = 100


def priority_value(priority_class_name: str) -> int:
    """The priority a job's PriorityClass name counts with (see the module docstring)."""
    return KAI_PRIORITY_VALUES.get(priority_class_name or "", DEFAULT_PRIORITY)


def _priority_expr():
    return Case(*(When(priority_class_name=name, then=Value(v)) for name, v in KAI_PRIORITY_VALUES.items()),
                default=Value(DEFAULT_PRIORITY), output_field=IntegerField())


def _pending(cluster_id: int):
    return GangJob.objects.filter(cluster_id=cluster_id, phase__in=PENDING, desired_state=DesiredState.RUN)


def _text(n: int, total: int, where: str) -> str:
    return f"{n} of {total} in {where}"


def position(job: GangJob) -> dict | None:
    """Where a pending `job` stands: ``{"queue": 3, "queue_total": 7, "parent": 5 | None, "parent_total": 10 |
    None, "priority": 50, "text": "3 of 7 in team-a", "parent_text": "5 of 10 in research" | None, "order": ...}``
    (1 = next); None when the job is not pending. One query (two when `job.queue` is not loaded yet)."""
    if job.phase not in PENDING or job.desired_state != DesiredState.RUN:
        return None
    queue = job.queue
    mine = priority_value(job.priority_class_name)
    ahead = (Q(prio__gt=mine) | Q(prio=mine, created_at__lt=job.created_at)
             | Q(prio=mine, created_at=job.created_at, id__lt=job.id))
    same = Q(queue_id=job.queue_id)
    rows = _pending(job.cluster_id).annotate(prio=_priority_expr())
    if queue.parent_id is not None:
        rows = rows.filter(queue_id__in=QueuePolicy.objects.filter(parent_id=queue.parent_id).values("id"))
    else:
        rows = rows.filter(same)
    counts = rows.order_by().aggregate(q_ahead=Count("id", filter=same & ahead), q_total=Count("id", filter=same),
                                       p_ahead=Count("id", filter=ahead), p_total=Count("id"))
    out = {"queue": counts["q_ahead"] + 1, "queue_total": counts["q_total"], "parent": None, "parent_total": None,
           "priority": mine, "text": _text(counts["q_ahead"] + 1, counts["q_total"], queue.name),
           "parent_text": None, "order": ORDER}
    if queue.parent_id is not None:
        parent_name = queue.parent.name if "parent" in queue._state.fields_cache else \
            QueuePolicy.objects.filter(pk=queue.parent_id).values_list("name", flat=True).first()
        out.update(parent=counts["p_ahead"] + 1, parent_total=counts["p_total"],
                   parent_text=_text(counts["p_ahead"] + 1, counts["p_total"], parent_name or "its parent"))
    return out


def line(policy, cluster_ids=None, limit: int = LINE_SHOWN) -> list[dict]:
    """The pending jobs of queue `policy` in line order, per cluster (clusters by id, then position), at most
    `limit`: ``[{"id", "name", "namespace", "cluster_id", "cluster", "priority_class_name", "priority",
    "created_at", "phase", "queue": 1, "queue_total": 7, "parent": 4 | None, "parent_total": 10 | None}]``.
    One query whatever the number of jobs: the positions are window functions over the pending jobs of the
    queue and its siblings."""
    order = [F("prio").desc(), F("created_at").asc(), F("id").asc()]
    rows = GangJob.objects.filter(phase__in=PENDING, desired_state=DesiredState.RUN)
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=sorted(cluster_ids))
    if policy.parent_id is not None:
        rows = rows.filter(queue_id__in=QueuePolicy.objects.filter(parent_id=policy.parent_id).values("id"))
    else:
        rows = rows.filter(queue_id=policy.id)
    rows = rows.annotate(prio=_priority_expr()).annotate(
        queue_pos=Window(RowNumber(), partition_by=[F("cluster_id"), F("queue_id")], order_by=order),
        queue_total=Window(Count("id"), partition_by=[F("cluster_id"), F("queue_id")]),
        parent_pos=Window(RowNumber(), partition_by=[F("cluster_id")], order_by=order),
        parent_total=Window(Count("id"), partition_by=[F("cluster_id")]),
        # A plain `queue_id=` filter would go into WHERE and cut the siblings out before the parent positions are
        # counted; a filter on a window expression is applied after them (Django wraps the query, QUALIFY-like).
        own_queue=Window(Max("queue_id"), partition_by=[F("id")]),
        cluster_name=Subquery(Cluster.objects.filter(pk=OuterRef("cluster_id")).values("name")[:1]),
    ).filter(own_queue=policy.id).order_by("cluster_id", "queue_pos")
    top = policy.parent_id is None
    return [{"id": r["id"], "name": r["name"], "namespace": r["namespace"], "cluster_id": r["cluster_id"],
             "cluster": r["cluster_name"],
             "priority_class_name": r["priority_class_name"], "priority": r["prio"], "created_at": r["created_at"],
             "phase": r["phase"], "queue": r["queue_pos"], "queue_total": r["queue_total"],
             "parent": None if top else r["parent_pos"], "parent_total": None if top else r["parent_total"]}
            for r in rows.values("id", "name", "namespace", "cluster_id", "cluster_name", "priority_class_name",
                                 "prio", "created_at", "phase", "queue_pos", "queue_total", "parent_pos",
                                 "parent_total")[:limit]]


def line_payload(user, policy, cluster_ids=None) -> list[dict]:
    """`line()` for the API and the queue page: each row with `text` ("3 of 7 in team-a") and `parent_text`;
    a reader without a role on the queue's jobs (access.visible_jobs) sees the positions without the jobs'
    names and namespaces."""
    rows = line(policy, cluster_ids)
    see = access.is_platform_admin(user) or policy.id in access.queue_roles(user)
    parent = policy.parent.name if policy.parent_id else None
    for r in rows:
        r["text"] = _text(r["queue"], r["queue_total"], policy.name)
        r["parent_text"] = _text(r["parent"], r["parent_total"], parent) if parent else None
        if not see:
            r.update(id=None, name="(hidden)", namespace="")
    return rows
