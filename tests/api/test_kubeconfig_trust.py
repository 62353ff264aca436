"""Issue 15, the kubeconfig rows: a cluster admin's kubeconfig is data, never code, file paths or internal
addresses, and what viewers read about a cluster's failures carries no token, server body or file content.

Each attack goes through the API or the dashboard (and, for rows stored before the rules, the worker's own task
functions run in-process) against `tests.fake_apiserver.RecordingServer`, a local HTTPS server that records what
it receives. The test settings allow loopback cluster addresses (GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES), as
`make run` does; the address rows turn that off.
"""
import base64
import json
import os

import pytest
import yaml
from django.test import Client
from kubernetes import client as k8s
from kubernetes.config import kube_config

from scheduling import tasks
from scheduling.kube import client as kube_client
from scheduling.models import Cluster, GangJob, ReconcileAttempt
from scheduling.reconcile import jobs as job_reconcile
from tests.fake_apiserver import RecordingServer, kubeconfig, self_signed

pytestmark = pytest.mark.django_db


def script(tmp_path, marker, output: dict) -> str:
    """An executable that creates `marker` and prints `output`: what a hostile exec plugin or cmd-path runs."""
    path = tmp_path / f"plugin-{len(list(tmp_path.iterdir()))}.sh"
    path.write_text(f"#!/bin/sh\ntouch {marker}\necho '{json.dumps(output)}'\n")
    path.chmod(0o755)
    return str(path)


def exec_user(tmp_path, marker) -> dict:
    credential = {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {"token": "from-exec"}}
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "interactiveMode": "Never",
                     "command": script(tmp_path, marker, credential)}}


def gcp_user(tmp_path, marker) -> dict:
    output = {"credential": {"access_token": "from-cmd", "token_expiry": "2099-01-01T00:00:00Z"}}
    return {"auth-provider": {"name": "gcp", "config": {"cmd-path": script(tmp_path, marker, output)}}}


@pytest.fixture(autouse=True)
def beat_fan_out_runs_here(monkeypatch):
    """The beat tasks queue one probe/resync per cluster; here each runs in-process, as its worker would."""
    monkeypatch.setattr(tasks.probe_cluster, "delay", tasks.probe_cluster)
    monkeypatch.setattr(tasks.resync_cluster, "delay", tasks.resync_cluster)


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "pwned"


@pytest.fixture
def fake():
    with RecordingServer() as server:
        yield server


def browser(user) -> Client:
    page = Client()
    page.force_login(user)
    return page


def store_directly(cluster, text):
    """A row written before the rules (or through the admin, or the database): no validation on the way in."""
    Cluster.objects.filter(pk=cluster.pk).update(kubeconfig=text)
    kube_client.forget()
    return Cluster.objects.get(pk=cluster.pk)


# --- the test's own proof: the upstream loader does run these plugins -------------------------------------------

@pytest.mark.parametrize("user", [exec_user, gcp_user])
def test_the_client_librarys_own_loader_would_run_the_plugin(tmp_path, marker, fake, user):
    """Without gangweb's rules, the kubeconfigs below run their command (so the marker checks below can fail)."""
    doc = yaml.safe_load(fake.kubeconfig(user(tmp_path, marker)))
    try:
        kube_config.KubeConfigLoader(config_dict=doc).load_and_set(k8s.Configuration())
    except Exception:  # noqa: BLE001 - whether the token is then usable does not matter: the command ran
        pass
    assert marker.exists()


# --- C1: exec and auth-provider never run -------------------------------------------------------------------------

@pytest.mark.parametrize("user, field", [(exec_user, "kubeconfig.users[0].user.exec"),
                                         (gcp_user, "kubeconfig.users[0].user.auth-provider")])
def test_a_plugin_kubeconfig_is_refused_on_create_update_and_the_form_and_never_runs(
        teams, tmp_path, marker, fake, user, field):
    text = fake.kubeconfig(user(tmp_path, marker))
    created = teams.clients["padmin"].post("/api/v1/clusters/", {"name": "evil", "kubeconfig": text}, format="json")
    assert created.status_code == 400 and field in created.json(), created.content
    assert not Cluster.objects.filter(name="evil").exists()

    before = Cluster.objects.get(name="local").kubeconfig
    updated = teams.clients["a_admin"].patch("/api/v1/clusters/local/", {"kubeconfig": text}, format="json")
    assert updated.status_code == 400 and field in updated.json(), updated.content
    assert Cluster.objects.get(name="local").kubeconfig == before

    page = browser(teams.padmin).post("/clusters/new/", {"name": "evil", "kubeconfig": text})
    assert page.status_code == 200 and field.removeprefix("kubeconfig.") in page.content.decode()
    assert not Cluster.objects.filter(name="evil").exists()
    assert not marker.exists() and fake.requests == []


