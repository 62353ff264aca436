"""Issue 32, the outbound rows: redirects (row 1), DNS rebinding of webhooks (row 2) and what outbound errors tell
users (row 7). Each replays the attack with fake servers on loopback only: an "allowed" server on one loopback
address and an "internal service" on another that the install's address rules refuse (the test settings allow
only the first: `GANGWEB_ALLOW_PRIVATE_*_ADDRESSES = "127.0.0.1/32"` or `"127.0.0.2/32"`)."""
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scheduling import tasks
from scheduling.kube import client as kube_client
from scheduling.kube.errors import TransientKubeError
from scheduling.models import Cluster, GangJob, ReconcileAttempt, WebhookDelivery
from scheduling.reconcile import jobs as job_reconcile
from scheduling.services.webhooks import delivery as webhook_delivery
from scheduling.services.webhooks import subscriptions as notifications
from tests.fake_apiserver import VERSION, RecordingServer

APIS_WITH_WORKLOADS = {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
    {"name": group, "versions": [{"groupVersion": f"{group}/{v}", "version": v}],
     "preferredVersion": {"groupVersion": f"{group}/{v}", "version": v}}
    for group, v in (("batch", "v1"), ("scheduling.k8s.io", "v1beta1"))]}

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def beat_fan_out_runs_here(monkeypatch):
    """The beat tasks queue one probe per cluster; here each runs in-process, as its worker would."""
    monkeypatch.setattr(tasks.probe_cluster, "delay", tasks.probe_cluster)


def store_directly(cluster, text):
    Cluster.objects.filter(pk=cluster.pk).update(kubeconfig=text)
    kube_client.forget()
    return Cluster.objects.get(pk=cluster.pk)


class Receiver:
    """A plain-HTTP receiver on `host` (a loopback address), on `port` or a free one: records each POST (headers,
    body) and answers `status` with `headers`."""

    def __init__(self, host="127.0.0.1", port=0, status=200, headers=None):
        self.got = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.got.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _subscribe(client, **body):
    response = client.post("/api/v1/webhooks/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


# --- row 1: no redirect is followed ------------------------------------------------------------------------------

def test_row1_cluster_client_never_follows_a_redirect_to_a_forbidden_address(teams, settings):
    """An allowed API server (127.0.0.1) answers every request 307 to an internal service on 127.0.0.3, which the
    install refuses. Before: the web and the worker sent their GETs and POSTs there and its answer reached the
    cluster's health. Now nothing reaches it; the cluster says it answered a redirect."""
    settings.GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES = "127.0.0.1/32"
    internal_answer = {"major": "1", "minor": "36", "gitVersion": "INTERNAL-SECRET-v9"}
    with RecordingServer(host="127.0.0.3", tls=False, answers={}, fallback=(200, internal_answer)) as internal:
        moved = (307, "", {"Location": f"{internal.url}/stolen"})
        with RecordingServer(answers={}, fallback=moved) as allowed:
            local = store_directly(teams.local, allowed.kubeconfig())
            tasks.probe_all_clusters()
            events = teams.clients["a_view"].get(f"/api/v1/jobs/{teams.a_job.pk}/events/")
            try:  # a transient error (retried with backoff), as for any misconfigured server
                job_reconcile.run_pass(GangJob.objects.select_related("cluster", "queue").get(pk=teams.a_job.pk))
                failed = None
            except TransientKubeError as exc:
                failed = exc
            asked = list(allowed.requests)
        reached = list(internal.requests)
    assert asked, "the allowed server was asked"
    assert reached == [], f"a redirect was followed to the internal service: {reached}"
    local.refresh_from_db()
    said = "Redirected: the server answered a redirect, which gangweb does not follow (HTTP 307)"
    assert (local.health, local.health_message) == ("Unreachable", said)
    assert "INTERNAL-SECRET" not in local.server_version + local.health_message
    assert events.status_code == 502 and events.json()["error"] == said
    assert failed is not None and failed.reason == "Redirected"
    assert GangJob.objects.get(pk=teams.a_job.pk).phase_reason == "Redirected"
    assert ReconcileAttempt.objects.filter(cluster=local, reason="Redirected").exists()


def test_row1_job_creates_answered_307_never_reach_the_internal_service(teams, settings):
    """The API server answers reads normally (empty lists) and every create 307 to the internal service. Before:
    the creates, with the job's objects as their bodies, were re-sent there (a 307 keeps the method and body)."""
    settings.GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES = "127.0.0.1/32"
    empty = (200, {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []})
    with RecordingServer(host="127.0.0.3", tls=False, answers={}, fallback=(201, {})) as internal:
        moved = (307, "", {"Location": f"{internal.url}/stolen"})
        with RecordingServer(answers={"/version": (200, VERSION), "/apis": (200, APIS_WITH_WORKLOADS)},
                             fallback=empty, writes=moved) as allowed:
            store_directly(teams.local, allowed.kubeconfig())
            job = GangJob.objects.select_related("cluster", "queue").get(pk=teams.a_job.pk)
            try:
                job_reconcile.run_pass(job)
                failed = None
            except TransientKubeError as exc:
                failed = exc
            posted = [r for r in allowed.requests if r["method"] == "POST"]
        reached = list(internal.requests)
    assert posted, "the reconcile tried to create the job's objects"
    assert reached == [], f"{len(reached)} redirected requests reached the internal service"
    assert failed is not None and failed.reason == "Redirected"


def test_row1_webhook_delivery_never_follows_a_redirect(teams, settings):
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = "127.0.0.2/32"
    with Receiver("127.0.0.3") as internal, Receiver("127.0.0.2", status=307,
                                                     headers={"Location": internal.url}) as allowed:
        sub = _subscribe(teams.clients["a_sub"], name="hook", url=allowed.url)
        delivery = notifications.send_test(teams.a_sub, notifications.WebhookSubscription.objects.get(pk=sub["id"]))
        assert webhook_delivery.deliver(delivery.pk) == "Failed"
    assert len(allowed.got) == 1 and internal.got == []
    row = WebhookDelivery.objects.get(pk=delivery.pk)
    assert (row.last_status_code, row.last_error) == (
        307, "the server answered a redirect, which gangweb does not follow (HTTP 307)")


# --- row 2: webhooks connect to the address that was checked -----------------------------------------------------

@pytest.fixture
def rebinding_dns(monkeypatch):
    """A name `rebind.test` whose DNS answers 127.0.0.2 (allowed) to gangweb's address check and 127.0.0.1
    (refused) to anyone else: the worst timing a rebinding attacker with a zero TTL can get."""
    real = socket.getaddrinfo

    def checking() -> bool:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_name == "resolve" and frame.f_code.co_filename.endswith("addresses.py"):
                return True
            frame = frame.f_back
        return False

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "rebind.test":
            address = "127.0.0.2" if checking() else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, int(port)))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_row2_webhook_delivery_goes_to_the_checked_address_not_a_rebound_one(teams, settings, rebinding_dns):
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = "127.0.0.2/32"
    with Receiver("127.0.0.2") as allowed, Receiver("127.0.0.1", port=allowed.port) as internal:
        url = f"http://rebind.test:{allowed.port}/hook?x=1"
        sub = _subscribe(teams.clients["a_sub"], name="hook", url=url)
        delivery = notifications.send_test(teams.a_sub, notifications.WebhookSubscription.objects.get(pk=sub["id"]))
        assert webhook_delivery.deliver(delivery.pk) == "Delivered"
    assert internal.got == [], "the signed POST reached the refused address"
    [(headers, body)] = allowed.got
    assert headers["host"] == f"rebind.test:{allowed.port}"  # the name, as the receiver's virtual host expects
    assert headers["webhook-id"] == delivery.event_id and b"test event" in body


