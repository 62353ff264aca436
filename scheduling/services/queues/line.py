"""A pending job's place in line: how many jobs its scheduler would consider before it (kueue #4046).

The order is the order of the job's backend's scheduler (its template's `backend` family), in one line per cluster
and backend family (each family is its own scheduler):

- **KAI** (docs/upstream.md, KAI fair share and queue order; KAI `plugins/priority` `JobOrderFn`, then
  `framework/session_plugins.go`: creation time, then UID): higher priority first, then the job queued earliest,
  then the lower id. A job's priority is its PriorityClass's value, which gangweb does not read from the cluster:
  KAI's built-in classes count with their documented values (`train` 50, `build-preemptible` 75, `build` 100,
  `inference` 125) and any other class, or none, as KAI's default 50 (`DefaultPodGroupPriority`).
- **Volcano, the Kubernetes Workload API and coscheduling**: pod priority, then creation time (Volcano's
  `priority` plugin then the PodGroup's creation time; kube-scheduler's `PrioritySort`, pod priority then the
  time the pod entered the queue). KAI's built-in values mean nothing there, and gangweb does not read the
  clusters' PriorityClass values, so every job counts as priority 0 (a pod without a PriorityClass and no
  `globalDefault`): the line is submit order, then id, and `priority` is null in the answers. Jobs of these
  backends that name PriorityClasses of different values may be taken in another order: the line is a guide.

Positions:

- `queue`: among the pending jobs of the same queue; for a parent queue (which takes no jobs itself), among the
  pending jobs of every queue below it;
- `parent`: among the pending jobs of every queue under the same parent (the queue and its siblings), merged in
  that order. KAI takes queues in turn by how far each is below its fair share (docs/upstream.md), so this is the order
  within the parent ignoring which queue is served first: a guide, not a promise. None for a top-level queue and
  on a parent queue's line.

**Decayed usage** (services/queues/usage_order.py): on the clusters named in `GANGWEB_USAGE_ORDERED_CLUSTERS` (KAI
with time-based fair share, Kueue with admission fair sharing: gangweb cannot read whether a cluster's scheduler
does), the KAI and Kueue jobs of sibling queues are ordered first by their queue's decayed usage on that cluster,
least first (a parent's line: by the decayed usage of the child queue each job is under), then as above. Elsewhere
the order is the one above and ignores past use. Two more queries when such a cluster is in the line.

"Queued" is the job's submit time (`created_at`): its gang object is created when gangweb dispatches it, in
submit order. Pending means Submitted, Dispatched or Queued, and not being cancelled. One aggregate query for one
job; one window-function query for a queue's whole line (plus the queue tree for a parent's, unless given).
"""
from __future__ import annotations

import logging

from django.db.models import Case, CharField, Count, F, IntegerField, Max, OuterRef, Q, Subquery, Value, When, Window
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce, RowNumber

from ...choices import DesiredState, GangPhase
from ...models import Cluster, GangJob, QueuePolicy
from ...unavailable import DEPENDENCY_ERRORS
from ..access import roles as access
from . import decayed_usage as du
from . import usage_order

logger = logging.getLogger(__name__)

PENDING = (GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED)
KAI = "kai"  # the backend family whose scheduler orders by KAI's priority values
# KAI's built-in PriorityClasses (KAI `docs/priority/README.md`) and its default for a PodGroup without one.
KAI_PRIORITY_VALUES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
DEFAULT_PRIORITY = 50
OTHER_PRIORITY = 0  # what a job of another backend counts with: gangweb reads no PriorityClass values
ORDER = ("per cluster and scheduler: KAI jobs by priority (KAI built-in PriorityClass values; other classes count "
         "as 50), then submit time, then id; Volcano, Kubernetes Workload and coscheduling jobs by submit time, "
         "then id (their schedulers take pod priority first, whose values gangweb does not read); on the clusters "
         "named in GANGWEB_USAGE_ORDERED_CLUSTERS, KAI and Kueue jobs of sibling queues go by their queue's decayed "
         "usage first, least used first (time-based fair share, admission fair sharing); elsewhere gangweb does "
         "not know whether the scheduler weighs past use, and the line ignores it")
LINE_SHOWN = 100
HIDDEN = "(hidden)"


def family_of(job: GangJob) -> str:
    """The backend family of `job` (its resolved spec's `backend`), "" when unreadable."""
    spec = job.resolved_spec if isinstance(job.resolved_spec, dict) else {}
    return str(spec.get("backend") or "")


