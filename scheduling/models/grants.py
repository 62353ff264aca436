"""Per-queue and per-cluster grants of a role to a user or a group (enforced in services/access.py)."""
from django.conf import settings
from django.db import models
from django.db.models import Q

from ..choices import GrantRole

_ONE_GRANTEE = Q(user__isnull=False, group__isnull=True) | Q(user__isnull=True, group__isnull=False)


class QueueGrant(models.Model):
    """`role` on `queue` and on every queue below it, for one user or one group (exactly one of the two)."""

    queue = models.ForeignKey("scheduling.QueuePolicy", on_delete=models.CASCADE, related_name="grants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="queue_grants")
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.CASCADE,
                              related_name="queue_grants")
    role = models.CharField(max_length=16, choices=GrantRole.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["queue__name", "id"]
        constraints = [
            models.CheckConstraint(condition=_ONE_GRANTEE, name="queuegrant_one_grantee"),
            models.UniqueConstraint(fields=["queue", "user"], condition=Q(user__isnull=False),
                                    name="uniq_queuegrant_user"),
            models.UniqueConstraint(fields=["queue", "group"], condition=Q(group__isnull=False),
                                    name="uniq_queuegrant_group"),
        ]

    def __str__(self):
        return f"{self.user or self.group} {self.role} on queue {self.queue_id}"


class ClusterGrant(models.Model):
    """`role` on `cluster` for one user or one group: viewer sees it, admin may change it (not delete it)."""

    cluster = models.ForeignKey("scheduling.Cluster", on_delete=models.CASCADE, related_name="grants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="cluster_grants")
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.CASCADE,
                              related_name="cluster_grants")
    role = models.CharField(max_length=16, choices=GrantRole.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster__name", "id"]
        constraints = [
            models.CheckConstraint(condition=_ONE_GRANTEE, name="clustergrant_one_grantee"),
            models.UniqueConstraint(fields=["cluster", "user"], condition=Q(user__isnull=False),
                                    name="uniq_clustergrant_user"),
            models.UniqueConstraint(fields=["cluster", "group"], condition=Q(group__isnull=False),
                                    name="uniq_clustergrant_group"),
        ]

    def __str__(self):
        return f"{self.user or self.group} {self.role} on cluster {self.cluster_id}"
