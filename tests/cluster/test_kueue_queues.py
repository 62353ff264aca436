"""Queue policies as Kueue objects (`kueue.x-k8s.io/v1beta2`: Cohort, ClusterQueue, LocalQueue, ResourceFlavor) on
the local control plane with Kueue v0.17.0 running (`kueue_cluster`: its CRDs, webhooks and manager): what the sync
writes, a hand edit put back, a foreign ClusterQueue never adopted, a removed policy's objects deleted but a
ClusterQueue kept while a Workload is admitted to it."""
from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from localcluster.processes import wait_until
from scheduling.choices import QueueFamily, SyncState
from scheduling.constants import LABEL_INSTANCE
from scheduling.models import Cluster, QueueClusterState, ReconcileAttempt
from scheduling.reconcile import kueue_desired as kd
from scheduling.reconcile import kueue_queues as kueue_sync
from scheduling.reconcile import probe
from scheduling.reconcile import queue_desired as kai_desired
from scheduling.reconcile import volcano_desired as vd

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
G, V = kd.GROUP, kd.VERSION
CQ, COHORTS, LQ, RF = (kd.PLURALS[k] for k in (kd.CLUSTER_QUEUE, kd.COHORT, kd.LOCAL_QUEUE, kd.FLAVOR_KIND))
INSTANCE = "gangweb-kueue-queue-tests"  # its own owner label value: never touches other tests' objects
NAMES = ("kq-dept", "kq-team-a", "kq-team-b", "kq-team-c")
ADMIT_TIMEOUT = 120  # seconds: Kueue's manager admits within a few under load
STATES = QueueClusterState.objects.filter(family=QueueFamily.KUEUE)


def custom_objects(custom, plural, namespace=None) -> dict:
    """This test's objects of one kind by name (LocalQueues: those in `namespace`)."""
    items = custom.list_cluster_custom_object(G, V, plural)["items"]
    ours = [o for o in items if (o["metadata"].get("labels") or {}).get(LABEL_INSTANCE) == INSTANCE]
    if plural == LQ:
        return {o["metadata"]["name"]: o for o in ours if o["metadata"]["namespace"] == namespace}
    return {o["metadata"]["name"]: o for o in ours}


def clean(custom) -> None:
    """The test's Kueue objects, and the KAI and Volcano Queues `sync_cluster_id` also makes of its policies (other
    tests' syncs would import them)."""
    kinds = ((G, V, CQ), (G, V, COHORTS), (kai_desired.GROUP, kai_desired.VERSION, kai_desired.PLURAL),
             (vd.GROUP, vd.VERSION, vd.PLURAL))
    for group, version, plural in kinds:
        for name in reversed(NAMES):
            try:
                custom.delete_cluster_custom_object(group, version, plural, name)
            except client.ApiException as exc:
                assert exc.status == 404


@pytest.fixture
def east(kueue_cluster, kube_namespace, settings, api, queue_syncs):
    """The session's control plane as cluster "kq-east" (probed: it serves Kueue v1beta2), no test objects before
    or after; the test runs the Kueue sync itself. Yields (cluster, CustomObjectsApi, the test's namespace)."""
    settings.GANGWEB_INSTANCE = INSTANCE
    custom = client.CustomObjectsApi(kueue_cluster.api_client())
    clean(custom)
    reset_kueue(custom)
    cluster = Cluster.objects.create(name="kq-east", kubeconfig=Path(kueue_cluster.kubeconfig).read_text())
    probe.probe_cluster(cluster)
    cluster.refresh_from_db()
    assert kd.API_VERSION in cluster.served_apis
    yield cluster, custom, kube_namespace
    # The test's Workloads first: Kueue's manager keeps a ClusterQueue that still counts one.
    custom.delete_collection_namespaced_custom_object(G, V, kube_namespace, "workloads")
    clean(custom)
    gone(custom, CQ, *NAMES)  # before the flavor they use (Kueue's manager keeps a flavor in use)
    drop_flavor(custom)