@pytest.mark.parametrize("user", [exec_user, gcp_user])
def test_a_plugin_kubeconfig_stored_before_the_rules_never_runs_in_the_web_or_the_worker(
        teams, tmp_path, marker, fake, user):
    local = store_directly(teams.local, fake.kubeconfig(user(tmp_path, marker)))
    # Web: the Test button, the job's events in the API and on its page, as a cluster admin and a viewer.
    tested = browser(teams.a_admin).post("/clusters/local/test/", follow=True)
    events = teams.clients["a_view"].get(f"/api/v1/jobs/{teams.a_job.pk}/events/")
    page = browser(teams.a_view).get(f"/jobs/{teams.a_job.pk}/events/")
    assert not marker.exists() and fake.requests == []
    assert tested.status_code == 200 and "InvalidKubeconfig" in tested.content.decode()
    assert events.status_code == 502 and "InvalidKubeconfig" in events.json()["error"]
    assert page.status_code == 200 and "InvalidKubeconfig" in page.content.decode()
    # Worker: beat's probe, a reconcile pass of the job, the periodic resync, executed for real in-process.
    tasks.probe_all_clusters()
    result = job_reconcile.run_pass(GangJob.objects.select_related("cluster", "queue").get(pk=teams.a_job.pk))
    assert result.error is not None and result.error.reason == "InvalidKubeconfig"
    tasks.resync_all_clusters()
    assert not marker.exists() and fake.requests == []
    local.refresh_from_db()
    assert local.health == "Unreachable" and "users[0].user" in local.health_message
    assert ReconcileAttempt.objects.filter(cluster=local, kind="probe", reason="InvalidKubeconfig").exists()


# --- H1: no file is read, whatever the path --------------------------------------------------------------------

