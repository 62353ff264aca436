"""Queue policies synced into two real control planes with the KAI Queue CRD (scheduling.run.ai/v2).

The session's control plane (`kube_cluster`) is "east"; a second, one-node control plane started by this module
is "west" (about 10 s to start), so a hand edit in one cluster is really invisible to the other.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from kubernetes import client

from scheduling.choices import SyncState
from scheduling.constants import LABEL_INSTANCE, LABEL_MANAGED_BY
from scheduling.models import Cluster, QueueClusterState, QueueUsageSample, ReconcileAttempt
from scheduling.reconcile import queues as sync

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
G, V, P = sync.GROUP, sync.VERSION, sync.PLURAL
INSTANCE = "gangweb-queue-tests"  # its own owner label value: never touches Queues other tests' gangweb made
NAMES = ("qs-dept", "qs-team-a", "qs-team-b", "qs-proj", "qs-legacy")

KAI_STATES = QueueClusterState.objects.filter(family="kai")  # the KAI Queue's state rows


@pytest.fixture(scope="module")
def west_cluster(tmp_path_factory):
    """A second control plane (one fake node), or the one named by GANGWEB_TEST_KUBECONFIG_2."""
    import localcluster

    external = os.environ.get("GANGWEB_TEST_KUBECONFIG_2")
    if external:
        yield localcluster.attach(external)
        return
    state_dir = Path(tmp_path_factory.mktemp("localcluster-west"))
    cluster = localcluster.up(localcluster.ClusterConfig(state_dir=state_dir, nodes=1, die_with_parent=True))
    try:
        yield cluster
    finally:
        localcluster.down(state_dir)


def custom_api(handle) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(handle.api_client())


def clean(api: client.CustomObjectsApi) -> None:
    # The Volcano Queues too: a policy write syncs both (reconcile/volcano_queues.py), and the clusters serve Volcano.
    for group, version in ((G, V), ("scheduling.volcano.sh", "v1beta1")):
        for name in reversed(NAMES):
            try:
                api.delete_cluster_custom_object(group, version, P, name)
            except client.ApiException as exc:
                assert exc.status == 404


@pytest.fixture
def clusters(kube_cluster, west_cluster, settings, api, queue_syncs):
    """Both clusters registered in gangweb, with no test Queues in them before or after the test."""
    settings.GANGWEB_INSTANCE = INSTANCE
    apis = {"east": custom_api(kube_cluster), "west": custom_api(west_cluster)}
    for a in apis.values():
        clean(a)
    rows = {name: Cluster.objects.create(name=name, kubeconfig=Path(handle.kubeconfig).read_text())
            for name, handle in (("east", kube_cluster), ("west", west_cluster))}
    yield rows, apis
    for a in apis.values():
        clean(a)


def queue(apis, cluster, name) -> dict:
    return apis[cluster].get_cluster_custom_object(G, V, P, name)


def make_tree(api):
    """Department, two teams, and a project under team A, in both clusters."""
    bodies = [
        {"name": "qs-dept", "display_name": "Research", "gpu_quota": 8, "gpu_limit": 12, "cpu_quota": "32",
         "memory_quota": "256G", "priority": 100},
        {"name": "qs-team-a", "parent": "qs-dept", "gpu_quota": "4", "gpu_limit": 8, "cpu_quota": "16",
         "cpu_limit": "24", "memory_quota": "64Gi", "priority": 200, "gpu_over_quota_weight": 2,
         "preempt_min_runtime": "10m", "reclaim_min_runtime": "30m"},
        {"name": "qs-team-b", "parent": "qs-dept", "gpu_quota": 4, "cpu_quota": 16000},
        {"name": "qs-proj", "parent": "qs-team-a", "gpu_quota": 0.5, "gpu_limit": 2, "cpu_quota": "500m"},
    ]
    for body in bodies:
        r = api.post("/api/v1/queues/", {**body, "clusters": ["east", "west"]}, format="json")
        assert r.status_code == 201, r.data


EXPECTED_SPECS = {
    "qs-dept": {"displayName": "Research", "priority": 100, "resources": {
        "gpu": {"quota": 8, "limit": 12, "overQuotaWeight": 1},
        "cpu": {"quota": 32000, "limit": -1, "overQuotaWeight": 1},
        "memory": {"quota": 256000, "limit": -1, "overQuotaWeight": 1}}},
    "qs-team-a": {"parentQueue": "qs-dept", "priority": 200, "preemptMinRuntime": "10m", "reclaimMinRuntime": "30m",
                  "resources": {"gpu": {"quota": 4, "limit": 8, "overQuotaWeight": 2},
                                "cpu": {"quota": 16000, "limit": 24000, "overQuotaWeight": 1},
                                "memory": {"quota": 68720, "limit": -1, "overQuotaWeight": 1}}},
    "qs-team-b": {"parentQueue": "qs-dept", "priority": 100, "resources": {
        "gpu": {"quota": 4, "limit": -1, "overQuotaWeight": 1},
        "cpu": {"quota": 16000, "limit": -1, "overQuotaWeight": 1},
        "memory": {"quota": 0, "limit": -1, "overQuotaWeight": 1}}},
    "qs-proj": {"parentQueue": "qs-team-a", "priority": 100, "resources": {
        "gpu": {"quota": 0.5, "limit": 2, "overQuotaWeight": 1},
        "cpu": {"quota": 500, "limit": -1, "overQuotaWeight": 1},
        "memory": {"quota": 0, "limit": -1, "overQuotaWeight": 1}}},
}


def dept_root(roots: list[dict]) -> dict:
    """This test's root in the queue tree (other tests' Queues left on the shared control plane are imported as
    roots of their own)."""
    (root,) = [r for r in roots if r["name"] == "qs-dept"]
    return root


def ours(actions: list[str]) -> list[str]:
    """A pass's actions on this test's queues. The control plane is shared by the tests of one worker: Queues other
    tests' syncs left (their policies went with their database) are imported as unmanaged, and only those may be
    what else the pass did."""
    others = [a for a in actions if "qs-" not in a]
    assert all(a.startswith("import Queue ") and a.endswith(" as unmanaged") for a in others), actions
    return [a for a in actions if "qs-" in a]


def test_a_three_level_tree_is_synced_to_two_clusters_field_for_field(api, clusters):
    rows, apis = clusters
    make_tree(api)
    for name in ("east", "west"):
        sync.sync_cluster(rows[name])
        attempt = ReconcileAttempt.objects.filter(cluster=rows[name]).first()
        assert ours(attempt.actions) == ["create Queue qs-dept", "create Queue qs-team-a", "create Queue qs-team-b",
                                         "create Queue qs-proj"]  # parents first
        for qname, spec in EXPECTED_SPECS.items():
            cr = queue(apis, name, qname)
            assert cr["spec"] == spec, (name, qname)
            assert cr["metadata"]["labels"][LABEL_MANAGED_BY] == "gangweb"
            assert cr["metadata"]["labels"][LABEL_INSTANCE] == INSTANCE
    states = KAI_STATES.filter(policy__name__startswith="qs-")
    assert sorted({s.state for s in states}) == [SyncState.IN_SYNC] and states.count() == 8
    # A second pass changes nothing: level-triggered and idempotent.
    rv = queue(apis, "east", "qs-team-a")["metadata"]["resourceVersion"]
    sync.sync_cluster(rows["east"])
    assert ours(ReconcileAttempt.objects.filter(cluster=rows["east"]).first().actions) == []
    assert queue(apis, "east", "qs-team-a")["metadata"]["resourceVersion"] == rv


def test_a_hand_edit_is_reverted_at_the_next_sync_and_recorded_as_drift(api, clusters):
    rows, apis = clusters
    make_tree(api)
    sync.sync_cluster(rows["east"])
    sync.sync_cluster(rows["west"])
    apis["east"].patch_cluster_custom_object(G, V, P, "qs-team-a", {"spec": {"resources": {"gpu": {"quota": 6}}}})
    assert queue(apis, "east", "qs-team-a")["spec"]["resources"]["gpu"]["quota"] == 6

    sync.sync_cluster(rows["east"])
    sync.sync_cluster(rows["west"])

    assert queue(apis, "east", "qs-team-a")["spec"]["resources"]["gpu"] == {"quota": 4, "limit": 8,
                                                                            "overQuotaWeight": 2}
    detail = api.get("/api/v1/queues/qs-team-a/").data
    east, west = detail["sync"]
    assert (east["cluster"], east["state"]) == ("east", SyncState.DRIFTED)
    assert east["last_drift"] == [{"field": "resources.gpu.quota", "expected": 4, "found": 6}]
    assert (west["cluster"], west["state"], west["last_drift"]) == ("west", SyncState.IN_SYNC, [])
    assert "revert drift on Queue qs-team-a: resources.gpu.quota 6 → 4" in \
        ReconcileAttempt.objects.filter(cluster=rows["east"]).first().actions
    # The next pass finds it in sync and keeps the drift record for the page.
    sync.sync_cluster(rows["east"])
    east = api.get("/api/v1/queues/qs-team-a/").data["sync"][0]
    assert east["state"] == SyncState.IN_SYNC and east["last_drift"][0]["found"] == 6


def test_a_policy_change_is_an_update_not_drift(api, clusters):
    rows, apis = clusters
    make_tree(api)
    sync.sync_cluster(rows["east"])
    assert api.patch("/api/v1/queues/qs-team-b/", {"gpu_quota": 3}, format="json").status_code == 200
    sync.sync_cluster(rows["east"])
    assert queue(apis, "east", "qs-team-b")["spec"]["resources"]["gpu"]["quota"] == 3
    state = KAI_STATES.get(policy__name="qs-team-b", cluster=rows["east"])
    assert (state.state, state.last_drift) == (SyncState.IN_SYNC, [])


def test_status_written_by_the_queue_controller_shows_in_the_api(api, clusters):
    rows, apis = clusters
    make_tree(api)
    sync.sync_cluster(rows["east"])
    # No queue controller has written status yet: nothing reported, so no usage sample and no scheduler figures
    # (the tree shows gangweb's estimate instead of a reported 0).
    assert QueueUsageSample.objects.filter(policy__name="qs-proj").count() == 0
    before = dept_root(api.get("/api/v1/queues/tree/", {"cluster": "east"}).data["roots"])["children"][0]["children"][0]
    assert before["resources"]["gpu"]["allocated"] is None
    # What KAI's queue controller writes, through the status subresource.
    apis["east"].patch_cluster_custom_object_status(G, V, P, "qs-proj", {"status": {
        "allocated": {"nvidia.com/gpu": "1", "cpu": "3500m", "memory": "8Gi"},
        "requested": {"nvidia.com/gpu": "3", "cpu": "7", "memory": "16Gi"}, "childQueues": []}})
    apis["east"].patch_cluster_custom_object_status(G, V, P, "qs-team-a", {"status": {
        "allocated": {"nvidia.com/gpu": "1"}, "requested": {"nvidia.com/gpu": "3"}, "childQueues": ["qs-proj"]}})

    sync.sync_cluster(rows["east"])

    east = api.get("/api/v1/queues/qs-proj/").data["sync"][0]
    assert east["status"]["allocated"] == {"gpu": 1.0, "cpu": 3500, "memory": 8590}
    assert east["status"]["requested"] == {"gpu": 3.0, "cpu": 7000, "memory": 17180}
    tree = dept_root(api.get("/api/v1/queues/tree/", {"cluster": "east"}).data["roots"])
    team_a = tree["children"][0]
    assert (team_a["resources"]["gpu"]["allocated"], team_a["resources"]["gpu"]["requested"]) == (1.0, 3.0)
    proj = team_a["children"][0]
    gpu = proj["resources"]["gpu"]
    assert (gpu["quota"], gpu["limit"], gpu["allocated"], gpu["requested"]) == (0.5, 2.0, 1.0, 3.0)
    samples = api.get("/api/v1/queues/qs-proj/usage/", {"cluster": "east"}).data["samples"]
    assert (samples[-1]["allocated_gpu"], samples[-1]["requested_cpu"]) == (1.0, 7000)
    assert QueueUsageSample.objects.filter(policy__name="qs-proj").count() == 1  # from the status write on


def test_foreign_queues_are_imported_unmanaged_and_never_deleted(api, clusters):
    rows, apis = clusters
    apis["east"].create_cluster_custom_object(G, V, P, {
        "apiVersion": f"{G}/{V}", "kind": "Queue", "metadata": {"name": "qs-legacy"},
        "spec": {"resources": {"gpu": {"quota": 2}}}})
    sync.sync_cluster(rows["east"])
    sync.sync_cluster(rows["east"])
    data = api.get("/api/v1/queues/qs-legacy/").data
    assert (data["managed"], data["gpu_quota"], data["gpu_limit"]) == (False, 2.0, 0)  # KAI: no limit = 0
    assert "ZeroLimit" in [w["code"] for w in data["warnings"]]
    assert data["sync"][0]["state"] == SyncState.IMPORTED
    assert queue(apis, "east", "qs-legacy")["spec"] == {"resources": {"gpu": {"quota": 2}}}


def test_deleted_policies_are_deleted_in_each_cluster_children_first(api, clusters):
    rows, apis = clusters
    make_tree(api)
    sync.sync_cluster(rows["east"])
    assert api.delete("/api/v1/queues/qs-team-a/").status_code == 409  # it has a child
    assert api.delete("/api/v1/queues/qs-proj/").status_code == 204
    assert api.delete("/api/v1/queues/qs-team-a/").status_code == 204
    sync.sync_cluster(rows["east"])
    assert ReconcileAttempt.objects.filter(cluster=rows["east"]).first().actions == [
        "delete Queue qs-proj", "delete Queue qs-team-a"]
    names = {q["metadata"]["name"] for q in apis["east"].list_cluster_custom_object(G, V, P)["items"]}
    assert {"qs-dept", "qs-team-b"} <= names and not {"qs-team-a", "qs-proj"} & names


def test_a_policy_write_is_reconciled_into_its_clusters_and_removed_from_dropped_ones(api, clusters, sent_tasks):
    from scheduling import tasks
    from scheduling.work import enqueue

    def reconcile_queue(*args):
        """The task, then the per-cluster syncs it queues (each on its cluster's shard), as the workers would."""
        del sent_tasks[:]
        tasks.reconcile_queue(*args)
        synced = [a[0] for name, a in sent_tasks if name == enqueue.SYNC_QUEUES]
        for cluster_id in synced:
            tasks.sync_queues(cluster_id)
        return synced

    rows, apis = clusters
    make_tree(api)
    team_b = api.get("/api/v1/queues/qs-team-b/").data["id"]
    assert reconcile_queue(team_b) == sorted([rows["east"].id, rows["west"].id])  # what the on-commit hook queues
    for name in ("east", "west"):
        assert queue(apis, name, "qs-team-b")["spec"]["resources"]["gpu"]["quota"] == 4
        assert queue(apis, name, "qs-dept")["spec"]["displayName"] == "Research"  # its parent came along
    assert api.patch("/api/v1/queues/qs-team-b/", {"clusters": ["east"]}, format="json").status_code == 200
    reconcile_queue(team_b, [rows["east"].id, rows["west"].id])
    assert queue(apis, "east", "qs-team-b")["metadata"]["name"] == "qs-team-b"
    with pytest.raises(client.ApiException) as gone:
        queue(apis, "west", "qs-team-b")
    assert gone.value.status == 404
    west = KAI_STATES.get(policy__name="qs-team-b", cluster=rows["west"])
    assert west.state == SyncState.DELETED


def test_a_queue_deleted_by_hand_is_created_again_and_recorded_as_drift(api, clusters):
    rows, apis = clusters
    make_tree(api)
    sync.sync_cluster(rows["west"])
    apis["west"].delete_cluster_custom_object(G, V, P, "qs-proj")
    sync.sync_cluster(rows["west"])
    assert queue(apis, "west", "qs-proj")["spec"] == EXPECTED_SPECS["qs-proj"]
    state = KAI_STATES.get(policy__name="qs-proj", cluster=rows["west"])
    assert (state.state, state.last_drift) == (SyncState.DRIFTED, [sync.DELETED_BY_HAND])
