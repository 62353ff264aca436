"""The overview page: cluster health and versions, GPU quota against use per queue, jobs by phase, recent
failures and stuck jobs."""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.utils import timezone

from ..choices import GangPhase
from ..models import Cluster, GangJob
from ..services import access
from ..services import queues as queue_service
from .common import page_or_fragment
from .queues import decorate, job_usage
from .why_pending import explain

RECENT_FAILURES = 8
STUCK_SHOWN = 10


def _flatten(nodes):
    for node in nodes:
        yield node
        yield from _flatten(node["children"])


def overview_context(user) -> dict:
    """Everything the overview draws, in a fixed number of queries whatever the number of jobs, queues or
    clusters (pinned by tests/dashboard/test_query_budgets.py)."""
    now = timezone.now()
    jobs = access.visible_jobs(user, GangJob.objects.all())
    counts = dict(jobs.values_list("phase").annotate(n=Count("id")).order_by())
    most = max(counts.values(), default=0) or 1
    phases = [{"phase": p.value, "n": counts.get(p.value, 0), "pct": counts.get(p.value, 0) / most * 100}
              for p in GangPhase]

    roots = access.prune_queue_tree(user, queue_service.queue_tree())
    decorate(roots, job_usage())
    queues = [{"name": node["name"], "depth": node["depth"], "estimated": node["estimated"], "bar": node["bars"][0]}
              for node in _flatten(roots)]

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
        "clusters": list(access.visible_clusters(user, Cluster.objects.all())),
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
