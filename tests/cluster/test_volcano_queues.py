"""Queue policies as Volcano Queues (`scheduling.volcano.sh/v1beta1`) in the real control plane, next to the KAI
Queues of the same policies; and a Volcano job's queue existing before its PodGroup."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client

from scheduling.choices import SyncState
from scheduling.constants import LABEL_INSTANCE
from scheduling.models import Cluster, GangJob, QueueClusterState, ReconcileAttempt
from scheduling.reconcile import probe
from scheduling.reconcile import queues as kai_sync
from scheduling.reconcile import volcano_desired as vd
from scheduling.reconcile import volcano_queues as volcano_sync
from scheduling.services.jobs import lifecycle as job_service
from tests import builders

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
G, V, P = vd.GROUP, vd.VERSION, vd.PLURAL
INSTANCE = "gangweb-volcano-queue-tests"  # its own owner label value: never touches other tests' Queues
NAMES = ("vq-dept", "vq-team-a", "vq-team-b", "vq-zero", "vq-jobs")

VOLCANO_STATES = QueueClusterState.objects.filter(family="volcano")  # the Volcano Queue's state rows


def clean(custom: client.CustomObjectsApi) -> None:
    for group, version in ((G, V), (kai_sync.GROUP, kai_sync.VERSION)):
        for name in reversed(NAMES):
            try:
                custom.delete_cluster_custom_object(group, version, "queues", name)
            except client.ApiException as exc:
                assert exc.status == 404


@pytest.fixture
def east(kube_cluster, settings, api, queue_syncs):
    """The session's control plane as cluster "vq-east" (probed: it serves Volcano), no test Queues before or after;
    the test's queue syncs are run by the test itself."""
    settings.GANGWEB_INSTANCE = INSTANCE
    custom = client.CustomObjectsApi(kube_cluster.api_client())
    clean(custom)
    cluster = Cluster.objects.create(name="vq-east", kubeconfig=Path(kube_cluster.kubeconfig).read_text())
    probe.probe_cluster(cluster)
    cluster.refresh_from_db()
    assert f"{G}/{V}" in cluster.served_apis
    yield cluster, custom
    clean(custom)


def vq(custom, name) -> dict:
    return custom.get_cluster_custom_object(G, V, P, name)


def make_tree(api):
    bodies = [
        {"name": "vq-dept", "gpu_quota": 8, "gpu_limit": 12, "cpu_quota": "32", "memory_quota": "256G",
         "priority": 100},
        {"name": "vq-team-a", "parent": "vq-dept", "gpu_quota": "4", "gpu_limit": 8, "cpu_quota": "16",
         "cpu_limit": "24", "memory_quota": "64G", "priority": 200, "gpu_over_quota_weight": 3,
         "cpu_over_quota_weight": 3, "memory_over_quota_weight": 3, "reclaim_min_runtime": "30m"},
        {"name": "vq-team-b", "parent": "vq-dept", "gpu_quota": 0.5, "cpu_quota": 16000},
    ]
    for body in bodies:
        r = api.post("/api/v1/queues/", {**body, "clusters": ["vq-east"]}, format="json")
        assert r.status_code == 201, r.data


EXPECTED = {
    "vq-dept": {"weight": 1, "priority": 100, "reclaimable": True,
                "capability": {"nvidia.com/gpu": "12"},  # cpu and memory limits -1: left out
                "deserved": {"nvidia.com/gpu": "8", "cpu": "32", "memory": "256000M"}},
    "vq-team-a": {"weight": 3, "priority": 200, "reclaimable": True, "parent": "vq-dept",
                  "capability": {"nvidia.com/gpu": "8", "cpu": "24"},
                  "deserved": {"nvidia.com/gpu": "4", "cpu": "16", "memory": "64000M"}},
    "vq-team-b": {"weight": 1, "priority": 100, "reclaimable": True, "parent": "vq-dept", "capability": {},
                  "deserved": {"nvidia.com/gpu": "500m", "cpu": "16", "memory": "0M"}},
}


