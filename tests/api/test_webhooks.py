"""Webhook notifications: subscriptions (scope, phases, address rules, who may), the outbox scan (one delivery per
subscribed timeline entry, idempotent), and delivery to a local receiver: signed per Standard Webhooks (verified
with the `standardwebhooks` library), retried on a 500 with the same webhook-id, Failed after the last attempt."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from standardwebhooks.webhooks import Webhook

from scheduling import tasks
from scheduling.choices import GangPhase
from scheduling.models import DeliveryStatus, GangJob, WebhookDelivery, WebhookSubscription
from scheduling.services.webhooks import delivery as webhook_delivery
from scheduling.work import enqueue
from tests import builders

pytestmark = pytest.mark.django_db


class Receiver:
    """A local HTTP receiver: answers each POST with the next of `codes` (then 200), keeps what it got."""

    def __init__(self, codes=()):
        self.codes, self.got = list(codes), []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.got.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(receiver.codes.pop(0) if receiver.codes else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings):
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = True
    r = Receiver()
    yield r
    r.close()


def _subscribe(api, **body):
    r = api.post("/api/v1/webhooks/", body, format="json")
    assert r.status_code == 201, r.data
    return r.data


@pytest.mark.parametrize(("url", "words"), [
    ("http://127.0.0.1:9/hook", "127.0.0.1 is a loopback address"),
    ("http://169.254.169.254/latest/meta-data", "169.254.169.254 is a cloud metadata endpoint"),
    ("http://10.1.2.3/hook", "10.1.2.3 is a private address"),
    ("http://[::1]/hook", "::1 is a loopback address"),
    ("ftp://example.com/hook", "must be an http:// or https:// URL"),
    ("hook", "must be an http:// or https:// URL"),
    # The client (urllib3) connects to what is before the backslash, the check read what is after the "@".
    ("http://127.0.0.1:8011\\@1.1.1.1/", "no credentials, backslashes or spaces"),
    ("http://169.254.169.254\\@1.1.1.1/latest/meta-data/", "no credentials, backslashes or spaces"),
    ("http://user:pw@1.1.1.1/hook", "no credentials, backslashes or spaces"),
    ("http://1.1.1.1 /hook", "no credentials, backslashes or spaces"),
    ("http://[::1/hook", "must be an http:// or https:// URL"),  # were 500s
    ("http://1.1.1.1:99999/hook", "must be an http:// or https:// URL"),
    ("http://[::ffff:127.0.0.1]:18999/", "is a loopback address"),
])
def test_receivers_on_private_or_metadata_addresses_are_refused_naming_the_url(api, url, words):
    r = api.post("/api/v1/webhooks/", {"name": "x", "url": url}, format="json")
    assert r.status_code == 400 and words in str(r.data["url"])
    assert not WebhookSubscription.objects.exists()


def test_an_api_token_cannot_add_a_receiver_and_a_hidden_job_is_unknown(teams, settings):
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = True
    r = teams.clients["t_sub"].post("/api/v1/webhooks/", {"name": "x", "url": "http://127.0.0.1/h"}, format="json")
    assert r.status_code == 403 and "password login" in str(r.data)
    r = teams.clients["a_sub"].post("/api/v1/webhooks/", {"name": "x", "url": "http://127.0.0.1/h",
                                                          "job": teams.b_job.pk}, format="json")
    assert r.status_code == 400 and f"no job {teams.b_job.pk} that you can see" in str(r.data["job"])
    r = teams.clients["a_sub"].post("/api/v1/webhooks/", {"name": "x", "url": "http://127.0.0.1/h",
                                                          "queue": "b-train"}, format="json")
    assert r.status_code == 400 and "no queue named 'b-train'" in str(r.data["queue"])
    r = teams.clients["a_sub"].post("/api/v1/webhooks/", {"name": "x", "url": "http://127.0.0.1/h",
                                                          "phases": ["Done"]}, format="json")
    assert r.status_code == 400 and "phases" in r.data
    assert not WebhookSubscription.objects.exists()


def test_each_subscribed_transition_becomes_one_delivery_and_a_rescan_adds_none(api, setup, admin_user, receiver):
    mine = _subscribe(api, name="all mine", url=receiver.url)
    finished = _subscribe(api, name="finished", url=receiver.url, phases=["Succeeded", "Failed"])
    assert mine["secret"].startswith("whsec_") and "secret" not in api.get("/api/v1/webhooks/").data["results"][0]
    job = builders.make_job(*setup, user=admin_user, name="t1", phase=GangPhase.SUCCEEDED)
    due = webhook_delivery.scan()
    assert len(due) == 6 + 1  # Submitted..Succeeded for "all mine", Succeeded for "finished"
    assert webhook_delivery.scan() == []  # same entries again: nothing new, nothing re-sent
    rows = WebhookDelivery.objects.filter(subscription_id=finished["id"])
    assert [d.payload["data"]["phase"] for d in rows] == ["Succeeded"]
    payload = rows[0].payload
    assert payload["type"] == "job.phase_changed"
    assert payload["data"]["job"] == {"id": job.pk, "uid": str(job.uid), "name": "t1", "namespace": "default",
                                      "url": f"http://127.0.0.1:8000/jobs/{job.pk}/"}
    assert (payload["data"]["queue"], payload["data"]["cluster"]) == ("team-a", "local")
    assert payload["text"].startswith(f"gangweb: job {job.pk} t1 (queue team-a, cluster local) is Succeeded")


def test_a_failed_entry_carries_the_jobs_first_failure_in_data_and_text(api, setup, admin_user, receiver):
    sub = _subscribe(api, name="failures", url=receiver.url, phases=["Failed", "Running"])
    job = builders.make_job(*setup, user=admin_user, name="t2", phase=GangPhase.FAILED)
    failure = {"kind": "ExitCode", "pod_set": "worker", "index": 1, "container": "trainer", "exit_code": 3,
               "summary": "worker[1] container trainer exited with code 3 (Error)"}
    GangJob.objects.filter(pk=job.pk).update(observed={"failure": failure})
    webhook_delivery.scan()
    rows = WebhookDelivery.objects.filter(subscription_id=sub["id"])
    by_phase = {d.payload["data"]["phase"]: d.payload for d in rows}
    assert by_phase["Failed"]["data"]["failure"] == failure
    assert ": worker[1] container trainer exited with code 3 (Error) http" in by_phase["Failed"]["text"]
    assert "failure" not in by_phase["Running"]["data"]


def test_a_delivery_is_signed_and_verifies_with_the_standard_webhooks_library(api, setup, admin_user, receiver):
    sub = _subscribe(api, name="hook", url=receiver.url, phases=["Running"])
    builders.make_job(*setup, user=admin_user, phase=GangPhase.RUNNING)
    [delivery_id] = webhook_delivery.scan()
    assert webhook_delivery.deliver(delivery_id) == DeliveryStatus.DELIVERED
    [(headers, body)] = receiver.got
    verified = Webhook(sub["secret"]).verify(body, headers)  # raises WebhookVerificationError if not
    assert verified["data"]["phase"] == "Running"
    assert headers["webhook-id"] == WebhookDelivery.objects.get(pk=delivery_id).event_id
    row = WebhookDelivery.objects.get(pk=delivery_id)
    assert (row.status, row.attempts, row.last_status_code, row.last_error) == ("Delivered", 1, 200, "")


def test_a_500_is_retried_with_the_same_id_and_delivered_after(api, setup, admin_user, receiver):
    receiver.codes = [500, 503]
    _subscribe(api, name="hook", url=receiver.url, phases=["Queued"])
    builders.make_job(*setup, user=admin_user, phase=GangPhase.QUEUED)
    [delivery_id] = webhook_delivery.scan()
    for _ in range(2):
        with pytest.raises(webhook_delivery.DeliveryRetry):
            webhook_delivery.deliver(delivery_id)
    row = WebhookDelivery.objects.get(pk=delivery_id)
    assert (row.status, row.attempts, row.last_status_code) == ("Pending", 2, 503)
    assert webhook_delivery.deliver(delivery_id) == "Delivered"
    assert len({headers["webhook-id"] for headers, _ in receiver.got}) == 1 and len(receiver.got) == 3
    assert webhook_delivery.deliver(delivery_id) == "Delivered" and len(receiver.got) == 3  # a duplicate task: no-op


def test_the_last_attempt_marks_the_delivery_failed_and_a_4xx_is_not_retried(api, setup, admin_user, receiver):
    receiver.codes = [502, 410]
    _subscribe(api, name="hook", url=receiver.url, phases=["Queued", "Dispatched"])
    builders.make_job(*setup, user=admin_user, phase=GangPhase.QUEUED)
    first, second = webhook_delivery.scan()
    assert webhook_delivery.deliver(first, final=True) == "Failed"
    assert webhook_delivery.deliver(second) == "Failed"  # 410: the receiver said no; retrying would not help
    assert WebhookDelivery.objects.get(pk=second).last_error.startswith("HTTP 410")


def test_the_delivery_log_and_the_send_test_button(api, receiver, sent_tasks):
    sub = _subscribe(api, name="hook", url=receiver.url)
    r = api.post(f"/api/v1/webhooks/{sub['id']}/test/")
    sent = [args[0] for name, args in sent_tasks if name == enqueue.DELIVER_WEBHOOK]
    assert r.status_code == 202 and r.data["status"] == "Pending"
    assert sent == [r.data["id"]]
    webhook_delivery.deliver(sent[0])
    log = api.get(f"/api/v1/webhooks/{sub['id']}/deliveries/").data
    assert [(d["status"], d["attempts"], d["payload"]["type"]) for d in log] == [("Delivered", 1, "webhook.test")]
    assert json.loads(receiver.got[0][1])["text"] == "gangweb: test event for webhook 'hook'"


def test_a_receiver_whose_address_became_private_is_failed_not_called(api, setup, admin_user, receiver, settings):
    _subscribe(api, name="hook", url=receiver.url, phases=["Queued"])
    builders.make_job(*setup, user=admin_user, phase=GangPhase.QUEUED)
    [delivery_id] = webhook_delivery.scan()
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = False
    assert webhook_delivery.deliver(delivery_id) == "Failed"
    assert receiver.got == [] and "loopback address" in WebhookDelivery.objects.get(pk=delivery_id).last_error


def test_users_see_only_their_own_subscriptions(teams, settings):
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = True
    _subscribe(teams.clients["a_sub"], name="a", url="http://127.0.0.1/a")
    assert [w["name"] for w in teams.clients["a_sub"].get("/api/v1/webhooks/").data["results"]] == ["a"]
    assert teams.clients["b_sub"].get("/api/v1/webhooks/").data["results"] == []
    assert [w["name"] for w in teams.clients["admin"].get("/api/v1/webhooks/").data["results"]] == ["a"]


def test_the_celery_task_retries_until_delivered_and_gives_up_after_its_last_retry(api, setup, admin_user, receiver):
    receiver.codes = [500, 500]
    _subscribe(api, name="hook", url=receiver.url, phases=["Queued", "Dispatched"])
    builders.make_job(*setup, user=admin_user, phase=GangPhase.QUEUED)
    first, second = webhook_delivery.scan()
    tasks.deliver_webhook.apply(args=[first])  # eager: the task's own retries run at once, without the countdown
    row = WebhookDelivery.objects.get(pk=first)
    assert (row.status, row.attempts) == ("Delivered", 3)
    receiver.codes = [503] * 20
    tasks.deliver_webhook.apply(args=[second])
    row = WebhookDelivery.objects.get(pk=second)
    assert (row.status, row.attempts) == ("Failed", tasks.deliver_webhook.max_retries + 1)


def test_a_metadata_address_stays_refused_when_private_receivers_are_allowed(api, settings):
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = True
    r = api.post("/api/v1/webhooks/", {"name": "x", "url": "http://169.254.169.254/latest/"}, format="json")
    assert r.status_code == 400 and "cloud metadata endpoint" in str(r.data["url"])
    assert api.post("/api/v1/webhooks/", {"name": "y", "url": "http://10.1.2.3/hook"}, format="json").status_code == 201


def test_the_task_retries_with_exponential_backoff_and_jitter(api, setup, admin_user, receiver, monkeypatch):
    """Celery's autoretry computes each retry's countdown: full jitter under 2 s x 2^n, capped at 600 s."""
    from celery import Task

    countdowns = []
    real_retry = Task.retry

    def spy(self, *args, **kwargs):
        countdowns.append(kwargs.get("countdown"))
        return real_retry(self, *args, **kwargs)

    monkeypatch.setattr(Task, "retry", spy)
    receiver.codes = [500] * 20
    _subscribe(api, name="hook", url=receiver.url, phases=["Queued"])
    builders.make_job(*setup, user=admin_user, phase=GangPhase.QUEUED)
    [delivery_id] = webhook_delivery.scan()
    tasks.deliver_webhook.apply(args=[delivery_id])
    assert len(countdowns) == tasks.deliver_webhook.max_retries == 8
    assert all(c is not None and 0 <= c <= min(2 * 2 ** n, 600) for n, c in enumerate(countdowns)), countdowns
    assert WebhookDelivery.objects.get(pk=delivery_id).status == "Failed"


def test_a_receiver_slower_than_the_read_timeout_is_a_failed_attempt_to_retry(api, setup, admin_user, settings):
    """A receiver that answers after the read timeout (here 0.3 s; 5 s by default) costs one attempt, recorded as
    a timeout and retried; it never holds the worker for as long as it sleeps."""
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = True
    settings.GANGWEB_WEBHOOK_TIMEOUT_SECONDS = 0.3
    release = threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self):
            release.wait(30)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _subscribe(api, name="slow", url=f"http://127.0.0.1:{server.server_address[1]}/hook", phases=["Queued"])
        builders.make_job(*setup, user=admin_user, phase=GangPhase.QUEUED)
        [delivery_id] = webhook_delivery.scan()
        with pytest.raises(webhook_delivery.DeliveryRetry, match="did not answer within the timeout"):
            webhook_delivery.deliver(delivery_id)
    finally:
        release.set()
        server.shutdown()
        server.server_close()
    row = WebhookDelivery.objects.get(pk=delivery_id)
    assert (row.status, row.attempts) == ("Pending", 1) and "did not answer within the timeout" in row.last_error


def test_every_subscribed_transition_reaches_the_receiver_once_signed_and_a_500_is_retried(api, setup, admin_user,
                                                                                          receiver):
    """The whole path a beat tick takes: scan, then the Celery task per delivery (eager). The receiver's first
    answer is a 500; that delivery is retried with the same webhook-id and delivered. Scanning and sending again
    sends nothing twice."""
    from scheduling.models import PhaseTransition

    receiver.codes = [500]
    phases = ["Submitted", "Running", "Succeeded", "Failed"]
    sub = _subscribe(api, name="pipeline", url=receiver.url, phases=phases)
    jobs = [builders.make_job(*setup, user=admin_user, name="ok", phase=GangPhase.SUCCEEDED),
            builders.make_job(*setup, user=admin_user, name="bad", phase=GangPhase.FAILED)]
    for _ in range(2):
        for delivery_id in webhook_delivery.scan():
            tasks.deliver_webhook.apply(args=[delivery_id])
    wanted = sorted(PhaseTransition.objects.filter(job__in=jobs, phase__in=phases).values_list("job_id", "phase"))
    assert len(wanted) == 6  # Submitted, Running and the end of each
    verified = {}
    for headers, body in receiver.got:
        payload = Webhook(sub["secret"]).verify(body, headers)  # raises WebhookVerificationError if not
        verified.setdefault(headers["webhook-id"], []).append(payload)
    assert len(receiver.got) == len(wanted) + 1  # each once, and the one that got the 500 twice
    assert sorted((p[0]["data"]["job"]["id"], p[0]["data"]["phase"]) for p in verified.values()) == wanted
    first_id = receiver.got[0][0]["webhook-id"]
    assert len(verified[first_id]) == 2 and verified[first_id][0] == verified[first_id][1]
    rows = WebhookDelivery.objects.filter(subscription_id=sub["id"])
    assert sorted((r.status, r.attempts) for r in rows) == [("Delivered", 1)] * 5 + [("Delivered", 2)]
    assert rows.get(event_id=first_id).attempts == 2


def test_a_rescan_builds_no_payload_for_entries_that_already_have_a_delivery(api, setup, admin_user, receiver,
                                                                           monkeypatch):
    """Each beat tick scans a 10-minute window: only entries new to a subscription are loaded and turned into
    payloads, so a tick's work follows the new entries, not the window."""
    _subscribe(api, name="all mine", url=receiver.url)
    builders.make_job(*setup, user=admin_user, phase=GangPhase.RUNNING)
    built = []
    real = webhook_delivery.payload_for
    monkeypatch.setattr(webhook_delivery, "payload_for", lambda entry, job: built.append(entry.pk) or real(entry, job))
    assert len(webhook_delivery.scan()) == 5 and len(built) == 5
    assert webhook_delivery.scan() == [] and len(built) == 5
    builders.make_job(*setup, user=admin_user, phase=GangPhase.DISPATCHED)
    assert len(webhook_delivery.scan()) == 2 and len(built) == 7


def test_beat_drops_a_scan_not_started_within_its_period():
    from django.conf import settings as conf

    entry = conf.CELERY_BEAT_SCHEDULE["notify-transitions"]
    assert entry["options"]["expires"] == entry["schedule"] == conf.GANGWEB_NOTIFY_SCAN_SECONDS
