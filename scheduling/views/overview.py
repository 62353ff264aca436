"""The overview page: cluster health and versions, GPU quota against use per queue, jobs by phase, recent
failures and stuck jobs. Query count is fixed (pinned by tests/ui_views/test_query_budgets.py)."""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.utils import timezone

from ..choices import GangPhase
from ..models import Cluster, GangJob, QueuePolicy
from ..services import access
from .common import page_or_fragment
from .display import gpus_of_spec, quota_bar
from .why_pending import explain

RECENT_FAILURES = 8
STUCK_SHOWN = 10
RUNNING_PHASES = (GangPhase.SCHEDULED, GangPhase.RUNNING)
WAITING_PHASES = (GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED)


def queue_gpu_usage(jobs) -> dict[int, dict[str, float]]:
    """GPUs per queue id from gangweb's own jobs: {"allocated": Scheduled+Running, "requested": all active}.

    `jobs`: (queue_id, phase, resolved_spec) tuples of active jobs. This is gangweb's view; KAI's own
    `status.allocated` per cluster replaces it once queue status sync reports it.
    """
    usage: dict[int, dict[str, float]] = {}
    for queue_id, phase, spec in jobs:
        gpus = gpus_of_spec(spec)
        row = usage.setdefault(queue_id, {"allocated": 0.0, "requested": 0.0})
        row["requested"] += gpus
        if phase in RUNNING_PHASES:
            row["allocated"] += gpus
    return usage


def overview_context(user) -> dict:
    """Everything the overview draws, in 6 queries whatever the number of jobs, queues or clusters."""
    now = timezone.now()
    jobs = access.visible_jobs(user, GangJob.objects.all())
    counts = dict(jobs.values_list("phase").annotate(n=Count("id")).order_by())
    most = max(counts.values(), default=0) or 1
    phases = [{"phase": p.value, "n": counts.get(p.value, 0), "pct": counts.get(p.value, 0) / most * 100}
              for p in GangPhase]

    active = jobs.filter(phase__in=[*RUNNING_PHASES, *WAITING_PHASES]).values_list("queue_id", "phase",
                                                                                     "resolved_spec")
    usage = queue_gpu_usage(active)
    queues = []
    for q in QueuePolicy.objects.all():
        use = usage.get(q.id, {})
        allocated = use.get("allocated", 0.0)
        queues.append({"queue": q, "bar": quota_bar("gpu", "GPU", q.gpu_quota, q.gpu_limit, allocated,
                                                     use.get("requested", 0.0))})

    stuck_before = now - timedelta(seconds=settings.GANGWEB_STUCK_AFTER_SECONDS)
    related = ("queue", "cluster", "template_version__template")
    stuck = list(jobs.filter(phase=GangPhase.QUEUED, phase_changed_at__lt=stuck_before)
                 .select_related(*related).order_by("phase_changed_at")[:STUCK_SHOWN])
    for job in stuck:
        job.why = explain(job.why_pending, job.phase)
    failures = list(jobs.filter(phase=GangPhase.FAILED).select_related(*related)
                    .order_by("-phase_changed_at", "-id")[:RECENT_FAILURES])
    return {
        "section": "overview",
        "clusters": list(Cluster.objects.all()),
        "phases": phases,
        "total_jobs": sum(counts.values()),
        "queues": queues,
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
