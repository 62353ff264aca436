"""Issue 32, the exhaustion rows: long-polls bounded per user and per process with tokens per user capped (row 3),
webhook subscriptions capped per user and an outbox scan whose cost does not grow with subscriptions that match
nothing (row 4). The waits held "in progress" are held the way the view holds them (`job_wait.wait_slot`), so the
test needs no threads; the measurement with gunicorn is in docs/security.md."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.choices import GangPhase
from scheduling.models import WebhookDelivery, WebhookSubscription
from scheduling.services.jobs import wait as job_wait
from scheduling.services.webhooks import delivery as webhook_delivery
from tests import builders

pytestmark = pytest.mark.django_db


def _wait(client, ids, **params):
    query = "&".join(f"{k}={v}" for k, v in {"ids": ",".join(map(str, ids)), **params}.items())
    return client.get(f"/api/v1/jobs/wait/?{query}")


# --- row 3 ---------------------------------------------------------------------------------------------------------

def test_row3_long_polls_are_bounded_per_user_across_tokens_and_per_process(teams, settings):
    """Before: 8 waits per token per process, and tokens unlimited: one user with 4 tokens held every thread. Now
    a user's waits count together whatever token asks, and the process keeps the rest of its threads."""
    settings.GANGWEB_WAITS_PER_USER, settings.GANGWEB_WAITS_PER_PROCESS = 2, 3
    job = teams.a_job
    cursor = _wait(teams.clients["t_read"], [job.pk]).json()["cursor"]
    with job_wait.wait_slot(teams.a_sub.pk), job_wait.wait_slot(teams.a_sub.pk):  # two waits through token t_sub
        other_token = _wait(teams.clients["t_read"], [job.pk], after=cursor, timeout="0.2")
        assert other_token.status_code == 429, other_token.content
        assert other_token["Retry-After"] == "2"
        assert "at most 2 waits at a time per user (GANGWEB_WAITS_PER_USER)" in other_token.json()["detail"]
        with job_wait.wait_slot(teams.a_view.pk):  # the process's third and last long-poll slot
            full = _wait(teams.clients["admin"], [job.pk], after=cursor, timeout="0.2")
            assert full.status_code == 429
            assert "this web process already holds 3 waits (GANGWEB_WAITS_PER_PROCESS)" in full.json()["detail"]
            # Ordinary requests and the health check are not long-polls: they are answered.
            assert teams.clients["b_sub"].get("/api/v1/jobs/").status_code == 200
            assert teams.clients["anon"].get("/healthz").status_code == 200
    assert _wait(teams.clients["t_read"], [job.pk], after=cursor, timeout="0.2").json()["timed_out"] is True


def test_row3_tokens_per_user_are_capped_naming_the_cap(teams, settings):
    settings.GANGWEB_TOKENS_PER_USER = 3  # a_sub holds t_sub and t_read active (t_rev revoked, t_exp expired)
    me = teams.clients["a_sub"]
    assert me.post("/api/v1/tokens/", {"name": "third", "actions": ["read"]}, format="json").status_code == 201
    refused = me.post("/api/v1/tokens/", {"name": "fourth", "actions": ["read"]}, format="json")
    assert refused.status_code == 409
    assert str(refused.json()["tokens"]).strip("[]'") == ("at most 3 active tokens per user "
                                                          "(GANGWEB_TOKENS_PER_USER); you have 3: revoke one first")
    assert me.post(f"/api/v1/tokens/{_token_id(teams, 't_read')}/revoke/").status_code == 200
    assert me.post("/api/v1/tokens/", {"name": "fourth", "actions": ["read"]}, format="json").status_code == 201


def _token_id(teams, name) -> int:
    from scheduling.models import ApiToken

    lookup = teams.tokens[name].split("_", 2)[1]
    return ApiToken.objects.get(lookup=lookup).pk


# --- row 4 ---------------------------------------------------------------------------------------------------------

def test_row4_webhook_subscriptions_are_capped_per_user(teams, settings):
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = "127.0.0.0/8"
    settings.GANGWEB_WEBHOOKS_PER_USER = 2
    me = teams.clients["a_sub"]
    for name in ("one", "two"):
        assert me.post("/api/v1/webhooks/", {"name": name, "url": "http://127.0.0.1:9/h"},
                       format="json").status_code == 201
    refused = me.post("/api/v1/webhooks/", {"name": "three", "url": "http://127.0.0.1:9/h"}, format="json")
    assert refused.status_code == 409 and "at most 2 webhook subscriptions per user (GANGWEB_WEBHOOKS_PER_USER)" in (
        refused.content.decode())
    assert WebhookSubscription.objects.filter(owner=teams.a_sub).count() == 2
    # Another user is not affected by a_sub's cap.
    assert teams.clients["b_sub"].post("/api/v1/webhooks/", {"name": "b", "url": "http://127.0.0.1:9/h"},
                                       format="json").status_code == 201


def test_row4_outbox_scan_cost_does_not_grow_with_subscriptions_that_match_nothing(api, setup, admin_user,
                                                                                   django_user_model, settings):
    """Before: one query (and one Python pass) per active subscription on every scan, so 8,000 idle ones of one user
    made every scan time out and nobody's delivery was created. Now subscriptions whose job, queue, owner or phases
    match no new entry are never read: the scan costs the same with 2 or 300 of them."""
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = "1"
    mine = api.post("/api/v1/webhooks/", {"name": "mine", "url": "http://127.0.0.1:9/h", "phases": ["Running"]},
                    format="json").json()
    flooder = django_user_model.objects.create_user("flooder")
    quiet = builders.make_job(*setup, user=admin_user, name="quiet", phase=GangPhase.QUEUED)
    builders.make_job(*setup, user=admin_user, name="busy", phase=GangPhase.RUNNING)

    def scan_with(idle: int) -> tuple[int, list]:
        WebhookSubscription.objects.filter(owner=flooder).delete()
        WebhookDelivery.objects.all().delete()
        WebhookSubscription.objects.bulk_create(
            [WebhookSubscription(owner=flooder, name=f"idle-{i}", url="http://127.0.0.1:9/h", secret="whsec_x",
                                 **({"job": quiet, "phases": ["Succeeded"]} if i % 2 else {}))
             for i in range(idle)])
        with CaptureQueriesContext(connection) as queries:
            webhook_delivery.scan()
        made = list(WebhookDelivery.objects.values_list("subscription_id", "payload__data__phase"))
        return len(queries), made

    few, made_few = scan_with(2)
    many, made_many = scan_with(300)
    assert made_few == made_many == [(mine["id"], "Running")]
    assert many == few, f"the scan made {few} queries with 2 idle subscriptions and {many} with 300"