def reset_kueue(custom) -> None:
    """Nothing of Kueue's queues left on this worker's control plane by an earlier test (the tests that write
    Kueue objects by hand leave their ClusterQueues terminating while their namespace's Workloads go, and those hold
    the flavor): every Workload, ClusterQueue and Cohort deleted, then the flavor, and each waited for until the API
    server answers 404 (a terminating object counts as present)."""
    for wl in custom.list_cluster_custom_object(G, V, "workloads")["items"]:
        meta = wl["metadata"]
        try:
            custom.delete_namespaced_custom_object(G, V, meta["namespace"], "workloads", meta["name"])
        except client.ApiException as exc:
            assert exc.status == 404
    for plural in (CQ, COHORTS, RF):
        for obj in custom.list_cluster_custom_object(G, V, plural)["items"]:
            try:
                custom.delete_cluster_custom_object(G, V, plural, obj["metadata"]["name"])
            except client.ApiException as exc:
                assert exc.status == 404
        wait_until(lambda plural=plural: not custom.list_cluster_custom_object(G, V, plural)["items"], 120,
                   f"every {plural} gone, terminating ones too")


def drop_flavor(custom) -> None:
    """Delete the ResourceFlavor the sync makes and wait until it is gone."""
    try:
        custom.delete_cluster_custom_object(G, V, RF, kd.FLAVOR)
    except client.ApiException as exc:
        assert exc.status == 404
    gone(custom, RF, kd.FLAVOR)


def make_tree(api, namespace):
    """kq-dept with two leaves, quota 4 GPUs and limit 8 each, jobs allowed in the test's namespace."""
    bodies = [
        {"name": "kq-dept", "gpu_quota": 8, "allowed_namespaces": [namespace]},
        {"name": "kq-team-a", "parent": "kq-dept", "gpu_quota": 4, "gpu_limit": 8, "gpu_over_quota_weight": 2,
         "cpu_over_quota_weight": 2, "memory_over_quota_weight": 2, "allowed_namespaces": [namespace]},
        {"name": "kq-team-b", "parent": "kq-dept", "gpu_quota": 4, "gpu_limit": 8, "allowed_namespaces": [namespace]},
    ]
    for body in bodies:
        r = api.post("/api/v1/queues/", {**body, "clusters": ["kq-east"]}, format="json")
        assert r.status_code == 201, r.data


def leaf_spec(name, namespace, weight="1") -> dict:
    return {
        "cohortName": "kq-dept",
        "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
            {"name": "gangweb-default", "resources": [
                {"name": "cpu", "nominalQuota": "100000"},  # quota 0, limit -1: not held back by Kueue
                {"name": "memory", "nominalQuota": "100000000M"},
                {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "4"}]}]}],
        "namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}]},
        "fairSharing": {"weight": weight},
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
                       "borrowWithinCohort": {"policy": "Never"}},
    }


def gpu_quota(obj: dict) -> dict:
    return obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]


def owned(spec: dict) -> dict:
    """The spec keys gangweb writes (the CRD's defaults, e.g. queueingStrategy, left out)."""
    return {k: v for k, v in spec.items() if k in kd.OWNED_KEYS}


def gone(custom, plural, *names, namespace=None) -> None:
    """Wait until the objects are gone (Kueue's manager, where it runs, holds a deleted ClusterQueue or
    ResourceFlavor with its finalizer until nothing uses it)."""
    wait_until(lambda: not set(names) & set(custom_objects(custom, plural, namespace)), 60,
               f"{plural} {', '.join(names)} gone")


def last_actions(cluster) -> list[str]:
    return ReconcileAttempt.objects.filter(cluster=cluster, reason=kueue_sync.REASON).first().actions