@pytest.mark.parametrize("user, field", [
    ({"tokenFile": "/etc/shadow"}, "tokenFile"),
    ({"tokenFile": "/proc/self/environ"}, "tokenFile"),
    ({"client-certificate": "/etc/passwd", "client-key": "/etc/shadow"}, "client-certificate"),
    ({"token": "t", "username": "u", "password": "p"}, "username"),
])
def test_file_and_basic_auth_fields_are_refused_by_name(teams, fake, user, field):
    response = teams.clients["padmin"].post("/api/v1/clusters/", {"name": "files", "kubeconfig": fake.kubeconfig(
        user)}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [f"kubeconfig.users[0].user.{field}"]
    assert not Cluster.objects.filter(name="files").exists()


def test_a_present_and_a_missing_file_answer_the_same(teams, fake):
    def answer(path):
        for user in ({"tokenFile": path}, {"client-certificate": path, "client-key": path}):
            response = teams.clients["a_admin"].patch("/api/v1/clusters/local/", {"kubeconfig": fake.kubeconfig(
                user)}, format="json")
            yield response.status_code, response.content.replace(path.encode(), b"PATH")

    assert list(answer("/etc/hostname")) == list(answer("/nonexistent/hostname"))
    ca_present = fake.kubeconfig(cluster_extra={"certificate-authority": "/etc/hostname"})
    ca_missing = fake.kubeconfig(cluster_extra={"certificate-authority": "/nonexistent/ca"})
    answers = [teams.clients["a_admin"].patch("/api/v1/clusters/local/", {"kubeconfig": text}, format="json")
               for text in (ca_present, ca_missing)]
    assert [a.status_code for a in answers] == [400, 400]
    assert answers[0].json() == answers[1].json()


@pytest.mark.parametrize("environ", [False, True])
def test_a_token_file_stored_before_the_rules_is_never_read_nor_sent(teams, fake, tmp_path, monkeypatch, environ):
    secret = tmp_path / "secret"
    secret.write_text("FILE-CONTENT-4f2a")
    monkeypatch.setenv("GANGWEB_TEST_ENV_SECRET", "FILE-CONTENT-in-environ")
    path = "/proc/self/environ" if environ else str(secret)
    store_directly(teams.local, fake.kubeconfig({"tokenFile": path}))
    events = teams.clients["a_view"].get(f"/api/v1/jobs/{teams.a_job.pk}/events/")
    assert events.status_code == 502 and "tokenFile" in events.json()["error"]
    tasks.probe_all_clusters()
    assert fake.requests == []  # refused before any connection: nothing read, nothing sent
    for text in (events.content.decode(), Cluster.objects.get(name="local").health_message):
        assert "FILE-CONTENT" not in text


# --- M1: addresses and response bodies ---------------------------------------------------------------------------

@pytest.mark.parametrize("server, says", [
    ("https://127.0.0.1:6443", "loopback"),
    ("https://localhost:6443", "localhost is unreachable: it resolves to an address this install does not allow"),
    ("https://[::1]:6443", "loopback"),
    ("https://[::ffff:127.0.0.1]:6443", "loopback"),
    ("https://10.1.2.3:6443", "private"),
    ("https://192.168.0.10", "private"),
    ("https://169.254.169.254", "cloud metadata"),
    ("https://[fd00:ec2::254]", "cloud metadata"),
    ("https://169.254.10.1", "link-local"),
    ("https://0.0.0.0:6443", "unspecified"),
    ("https://224.0.0.1", "multicast"),
])
def test_a_server_on_an_internal_address_is_refused_unless_the_install_allows_it(teams, settings, server, says):
    settings.GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES = ""
    text = kubeconfig({"server": server}, {"token": "t"})
    response = teams.clients["padmin"].post("/api/v1/clusters/", {"name": "inside", "kubeconfig": text},
                                            format="json")
    assert response.status_code == 400, response.content
    message = response.json()["kubeconfig.clusters[0].cluster.server"][0]
    assert says in message
    assert not Cluster.objects.filter(name="inside").exists()


def test_metadata_endpoints_stay_refused_when_private_addresses_are_allowed(teams, settings):
    settings.GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES = "1"
    for server in ("https://169.254.169.254", "https://[fd00:ec2::254]"):
        text = kubeconfig({"server": server}, {"token": "t"})
        response = teams.clients["padmin"].post("/api/v1/clusters/", {"name": "meta", "kubeconfig": text},
                                                format="json")
        assert response.status_code == 400 and "cloud metadata" in json.dumps(response.json())
    allowed = teams.clients["padmin"].post("/api/v1/clusters/", {"name": "onprem", "kubeconfig": kubeconfig(
        {"server": "https://10.1.2.3:6443"}, {"token": "t"})}, format="json")
    assert allowed.status_code == 201, allowed.content


def test_only_https_servers(teams):
    response = teams.clients["padmin"].post("/api/v1/clusters/", {"name": "plain", "kubeconfig": kubeconfig(
        {"server": "http://127.0.0.1:8080"}, {"token": "t"})}, format="json")
    assert response.status_code == 400 and "https" in response.json()["kubeconfig.clusters[0].cluster.server"][0]


def test_a_row_on_a_refused_address_is_never_contacted_by_the_worker(teams, fake, settings):
    store_directly(teams.local, fake.kubeconfig())
    settings.GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES = ""
    tasks.probe_all_clusters()
    local = Cluster.objects.get(name="local")
    assert local.health == "Unreachable" and local.health_message.startswith("AddressNotAllowed: ")
    assert fake.requests == []


def test_an_internal_services_answers_never_reach_viewers(teams):
    body = "INTERNAL-SERVICE-BODY secret=hunter2"
    answers = {"/version": (200, {"service": body}), "/apis": (200, body),
               f"/api/v1/namespaces/{teams.a_job.namespace}/pods": (500, body)}
    with RecordingServer(answers) as internal:
        store_directly(teams.local, internal.kubeconfig())
        tested = browser(teams.a_admin).post("/clusters/local/test/", follow=True)
        events = teams.clients["a_view"].get(f"/api/v1/jobs/{teams.a_job.pk}/events/")
        page = browser(teams.a_view).get(f"/jobs/{teams.a_job.pk}/events/")
        assert internal.requests  # it was asked (the address is allowed here): only its answers stay inside
    local = Cluster.objects.get(name="local")
    assert tested.status_code == 200 and local.health_message.startswith("NotKubernetes: ")
    assert local.served_apis == [] and local.server_version == ""
    assert events.status_code == 502 and events.json()["error"] == "ServerError: HTTP 500 Internal Server Error"
    for text in (tested.content.decode(), events.content.decode(), page.content.decode(), local.health_message,
                 *ReconcileAttempt.objects.filter(cluster=local).values_list("message", flat=True)):
        assert "INTERNAL-SERVICE-BODY" not in text and "hunter2" not in text


# --- M2: a token with a trailing newline ------------------------------------------------------------------------

def test_a_token_ending_in_a_newline_is_sent_without_it_and_never_echoed(teams, fake):
    text = fake.kubeconfig({"token": "tok-5e3c9a\n"})
    assert teams.clients["a_admin"].patch("/api/v1/clusters/local/", {"kubeconfig": text},
                                          format="json").status_code == 200
    events = teams.clients["a_view"].get(f"/api/v1/jobs/{teams.a_job.pk}/events/")
    assert fake.requests and {r["headers"].get("authorization") for r in fake.requests} == {"Bearer tok-5e3c9a"}
    assert events.status_code == 502 and "tok-5e3c9a" not in events.content.decode()  # the fake has no pods


def test_a_token_with_whitespace_inside_is_refused(teams, fake):
    response = teams.clients["a_admin"].patch("/api/v1/clusters/local/", {"kubeconfig": fake.kubeconfig(
        {"token": "tok-a\nAuthorization: x"})}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == ["kubeconfig.users[0].user.token"]
    assert "tok-a" not in response.content.decode()


def test_a_newline_token_stored_before_the_rules_is_stripped_by_the_client_factory(teams, fake):
    store_directly(teams.local, fake.kubeconfig({"token": "tok-77b1\n"}))
    tasks.probe_all_clusters()
    assert Cluster.objects.get(name="local").health == "Healthy"
    assert {r["headers"].get("authorization") for r in fake.requests} == {"Bearer tok-77b1"}


# --- M6: in_cluster and the name are the platform admin's ------------------------------------------------------

@pytest.mark.parametrize("change", [{"in_cluster": True}, {"name": "renamed"}])
def test_a_cluster_admin_may_not_switch_to_in_cluster_or_rename(teams, change):
    (field,) = change
    response = teams.clients["a_admin"].patch("/api/v1/clusters/local/", change, format="json")
    assert response.status_code == 403 and field in response.json(), response.content
    local = Cluster.objects.get(pk=teams.local.pk)
    assert (local.name, local.in_cluster) == ("local", False)
    same = teams.clients["a_admin"].patch("/api/v1/clusters/local/", {"name": "local", "in_cluster": False,
                                                                      "description": "ok"}, format="json")
    assert same.status_code == 200
    assert teams.clients["padmin"].patch("/api/v1/clusters/local/", change, format="json").status_code == 200


# --- L1: one cluster's odd answer does not stop the others ----------------------------------------------------

def test_probe_all_isolates_a_cluster_that_is_not_kubernetes(teams):
    with RecordingServer({"/version": (200, {"hello": "world"})}) as odd, RecordingServer() as good:
        first = Cluster.objects.create(name="aaa-odd", kubeconfig=odd.kubeconfig())
        last = Cluster.objects.create(name="zzz-good", kubeconfig=good.kubeconfig())
        tasks.probe_all_clusters()
        tested = browser(teams.padmin).post("/clusters/aaa-odd/test/", follow=True)
    first.refresh_from_db()
    last.refresh_from_db()
    assert (first.health, last.health) == ("Unreachable", "Healthy")
    assert first.health_message == "NotKubernetes: GET /version did not answer a Kubernetes version document"
    assert last.server_version == "v1.36.3" and "batch/v1" in last.served_apis
    assert tested.status_code == 200 and "NotKubernetes" in tested.content.decode()


# --- DNS rebinding: the connection goes to the address that was checked --------------------------------------

def test_a_host_name_is_resolved_checked_and_pinned_with_tls_kept_on_the_name(teams, fake):
    local = store_directly(teams.local, fake.kubeconfig(server=f"https://localhost:{fake.port}"))
    api = kube_client.api_client(local)
    assert api.configuration.host in (f"https://127.0.0.1:{fake.port}", f"https://[::1]:{fake.port}")
    tasks.probe_all_clusters()  # TLS verified against the certificate's name "localhost" (SNI and check)
    assert Cluster.objects.get(pk=local.pk).health == "Healthy"
    assert fake.requests and all(r["headers"]["host"].startswith("127.0.0.1") for r in fake.requests)


def test_a_client_certificate_from_data_fields_is_presented_and_leaves_no_file(teams, tmp_path, monkeypatch):
    cert, key = self_signed(names=("gangweb-client",), ips=())
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the factory's private key file lives, briefly
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    with RecordingServer(client_ca_pem=cert) as mtls:
        local = store_directly(teams.local, mtls.kubeconfig({"client-certificate-data": base64.b64encode(cert).decode(),
                                                             "client-key-data": base64.b64encode(key).decode()}))
        tasks.probe_all_clusters()
    assert Cluster.objects.get(pk=local.pk).health == "Healthy"
    assert mtls.requests and all(r["peer"] and "authorization" not in r["headers"] for r in mtls.requests)
    assert os.listdir(tmp_path) == []
