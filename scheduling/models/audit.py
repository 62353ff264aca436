"""The audit log: who created, changed, submitted or cancelled what, and when. Append-only."""
from django.conf import settings
from django.db import models


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs):  # noqa: D102 - the log is append-only
        raise TypeError("the audit log is append-only")


class AuditEvent(models.Model):
    """One action by a user (through the UI, the API, or one of their tokens).

    `action` is "<object type>.<verb>", e.g. "job.submit", "queue.update", "token.revoke" (see
    services/access/audit.py). `actor_name` keeps the username even after the user is deleted. `details` holds what
    changed; never secrets.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_name = models.CharField(max_length=150, blank=True)
    token = models.ForeignKey("scheduling.ApiToken", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    action = models.CharField(max_length=32, db_index=True)
    object_type = models.CharField(max_length=32)
    object_id = models.CharField(max_length=64, blank=True)
    object_name = models.CharField(max_length=300, blank=True)
    details = models.JSONField(default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.object_type} {self.object_name}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise TypeError("the audit log is append-only")
        super().save(*args, **kwargs)
