"""Django admin registrations (a fallback for platform admins; the dashboard is the main UI)."""
from django.contrib import admin
from django.db import transaction

from .models import (
    ApiToken,
    AuditEvent,
    Cluster,
    ClusterGrant,
    GangJob,
    PhaseTransition,
    QueueGrant,
    QueuePolicy,
    ReconcileAttempt,
    RuntimeTemplate,
)
from .services.access.tokens import revoke_scoped_only_to


@admin.register(QueuePolicy)
class QueuePolicyAdmin(admin.ModelAdmin):
    """Queues. A delete here revokes the API tokens scoped only to the deleted queues, as the API's delete does
    (services/access/tokens.py `revoke_scoped_only_to`): an empty scope would mean every queue of the token's owner."""

    def delete_model(self, request, obj):
        with transaction.atomic():
            revoke_scoped_only_to(obj)
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            revoke_scoped_only_to(*queryset)
            super().delete_queryset(request, queryset)


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


@admin.register(QueueGrant)
class QueueGrantAdmin(admin.ModelAdmin):
    """Who has which role on which queue (and the queues below it)."""

    list_display = ["queue", "user", "group", "role"]
    fields = ["queue", "user", "group", "role"]  # the target first (the abstract Grant base declares role first)
    list_filter = ["role"]


@admin.register(ClusterGrant)
class ClusterGrantAdmin(admin.ModelAdmin):
    """Who may see or change which cluster."""

    list_display = ["cluster", "user", "group", "role"]
    fields = ["cluster", "user", "group", "role"]  # the target first (the abstract Grant base declares role first)
    list_filter = ["role"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens, read-only here: created through the API (the secret is shown once), revoked by setting revoked_at."""

    list_display = ["name", "owner", "lookup", "actions", "expires_at", "revoked_at", "last_used_at"]
    fields = ["name", "owner", "lookup", "actions", "queues", "expires_at", "revoked_at", "last_used_at"]
    readonly_fields = ["name", "owner", "lookup", "actions", "queues", "expires_at", "last_used_at"]

    def has_add_permission(self, request):
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """The audit log, read-only."""

    list_display = ["at", "actor_name", "action", "object_type", "object_name"]
    list_filter = ["action", "object_type"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
