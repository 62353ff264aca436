"""What the job lists (GET /api/v1/jobs/ and the dashboard's /jobs/) show beyond the job's own columns, the same
for both: grouping by queue, cluster or phase, and the short waiting reason of a pending job.

- Grouping (`?group=queue|cluster|phase`, validated by `filtersets.GangJobFilterSet`): the rows come ordered by the
  group first (queue and cluster names alphabetically, phases in lifecycle order), then by the list's own sort, so a
  page shows each group's rows together; `group_counts` gives how many jobs each group has, in one `GROUP BY`
  query on the job's own column (`queue_id`, `cluster_id`, `phase`; indexed) plus one lookup of the names.
- The GPUs a job asks for are the `GangJob.requested_gpu` column: gangweb's one request arithmetic
  (`models.jobs.requested_totals`, kube-scheduler's `PodRequests` over the whole gang), filled at submit.
- The waiting reason: the job's why-pending summary (written by the observer, observe/why_pending.py), else its
  scheduler's reason code, else its phase reason, cut to WAITING_REASON_CHARS; "" unless the job is pending.
"""
from __future__ import annotations

from django.db.models import Case, Count, IntegerField, QuerySet, Value, When
from django.db.models.fields.json import KeyTextTransform

from ...choices import DesiredState, GangPhase
from ...db import related
from ...models import Cluster, QueuePolicy

GROUPS = {"queue": "Queue", "cluster": "Cluster", "phase": "Phase"}
GROUP_CHOICES = list(GROUPS.items())
# The column each group counts by, and the model its ids name.
_GROUP_COLUMN = {"queue": ("queue_id", QueuePolicy), "cluster": ("cluster_id", Cluster), "phase": ("phase", None)}
PHASE_ORDER = {p.value: i for i, p in enumerate(GangPhase)}
PENDING = (GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED)
WAITING_REASON_CHARS = 120


def _phase_rank():
    return Case(*(When(phase=p, then=Value(i)) for p, i in PHASE_ORDER.items()), default=Value(len(PHASE_ORDER)),
                output_field=IntegerField())


def ordered(qs: QuerySet, group: str, then: tuple | list) -> QuerySet:
    """`qs` ordered by `group` ("queue", "cluster" or "phase"; "" or None = not grouped), then by `then` (the list's
    own ORDER BY). Queue and cluster names come from the list's relation lookups (`related.JOB_LIST_RELATED`, which
    `qs` must be annotated with)."""
    if not group:
        return qs.order_by(*then)
    if group == "phase":
        return qs.annotate(group_rank=_phase_rank()).order_by("group_rank", *then)
    return qs.order_by(related.alias(group, "name"), *then)


def group_key(job, group: str) -> str:
    """The group a job of the list is in: its queue's or cluster's name (loaded by `related.attach`), or its phase."""
    if group == "phase":
        return job.phase
    return getattr(getattr(job, group), "name", "")


def group_counts(qs: QuerySet, group: str) -> list[dict]:
    """``[{"key": "team-a", "count": 12}, ...]``: how many jobs of `qs` are in each group, in the list's group order.
    Two queries for queue and cluster (the counts by id, then the names of those ids), one for phase."""
    column, model = _GROUP_COLUMN[group]
    counts = dict(qs.order_by().values_list(column).annotate(n=Count("*")).values_list(column, "n"))
    if model is None:
        return [{"key": k, "count": counts[k]} for k in sorted(counts, key=lambda p: PHASE_ORDER.get(p, 99))]
    names = dict(model.objects.filter(pk__in=list(counts)).values_list("pk", "name"))
    return sorted(({"key": names.get(k, ""), "count": n} for k, n in counts.items()), key=lambda g: g["key"])


def with_waiting_fields(qs: QuerySet) -> QuerySet:
    """`qs` with the two why-pending keys `waiting_reason` reads, taken out of the JSON in the database
    (`why_summary`, `why_reason`): a list does not fetch nor decode whole why-pending objects."""
    return qs.annotate(why_summary=KeyTextTransform("summary", "why_pending"),
                       why_reason=KeyTextTransform("reason", "why_pending"))


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= WAITING_REASON_CHARS else text[:WAITING_REASON_CHARS - 1].rstrip() + "…"


def waiting_reason(job) -> str:
    """Why a pending job waits, in one short line (at most WAITING_REASON_CHARS characters): its why-pending
    summary, else the scheduler's reason code, else its phase reason, else "waiting to be dispatched" /
    "waiting for the scheduler". "" for a job that is not pending or is being cancelled.

    Reads `job.why_summary` / `job.why_reason` when the list annotated them (`with_waiting_fields`), else
    `job.why_pending` (the API list loads it)."""
    if job.phase not in PENDING or job.desired_state != DesiredState.RUN:
        return ""
    if hasattr(job, "why_summary"):
        summary, reason = job.why_summary, job.why_reason
    else:
        why = job.why_pending if isinstance(job.why_pending, dict) else {}
        summary, reason = why.get("summary"), why.get("reason")
    for text in (summary, reason, job.phase_reason):
        if isinstance(text, str) and text.strip():
            return _short(text)
    return "waiting to be dispatched" if job.phase == GangPhase.SUBMITTED else "waiting for the scheduler"
