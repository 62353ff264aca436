"""A queue policy as Kueue objects (reconcile/kueue_desired.py): the mapped numbers, the warnings for what Kueue
cannot express, the comparison that finds hand edits, the status stored, and when a ClusterQueue must be kept."""
import pytest

from scheduling.constants import ANNOTATION_SPEC_HASH, LABEL_MANAGED_BY
from scheduling.models import QueuePolicy
from scheduling.reconcile import kueue_desired as kd


def policy(**fields) -> QueuePolicy:
    return QueuePolicy(name=fields.pop("name", "team-a"), **fields)


def codes(result) -> list[str]:
    return [w["code"] for w in result.warnings]


def gpu(spec) -> dict:
    [group] = spec["resourceGroups"]
    [flavor] = group["flavors"]
    assert flavor["name"] == "gangweb-default"
    return {r["name"]: r for r in flavor["resources"]}["nvidia.com/gpu"]


def test_a_leaf_with_quota_4_and_limit_8_is_a_cluster_queue_with_nominal_4_and_borrowing_limit_4():
    result = kd.desired(policy(gpu_quota=4, gpu_limit=8, cpu_quota=16000, cpu_limit=24000, memory_quota=64000,
                               memory_limit=-1, gpu_over_quota_weight=2, cpu_over_quota_weight=2,
                               memory_over_quota_weight=2), "dept", [], ["ml", "ai"])
    assert result.kind == "ClusterQueue"
    assert result.spec == {
        "cohortName": "dept",
        "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
            {"name": "gangweb-default", "resources": [
                {"name": "cpu", "nominalQuota": "16", "borrowingLimit": "8"},
                {"name": "memory", "nominalQuota": "64000M"},  # limit -1: no borrowing limit
                {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "4"}]}]}],
        "namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ai", "ml"]}]},
        "fairSharing": {"weight": "2"},
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
                       "borrowWithinCohort": {"policy": "Never"}},
    }
    assert result.warnings == []


def test_a_parent_is_a_cohort_whose_quota_beyond_its_childrens_is_its_own_pool():
    a, b = policy(name="a", gpu_quota=4, gpu_limit=8), policy(name="b", gpu_quota=4, gpu_limit=8)
    result = kd.desired(policy(name="dept", gpu_quota=10, gpu_limit=16), "org", [a, b], [])
    assert result.kind == "Cohort"
    assert result.spec["parentName"] == "org" and result.spec["fairSharing"] == {"weight": "1"}
    assert gpu(result.spec) == {"name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "6"}  # 10-8, 16-10
    # 8 = 4 + 4, no parent, no limit: nothing of its own to say
    assert kd.desired(policy(name="dept", gpu_quota=8), "", [a, b], []).spec == {"fairSharing": {"weight": "1"}}


def test_children_holding_more_than_their_parent_warn_and_a_root_cohort_cannot_borrow():
    a, b = policy(name="a", gpu_quota=4, gpu_limit=8), policy(name="b", gpu_quota=4, gpu_limit=8)
    result = kd.desired(policy(name="dept", gpu_quota=6, gpu_limit=12), "", [a, b], [])
    assert [(w["code"], w["field"]) for w in result.warnings] == [
        ("kueue_children_over_parent", "gpu_quota"), ("kueue_no_cohort", "gpu_limit")]
    assert "borrowingLimit" not in str(result.spec)  # Kueue refuses a borrowing limit on a Cohort without parent


def test_a_top_level_leaf_has_no_cohort_and_no_borrowing_limit_with_a_warning():
    result = kd.desired(policy(gpu_quota=4, gpu_limit=8), "", [], ["ml"])
    assert "cohortName" not in result.spec
    assert gpu(result.spec) == {"name": "nvidia.com/gpu", "nominalQuota": "4"}
    assert ("kueue_no_cohort", "gpu_limit") in [(w["code"], w["field"]) for w in result.warnings]


def test_an_unbounded_resource_is_sent_as_a_nominal_quota_kueue_never_reaches_with_a_warning():
    result = kd.desired(policy(gpu_quota=2, gpu_limit=2), "dept", [], ["ml"])  # cpu, memory: quota 0, limit -1
    resources = result.spec["resourceGroups"][0]["flavors"][0]["resources"]
    assert resources[:2] == [{"name": "cpu", "nominalQuota": "100000"},
                             {"name": "memory", "nominalQuota": "100000000M"}]
    [warning] = result.warnings
    assert (warning["code"], warning["field"]) == ("kueue_unbounded", "cpu_limit")
    assert warning["message"].startswith("cpu, memory: quota and limits leave Kueue nothing to hold")


@pytest.mark.parametrize("fields, code, fld", [
    ({"priority": 200}, "kueue_no_queue_priority", "priority"),
    ({"reclaim_min_runtime": "30m"}, "kueue_unsupported", "reclaim_min_runtime"),
    ({"gpu_quota": 0.5, "gpu_limit": 1}, "kueue_fractional_gpu", "gpu_quota"),
    ({"cpu_over_quota_weight": 3}, "kueue_one_weight", "cpu_over_quota_weight"),
    ({"gpu_quota": 6, "gpu_limit": 4}, "kueue_quota_sent_as_limit", "gpu_quota"),
])
def test_what_kueue_cannot_express_is_a_warning_naming_the_field(fields, code, fld):
    base = {"cpu_quota": 1000, "cpu_limit": 1000, "memory_quota": 1000, "memory_limit": 1000, "gpu_limit": 8}
    result = kd.desired(policy(**{**base, **fields}), "dept", [], [])
    assert [(w["code"], w["field"]) for w in result.warnings] == [(code, fld)]


def test_a_quota_above_its_limit_is_held_at_the_limit():
    result = kd.desired(policy(gpu_quota=6, gpu_limit=4), "dept", [], [])
    assert gpu(result.spec) == {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "0"}


@pytest.mark.parametrize("weight, sent", [(1, "1"), (0, "0"), (2.5, "2500m"), (0.001, "1m")])
def test_the_gpu_over_quota_weight_is_the_fair_sharing_weight(weight, sent):
    result = kd.desired(policy(gpu_over_quota_weight=weight, cpu_over_quota_weight=weight,
                               memory_over_quota_weight=weight), "dept", [], [])
    assert result.spec["fairSharing"] == {"weight": sent}
    assert "kueue_one_weight" not in codes(result)


def test_no_allowed_namespace_admits_none_and_ancestors_narrow_the_namespaces():
    assert kd.namespace_selector([]) == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}]}
    leaf = policy(allowed_namespaces=["ml", "ai", "web"])
    assert kd.allowed_namespaces(leaf, [policy(name="dept", allowed_namespaces=["ml", "ai"]),
                                        policy(name="org", allowed_namespaces=["ai", "ml", "ops"])]) == ["ai", "ml"]