def test_two_queues_under_one_parent_become_a_cohort_two_cluster_queues_their_local_queues_and_the_flavor(api, east):
    cluster, custom, ns = east
    make_tree(api, ns)

    from scheduling.reconcile import queues as queue_tasks
    queue_tasks.sync_cluster_id(cluster.id)  # what the beat and every policy write run: KAI, Volcano, then Kueue

    cohorts, queues, local = custom_objects(custom, COHORTS), custom_objects(custom, CQ), custom_objects(custom, LQ, ns)
    assert sorted(cohorts) == ["kq-dept"]
    assert owned(cohorts["kq-dept"]["spec"]) == {"fairSharing": {"weight": "1"}}  # 8 = 4 + 4: no pool of its own
    assert sorted(queues) == ["kq-team-a", "kq-team-b"]
    # by value: Kueue's webhook writes quantities back in canonical form ("100000000M" is stored as "100T")
    assert kd.flat_fields(queues["kq-team-a"]["spec"]) == kd.flat_fields(leaf_spec("kq-team-a", ns, weight="2"))
    assert kd.flat_fields(queues["kq-team-b"]["spec"]) == kd.flat_fields(leaf_spec("kq-team-b", ns))
    assert gpu_quota(queues["kq-team-b"]) == {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "4"}
    assert {n: q["spec"]["clusterQueue"] for n, q in local.items()} == {"kq-team-a": "kq-team-a",
                                                                         "kq-team-b": "kq-team-b"}
    flavor = custom.get_cluster_custom_object(G, V, RF, kd.FLAVOR)
    assert (flavor["metadata"]["labels"][LABEL_INSTANCE], flavor.get("spec") or {}) == (INSTANCE, {})
    assert [a for a in last_actions(cluster) if " create " in a or a.startswith("create ")] == [
        "kueue: create ResourceFlavor gangweb-default", "kueue: create Cohort kq-dept",
        "kueue: create ClusterQueue kq-team-a", "kueue: create ClusterQueue kq-team-b",
        f"kueue: create LocalQueue {ns}/kq-team-a", f"kueue: create LocalQueue {ns}/kq-team-b"]
    state = STATES.get(policy__name="kq-team-a", cluster=cluster)
    assert (state.state, [w["code"] for w in state.warnings]) == (SyncState.IN_SYNC, ["kueue_unbounded"])
    assert state.status["kind"] == "ClusterQueue"
    assert [lq["namespace"] for lq in state.status["local_queues"]] == [ns]

    # Level-triggered: a second pass writes nothing.
    rv = queues["kq-team-a"]["metadata"]["resourceVersion"]
    kueue_sync.sync_cluster(cluster)
    assert [a for a in last_actions(cluster) if "import" not in a] == []
    assert custom.get_cluster_custom_object(G, V, CQ, "kq-team-a")["metadata"]["resourceVersion"] == rv


def edit(custom, plural, name, change) -> None:
    """A hand edit of the test's own, retried on 409."""
    for attempt in range(5):
        obj = custom.get_cluster_custom_object(G, V, plural, name)
        change(obj)
        try:
            custom.replace_cluster_custom_object(G, V, plural, name, obj)
            return
        except client.ApiException as exc:
            assert exc.status == 409 and attempt < 4


