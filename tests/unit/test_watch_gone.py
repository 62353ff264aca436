"""A watch whose resourceVersion expired (410 Gone) is counted as a restart labelled Gone, and the watcher lists
again and keeps delivering: the informer loop of scheduling.reconcile.cluster_watcher.

The real local control plane does not answer 410 on demand (its watch cache serves even resourceVersion 1 on a
young cluster, compacted or not), so a small HTTP server plays the API server here and answers exactly what
kube-apiserver sends for an expired watch: HTTP 200, then one ERROR event carrying a Status with code 410 and
reason Expired (k8s.io/apiserver `storage.NewTooLargeResourceVersionError` / `errors.NewResourceExpired`). The
watcher talks to it through the real kubernetes client, as it talks to a cluster.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from kubernetes import client

from scheduling.observe import metrics
from scheduling.reconcile.cluster_watcher import ClusterWatcher

EXPIRED = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                       "message": "too old resource version: 100 (250)", "reason": "Expired",
                                       "code": 410}}


def a_pod(rv: str) -> dict:
    return {"metadata": {"name": "train-0", "namespace": "ns", "uid": "pod-uid", "resourceVersion": rv,
                         "labels": {"gangweb.io/instance": "test", "gangweb.io/job-uid": "job-1"}},
            "status": {"phase": "Pending"}}


class FakeApiServer(BaseHTTPRequestHandler):
    """LIST answers a PodList whose pod changes on each list; the first pod WATCH answers 410 Expired once `expire`
    is set (a test that must see the first list observed first clears it, and sets it when it was)."""

    requests: list[tuple[str, dict]] = []
    pod_lists = 0
    lock = threading.Lock()
    expire = threading.Event()

    def log_message(self, *args):  # keep the test output clean
        pass

    def do_GET(self):
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        cls = type(self)
        with cls.lock:
            cls.requests.append((url.path, query))
            first_pod_watch = url.path == "/api/v1/pods" and query.get("watch", "").lower() == "true" and sum(
                1 for p, q in cls.requests if p == "/api/v1/pods" and q.get("watch", "").lower() == "true") == 1
        if query.get("watch", "").lower() == "true":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            if first_pod_watch:
                cls.expire.wait(60)  # bounded: a test that never lets it expire fails on what it then lacks
                self.wfile.write(json.dumps(EXPIRED).encode() + b"\n")
            else:
                time.sleep(0.2)  # a quiet watch the server ends: the watcher resumes it
            return
        if url.path == "/api/v1/pods":
            with cls.lock:
                cls.pod_lists += 1
                rv = str(100 * cls.pod_lists)
            body = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": rv}, "items": [a_pod(rv)]}
        else:
            body = {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def fake_server():
    FakeApiServer.requests, FakeApiServer.pod_lists, FakeApiServer.expire = [], 0, threading.Event()
    FakeApiServer.expire.set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApiServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{server.server_address[1]}"
    api = client.ApiClient(config)
    yield api
    FakeApiServer.expire.set()  # a held watch answers and ends
    api.close()
    server.shutdown()


def restarts_labelled(reason: str) -> float:
    return metrics.WATCH_RESTARTS.labels("fake", "pods", reason)._value.get()


def pod_requests() -> list[tuple[bool, str | None]]:
    """(is a WATCH, resourceVersion) of each pod request the server got, in order."""
    with FakeApiServer.lock:
        return [(q.get("watch", "").lower() == "true", q.get("resourceVersion")) for p, q in FakeApiServer.requests
                if p == "/api/v1/pods"]


def test_an_expired_watch_is_counted_as_gone_and_the_watcher_lists_again(fake_server, monkeypatch):
    """The watch expires only once the first list's pod was observed: the watcher coalesces the changes of a job
    that arrive before its dispatcher gets to it (by design), so without this the relist could overtake the first
    observation on a loaded machine (it did: `seen` was [("job-1", "200")])."""
    monkeypatch.setattr("scheduling.reconcile.cluster_watcher.BACKOFF_SECONDS", (0.05,))
    FakeApiServer.expire.clear()
    seen: list[tuple[str, str]] = []

    def observe(uid, objs, deleted):
        seen.append((uid, objs.pods[0]["metadata"]["resourceVersion"]))
        FakeApiServer.expire.set()

    gone_before = restarts_labelled("Gone")
    watcher = ClusterWatcher("fake", fake_server, [], "test", observe)
    watcher.start()
    try:
        # Until the relist's pod was observed and the watch from the relist's resourceVersion was asked for (it
        # may follow the observation: the pods' thread and the dispatcher run apart).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (("job-1", "200") in seen and len(pod_requests()) >= 4):
            time.sleep(0.05)
    finally:
        watcher.stop()
    requests = pod_requests()
    # LIST (rv 100) -> WATCH from 100 -> 410 Expired -> LIST again (rv 200) -> WATCH from 200.
    assert requests[:4] == [(False, None), (True, "100"), (False, None), (True, "200")]
    assert restarts_labelled("Gone") == gone_before + 1
    assert watcher.restarts == 1
    assert seen[:2] == [("job-1", "100"), ("job-1", "200")]  # the relist's changed pod reached the job


def test_a_node_heartbeat_does_not_count_as_a_capacity_change():
    from scheduling.reconcile.cluster_watcher import _node_facts, _slim_node

    def node(rv, heartbeat, gpus="8", ready="True"):
        return {"metadata": {"name": "n", "uid": "u", "resourceVersion": rv},
                "status": {"allocatable": {"nvidia.com/gpu": gpus}, "images": [{"names": ["big"]}],
                           "conditions": [{"type": "Ready", "status": ready, "lastHeartbeatTime": heartbeat}]}}

    before = _slim_node(node("1", "2026-01-01T00:00:00Z"))
    assert "images" not in before["status"]
    assert _node_facts(before) == _node_facts(_slim_node(node("2", "2026-01-01T00:00:10Z")))
    assert _node_facts(before) != _node_facts(_slim_node(node("3", "2026-01-01T00:00:20Z", gpus="4")))
    assert _node_facts(before) != _node_facts(_slim_node(node("4", "2026-01-01T00:00:30Z", ready="False")))



@pytest.mark.django_db(transaction=True)
def test_a_stopped_watcher_leaves_no_database_connection_open(fake_server, monkeypatch):
    """The dispatcher thread reads and writes the database (each observation, the nodes' capacity); once the
    watcher stopped, that thread's connection is closed, else PostgreSQL cannot drop the test database."""
    from django.db import connections

    from scheduling.models import Cluster, GangJob
    from scheduling.reconcile import watching
    from tests import builders

    monkeypatch.setattr("scheduling.reconcile.cluster_watcher.BACKOFF_SECONDS", (0.05,))
    cluster = builders.make_cluster("fake")
    used = []

    def observe(uid, objs, deleted):
        GangJob.objects.filter(name=uid).exists()  # as watching.observe_job reads the job
        used.append(connections["default"])

    watcher = watching.watcher_for(cluster, api=fake_server, on_change=observe).start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not used:
            time.sleep(0.05)
    finally:
        watcher.stop()
    assert used and used[0] is not connections["default"]  # the dispatcher thread's own connection
    assert not any(t.is_alive() for t in watcher._threads)
    assert Cluster.objects.get(pk=cluster.pk).capacity is not None  # the capacity write went through it too
    assert used[0].connection is None  # closed as the thread ended