def priority_value(priority_class_name: str, family: str = KAI) -> int | None:
    """The priority a job counts with in its line (see the module docstring); None for a family whose scheduler's
    values gangweb does not know (it then counts as OTHER_PRIORITY)."""
    if family != KAI:
        return None
    return KAI_PRIORITY_VALUES.get(priority_class_name or "", DEFAULT_PRIORITY)


def rank_of(job: GangJob) -> int:
    """The priority `job` is ordered by in its line: `priority_value` for its family, OTHER_PRIORITY when that is
    None (a family whose PriorityClass values gangweb does not read). The same number `priority_expr` gives in SQL."""
    value = priority_value(job.priority_class_name, family_of(job))
    return OTHER_PRIORITY if value is None else value


def family_expr():
    """SQL for a job's backend family (`family_of`): its resolved spec's `backend`, "" when missing."""
    return Coalesce(KeyTextTransform("backend", "resolved_spec"), Value(""), output_field=CharField())


def priority_expr():
    """SQL for the priority a job is ordered by (`rank_of`); needs a `family` annotation (`family_expr`)."""
    return Case(*(When(family=KAI, priority_class_name=name, then=Value(v)) for name, v in KAI_PRIORITY_VALUES.items()),
                When(family=KAI, then=Value(DEFAULT_PRIORITY)), default=Value(OTHER_PRIORITY),
                output_field=IntegerField())


def _ordered_cluster_ids(cluster_ids=None) -> list[int]:
    """Ids of the clusters named in GANGWEB_USAGE_ORDERED_CLUSTERS (among `cluster_ids` when given): one query,
    none when the setting is empty."""
    names = usage_order.ordered_clusters()
    if not names:
        return []
    rows = Cluster.objects.filter(name__in=sorted(names))
    if cluster_ids is not None:
        rows = rows.filter(pk__in=sorted(cluster_ids))
    return list(rows.values_list("pk", flat=True))


def usage_ranks(groups: dict[int, list[int]], cluster_ids=None) -> dict[tuple[int, int], int]:
    """{(cluster id, queue id): usage rank} (0 = its group used the least; module docstring) on the clusters that
    order by decayed usage (among `cluster_ids` when given): `groups` maps each sibling queue id to the queue ids
    whose jobs stand for it (its subtree). {} with fewer than two groups or no such cluster. At most three queries
    (the clusters, then `decayed_usage.held`), none when the setting is empty."""
    if len(groups) < 2:
        return {}
    return usage_order.line_ranks(groups, _ordered_cluster_ids(cluster_ids))


def rank_expr(ranks: dict[tuple[int, int], int]):
    """SQL for a pending job's usage rank from `usage_ranks`: 0 for jobs of other clusters and families. Needs a
    `family` annotation."""
    by_rank: dict[tuple[int, int], list[int]] = {}
    for (cid, qid), rank in ranks.items():
        if rank:
            by_rank.setdefault((cid, rank), []).append(qid)
    if not by_rank:
        return Value(0, output_field=IntegerField())
    return Case(*(When(cluster_id=cid, queue_id__in=sorted(qids), family__in=usage_order.FAMILIES, then=Value(rank))
                  for (cid, rank), qids in sorted(by_rank.items())), default=Value(0), output_field=IntegerField())


def _groups(parent_id, tree) -> dict[int, list[int]]:
    """{child id: its subtree's ids} for the children of queue `parent_id` (`tree`: a QueueTree)."""
    kids = tree.children.get(parent_id, [])
    return du.subtrees([k.id for k in kids], tree)


def pending(cluster_id: int):
    """The pending jobs of cluster `cluster_id` (Submitted, Dispatched or Queued, not being cancelled), unordered."""
    return GangJob.objects.filter(cluster_id=cluster_id, phase__in=PENDING, desired_state=DesiredState.RUN)


def _text(n: int, total: int, where: str) -> str:
    return f"{n} of {total} in {where}"


