"""Webhook notifications of job phase changes, signed per the Standard Webhooks specification: the subscriptions
(create, update, who sees and manages them, a test delivery) are here; the scan and the delivery, the worker's side,
are in services/webhooks/delivery.py.

Flow (an outbox read from the append-only timeline, so reconcile never waits on a receiver):

1. `scan()` (Celery beat, `scheduling.notify_transitions`, every GANGWEB_NOTIFY_SCAN_SECONDS) turns the timeline
   entries recorded in the last SCAN_WINDOW into one WebhookDelivery per matching subscription. The row is unique
   per (subscription, event id = `msg_<transition id>`), so scanning the same entries again creates nothing: an
   entry committed late is still found by the next scans while it is inside the window.
2. New deliveries (and ones whose task was lost: enqueued more than REENQUEUE_AFTER ago and still Pending) are
   handed to `scheduling.deliver_webhook`, which calls `deliver()`: one signed POST with short timeouts
   (`timeouts()`), the outcome written on the row. A failure raises DeliveryRetry and the task retries it with
   exponential backoff and jitter (Celery's autoretry); after the last retry the row is Failed. The `webhook-id`
   stays the same on every attempt (at least once: receivers deduplicate on it).

Both tasks run on a Celery queue of their own (settings.GANGWEB_WEBHOOK_QUEUE, "webhooks"), consumed by a worker of
its own (`make run`'s runstack, docker compose's `webhooks` service): a receiver that is slow or down holds a slot
of that worker, never one of the worker that reconciles jobs (measured in bench/webhooks.py).

Webhook targets obey `check_target_url()`: http(s) only, and the outbound address rules cluster servers obey
(`scheduling/security/addresses.py`): no loopback, private or link-local address unless
GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES allows it, and never a cloud metadata address. A delivery connects to the
address its check returned and never follows a redirect (`scheduling/security/outbound.py`, issue 32 rows 1-2).
"""
from __future__ import annotations

import base64
import secrets
import uuid

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ...choices import GangPhase
from ...models import GangJob, QueuePolicy, WebhookDelivery, WebhookSubscription
from ..access import roles as access
from ..errors import Conflict, PermissionDenied
from .delivery import check_target_url

FIELDS = ("name", "url", "job", "queue", "phases", "active")


def _clean(user, data, instance: WebhookSubscription | None = None) -> dict:
    """Validated fields of a create or update body (ValidationError naming the field)."""
    if not isinstance(data, dict):
        raise ValidationError({"body": "must be a JSON object"})
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ValidationError({unknown[0]: f"unknown field; allowed fields are {', '.join(FIELDS)}"})
    out: dict = {}
    if instance is None or "name" in data:
        name = data.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 100:
            raise ValidationError({"name": "give a name of 1 to 100 characters"})
        out["name"] = name.strip()
    if instance is None or "url" in data:
        url = data.get("url")
        if not isinstance(url, str) or len(url) > 2000:
            raise ValidationError({"url": "give the receiver's URL (at most 2000 characters)"})
        check_target_url(url)
        out["url"] = url
    if "job" in data and data["job"] is not None:
        job = GangJob.objects.filter(pk=data["job"]).first() if isinstance(data["job"], int) else None
        if job is None or not access.visible_jobs(user, GangJob.objects.filter(pk=job.pk)).exists():
            raise ValidationError({"job": f"no job {str(data['job'])[:20]} that you can see"})
        out["job"] = job
    elif "job" in data:
        out["job"] = None
    if "queue" in data and data["queue"] not in (None, ""):
        queue = QueuePolicy.objects.filter(name=data["queue"]).first() if isinstance(data["queue"], str) else None
        out["queue"] = access.named_queue(user, queue, str(data["queue"])[:63])
    elif "queue" in data:
        out["queue"] = None
    if "phases" in data:
        phases = data["phases"]
        if not isinstance(phases, list) or any(p not in GangPhase.values for p in phases):
            raise ValidationError({"phases": f"a list of phases from {', '.join(GangPhase.values)}"})
        out["phases"] = sorted(set(phases), key=GangPhase.values.index)
    if "active" in data:
        if not isinstance(data["active"], bool):
            raise ValidationError({"active": "true or false"})
        out["active"] = data["active"]
    return out


def create_subscription(user, data) -> tuple[WebhookSubscription, str]:
    """Create a subscription for `user`; returns it and its signing secret (`whsec_...`, shown once).
    Raises ValidationError naming the field (bad URL or refused address, a job or queue the user cannot see)."""
    check_manage(user)
    fields = _clean(user, data)
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    with transaction.atomic():
        # The owner's row is locked so two concurrent creates cannot both pass the cap.
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        cap = webhooks_per_user()
        held = WebhookSubscription.objects.filter(owner=user).count()
        if held >= cap:
            raise Conflict({"webhooks": f"at most {cap} webhook subscriptions per user (GANGWEB_WEBHOOKS_PER_USER); "
                                        f"you have {held}: delete one first"})
        sub = WebhookSubscription.objects.create(owner=user, secret=secret, **fields)
    return sub, secret


def webhooks_per_user() -> int:
    """settings.GANGWEB_WEBHOOKS_PER_USER (25): subscriptions one user may hold (issue 32 row 4)."""
    return int(getattr(settings, "GANGWEB_WEBHOOKS_PER_USER", 25))


def check_manage(user) -> None:
    """Webhooks are added and changed with a password login (session or basic auth): an API token, which may
    only read, submit or cancel, never adds a receiver that jobs' details are sent to."""
    if not getattr(user, "is_authenticated", False) or access.token_of(user) is not None:
        raise PermissionDenied({"detail": "webhooks are managed with a password login, not an API token"})


def update_subscription(user, sub: WebhookSubscription, data) -> WebhookSubscription:
    """Change a subscription's fields (those sent); same checks as create."""
    check_manage(user)
    for name, value in _clean(user, data, sub).items():
        setattr(sub, name, value)
    sub.save()
    return sub


def visible_subscriptions(user, queryset):
    """A user's own subscriptions (platform admins: all)."""
    if not getattr(user, "is_authenticated", False):
        return queryset.none()
    return queryset if access.is_platform_admin(user) else queryset.filter(owner=user)


def send_test(user, sub: WebhookSubscription) -> WebhookDelivery:
    """A test event for `sub` (not tied to a job), queued for delivery at once."""
    now = timezone.now()
    payload = {"type": "webhook.test", "timestamp": now.isoformat(),
               "text": f"gangweb: test event for webhook '{sub.name}'", "data": {"subscription": sub.pk}}
    return WebhookDelivery.objects.create(subscription=sub, event_id=f"msg_test_{uuid.uuid4().hex}",
                                          payload=payload, enqueued_at=now)