def spec_of(**fields):
    return kd.desired(policy(**{"gpu_quota": 4, "gpu_limit": 8, **fields}), "dept", [], ["ml"]).spec


def test_a_hand_edit_of_the_nominal_quota_is_a_difference_with_expected_and_found():
    want = kd.flat_fields(spec_of())
    edited = spec_of()
    edited["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = "6"
    edited["queueingStrategy"] = "StrictFIFO"  # not gangweb's: not compared
    assert kd.diff(want, kd.flat_fields(edited)) == [
        {"field": "gangweb-default/nvidia.com/gpu.nominalQuota", "expected": 4.0, "found": 6.0}]


def test_the_crds_defaults_read_as_what_gangweb_sent_and_quantities_compare_by_value():
    sent = spec_of()
    stored = spec_of()
    stored["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "100k"  # = 100000 cores
    assert kd.diff(kd.flat_fields(sent), kd.flat_fields(stored)) == []
    cohort = kd.desired(policy(name="dept"), "", [policy(name="a")], []).spec
    assert kd.diff(kd.flat_fields(cohort), kd.flat_fields({"fairSharing": {"weight": "1"}})) == []
    assert kd.flat_fields({})["preemption.reclaimWithinCohort"] == "Never"


@pytest.mark.parametrize("hostile", [
    {"resourceGroups": "lots"},
    {"resourceGroups": [{"flavors": [{"name": "x", "resources": [{"name": "cpu", "nominalQuota": "1.5.3"}]}]}]},
    {"fairSharing": {"weight": "heavy"}}, {"namespaceSelector": ["not", "a", "selector"]}, {"preemption": 3},
])
def test_a_hostile_spec_reads_as_different_never_raises(hostile):
    assert kd.diff(kd.flat_fields(spec_of()), kd.flat_fields(hostile)) != []


def test_the_update_body_keeps_fields_gangweb_does_not_own_and_stamps_the_hash():
    existing = {"apiVersion": kd.API_VERSION, "kind": "ClusterQueue",
                "metadata": {"name": "team-a", "resourceVersion": "42", "labels": {"other": "x"}},
                "spec": {**spec_of(), "stopPolicy": "Hold", "cohortName": "elsewhere"}, "status": {"x": 1}}
    body = kd.body("ClusterQueue", "team-a", spec_of(), existing)
    assert body["spec"] == {**spec_of(), "stopPolicy": "Hold"}
    assert body["metadata"]["resourceVersion"] == "42" and "status" not in body
    assert body["metadata"]["labels"]["other"] == "x" and body["metadata"]["labels"][LABEL_MANAGED_BY] == "gangweb"
    assert body["metadata"]["annotations"][ANNOTATION_SPEC_HASH] == kd.body("ClusterQueue", "team-a", spec_of(),
                                                                            None)["metadata"]["annotations"][
        ANNOTATION_SPEC_HASH]


def test_a_foreign_cluster_queue_imports_its_quota_and_limit_and_gangwebs_no_bound_reads_as_the_defaults():
    fields = kd.import_fields(spec_of(gpu_over_quota_weight=2, cpu_over_quota_weight=2, memory_over_quota_weight=2))
    assert (fields["gpu_quota"], fields["gpu_limit"], fields["gpu_over_quota_weight"]) == (4.0, 8.0, 2.0)
    assert (fields["cpu_quota"], fields["cpu_limit"]) == (0, -1)
    assert kd.import_fields({"fairSharing": {"weight": "500m"}})["gpu_over_quota_weight"] == 0.5


def test_cluster_queue_status_is_stored_raw_and_in_kai_units():
    obj = {"kind": "ClusterQueue", "status": {
        "pendingWorkloads": 1, "reservingWorkloads": 2, "admittedWorkloads": 2,
        "fairSharing": {"weightedShare": 250},
        "conditions": [{"type": "Active", "status": "True", "reason": "Ready"}],
        "flavorsReservation": [{"name": "gangweb-default", "resources": [
            {"name": "nvidia.com/gpu", "total": "6", "borrowed": "2"}, {"name": "cpu", "total": "1500m"}]}],
        "flavorsUsage": [{"name": "gangweb-default", "resources": [
            {"name": "nvidia.com/gpu", "total": "6", "borrowed": "2"}, {"name": "memory", "total": "16Gi"}]}]}}
    status = kd.status_payload(obj)
    assert status == {
        "kind": "ClusterQueue", "pending_workloads": 1, "reserving_workloads": 2, "admitted_workloads": 2,
        "weighted_share": 250, "active": "True", "active_reason": "Ready",
        "flavors_reservation": [{"name": "gangweb-default", "resources": [
            {"name": "nvidia.com/gpu", "total": "6", "borrowed": "2"},
            {"name": "cpu", "total": "1500m", "borrowed": "0"}]}],
        "flavors_usage": [{"name": "gangweb-default", "resources": [
            {"name": "nvidia.com/gpu", "total": "6", "borrowed": "2"},
            {"name": "memory", "total": "16Gi", "borrowed": "0"}]}],
        "allocated": {"gpu": 6.0, "cpu": 0, "memory": 17180}, "reserved": {"gpu": 6.0, "cpu": 1500, "memory": 0},
        "borrowed": {"gpu": 2.0, "cpu": 0, "memory": 0}}
    assert kd.status_payload({"kind": "Cohort", "status": {"fairSharing": {"weightedShare": 0}}}) == {
        "kind": "Cohort", "weighted_share": 0}


def test_nothing_reported_is_unknown_never_zero():
    status = kd.status_payload({"kind": "ClusterQueue", "status": {"admittedWorkloads": "many"}})
    assert (status["admitted_workloads"], status["pending_workloads"], status["weighted_share"]) == (None, None, None)


@pytest.mark.parametrize("status, reason", [
    ({}, ""),
    ({"admittedWorkloads": 0, "reservingWorkloads": 0}, ""),
    ({"admittedWorkloads": 1, "reservingWorkloads": 1}, "1 workload admitted, 1 workload reserving quota"),
    ({"admittedWorkloads": 0, "reservingWorkloads": 2}, "2 workloads reserving quota"),
    ({"admittedWorkloads": "1"}, "its workload counts are unreadable"),
    ({"admittedWorkloads": -1}, "its workload counts are unreadable"),
])
def test_a_cluster_queue_holding_workloads_is_kept(status, reason):
    assert kd.workloads_held({"kind": "ClusterQueue", "status": status}) == reason


@pytest.mark.parametrize("served, synced", [
    (["kueue.x-k8s.io/v1beta2", "batch/v1"], True),
    (["kueue.x-k8s.io/v1beta1", "batch/v1"], False),  # gangweb writes v1beta2 only
    ([], None),  # never probed: the LIST decides (a 404 means no Kueue, nothing recorded)
])
def test_the_kueue_sync_runs_where_the_cluster_serves_kueue_v1beta2(served, synced):
    from scheduling.models import Cluster
    from scheduling.reconcile import kueue_queues

    assert kueue_queues.serves_kueue(Cluster(name="c", served_apis=served)) is synced