def test_a_queue_tree_created_through_the_api_appears_as_volcano_and_kai_queues(api, east):
    cluster, custom = east
    make_tree(api)

    kai_sync.sync_cluster_id(cluster.id)  # what the beat and every policy write run: KAI, then Volcano

    for name, spec in EXPECTED.items():
        queue = vq(custom, name)
        assert queue["spec"] == spec, name
        assert queue["metadata"]["labels"][LABEL_INSTANCE] == INSTANCE
        kai = custom.get_cluster_custom_object(kai_sync.GROUP, kai_sync.VERSION, "queues", name)
        assert kai["spec"]["resources"]["gpu"]["quota"] == {"vq-dept": 8, "vq-team-a": 4, "vq-team-b": 0.5}[name]
    attempt = ReconcileAttempt.objects.filter(cluster=cluster, reason=volcano_sync.REASON).first()
    assert [a for a in attempt.actions if " create " in a] == [
        "volcano: create Queue vq-dept", "volcano: create Queue vq-team-a", "volcano: create Queue vq-team-b"]
    # (other tests' Volcano Queues in the shared control plane are imported as unmanaged: never changed)
    detail = api.get("/api/v1/queues/vq-team-a/").data
    [state] = detail["volcano_sync"]
    assert (state["cluster"], state["state"]) == ("vq-east", SyncState.IN_SYNC)
    assert [w["code"] for w in state["warnings"]] == ["volcano_unsupported"]  # reclaim_min_runtime
    assert [w["code"] for w in api.get("/api/v1/queues/vq-team-b/").data["volcano_sync"][0]["warnings"]] == [
        "volcano_fractional_gpu"]
    assert detail["sync"][0]["state"] == SyncState.IN_SYNC  # the KAI Queue, unchanged
    # Level-triggered: a second pass writes nothing.
    rv = vq(custom, "vq-team-a")["metadata"]["resourceVersion"]
    volcano_sync.sync_cluster(cluster)
    assert ReconcileAttempt.objects.filter(cluster=cluster, reason=volcano_sync.REASON).first().actions == []
    assert vq(custom, "vq-team-a")["metadata"]["resourceVersion"] == rv


def test_a_hand_edit_of_a_volcano_queue_is_put_back_and_recorded(api, east):
    cluster, custom = east
    make_tree(api)
    volcano_sync.sync_cluster(cluster)
    for attempt in range(5):  # a hand edit of the test's own, retried on 409
        queue = vq(custom, "vq-team-a")
        queue["spec"]["deserved"]["nvidia.com/gpu"] = "6"
        queue["spec"]["weight"] = 40
        queue["spec"]["guarantee"] = {"resource": {"cpu": "2"}}
        queue["spec"]["dequeueStrategy"] = "fifo"  # not a field gangweb manages: kept
        try:
            custom.replace_cluster_custom_object(G, V, P, "vq-team-a", queue)
            break
        except client.ApiException as exc:
            assert exc.status == 409 and attempt < 4

    volcano_sync.sync_cluster(cluster)

    spec = vq(custom, "vq-team-a")["spec"]
    assert {k: v for k, v in spec.items() if k != "dequeueStrategy"} == EXPECTED["vq-team-a"]
    assert spec["dequeueStrategy"] == "fifo"
    state = VOLCANO_STATES.get(policy__name="vq-team-a", cluster=cluster)
    assert state.state == SyncState.DRIFTED
    assert state.last_drift == [{"field": "deserved.nvidia.com/gpu", "expected": 4.0, "found": 6.0},
                                {"field": "weight", "expected": 3, "found": 40},
                                {"field": "guarantee.cpu", "expected": None, "found": 2000}]
    assert any(a.startswith("volcano: revert drift on Queue vq-team-a: deserved.nvidia.com/gpu 6.0 → 4.0")
               for a in ReconcileAttempt.objects.filter(cluster=cluster, reason=volcano_sync.REASON).first().actions)

    # Deleted by hand: created again, recorded as drift.
    custom.delete_cluster_custom_object(G, V, P, "vq-team-b")
    volcano_sync.sync_cluster(cluster)
    assert vq(custom, "vq-team-b")["spec"] == EXPECTED["vq-team-b"]
    state = VOLCANO_STATES.get(policy__name="vq-team-b", cluster=cluster)
    assert (state.state, state.last_drift) == (SyncState.DRIFTED, [kai_sync.DELETED_BY_HAND])


def test_weight_0_is_sent_as_1_with_a_warning_and_an_unlimited_limit_is_no_capability(api, east):
    cluster, custom = east
    r = api.post("/api/v1/queues/", {"name": "vq-zero", "gpu_quota": 2, "gpu_limit": -1, "gpu_over_quota_weight": 0,
                                     "cpu_over_quota_weight": 0, "memory_over_quota_weight": 0,
                                     "clusters": ["vq-east"]}, format="json")
    assert r.status_code == 201, r.data

    volcano_sync.sync_cluster(cluster)

    spec = vq(custom, "vq-zero")["spec"]
    assert spec["weight"] == 1
    assert spec["capability"] == {}  # every limit -1 (unlimited): nothing capped
    assert spec["deserved"]["nvidia.com/gpu"] == "2"
    [warning] = VOLCANO_STATES.get(policy__name="vq-zero", cluster=cluster).warnings
    assert (warning["code"], warning["field"]) == ("volcano_weight_zero", "gpu_over_quota_weight")
    # Why: the Volcano Queue CRD refuses weight 0 (1..65535), so gangweb could not send it if it tried.
    queue = vq(custom, "vq-zero")
    queue["spec"]["weight"] = 0
    with pytest.raises(client.ApiException) as refused:
        custom.replace_cluster_custom_object(G, V, P, "vq-zero", queue)
    assert refused.value.status == 422 and "spec.weight" in refused.value.body


