"""Dashboard views (server-rendered, htmx for live parts)."""
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.shortcuts import render

from .models import Cluster, GangJob
from .services import access


@login_required
def overview(request):
    """Cluster health, jobs by phase."""
    return render(request, "scheduling/overview.html", {
        "clusters": access.visible_clusters(request.user, Cluster.objects.all()),
        "phases": access.visible_jobs(request.user, GangJob.objects.all()).values("phase").annotate(
            n=Count("id")).order_by("phase"),
    })
