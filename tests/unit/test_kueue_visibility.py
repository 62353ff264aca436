"""A Kueue job's place in line comes from Kueue's visibility API (pendingworkloads of its LocalQueue), bounded,
cached briefly, and reads `unknown` with the reason when the API is not served or fails (never an error)."""
import json

import pytest
from django.core.cache import cache
from kubernetes.client import ApiException

from scheduling.kube import kueue_visibility as kv

# Recorded shape (visibility.kueue.x-k8s.io/v1beta2 PendingWorkloadsSummary, Kueue v0.17.0): positions from 0.
SUMMARY = {
    "kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
    "metadata": {"creationTimestamp": None},
    "items": [
        {"metadata": {"name": "train-a1-7c1d", "namespace": "team-a", "creationTimestamp": "2026-12-06T13:00:01Z",
                      "ownerReferences": []},
         "priority": 0, "localQueueName": "team-a", "positionInClusterQueue": 0, "positionInLocalQueue": 0},
        {"metadata": {"name": "train-a2-8e2f", "namespace": "team-a", "creationTimestamp": "2026-12-06T13:00:05Z"},
         "priority": 0, "localQueueName": "team-a", "positionInClusterQueue": 2, "positionInLocalQueue": 1},
    ],
}


class Response:
    def __init__(self, body):
        self.body = body

    def read(self):
        return self.body

    def release_conn(self):
        pass


class Api:
    """Stands in for the cluster's ApiClient: answers each GET with the next of `answers` (a dict, bytes or an
    exception), recording the path and query."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def call_api(self, path, method, query_params=None, **kwargs):
        self.calls.append((method, path, dict(query_params), kwargs["_request_timeout"]))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Response(answer if isinstance(answer, bytes) else json.dumps(answer).encode())


def test_the_position_is_kueues_counted_from_1_with_the_cluster_queue_place():
    api = Api(SUMMARY)
    answer = kv.pending(api, "team-a", "team-a")
    assert api.calls == [("GET", "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/team-a/"
                                 "pendingworkloads", {"limit": 500, "offset": 0}, (3, 5))]
    assert kv.position(answer, "train-a2-8e2f", "team-a") == {
        "status": "known", "local_queue": 2, "local_queue_total": 2, "cluster_queue": 3}


def test_reads_are_bounded_and_a_workload_past_the_bound_is_unknown(monkeypatch):
    monkeypatch.setattr(kv, "PAGE", 1)
    monkeypatch.setattr(kv, "MAX_PAGES", 2)
    first, second = ({**SUMMARY, "items": [i]} for i in SUMMARY["items"])
    api = Api(first, second)
    answer = kv.pending(api, "team-a", "team-a")
    assert [c[2]["offset"] for c in api.calls] == [0, 1] and answer["complete"] is False
    assert kv.position(answer, "train-a2-8e2f", "team-a")["local_queue_total"] is None
    assert kv.position(answer, "train-a9", "team-a") == {
        "status": "unknown", "reason": "not among the first 2 pending workloads the Kueue visibility API was read for"}


@pytest.mark.parametrize("answer,reason", [
    (ApiException(status=404, reason="Not Found"),
     "the cluster does not serve Kueue's visibility API (visibility.kueue.x-k8s.io/v1beta2), or LocalQueue "
     "team-a/team-a does not exist in it"),
    (ApiException(status=503, reason="Service Unavailable"),
     "the cluster does not serve Kueue's visibility API (visibility.kueue.x-k8s.io/v1beta2): its APIService is "
     "unavailable (HTTP 503)"),
    (b"<html>", "the Kueue visibility API answered something that is not JSON"),
    ({"items": "no"}, "the Kueue visibility API answered something that is not a PendingWorkloadsSummary"),
])
def test_an_api_not_served_or_failing_is_unknown_with_the_reason(answer, reason):
    assert kv.pending(Api(answer), "team-a", "team-a") == {"status": "unknown", "reason": reason}


def test_hostile_items_are_left_out():
    body = {"items": [{"metadata": {"name": "x", "namespace": "team-a"}, "positionInLocalQueue": -1,
                       "positionInClusterQueue": 0},
                      {"metadata": {"name": 5}, "positionInLocalQueue": 0, "positionInClusterQueue": 0},
                      {"metadata": {"name": "y", "namespace": "team-a"}, "positionInLocalQueue": True,
                       "positionInClusterQueue": 0}, "junk"]}
    assert kv.items_of(body) == []


def test_a_workload_kueue_does_not_list_is_unknown_saying_so():
    answer = kv.pending(Api(SUMMARY), "team-a", "team-a")
    assert kv.position(answer, "train-a3", "team-a")["reason"] == (
        "the Kueue visibility API does not list Workload team-a/train-a3 as pending (not yet queued, or being "
        "admitted)")


class Cluster:
    pk, name = 7, "local"


def test_answers_are_cached_briefly_per_local_queue():
    cache.clear()
    api = Api(SUMMARY)
    assert kv.pending_cached(Cluster(), "team-a", "team-a", api)["status"] == "known"
    assert kv.pending_cached(Cluster(), "team-a", "team-a", api)["status"] == "known"
    assert len(api.calls) == 1


@pytest.fixture
def kueue_job(db, admin_user):
    from scheduling.models import GangJob
    from tests.builders import make_cluster, make_job, make_queue, make_template, pod_set, template_spec

    cache.clear()
    cluster = make_cluster()
    queue = make_queue("team-a", clusters=[cluster])
    job = make_job(make_template(**template_spec(pod_sets=[pod_set(replicas=1)])), queue, cluster, name="train-a2",
                   phase="Queued", user=admin_user)
    spec = {**job.resolved_spec, "backend": "kueue"}  # the family's plugin is registered by its own branch
    GangJob.objects.filter(pk=job.pk).update(resolved_spec=spec)
    job.refresh_from_db()
    return job


def test_the_job_answer_reads_kueues_place_in_line(kueue_job, monkeypatch):
    from scheduling.reconcile.names import gang_name
    from scheduling.services.queues import line

    name = gang_name(kueue_job.name, kueue_job.uid, kueue_job.gang_generation)
    body = {"items": [SUMMARY["items"][0], {**SUMMARY["items"][1], "metadata": {"name": name,
                                                                                 "namespace": "default"}}]}
    seen = []
    monkeypatch.setattr(kv, "pending_cached", lambda cluster, ns, lq: seen.append((ns, lq)) or kv.pending(
        Api(body), ns, lq))
    got = line.position(kueue_job)
    assert seen == [("default", "team-a")]
    assert (got["status"], got["queue"], got["queue_total"], got["cluster_queue"], got["source"]) == (
        "known", 2, 2, 3, "Kueue visibility API")
    assert got["text"] == "2 of 2 in team-a (3 in ClusterQueue team-a; Kueue)"


def test_the_job_answer_says_unknown_and_why_when_the_api_is_not_served(kueue_job, monkeypatch):
    from scheduling.services.queues import line

    monkeypatch.setattr(kv, "pending_cached", lambda cluster, ns, lq: kv.pending(
        Api(ApiException(status=404)), ns, lq))
    got = line.position(kueue_job)
    assert got["status"] == "unknown" and got["queue"] is None
    assert got["text"].startswith("unknown: the cluster does not serve Kueue's visibility API")
