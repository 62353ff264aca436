"""Django admin registrations (a fallback for platform admins; the dashboard is the main UI)."""
from django.contrib import admin

from .models import Cluster, GangJob, PhaseTransition, QueuePolicy, ReconcileAttempt, RuntimeTemplate

admin.site.register(QueuePolicy)
admin.site.register(RuntimeTemplate)
admin.site.register(ReconcileAttempt)


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    """Clusters, without the kubeconfig field."""

    exclude = ["kubeconfig"]
    list_display = ["name", "health", "server_version"]


@admin.register(GangJob)
class GangJobAdmin(admin.ModelAdmin):
    """Jobs, read-mostly."""

    list_display = ["name", "namespace", "phase", "queue", "cluster", "created_at"]
    list_filter = ["phase"]


admin.site.register(PhaseTransition)
