"""Per-queue and per-cluster grants of a role to a user or a group (enforced in services/access/roles.py)."""
from django.conf import settings
from django.db import models
from django.db.models import Q

from ..choices import GrantRole

_ONE_GRANTEE = Q(user__isnull=False, group__isnull=True) | Q(user__isnull=True, group__isnull=False)


class Grant(models.Model):
    """What every grant shares: a `role` for exactly one of `user` or `group` (declared by the subclass, because
    their reverse names differ: `user.queue_grants`, `user.cluster_grants`) on one `target` object."""

    target = ""  # name of the subclass's ForeignKey to the object granted on ("queue", "cluster")

    role = models.CharField(max_length=16, choices=GrantRole.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        constraints = [models.CheckConstraint(condition=_ONE_GRANTEE, name="%(class)s_one_grantee")]

    @classmethod
    def unique_per_grantee(cls, target: str) -> list[models.UniqueConstraint]:
        """One grant per (target, user) and per (target, group); named `uniq_<model>_user` / `_group`."""
        return [models.UniqueConstraint(fields=[target, grantee], condition=Q(**{f"{grantee}__isnull": False}),
                                        name=f"uniq_%(class)s_{grantee}") for grantee in ("user", "group")]

    def __str__(self):
        return f"{self.user or self.group} {self.role} on {self.target} {getattr(self, f'{self.target}_id')}"


class QueueGrant(Grant):
    """`role` on `queue` and on every queue below it, for one user or one group (exactly one of the two)."""

    target = "queue"

    queue = models.ForeignKey("scheduling.QueuePolicy", on_delete=models.CASCADE, related_name="grants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="queue_grants")
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.CASCADE,
                              related_name="queue_grants")

    class Meta(Grant.Meta):
        ordering = ["queue__name", "id"]
        constraints = [*Grant.Meta.constraints, *Grant.unique_per_grantee("queue")]


class ClusterGrant(Grant):
    """`role` on `cluster` for one user or one group: viewer sees it, admin may change it (not delete it)."""

    target = "cluster"

    cluster = models.ForeignKey("scheduling.Cluster", on_delete=models.CASCADE, related_name="grants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="cluster_grants")
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.CASCADE,
                              related_name="cluster_grants")

    class Meta(Grant.Meta):
        ordering = ["cluster__name", "id"]
        constraints = [*Grant.Meta.constraints, *Grant.unique_per_grantee("cluster")]
