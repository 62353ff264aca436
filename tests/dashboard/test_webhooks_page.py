"""The Webhooks page: each subscription with its delivery log, in a fixed number of queries, and Send test."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.models import WebhookDelivery, WebhookSubscription
from scheduling.work import enqueue

pytestmark = pytest.mark.django_db


def _subscription(owner, name, deliveries=()):
    sub = WebhookSubscription.objects.create(owner=owner, name=name, url="https://hooks.example.com/x",
                                             secret="whsec_" + "A" * 44, phases=["Failed"])
    for i, (status, attempts, error) in enumerate(deliveries):
        WebhookDelivery.objects.create(subscription=sub, event_id=f"msg_{name}_{i}", payload={}, status=status,
                                       attempts=attempts, last_error=error, last_status_code=500 if error else 200)
    return sub


def test_the_page_shows_each_delivery_with_status_attempts_and_error_in_fixed_queries(ui, admin_user):
    _subscription(admin_user, "ci", [("Delivered", 1, ""), ("Pending", 3, "HTTP 500: boom")])
    ui.get("/webhooks/")  # warm the session and user
    with CaptureQueriesContext(connection) as small:
        page = ui.get("/webhooks/").content.decode()
    assert "HTTP 500 HTTP 500: boom" in page and "msg_ci_1" in page and ">Delivered<" in page
    for i in range(5):
        _subscription(admin_user, f"more-{i}", [("Failed", 8, "timeout")] * 3)
    with CaptureQueriesContext(connection) as large:
        page = ui.get("/webhooks/").content.decode()
    assert page.count("Send test") == 6
    assert len(small) == len(large)


def test_send_test_queues_a_test_event_and_others_cannot(ui, admin_user, client, django_user_model, sent_tasks):
    sub = _subscription(admin_user, "ci")
    r = ui.post(f"/webhooks/{sub.pk}/test/")
    sent = [args[0] for name, args in sent_tasks if name == enqueue.DELIVER_WEBHOOK]
    assert r.status_code == 302
    [delivery] = WebhookDelivery.objects.filter(subscription=sub)
    assert sent == [delivery.pk] and delivery.payload["type"] == "webhook.test"
    other = django_user_model.objects.create_user("other", password="x")
    client.force_login(other)
    assert client.post(f"/webhooks/{sub.pk}/test/").status_code == 404
    assert "No webhooks yet." in client.get("/webhooks/").content.decode()