def test_row2_https_webhook_is_pinned_with_tls_verified_against_the_name(teams, settings, monkeypatch):
    """The pinned connection still sends the name as SNI and checks the certificate against it: the receiver's
    certificate names `localhost` and 127.0.0.1 only, so a name it does not carry is refused."""
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = "127.0.0.1/32"
    with RecordingServer(answers={}, fallback=(204, "")) as tls_receiver:
        monkeypatch.setenv("SSL_CERT_FILE", _ca_file(tls_receiver))
        sub = _subscribe(teams.clients["a_sub"], name="hook", url=f"https://localhost:{tls_receiver.port}/h")
        delivery = notifications.send_test(teams.a_sub, notifications.WebhookSubscription.objects.get(pk=sub["id"]))
        assert webhook_delivery.deliver(delivery.pk) == "Delivered"
        [request] = tls_receiver.requests
        assert (request["method"], request["path"], request["headers"]["host"]) == (
            "POST", "/h", f"localhost:{tls_receiver.port}")


def _ca_file(server) -> str:
    import tempfile

    handle = tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False)
    handle.write(server.cert_pem)
    handle.close()
    return handle.name


# --- row 7: outbound errors say "unreachable", not what names resolve to or which ports answer ------------------

def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_row7_outbound_errors_say_unreachable_without_addresses_or_port_states(teams, settings):
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = "127.0.0.1/32"
    port = _closed_port()
    # A webhook to a closed port: the delivery log says unreachable, not "Connection refused" on which address.
    sub = _subscribe(teams.clients["a_sub"], name="hook", url=f"http://localhost:{port}/hook")
    delivery = notifications.send_test(teams.a_sub, notifications.WebhookSubscription.objects.get(pk=sub["id"]))
    with pytest.raises(webhook_delivery.DeliveryRetry):
        webhook_delivery.deliver(delivery.pk)
    error = WebhookDelivery.objects.get(pk=delivery.pk).last_error
    assert error.startswith("unreachable: ")
    # A name that resolves to a refused address: the answer does not say which address.
    settings.GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = ""
    refused = teams.clients["a_sub"].post("/api/v1/webhooks/", {"name": "x", "url": "http://localhost/h"},
                                          format="json")
    assert refused.status_code == 400
    assert refused.json()["url"] == ["localhost is unreachable: it resolves to an address this install does not "
                                     "allow (see docs/security.md, outbound address rules); receivers on loopback, "
                                     "private or link-local addresses are allowed by the setting "
                                     "GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES"]
    # A cluster whose server's port is closed: health and the events error say unreachable, nothing more.
    with RecordingServer() as fake:
        local = store_directly(teams.local, fake.kubeconfig(server=f"https://localhost:{port}"))
    tasks.probe_all_clusters()
    events = teams.clients["a_view"].get(f"/api/v1/jobs/{teams.a_job.pk}/events/")
    local.refresh_from_db()
    for text in (error, refused.content.decode(), local.health_message, events.json()["error"]):
        for detail in ("127.0.0.1", "::1", "refused", "Errno", "NewConnectionError", "HTTPSConnectionPool"):
            assert detail not in text, (detail, text)
    assert local.health_message == ("ClusterUnreachable: the API server is unreachable (no connection or no answer in "
                                    "time; details are in the server log)")
