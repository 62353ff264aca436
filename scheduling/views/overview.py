"""The overview page: the clusters side by side (capacity, in use, waiting, schedulers, version, how current),
GPU quota against use per queue, jobs by phase, recent failures and stuck jobs."""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.db.models.fields.json import KT
from django.utils import timezone

from ..choices import ACTIVE_PHASES, TERMINAL_PHASES, GangPhase, QueueFamily
from ..db import related
from ..models import GangJob, QueueClusterState
from ..services.access import roles as access
from ..services.clusters import summary as cluster_summary
from ..services.queues import payloads as queue_payloads
from ..services.queues import policies as queue_service
from ..services.queues import usage as queue_usage
from .common import page_or_fragment
from .queues import decorate
from .why_pending import explain

RECENT_FAILURES = 8
STUCK_SHOWN = 10
# Waiting phases listed as stuck past GANGWEB_STUCK_AFTER_SECONDS: Queued, and Dispatched (objects created, no
# scheduler acted on them: e.g. none runs for its backend on the cluster, observe/presence.py).
STUCK_PHASES = (GangPhase.QUEUED, GangPhase.DISPATCHED)
BUSIEST_SHOWN = 8
FINISHED_WINDOW, FINISHED_WINDOW_WORDS = timedelta(hours=24), "24 hours"
# What the stuck and failed lists show (templates/scheduling/partials/overview_body.html).
LISTED_FIELDS = ("id", "name", "namespace", "phase", "phase_reason", "phase_message", "phase_changed_at",
                 "why_pending", "queue")
LISTED_RELATED = {"queue": ["name"]}


def busiest(tree, rolled: dict[int, dict], reported: dict[int, float], visible: set[int] | None,
            limit: int = BUSIEST_SHOWN) -> list[int]:
    """Ids of the `limit` busiest queues below the top level: over their GPU quota first, then by GPU allocated
    against quota, then by GPUs allocated. Allocated is what the scheduler reported (`reported`: {queue id:
    GPUs summed over clusters}) where it did, else gangweb's estimate (`rolled`: `queue_usage.rolled_up()`).
    Queues with nothing allocated or requested are left out. Pure: no queries."""
    scored = []
    for p in tree.by_id.values():
        if p.parent_id is None or (visible is not None and p.id not in visible):
            continue
        est = rolled.get(p.id)
        allocated = reported.get(p.id, est["allocated"]["gpu"] if est else 0.0)
        requested = est["requested"]["gpu"] if est else 0.0
        if not allocated and not requested:
            continue
        quota = p.gpu_quota if p.gpu_quota and p.gpu_quota > 0 else 0
        ratio = allocated / quota if quota else (float("inf") if allocated else 0.0)
        over = bool(quota) and allocated > quota + 1e-9  # no quota set: nothing is guaranteed, nothing is "over"
        scored.append(((over, ratio, allocated, requested), p.name, p.id))
    scored.sort(key=lambda x: (tuple(-v for v in x[0]), x[1]))
    return [pid for _, _, pid in scored[:limit]]


def reported_gpus() -> dict[int, float]:
    """{queue id: GPUs allocated as the scheduler reported it, summed over the clusters that did} (one query)."""
    out: dict[int, float] = {}
    kai = QueueClusterState.objects.filter(family=QueueFamily.KAI)
    for pid, status in kai.exclude(status={}).values_list("policy_id", "status"):
        allocated = (status or {}).get("allocated")
        if allocated:
            out[pid] = out.get(pid, 0.0) + float(allocated.get("gpu", 0) or 0)
    return out


CLUSTER_RESOURCES = (("gpu", "GPUs"), ("cpu", "CPU cores"), ("memory", "Memory, GiB"))  # the answer's units


def figure_rows(summary: dict) -> list[dict]:
    """A cluster card's table, one row per resource: {"resource", "label", "capacity", "in_use", "reported", "free",
    "waiting"}, amounts as the summary gives them (answer units; None when unknown). Pure."""
    cap, reported = summary["capacity"]["allocatable"] or {}, summary["in_use"]["reported"]["amounts"] or {}
    free = summary["free"] or {}
    return [{"resource": r, "label": label, "capacity": cap.get(r), "in_use": summary["in_use"]["gangweb"][r],
             "reported": reported.get(r), "free": free.get(r), "waiting": summary["waiting"]["requested"][r]}
            for r, label in CLUSTER_RESOURCES]


