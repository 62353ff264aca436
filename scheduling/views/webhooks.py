"""Webhooks: your subscriptions with their delivery log (status, attempts, last error) and a send-test button."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from ..models import WebhookDelivery, WebhookSubscription
from ..services.webhooks import subscriptions as notifications
from ..work import dispatch
from .common import allowed

LOG_ROWS = 200  # deliveries shown on the page, newest first, over every subscription


@login_required
def webhook_list(request):
    """GET /webhooks/: the user's subscriptions and their latest deliveries (2 queries whatever the counts)."""
    subs = list(notifications.visible_subscriptions(
        request.user, WebhookSubscription.objects.select_related("owner", "queue")))
    deliveries = WebhookDelivery.objects.filter(subscription__in=[s.pk for s in subs]).defer("payload")
    by_sub: dict[int, list] = {s.pk: [] for s in subs}
    for delivery in deliveries[:LOG_ROWS]:
        by_sub[delivery.subscription_id].append(delivery)
    rows = [{"sub": s, "deliveries": by_sub[s.pk][:10]} for s in subs]
    return render(request, "scheduling/webhooks.html", {"section": "webhooks", "rows": rows})


@login_required
@require_POST
def webhook_test(request, pk: int):
    """POST /webhooks/<id>/test/: queue a `webhook.test` event for the subscription, as the API's `test`."""
    sub = notifications.visible_subscriptions(request.user, WebhookSubscription.objects.filter(pk=pk)).first()
    if sub is None:
        raise Http404("no such webhook")
    allowed(lambda user, _: notifications.check_manage(user), request.user, sub)
    delivery = notifications.send_test(request.user, sub)
    dispatch.deliver_webhook_on_commit(delivery.pk)
    messages.success(request, f"Test event {delivery.event_id} queued for '{sub.name}'.")
    return redirect("scheduling:webhooks")