def position(job: GangJob) -> dict | None:
    """Where a pending `job` stands: ``{"queue": 3, "queue_total": 7, "parent": 5 | None, "parent_total": 10 |
    None, "priority": 50 | None, "text": "3 of 7 in team-a", "parent_text": "5 of 10 in research" | None,
    "order": ...}`` (1 = next), among the pending jobs of its cluster and backend family; None when the job is not
    pending. One query (two when `job.queue` is not loaded yet). Never raises: when it cannot be computed it reads
    ``{"status": "unknown", "reason", "text": "unknown: ...", ...}`` with the numbers None, and the rest of the
    job's answer stands (issue 30: no read path answers 500)."""
    if job.phase not in PENDING or job.desired_state != DesiredState.RUN:
        return None
    try:
        return _position(job)
    except DEPENDENCY_ERRORS:
        raise  # a dependency down is the whole answer's 503 (scheduling/unavailable.py)
    except Exception as exc:  # noqa: BLE001 - a field that cannot be computed reads unknown, never a 500
        logger.exception("place in line of job %s could not be computed", job.pk)
        reason = f"the place in line could not be computed ({type(exc).__name__} in gangweb; the error is logged)"
        return {"status": "unknown", "reason": reason, "queue": None, "queue_total": None, "parent": None,
                "parent_total": None, "priority": None, "text": f"unknown: {reason}", "parent_text": None,
                "order": ORDER}


def _position(job: GangJob) -> dict:
    """`position` of a pending job (its docstring), raising what it meets."""
    queue = job.queue
    family = family_of(job)
    mine = priority_value(job.priority_class_name, family)
    rank = rank_of(job)
    ahead = (Q(prio__gt=rank) | Q(prio=rank, created_at__lt=job.created_at)
             | Q(prio=rank, created_at=job.created_at, id__lt=job.id))
    same = Q(queue_id=job.queue_id)
    rows = pending(job.cluster_id).annotate(family=family_expr()).filter(family=family).annotate(
        prio=priority_expr())
    if queue.parent_id is not None and family in usage_order.FAMILIES and usage_order.ordered_clusters():
        # Sibling queues by decayed usage first, where the cluster's scheduler does it (module docstring).
        from .policies import QueueTree

        ranks = usage_ranks(_groups(queue.parent_id, QueueTree.load_rows()), [job.cluster_id])
        if ranks:
            urank = ranks.get((job.cluster_id, job.queue_id), 0)
            rows = rows.annotate(urank=rank_expr(ranks))
            ahead = Q(urank__lt=urank) | (Q(urank=urank) & ahead)
    if queue.parent_id is not None:
        rows = rows.filter(queue_id__in=QueuePolicy.objects.filter(parent_id=queue.parent_id).values("id"))
    else:
        rows = rows.filter(same)
    counts = rows.order_by().aggregate(q_ahead=Count("id", filter=same & ahead), q_total=Count("id", filter=same),
                                       p_ahead=Count("id", filter=ahead), p_total=Count("id"))
    out = {"status": "known", "reason": "", "queue": counts["q_ahead"] + 1, "queue_total": counts["q_total"],
           "parent": None, "parent_total": None,
           "priority": mine, "text": _text(counts["q_ahead"] + 1, counts["q_total"], queue.name),
           "parent_text": None, "order": ORDER}
    if queue.parent_id is not None:
        parent_name = queue.parent.name if "parent" in queue._state.fields_cache else \
            QueuePolicy.objects.filter(pk=queue.parent_id).values_list("name", flat=True).first()
        out.update(parent=counts["p_ahead"] + 1, parent_total=counts["p_total"],
                   parent_text=_text(counts["p_ahead"] + 1, counts["p_total"], parent_name or "its parent"))
    return out


def _subtree_ids(policy, tree) -> list[int]:
    """Ids of the queues below `policy` (a parent's line is theirs); [] for a leaf. `tree`: a QueueTree or None
    (then loaded: one query)."""
    if tree is None:
        from .policies import QueueTree

        tree = QueueTree.load_rows()
    node = tree.by_id.get(policy.id)
    return [q.id for q in tree.descendants(node)] if node is not None else []


