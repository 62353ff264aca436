"""The queue tree: per queue and resource, quota, limit, allocated and requested as bars, with the warnings and
per-cluster sync state (drift) from `services.queues.queue_tree`, the same data as GET /api/v1/queues/tree/."""
from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from ..choices import GangPhase
from ..forms.queues import QueueForm
from ..kube.kai_units import RESOURCES
from ..models import Cluster, GangJob, QueuePolicy, QueueUsageSample
from ..services import access
from ..services import queues as queue_service
from .common import allowed, page_or_fragment
from .display import quota_bar, requests_of_spec, step_chart

UNIT_LABELS = {"gpu": "GPU", "cpu": "millicores", "memory": "MB"}
RUNNING_PHASES = (GangPhase.SCHEDULED, GangPhase.RUNNING)
ACTIVE = (GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED, *RUNNING_PHASES)


def job_usage(cluster: str | None = None) -> dict[int, dict]:
    """gangweb's own estimate per queue id from its active jobs (one query): {"allocated": {res: amount},
    "requested": {...}, "jobs": n}. Used where no cluster has reported the Queue's status yet."""
    rows = GangJob.objects.filter(phase__in=ACTIVE)
    if cluster:
        rows = rows.filter(cluster__name=cluster)
    usage: dict[int, dict] = {}
    # Grouped by spec in the database: jobs submitted together share their resolved spec, so each distinct spec is
    # parsed once instead of every active job's (bench/: the overview took seconds at 100,000 jobs).
    groups = rows.order_by().values_list("queue_id", "phase", "resolved_spec").annotate(n=Count("id"))
    for queue_id, phase, spec, n in groups:
        asks = requests_of_spec(spec)
        entry = usage.setdefault(queue_id, {"allocated": dict.fromkeys(RESOURCES, 0.0),
                                            "requested": dict.fromkeys(RESOURCES, 0.0), "jobs": 0})
        entry["jobs"] += n
        for r in RESOURCES:
            entry["requested"][r] += asks[r] * n
            if phase in RUNNING_PHASES:
                entry["allocated"][r] += asks[r] * n
    return usage


def decorate(nodes: list[dict], usage: dict[int, dict]) -> dict:
    """Add `bars` (QuotaBars per resource), `estimated` (True when the numbers are gangweb's estimate) and
    `jobs` to each node of a `queue_tree()` forest, in place. Returns the subtree's estimate, rolled up the way
    KAI counts a child's use in its parent."""
    total = {"allocated": dict.fromkeys(RESOURCES, 0.0), "requested": dict.fromkeys(RESOURCES, 0.0), "jobs": 0}
    for node in nodes:
        own = usage.get(node["id"], {"allocated": dict.fromkeys(RESOURCES, 0.0),
                                     "requested": dict.fromkeys(RESOURCES, 0.0), "jobs": 0})
        below = decorate(node["children"], usage)
        est = {k: {r: own[k][r] + below[k][r] for r in RESOURCES} for k in ("allocated", "requested")}
        node["jobs"] = own["jobs"]
        node["estimated"] = all(node["resources"][r]["allocated"] is None for r in RESOURCES)
        node["bars"] = []
        for r in RESOURCES:
            res = node["resources"][r]
            allocated = res["allocated"] if not node["estimated"] else est["allocated"][r]
            requested = res["requested"] if not node["estimated"] else est["requested"][r]
            node["bars"].append(quota_bar(r, UNIT_LABELS[r], res["quota"], res["limit"], allocated, requested))
        for k in ("allocated", "requested"):
            for r in RESOURCES:
                total[k][r] += est[k][r]
        total["jobs"] += own["jobs"] + below["jobs"]
    return total


@login_required
def queue_tree(request):
    """GET /queues/[?cluster=name]: the tree, polled by htmx every 5 s. A fixed number of queries."""
    cluster = request.GET.get("cluster") or None
    roots = access.prune_queue_tree(request.user, queue_service.queue_tree(cluster))
    decorate(roots, job_usage(cluster))
    return page_or_fragment(request, "scheduling/queues.html", "scheduling/partials/queue_tree.html", {
        "section": "queues", "roots": roots, "cluster": cluster,
        "cluster_names": list(access.visible_clusters(request.user, Cluster.objects.all()).values_list("name",
                                                                                                        flat=True)),
    })


WINDOWS = {"6h": timedelta(hours=6), "24h": timedelta(hours=24), "7d": timedelta(days=7)}
MAX_SAMPLES = 5000


def _find(nodes, name):
    for node in nodes:
        if node["name"] == name:
            return node
        found = _find(node["children"], name)
        if found:
            return found
    return None


def usage_series(samples) -> dict[str, list]:
    """Sum per-cluster readings into one series per measure: at each reading, the latest value of every cluster.

    `samples`: (at, cluster_id, allocated_gpu, requested_gpu) in time order. Returns {"allocated": [(at, gpus)],
    "requested": [...]}.
    """
    latest: dict[int, tuple[float, float]] = {}
    out = {"allocated": [], "requested": []}
    for at, cluster_id, allocated, requested in samples:
        latest[cluster_id] = (allocated, requested)
        out["allocated"].append((at, sum(a for a, _ in latest.values())))
        out["requested"].append((at, sum(r for _, r in latest.values())))
    return out


@login_required
def queue_detail(request, name: str):
    """GET /queues/<name>/[?window=24h&cluster=]: one queue's bars, warnings and sync, and its GPU use over time
    (QueueUsageSample, read back from KAI's Queue status) as a step chart against its quota and limit."""
    policy = get_object_or_404(QueuePolicy, name=name)
    allowed(access.check_read_queue, request.user, policy)
    cluster = request.GET.get("cluster") or None
    window = request.GET.get("window") if request.GET.get("window") in WINDOWS else "24h"
    now = timezone.now()
    start = now - WINDOWS[window]
    roots = queue_service.queue_tree(cluster)
    decorate(roots, job_usage(cluster))
    node = _find(roots, policy.name)
    samples = QueueUsageSample.objects.filter(policy=policy)
    if cluster:
        samples = samples.filter(cluster__name=cluster)
    # The last reading before the window sets the level at its start; then every reading inside it.
    before = samples.filter(at__lt=start).order_by("-at").values_list("at", "cluster_id", "allocated_gpu",
                                                                         "requested_gpu")[:50]
    inside = samples.filter(at__gte=start).order_by("at").values_list("at", "cluster_id", "allocated_gpu",
                                                                        "requested_gpu")[:MAX_SAMPLES]
    series = usage_series([*reversed(list(before)), *inside])
    chart = step_chart(series, start, now, lines={"quota": policy.gpu_quota, "limit": policy.gpu_limit})
    return render(request, "scheduling/queue_detail.html", {
        "section": "queues", "policy": policy, "node": node, "chart": chart, "window": window, "windows": WINDOWS,
        "cluster": cluster, "start": start, "now": now, "readings": len(series["allocated"]),
    })


@login_required
def queue_create(request):
    """GET/POST /queues/new/: create a queue through `services.queues.create_queue`, as POST /api/v1/queues/."""
    form = QueueForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        result = form.save(request.user)
        if result is not None:
            queue, warnings = result
            messages.success(request, f"Queue '{queue.name}' created.")
            for w in warnings:
                messages.warning(request, w["message"])
            return redirect("scheduling:queues")
    return render(request, "scheduling/queue_form.html", {"section": "queues", "form": form})
