"""Webhook subscriptions to job phase changes, and the delivery of each event to each subscription."""
from django.conf import settings
from django.db import models

from .fields import EncryptedTextField


class WebhookSubscription(models.Model):
    """A user's webhook: phase changes of one job, of one queue's jobs, or of every job they submitted.

    - Scope: `job` set → that job; else `queue` set → jobs in that queue; else the owner's own jobs.
    - `phases`: GangPhase values to send; empty = every phase.
    - `secret`: the Standard Webhooks signing secret (`whsec_<base64>`), encrypted at rest, shown once.
    Only events recorded after the subscription was created are sent.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhooks")
    name = models.CharField(max_length=100)
    url = models.URLField(max_length=2000)
    secret = EncryptedTextField()
    job = models.ForeignKey("scheduling.GangJob", null=True, blank=True, on_delete=models.CASCADE,
                            related_name="webhooks")
    queue = models.ForeignKey("scheduling.QueuePolicy", null=True, blank=True, on_delete=models.CASCADE,
                              related_name="webhooks")
    phases = models.JSONField(default=list, blank=True)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"{self.name} → {self.url}"


class DeliveryStatus(models.TextChoices):
    """Where one delivery stands."""

    PENDING = "Pending"
    DELIVERED = "Delivered"
    FAILED = "Failed"  # every attempt failed, or the target is refused by the address rules


class WebhookDelivery(models.Model):
    """One event for one subscription: its payload, and how sending it went.

    `event_id` is the Standard Webhooks `webhook-id`: `msg_<transition id>` for a phase change (the same for every
    attempt, so receivers deduplicate an at-least-once delivery) or `msg_test_<uuid>` for a test.
    """

    subscription = models.ForeignKey(WebhookSubscription, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.CharField(max_length=100)
    transition = models.ForeignKey("scheduling.PhaseTransition", null=True, blank=True, on_delete=models.CASCADE)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["subscription", "event_id"], name="uniq_delivery_per_event")]
        indexes = [models.Index(fields=["status", "enqueued_at"], name="delivery_pending")]