def line(policy, cluster_ids=None, limit: int = LINE_SHOWN, tree=None) -> list[dict]:
    """The pending jobs of queue `policy` in line order, per cluster and backend family (clusters by id, then
    family, then position), at most `limit`::

        [{"id", "name", "namespace", "queue_id", "queue_name", "cluster_id", "cluster", "backend",
          "priority_class_name", "priority": 50 | None, "created_at", "phase", "queue": 1, "queue_total": 7,
          "parent": 4 | None, "parent_total": 10 | None}]

    For a parent queue, the jobs of every queue below it, with `queue` their place among them and `queue_name` the
    leaf each is in. One query whatever the number of jobs (two for a parent without `tree`, a
    services.queues.policies.QueueTree): the positions are window functions over the pending jobs."""
    order = [F("urank").asc(), F("prio").desc(), F("created_at").asc(), F("id").asc()]
    lane = [F("cluster_id"), F("family")]
    rows = GangJob.objects.filter(phase__in=PENDING, desired_state=DesiredState.RUN)
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=sorted(cluster_ids))
    below = _subtree_ids(policy, tree)
    rows = rows.annotate(family=family_expr(), prio=priority_expr())
    # Sibling queues by decayed usage first where the cluster's scheduler does it: a parent's children, or a
    # leaf's siblings (module docstring). The tree is needed only then.
    scope = policy.id if below else policy.parent_id
    groups = {}
    if scope is not None and usage_order.ordered_clusters():
        if tree is None:
            from .policies import QueueTree

            tree = QueueTree.load_rows()
        groups = _groups(scope, tree)
    rows = rows.annotate(urank=rank_expr(usage_ranks(groups, cluster_ids)))
    if below:  # a parent: its subtree's line; no place across its own parent
        rows = rows.filter(queue_id__in=below).annotate(
            queue_pos=Window(RowNumber(), partition_by=lane, order_by=order),
            queue_total=Window(Count("id"), partition_by=lane),
            parent_pos=Value(None, output_field=IntegerField()), parent_total=Value(None, output_field=IntegerField()),
            queue_name=Subquery(QueuePolicy.objects.filter(pk=OuterRef("queue_id")).values("name")[:1]))
    else:
        if policy.parent_id is not None:
            rows = rows.filter(queue_id__in=QueuePolicy.objects.filter(parent_id=policy.parent_id).values("id"))
        else:
            rows = rows.filter(queue_id=policy.id)
        rows = rows.annotate(
            queue_pos=Window(RowNumber(), partition_by=[*lane, F("queue_id")], order_by=order),
            queue_total=Window(Count("id"), partition_by=[*lane, F("queue_id")]),
            parent_pos=Window(RowNumber(), partition_by=lane, order_by=order),
            parent_total=Window(Count("id"), partition_by=lane),
            # A plain `queue_id=` filter would go into WHERE and cut the siblings out before the parent positions
            # are counted; a filter on a window expression is applied after them (Django wraps the query,
            # QUALIFY-like).
            own_queue=Window(Max("queue_id"), partition_by=[F("id")]),
            queue_name=Value(policy.name, output_field=CharField()),
        ).filter(own_queue=policy.id)
    rows = rows.annotate(cluster_name=Subquery(Cluster.objects.filter(pk=OuterRef("cluster_id")).values("name")[:1])
                         ).order_by("cluster_id", "family", "queue_pos")
    top = policy.parent_id is None or bool(below)
    return [{"id": r["id"], "name": r["name"], "namespace": r["namespace"], "queue_id": r["queue_id"],
             "queue_name": r["queue_name"],
             "cluster_id": r["cluster_id"], "cluster": r["cluster_name"], "backend": r["family"],
             "priority_class_name": r["priority_class_name"],
             "priority": r["prio"] if r["family"] == KAI else None, "created_at": r["created_at"],
             "phase": r["phase"], "queue": r["queue_pos"], "queue_total": r["queue_total"],
             "parent": None if top else r["parent_pos"], "parent_total": None if top else r["parent_total"]}
            for r in rows.values("id", "name", "namespace", "queue_id", "queue_name", "cluster_id", "cluster_name",
                                 "family", "priority_class_name", "prio", "created_at", "phase", "queue_pos",
                                 "queue_total", "parent_pos", "parent_total")[:limit]]


def line_payload(user, policy, cluster_ids=None, tree=None) -> list[dict]:
    """`line()` for the API and the queue page: each row with `text` ("3 of 7 in team-a") and `parent_text`;
    a reader without a role on a job's queue (access.visible_jobs) sees the positions without the job's name,
    namespace, queue and cluster (HIDDEN)."""
    rows = line(policy, cluster_ids, tree=tree)
    admin = access.is_platform_admin(user)
    roles = set() if admin else set(access.queue_roles(user))
    parent = policy.parent.name if policy.parent_id else None
    for r in rows:
        r["text"] = _text(r["queue"], r["queue_total"], policy.name)
        r["parent_text"] = _text(r["parent"], r["parent_total"], parent) if parent and r["parent"] else None
        if not admin and r["queue_id"] not in roles:  # roles are inherited down the tree (access.queue_roles)
            # Nor which queue or cluster it is in: a parent's line spans queues (and their clusters) the reader
            # may not know exist, as the queue and cluster APIs answer 404 for them.
            r.update(id=None, name=HIDDEN, namespace="", queue_id=None, queue_name=HIDDEN, cluster_id=None,
                     cluster=HIDDEN)
    return rows