def overview_context(user) -> dict:
    """Everything the overview draws, in a fixed number of queries whatever the number of jobs, queues or
    clusters (pinned by tests/dashboard/test_query_budgets.py). Queues: the top level and the BUSIEST_SHOWN
    busiest below it, each with its GPU bar; the queue tree page has every queue."""
    now = timezone.now()
    jobs = access.visible_jobs(user, GangJob.objects.all())
    # Active jobs are counted whatever their age; finished ones over FINISHED_WINDOW only, so the cost follows the
    # active jobs and the recent rate, not the whole history (bench/: COUNT by phase over 100,000 jobs was the
    # largest part of this page). Both are read from indexes alone (job_active_usage, job_phase_changed).
    finished_since = now - FINISHED_WINDOW
    counts = dict(jobs.filter(phase__in=sorted(ACTIVE_PHASES)).values_list("phase").annotate(n=Count("*"))
                  .order_by())
    counts.update(jobs.filter(phase__in=sorted(TERMINAL_PHASES), phase_changed_at__gte=finished_since)
                  .values_list("phase").annotate(n=Count("*")).order_by())
    most = max(counts.values(), default=0) or 1
    phases = [{"phase": p.value, "n": counts.get(p.value, 0), "pct": counts.get(p.value, 0) / most * 100,
               "finished": p in TERMINAL_PHASES} for p in GangPhase]

    # A summary, not the forest: the top-level queues and the busiest ones below them (the tree page has the rest).
    visible = access.queue_tree_filter(user)
    tree = queue_service.QueueTree.load_rows()
    rolled = queue_usage.rolled_up(tree, queue_usage.estimated_usage())
    tops = [p.id for p in tree.roots() if visible is None or p.id in visible]
    hot = busiest(tree, rolled, reported_gpus(), visible)
    nodes = queue_payloads.queue_tree(ids=tops + hot, depth=0, visible=visible, tree=tree, rolled=rolled)
    decorate(nodes)
    rows = [{"name": n["name"], "path": n["path"], "estimated": n["estimated"], "bar": n["bars"][0],
             "children_count": n["children_count"]} for n in nodes]

    # Stuck and failed jobs: a range of job_phase_changed each, the queue's name by a lookup per row shown
    # (db/related.py: no join for the planner to get wrong with stale statistics, issue 14).
    stuck_before = now - timedelta(seconds=settings.GANGWEB_STUCK_AFTER_SECONDS)
    listed = related.annotate(jobs.only(*LISTED_FIELDS), LISTED_RELATED)
    # Dispatched counts too: a job whose scheduler never acts (none seen on its cluster) stays Dispatched for ever.
    stuck = related.attach(listed.filter(phase__in=STUCK_PHASES, phase_changed_at__lt=stuck_before)
                           .order_by("phase_changed_at", "id")[:STUCK_SHOWN], LISTED_RELATED)
    for job in stuck:
        job.why = explain(job.why_pending, job.phase)
    # The first failure's one line (observe/failure.py) read by key in the same query: the rest of `observed`
    # (objects, pods) is never loaded for a list.
    failures = related.attach(listed.filter(phase=GangPhase.FAILED).annotate(failure_summary=KT(
        "observed__failure__summary")).order_by("-phase_changed_at", "-id")[:RECENT_FAILURES], LISTED_RELATED)
    # The clusters side by side: the answer of GET /api/v1/clusters/summary/ (services/clusters/summary.py), a fixed
    # number of queries for every cluster; no cluster is read.
    clusters = cluster_summary.summaries(user, now)["clusters"]
    for c in clusters:
        c["rows"] = figure_rows(c)
    return {
        "section": "overview",
        "clusters": clusters,
        "phases": phases,
        "active_jobs": sum(n for p, n in counts.items() if p in ACTIVE_PHASES),
        "finished_jobs": sum(n for p, n in counts.items() if p in TERMINAL_PHASES),
        "finished_window": FINISHED_WINDOW_WORDS,
        "top_queues": rows[:len(tops)],
        "busiest_queues": rows[len(tops):],
        "total_queues": len(tree.by_id) if visible is None else len(visible),
        "stuck": stuck,
        "stuck_after": settings.GANGWEB_STUCK_AFTER_SECONDS,
        "failures": failures,
        "now": now,
    }


@login_required
def overview(request):
    """GET /: the overview page; htmx polls the same URL for its body every few seconds."""
    return page_or_fragment(request, "scheduling/overview.html", "scheduling/partials/overview_body.html",
                            overview_context(request.user))