def test_a_volcano_jobs_queue_exists_before_its_podgroup(api, east, admin_user, kube_namespace, enqueued):
    cluster, custom = east
    queue = builders.make_queue("vq-jobs", clusters=[cluster], allowed_namespaces=[kube_namespace])
    template = builders.make_template(f"t-{uuid.uuid4().hex[:6]}", backend="volcano",
                                      pod_sets=[builders.pod_set("worker", replicas=2)])
    job, _ = job_service.submit(admin_user, builders.submit_body(template, queue, cluster, name="vq-train",
                                                                 namespace=kube_namespace))
    with pytest.raises(client.ApiException) as missing:
        vq(custom, "vq-jobs")  # no sync has run: the queue is not in the cluster yet
    assert missing.value.status == 404

    from scheduling.reconcile import jobs as job_reconcile

    result = job_reconcile.run_pass(GangJob.objects.select_related("cluster", "queue").get(pk=job.pk))

    assert result.error is None, result.message
    created_queue = VOLCANO_STATES.get(policy=queue, cluster=cluster)
    assert created_queue.state == SyncState.IN_SYNC
    podgroups = custom.list_namespaced_custom_object(G, V, kube_namespace, "podgroups")["items"]
    [pg] = [p for p in podgroups if p["spec"]["queue"] == "vq-jobs"]
    # One etcd: resourceVersions are one increasing revision, so the Queue was written before the PodGroup.
    assert int(created_queue.resource_version) < int(pg["metadata"]["resourceVersion"])
    assert vq(custom, "vq-jobs")["spec"]["deserved"] == {"nvidia.com/gpu": "0", "cpu": "0", "memory": "0M"}


def test_a_volcano_job_whose_queue_cannot_be_created_waits_and_says_why(api, east, admin_user, kube_namespace,
                                                                       enqueued):
    cluster, custom = east
    queue = builders.make_queue("vq-jobs", clusters=[cluster], allowed_namespaces=[kube_namespace])
    template = builders.make_template(f"t-{uuid.uuid4().hex[:6]}", backend="volcano",
                                      pod_sets=[builders.pod_set("worker", replicas=2)])
    job, _ = job_service.submit(admin_user, builders.submit_body(template, queue, cluster, name="vq-wait",
                                                                 namespace=kube_namespace))
    # Then the policy is moved to another cluster: no sync of this one will create its Volcano Queue.
    queue.clusters.set([builders.make_cluster("vq-elsewhere")])

    from scheduling.reconcile import jobs as job_reconcile

    result = job_reconcile.run_pass(GangJob.objects.select_related("cluster", "queue").get(pk=job.pk))

    assert result.reason == "VolcanoQueueMissing" and result.requeue_after
    assert "Volcano Queue 'vq-jobs' does not exist in cluster vq-east" in result.message
    assert "no queue policy of that name belongs in this cluster" in result.message
    podgroups = custom.list_namespaced_custom_object(G, V, kube_namespace, "podgroups")["items"]
    assert podgroups == []  # no PodGroup without its queue
    job.refresh_from_db()
    assert job.why_pending["reason"] == "VolcanoQueueMissing"
    assert "Volcano Queue 'vq-jobs'" in job.why_pending["summary"]


def test_a_quota_above_its_limit_is_sent_as_the_limit_and_children_over_the_parent_warn(api, east):
    cluster, custom = east
    for body in ({"name": "vq-dept", "gpu_quota": 4},
                 {"name": "vq-team-a", "parent": "vq-dept", "gpu_quota": 6, "gpu_limit": 3},
                 {"name": "vq-team-b", "parent": "vq-dept", "gpu_quota": 2}):
        r = api.post("/api/v1/queues/", {**body, "clusters": ["vq-east"]}, format="json")
        assert r.status_code == 201, r.data  # accepted, with KAI's own warnings

    volcano_sync.sync_cluster(cluster)

    # Volcano refuses deserved > capability, so team-a's deserved is its limit: 3, not the policy's 6.
    spec = vq(custom, "vq-team-a")["spec"]
    assert (spec["deserved"]["nvidia.com/gpu"], spec["capability"]["nvidia.com/gpu"]) == ("3", "3")
    states = {s.policy.name: s for s in VOLCANO_STATES.filter(cluster=cluster).select_related("policy")}
    assert [w["code"] for w in states["vq-team-a"].warnings] == ["volcano_deserved_over_capability"]
    assert states["vq-team-a"].state == SyncState.IN_SYNC
    # The children's deserved (3 + 2 = 5 GPUs) add up to more than vq-dept's 4: a warning on vq-dept, values as said.
    [warning] = states["vq-dept"].warnings
    assert (warning["code"], warning["field"]) == ("volcano_children_over_parent", "gpu_quota")
    assert "(vq-team-a, vq-team-b) add up to 5, more than this queue's 4" in warning["message"]
    assert vq(custom, "vq-team-b")["spec"]["deserved"]["nvidia.com/gpu"] == "2"
    assert api.get("/api/v1/queues/vq-dept/").data["volcano_sync"][0]["warnings"] == [warning]
