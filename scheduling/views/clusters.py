"""Clusters: list, register (kubeconfig upload), detail with served scheduling APIs and backends, and a
connection test that runs the same probe as the periodic task."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from ..backends import registry
from ..choices import ACTIVE_PHASES
from ..filtersets import ClusterFilterSet
from ..forms.clusters import ClusterForm, SchedulerNamesForm
from ..models import Cluster, GangJob
from ..observe import presence
from ..reconcile import probe
from ..services.access import audit
from ..services.access import roles as access
from ..services.clusters import capacity as cluster_capacity
from ..services.errors import ServiceError
from .common import allowed

# API groups shown on the cluster page besides the registered plugins' own (`registry.api_groups`): the pods'
# owners (batch) and KAI's cluster configuration (Topology, `kai.scheduler`), which templates' topology names.
OTHER_GROUPS = ("kai.scheduler", "batch")


def scheduling_apis(served: list[str]) -> list[str]:
    """The served "group/version" strings of a registered plugin's API group or of OTHER_GROUPS, sorted."""
    groups = {*registry.api_groups(), *OTHER_GROUPS}
    return sorted(gv for gv in served or [] if gv.rpartition("/")[0] in groups)


def backend_rows(cluster) -> list[dict]:
    """Per registered plugin: its family, name, API version, whether this cluster serves it and which one is
    chosen (`registry.catalogue` of the cluster's probed APIs), and for the chosen ones whether their scheduler is
    seen acting (`presence`: "scheduler seen 2 min ago", `presence_state`: observe/presence.py's state)."""
    rows = registry.catalogue(cluster.served_apis or [])
    seen = presence.all_presence(cluster)
    for row in rows:
        # "API served · scheduler seen 2 min ago": the API alone does not say a scheduler acts on the objects.
        found = seen.get(row["family"]) if row.get("chosen") else None
        row["presence"] = found.text if found is not None else ""
        row["presence_state"] = found.state if found is not None else ""
    return rows


@login_required
def cluster_list(request):
    """GET /clusters/: every cluster with health, version, backends and active job count (2 queries)."""
    clusters = access.visible_clusters(request.user, Cluster.objects.all())
    filterset = ClusterFilterSet(request.GET or None, queryset=clusters)
    clusters = list(filterset.qs)
    # Active jobs per cluster: one GROUP BY over the active jobs alone (the job_active_usage index), in a query of
    # its own. Joined to the clusters it was planned, with stale statistics, as a scan of every job per cluster
    # (1.9-4.2 s at 1,000 clusters and 1,000 jobs, bench/README.md "Stale statistics"), and a per-cluster subquery
    # as a scan of every active job per cluster (issue 14).
    active = dict(GangJob.objects.filter(phase__in=sorted(ACTIVE_PHASES)).order_by().values_list("cluster_id")
                  .annotate(n=Count("*")))
    for cluster in clusters:
        cluster.active_jobs = active.get(cluster.id, 0)
    return render(request, "scheduling/clusters.html", {"section": "clusters", "clusters": clusters})


def may_manage(user, cluster) -> bool:
    """True when `user` may change `cluster` (`access.check_manage_cluster`)."""
    try:
        access.check_manage_cluster(user, cluster)
    except ServiceError:
        return False
    return True


CAPACITY_ROWS = (("gpu", "GPUs"), ("cpu", "CPU"), ("memory", "Memory"))


def capacity_section(request, cluster) -> dict:
    """The capacity section's context: `services.clusters.capacity.capacity` (the API's answer) with the node rows
    paginated by `?offset=` / `?limit=` (a bad value shows the first page, as a bad filter shows everything), and
    the offsets of the previous and next pages (None at either end)."""
    try:
        offset, limit = cluster_capacity.parse_page(request.GET)
    except ValidationError:
        offset, limit = 0, cluster_capacity.DEFAULT_LIMIT
    cap = cluster_capacity.capacity(cluster, offset, limit)
    count = cap["node_rows"]["count"]
    cap["prev_offset"] = max(offset - limit, 0) if offset > 0 else None
    cap["next_offset"] = offset + limit if offset + limit < count else None
    cap["shown_to"] = min(offset + limit, count)
    return cap


def _detail(request, cluster, form=None, status=200):
    names = cluster.scheduler_names or {}
    rows = [{**row, "scheduler_name": cluster.scheduler_name_for(row["family"]) if row["family"] in
             registry.scheduler_names() else "", "custom": row["family"] in names} for row in backend_rows(cluster)]
    manage = may_manage(request.user, cluster)
    if form is None and manage:
        form = SchedulerNamesForm(cluster=cluster)
    return render(request, "scheduling/cluster_detail.html", {
        "section": "clusters", "cluster": cluster, "apis": scheduling_apis(cluster.served_apis),
        "backends": rows, "scheduler_form": form if manage else None,
        "capacity": capacity_section(request, cluster), "capacity_resources": CAPACITY_ROWS,
    }, status=status)


@login_required
def cluster_detail(request, name: str):
    """GET /clusters/<name>/: health, served scheduling APIs, backends with the pods' scheduler name on this
    cluster, the scheduler-names form (for whoever may change the cluster) and the connection test button."""
    cluster = get_object_or_404(Cluster, name=name)
    allowed(access.check_read_cluster, request.user, cluster)
    return _detail(request, cluster)


@login_required
@require_POST
def cluster_schedulers(request, name: str):
    """POST /clusters/<name>/schedulers/: change the cluster's scheduler names (cluster admins and platform
    admins, as PATCH /api/v1/clusters/<name>/); a bad name re-renders the page with 400 naming the field."""
    cluster = get_object_or_404(Cluster, name=name)
    allowed(access.check_manage_cluster, request.user, cluster)
    form = SchedulerNamesForm(request.POST, cluster=cluster)
    if not form.is_valid():
        return _detail(request, cluster, form, status=400)
    with transaction.atomic():
        before = dict(cluster.scheduler_names or {})
        cluster.scheduler_names = form.cleaned_data["scheduler_names"]
        cluster.save(update_fields=["scheduler_names", "updated_at"])
        changed = {k: v for k, v in cluster.scheduler_names.items() if before.get(k) != v}
        audit.record(request.user, "cluster.update", cluster, {"scheduler_names": changed})
    messages.success(request, "Scheduler names saved." if changed else "Scheduler names unchanged.")
    return redirect("scheduling:cluster", name=name)


@login_required
def cluster_create(request):
    """GET/POST /clusters/new/: register a cluster (saved through the API's ClusterSerializer)."""
    allowed(access.check_platform_admin, request.user, "register clusters")
    form = ClusterForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        cluster = form.save(request.user)
        if cluster is not None:
            messages.success(request, f"Cluster '{cluster.name}' registered. Test the connection below.")
            return redirect("scheduling:cluster", name=cluster.name)
    return render(request, "scheduling/cluster_form.html", {"section": "clusters", "form": form})


@login_required
@require_POST
def cluster_test(request, name: str):
    """POST /clusters/<name>/test/: probe health and discovery now, with the periodic task's own
    `reconcile.probe.probe_cluster` (GET /version and GET /apis; never raises for cluster failures)."""
    cluster = get_object_or_404(Cluster, name=name)
    allowed(access.check_manage_cluster, request.user, cluster)
    cluster = probe.probe_cluster(cluster)
    level = messages.success if cluster.health == "Healthy" else messages.error
    level(request, f"{cluster.name}: {cluster.health}"
          + (f", Kubernetes {cluster.server_version}" if cluster.server_version else "")
          + (f". {cluster.health_message}" if cluster.health_message else "."))
    return redirect("scheduling:cluster", name=name)