def test_a_hand_edit_of_a_cluster_queues_nominal_quota_is_put_back_and_recorded_as_drift(api, east):
    cluster, custom, ns = east
    make_tree(api, ns)
    kueue_sync.sync_cluster(cluster)

    def six_gpus_and_strict(obj):
        obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = "6"
        obj["spec"]["queueingStrategy"] = "StrictFIFO"  # not a field gangweb manages: kept
    edit(custom, CQ, "kq-team-b", six_gpus_and_strict)

    kueue_sync.sync_cluster(cluster)

    spec = custom.get_cluster_custom_object(G, V, CQ, "kq-team-b")["spec"]
    assert kd.flat_fields(spec) == kd.flat_fields(leaf_spec("kq-team-b", ns))
    assert spec["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] == "4"
    assert spec["queueingStrategy"] == "StrictFIFO"
    state = STATES.get(policy__name="kq-team-b", cluster=cluster)
    assert state.state == SyncState.DRIFTED
    assert state.last_drift == [{"field": "gangweb-default/nvidia.com/gpu.nominalQuota", "expected": 4.0,
                                 "found": 6.0}]
    assert "kueue: revert drift on ClusterQueue kq-team-b: gangweb-default/nvidia.com/gpu.nominalQuota 6.0 → 4.0" \
        in last_actions(cluster)

    # A LocalQueue deleted by hand is created again (its spec.clusterQueue is immutable: it cannot be edited).
    custom.delete_namespaced_custom_object(G, V, ns, LQ, "kq-team-a")
    kueue_sync.sync_cluster(cluster)
    assert custom.get_namespaced_custom_object(G, V, ns, LQ, "kq-team-a")["spec"]["clusterQueue"] == "kq-team-a"
    assert f"kueue: create LocalQueue {ns}/kq-team-a" in last_actions(cluster)


def test_a_foreign_same_named_cluster_queue_is_not_adopted(api, east):
    cluster, custom, ns = east
    make_tree(api, ns)
    foreign = {"apiVersion": kd.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": "kq-team-c"},
               "spec": {"cohortName": "elsewhere", "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                   {"name": "other", "resources": [{"name": "cpu", "nominalQuota": "3"}]}]}]}}
    custom.create_cluster_custom_object(G, V, CQ, foreign)
    try:
        r = api.post("/api/v1/queues/", {"name": "kq-team-c", "parent": "kq-dept", "gpu_quota": 1,
                                         "allowed_namespaces": [ns], "clusters": ["kq-east"]}, format="json")
        assert r.status_code == 201, r.data

        kueue_sync.sync_cluster(cluster)

        theirs = custom.get_cluster_custom_object(G, V, CQ, "kq-team-c")
        assert theirs["spec"]["cohortName"] == "elsewhere"
        assert theirs["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [{"name": "cpu", "nominalQuota": "3"}]
        assert LABEL_INSTANCE not in (theirs["metadata"].get("labels") or {})
        state = STATES.get(policy__name="kq-team-c", cluster=cluster)
        assert state.state == SyncState.ERROR
        assert "already exists in the cluster and is not managed by this gangweb; it is not adopted" in state.message
        assert "kq-team-c" not in custom_objects(custom, LQ, ns)  # no LocalQueue sends jobs to someone else's queue
        assert custom_objects(custom, CQ).keys() == {"kq-team-a", "kq-team-b"}  # the others are made as usual
    finally:
        custom.delete_cluster_custom_object(G, V, CQ, "kq-team-c")


def submit(custom, namespace, queue, name, gpus=1) -> None:
    """A Workload of one pod asking `gpus` GPUs in LocalQueue `queue` (`spec.priority` set as Kueue's job
    integrations do: its visibility API needs it)."""
    custom.create_namespaced_custom_object(G, V, namespace, "workloads", {
        "apiVersion": kd.API_VERSION, "kind": "Workload", "metadata": {"name": name},
        "spec": {"queueName": queue, "priority": 0, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.example/train:1",
                                                      "resources": {"requests": {"nvidia.com/gpu": str(gpus)},
                                                                    "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}]}})


def admit_one(custom, namespace, queue) -> str:
    """A Workload of 1 GPU in `queue`, waited for until Kueue admits it and both its queues count it; its name."""
    name = f"w-{queue}"
    submit(custom, namespace, queue, name)
    wait_until(lambda: counts(custom, namespace, queue) == [1, 1, 1, 1], ADMIT_TIMEOUT,
               f"Kueue admits {name} to ClusterQueue {queue}, both queues counting it")
    return name


def counts(custom, namespace, queue) -> list:
    """[admitted, reserving] of the ClusterQueue, then of the LocalQueue, as Kueue's status says."""
    cq = custom.get_cluster_custom_object(G, V, CQ, queue).get("status") or {}
    lq = custom.get_namespaced_custom_object(G, V, namespace, LQ, queue).get("status") or {}
    return [st.get(k) for st in (cq, lq) for k in ("admittedWorkloads", "reservingWorkloads")]


def finish(custom, namespace, queue, name) -> None:
    """The Workload goes (as when its job ends and is cleaned up); wait until the ClusterQueue counts none."""
    custom.delete_namespaced_custom_object(G, V, namespace, "workloads", name)
    wait_until(lambda: not any(counts(custom, namespace, queue)), ADMIT_TIMEOUT,
               f"ClusterQueue {queue} and its LocalQueue hold no workload")


def test_a_removed_policys_cluster_queue_stays_while_a_workload_is_admitted_then_goes(api, east):
    cluster, custom, ns = east
    make_tree(api, ns)
    kueue_sync.sync_cluster(cluster)
    workload = admit_one(custom, ns, "kq-team-b")

    assert api.delete("/api/v1/queues/kq-team-b/").status_code == 204
    result = kueue_sync.sync_cluster(cluster)

    assert "kq-team-b: kept, 1 workload admitted, 1 workload reserving quota in its ClusterQueue" in result.errors

    assert "kq-team-b" in custom_objects(custom, CQ)
    attempt = ReconcileAttempt.objects.filter(cluster=cluster, reason=kueue_sync.REASON).first()
    assert "kq-team-b: kept, 1 workload admitted, 1 workload reserving quota in its ClusterQueue" in attempt.message
    assert (f"LocalQueue {ns}/kq-team-b: kept, 1 workload admitted, 1 workload reserving quota through it"
            in attempt.message)  # its LocalQueue counts the workload too
    assert sorted(custom_objects(custom, LQ, ns)) == ["kq-team-a", "kq-team-b"]

    finish(custom, ns, "kq-team-b", workload)
    kueue_sync.sync_cluster(cluster)

    gone(custom, CQ, "kq-team-b")
    assert sorted(custom_objects(custom, CQ)) == ["kq-team-a"]
    assert sorted(custom_objects(custom, LQ, ns)) == ["kq-team-a"]
    assert set(last_actions(cluster)) == {"kueue: delete ClusterQueue kq-team-b",
                                          f"kueue: delete LocalQueue {ns}/kq-team-b"}
    assert custom.get_cluster_custom_object(G, V, RF, kd.FLAVOR)  # kq-team-a still uses it


def test_a_namespace_leaving_a_policy_takes_its_local_queue_and_the_last_policy_takes_the_flavor(api, east):
    cluster, custom, ns = east
    make_tree(api, ns)
    kueue_sync.sync_cluster(cluster)

    r = api.patch("/api/v1/queues/kq-team-a/", {"allowed_namespaces": []}, format="json")
    assert r.status_code == 200, r.data
    kueue_sync.sync_cluster(cluster)

    assert sorted(custom_objects(custom, LQ, ns)) == ["kq-team-b"]
    assert custom.get_cluster_custom_object(G, V, CQ, "kq-team-a")["spec"]["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}]}  # admits none

    for name in ("kq-team-a", "kq-team-b", "kq-dept"):
        assert api.delete(f"/api/v1/queues/{name}/").status_code == 204
    kueue_sync.sync_cluster(cluster)

    gone(custom, CQ, "kq-team-a", "kq-team-b")
    gone(custom, RF, kd.FLAVOR)
    assert custom_objects(custom, CQ) == custom_objects(custom, COHORTS) == custom_objects(custom, LQ, ns) == {}
    assert last_actions(cluster)[-1] == "kueue: delete ResourceFlavor gangweb-default"  # after the last ClusterQueue


def test_a_leaf_that_gets_a_child_becomes_a_cohort_once_its_cluster_queue_holds_nothing(api, east):
    cluster, custom, ns = east
    make_tree(api, ns)
    kueue_sync.sync_cluster(cluster)
    workload = admit_one(custom, ns, "kq-team-a")
    r = api.post("/api/v1/queues/", {"name": "kq-team-c", "parent": "kq-team-a", "gpu_quota": 2,
                                     "allowed_namespaces": [ns], "clusters": ["kq-east"]}, format="json")
    assert r.status_code == 201, r.data

    kueue_sync.sync_cluster(cluster)  # kq-team-a's ClusterQueue holds a workload: kept, not yet a Cohort

    assert "kq-team-a" in custom_objects(custom, CQ) and "kq-team-a" not in custom_objects(custom, COHORTS)
    state = STATES.get(policy__name="kq-team-a", cluster=cluster)
    assert state.state == SyncState.ERROR
    assert state.message.startswith("its ClusterQueue is kept (1 workload admitted, 1 workload reserving quota in its "
                                    "ClusterQueue); it is replaced once that is over")
    assert custom_objects(custom, CQ)["kq-team-c"]["spec"]["cohortName"] == "kq-team-a"

    assert state.status["admitted_workloads"] == 1  # read back from Kueue's status

    finish(custom, ns, "kq-team-a", workload)
    kueue_sync.sync_cluster(cluster)  # deleted now; its LocalQueue too (a parent has none)
    assert STATES.get(policy__name="kq-team-a", cluster=cluster).state == SyncState.PENDING
    gone(custom, CQ, "kq-team-a")
    kueue_sync.sync_cluster(cluster)  # gone: the Cohort is created

    cohort = custom_objects(custom, COHORTS)["kq-team-a"]["spec"]
    assert (cohort["parentName"], cohort["fairSharing"]) == ("kq-dept", {"weight": "2"})
    # quota 4 of which kq-team-c holds 2: a pool of 2; limit 8: the subtree borrows up to 4 more
    assert cohort["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "0"}, {"name": "memory", "nominalQuota": "0M"},
        {"name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "4"}]
    assert sorted(custom_objects(custom, LQ, ns)) == ["kq-team-b", "kq-team-c"]
    assert STATES.get(policy__name="kq-team-a", cluster=cluster).state == SyncState.IN_SYNC


def test_the_queue_detail_shows_the_kueue_state_with_its_warnings(api, east):
    cluster, custom, ns = east
    make_tree(api, ns)
    kueue_sync.sync_cluster(cluster)

    [state] = api.get("/api/v1/queues/kq-team-a/").data["kueue_sync"]

    assert (state["cluster"], state["state"], state["status"]["kind"]) == ("kq-east", SyncState.IN_SYNC,
                                                                           "ClusterQueue")
    assert [(w["code"], w["field"]) for w in state["warnings"]] == [("kueue_unbounded", "cpu_limit")]


def conditions(custom, namespace, name) -> dict:
    wl = custom.get_namespaced_custom_object(G, V, namespace, "workloads", name)
    return {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}


def admitted(custom, namespace, name) -> bool:
    return (conditions(custom, namespace, name).get("Admitted") or {}).get("status") == "True"


def test_team_a_borrows_up_to_its_limit_and_a_job_of_team_b_within_its_quota_reclaims(api, east):
    cluster, custom, ns = east
    make_tree(api, ns)
    kueue_sync.sync_cluster(cluster)

    submit(custom, ns, "kq-team-a", "a-own", gpus=4)  # team-a's quota
    wait_until(lambda: admitted(custom, ns, "a-own"), ADMIT_TIMEOUT, "a-own admitted")
    submit(custom, ns, "kq-team-a", "a-borrows", gpus=4)  # team-b's idle quota, up to team-a's limit of 8
    wait_until(lambda: admitted(custom, ns, "a-borrows"), ADMIT_TIMEOUT, "a-borrows admitted")
    submit(custom, ns, "kq-team-a", "a-over-limit", gpus=1)  # 9 > limit 8: waits
    submit(custom, ns, "kq-team-b", "b-own", gpus=4)  # within team-b's quota: reclaims what team-a borrowed

    # team-a as a whole uses more than its quota: Kueue evicts one of its workloads (the same priority, admitted
    # together: which one is Kueue's choice) to give team-b its quota back
    def evicted() -> list[str]:
        return [w for w in ("a-own", "a-borrows")
                if (conditions(custom, ns, w).get("Evicted") or {}).get("status") == "True"]
    wait_until(lambda: evicted(), ADMIT_TIMEOUT, "one of team-a's workloads evicted by Kueue")
    [victim] = evicted()
    said = conditions(custom, ns, victim)
    assert (said["Evicted"]["reason"], said["Preempted"]["reason"]) == ("Preempted", "InCohortReclamation")
    assert "preemptor path: /kq-dept/kq-team-b; preemptee path: /kq-dept/kq-team-a" in said["Preempted"]["message"]
    assert not admitted(custom, ns, "a-over-limit")
    quota = conditions(custom, ns, "a-over-limit")["QuotaReserved"]
    assert (quota["status"], quota["reason"]) == ("False", "Pending")
