"""Backend plugins: the gang objects they build, how they stamp pods, drift, and status reading."""
import uuid

import pytest

from scheduling.backends import registry
from scheduling.backends.base import GangSpec, PodSetSpec
from scheduling.backends.coscheduling_v1alpha1 import CoschedulingV1alpha1
from scheduling.backends.k8s_workload_v1alpha2 import K8sWorkloadV1alpha2
from scheduling.backends.kai_v2alpha2 import KaiV2alpha2
from scheduling.backends.volcano_v1beta1 import VolcanoV1beta1

UID = str(uuid.UUID(int=7))
LABELS = {"gangweb.io/job-uid": UID, "gangweb.io/job": "train"}


def spec(**over) -> GangSpec:
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "main", "image": "i"}]}}
    fields = dict(
        job_name="train", namespace="ml", uid=UID, generation=0, gang_name="train-abcd1234",
        service_name="train-abcd1234", queue="team-a", priority_class_name="train", preemptibility="preemptible",
        topology=None, min_member=3, schedule_timeout_seconds=60, min_resources={"cpu": "8", "nvidia.com/gpu": "2"},
        pod_sets=(PodSetSpec("leader", 1, 1, template, "train-leader-abcd1234"),
                  PodSetSpec("worker", 2, 2, template, "train-worker-abcd1234")),
        labels=LABELS)
    fields.update(over)
    return GangSpec(**fields)


def test_registry_selects_highest_served_version_and_knows_every_family():
    assert registry.select("k8s-workload", {"scheduling.k8s.io/v1alpha2", "v1"}) is K8sWorkloadV1alpha2
    assert registry.select("k8s-workload", {"v1"}) is None
    assert registry.select("kai", {"scheduling.run.ai/v2alpha2"}) is KaiV2alpha2
    assert {cls.family for cls in registry.all_plugins()} == set(registry.family_names())
    assert registry.by_name("volcano-v1beta1") is VolcanoV1beta1


def test_kai_builds_one_podgroup_with_subgroups_queue_and_priority():
    [pg] = KaiV2alpha2().build_gang_objects(spec(topology={"topology": "net", "requiredTopologyLevel": "rack"}))
    assert pg["apiVersion"] == "scheduling.run.ai/v2alpha2" and pg["kind"] == "PodGroup"
    assert pg["metadata"] == {"name": "train-abcd1234", "namespace": "ml", "labels": LABELS}
    assert pg["spec"] == {
        "minMember": 3, "queue": "team-a", "priorityClassName": "train", "preemptibility": "preemptible",
        "subGroups": [{"name": "leader", "minMember": 1}, {"name": "worker", "minMember": 2}],
        "topologyConstraint": {"topology": "net", "requiredTopologyLevel": "rack"}}


def test_kai_stamps_pods_and_owners():
    s = spec()
    original = s.pod_sets[1].template
    pod = KaiV2alpha2().stamp_pod_template(original, s, s.pod_sets[1])
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["metadata"]["annotations"] == {"pod-group-name": "train-abcd1234"}
    assert pod["metadata"]["labels"] == {"app": "x", "kai.scheduler/queue": "team-a",
                                         "kai.scheduler/subgroup-name": "worker"}
    assert "schedulerName" not in original["spec"]  # the template is not mutated
    assert KaiV2alpha2().owner_metadata(s)["labels"] == {"kai.scheduler/skip-podgrouper": "true"}


def test_v1alpha2_builds_workload_then_podgroup_from_it():
    workload, pg = K8sWorkloadV1alpha2().build_gang_objects(spec())
    assert (workload["kind"], pg["kind"]) == ("Workload", "PodGroup")
    assert workload["spec"] == {"podGroupTemplates": [{"name": "gang", "schedulingPolicy": {"gang": {"minCount": 3}}}]}
    assert pg["spec"] == {"podGroupTemplateRef": {"workload": {"workloadName": "train-abcd1234",
                                                               "podGroupTemplateName": "gang"}},
                          "schedulingPolicy": {"gang": {"minCount": 3}}}
    s = spec()
    pod = K8sWorkloadV1alpha2().stamp_pod_template(s.pod_sets[0].template, s, s.pod_sets[0])
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "train-abcd1234"}
    assert "schedulerName" not in pod["spec"]


def test_coscheduling_and_volcano_podgroups():
    [cos] = CoschedulingV1alpha1().build_gang_objects(spec())
    assert cos["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert cos["spec"] == {"minMember": 3, "scheduleTimeoutSeconds": 60,
                           "minResources": {"cpu": "8", "nvidia.com/gpu": "2"}}
    [vol] = VolcanoV1beta1().build_gang_objects(spec())
    assert vol["spec"] == {"minMember": 3, "minTaskMember": {"leader": 1, "worker": 2}, "queue": "team-a",
                           "priorityClassName": "train", "minResources": {"cpu": "8", "nvidia.com/gpu": "2"}}
    s = spec()
    assert CoschedulingV1alpha1().stamp_pod_template(s.pod_sets[0].template, s, s.pod_sets[0])["metadata"][
        "labels"]["scheduling.x-k8s.io/pod-group"] == "train-abcd1234"
    vpod = VolcanoV1beta1().stamp_pod_template(s.pod_sets[0].template, s, s.pod_sets[0])
    assert vpod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "train-abcd1234"
    assert vpod["spec"]["schedulerName"] == "volcano"


def observed_copy(obj, **spec_changes):
    out = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "5", "uid": "u"},
           "spec": {**obj["spec"], **spec_changes}, "status": {}}
    return out


@pytest.mark.parametrize("backend", [KaiV2alpha2(), CoschedulingV1alpha1(), VolcanoV1beta1()],
                         ids=lambda b: b.name)
def test_mutable_backends_patch_a_stale_min_member_in_place(backend):
    [want] = backend.build_gang_objects(spec())
    drift = backend.diff(want, observed_copy(want, minMember=4))
    assert drift.fields == ["minMember"] and not drift.replace
    assert drift.patch == {"spec": {"minMember": 3}}
    assert backend.diff(want, observed_copy(want)).in_sync


def test_drift_ignores_server_defaults_and_equal_quantities_but_drops_removed_keys():
    backend = VolcanoV1beta1()
    [want] = backend.build_gang_objects(spec())
    same = observed_copy(want, minResources={"cpu": "8000m", "nvidia.com/gpu": 2})
    same["spec"]["networkTopology"] = {"mode": "hard"}  # not ours: ignored
    assert backend.diff(want, same).in_sync
    extra = observed_copy(want, minResources={"cpu": "8", "nvidia.com/gpu": "2", "memory": "1Gi"})
    assert backend.diff(want, extra).patch == {"spec": {"minResources": {"memory": None, "cpu": "8",
                                                                        "nvidia.com/gpu": "2"}}}
    [kai] = KaiV2alpha2().build_gang_objects(spec(priority_class_name=""))
    cleared = observed_copy(kai, priorityClassName="train")
    assert KaiV2alpha2().diff(kai, cleared).patch == {"spec": {"priorityClassName": None}}


def test_queue_and_priority_changes_are_patches_for_kai_and_volcano():
    for backend in (KaiV2alpha2(), VolcanoV1beta1()):
        [want] = backend.build_gang_objects(spec(queue="team-b", priority_class_name="inference"))
        drift = backend.diff(want, observed_copy(backend.build_gang_objects(spec())[0]))
        assert drift.patch == {"spec": {"priorityClassName": "inference", "queue": "team-b"}}


def test_v1alpha2_drift_means_replace():
    backend = K8sWorkloadV1alpha2()
    _, pg = backend.build_gang_objects(spec())
    drift = backend.diff(pg, observed_copy(pg, schedulingPolicy={"gang": {"minCount": 4}}))
    assert drift.replace and drift.fields == ["schedulingPolicy"] and drift.patch is None


def test_v1alpha2_status_from_podgroup_conditions():
    backend = K8sWorkloadV1alpha2()
    _, pg = backend.build_gang_objects(spec())
    pg["status"] = {"conditions": [{"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": "0/4 nodes", "lastTransitionTime": "2026-11-29T14:00:00Z"}]}
    st = backend.read_status([pg])
    assert (st.admitted, st.reason, st.message, st.at.isoformat()) == (
        False, "Unschedulable", "0/4 nodes", "2026-11-29T14:00:00+00:00")
    assert st.source == "PodGroup ml/train-abcd1234"
    pg["status"]["conditions"] = [
        {"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled",
         "lastTransitionTime": "2026-11-29T14:01:00Z"},
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": "preempted",
         "lastTransitionTime": "2026-11-29T14:02:00Z"}]
    st = backend.read_status([pg])
    assert (st.admitted, st.reason, st.message) == (True, "PreemptionByScheduler", "preempted")
    assert backend.read_status([]).admitted is None


def test_kai_status_reads_reasons_and_queue_details():
    backend = KaiV2alpha2()
    [pg] = backend.build_gang_objects(spec())
    details = {"name": "team-a", "queueResourceLimits": {"nvidia.com/gpu": "4"}}
    pg["status"] = {"schedulingConditions": [
        {"type": "UnschedulableOnNodePool", "reason": "Unschedulable", "status": "True",
         "lastTransitionTime": "2026-11-29T14:00:00Z", "reasons": [{"reason": "OldReason", "message": "old"}]},
        {"type": "UnschedulableOnNodePool", "reason": "Unschedulable", "status": "True",
         "lastTransitionTime": "2026-11-29T14:05:00Z",
         "reasons": [{"reason": "OverLimit", "message": "team-a quota has reached the allowable limit of GPUs",
                      "details": {"queueDetails": details}}]}]}
    st = backend.read_status([pg])
    assert (st.admitted, st.reason, st.queue_details) == (False, "OverLimit", details)
    assert "allowable limit" in st.message
    pg["status"] = {"resourcesStatus": {"allocated": {"nvidia.com/gpu": "2"}}}
    assert backend.read_status([pg]).admitted is True
    pg["status"] = {}
    assert backend.read_status([pg]).admitted is None


@pytest.mark.parametrize("status, admitted, reason", [
    ({"phase": "Running", "running": 3}, True, "Running"),
    ({"phase": "Scheduling"}, None, "Scheduling"),
    ({"phase": "Failed", "failed": 1}, False, "Failed"),
])
def test_coscheduling_status_from_phase_and_counters(status, admitted, reason):
    backend = CoschedulingV1alpha1()
    [pg] = backend.build_gang_objects(spec())
    pg["status"] = status
    st = backend.read_status([pg])
    assert (st.admitted, st.reason) == (admitted, reason)
    assert "running" in st.message


@pytest.mark.parametrize("status, admitted, reason", [
    ({"phase": "Pending", "conditions": [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                                          "message": "3/3 tasks", "lastTransitionTime": "2026-11-29T14:00:00Z"}]},
     False, "NotEnoughResources"),
    ({"phase": "Inqueue"}, None, "Inqueue"),
    ({"phase": "Running", "conditions": [{"type": "Scheduled", "status": "True", "reason": "tasks scheduled",
                                          "lastTransitionTime": "2026-11-29T14:01:00Z"}]}, True, "tasks scheduled"),
])
def test_volcano_status_from_conditions_and_phase(status, admitted, reason):
    backend = VolcanoV1beta1()
    [pg] = backend.build_gang_objects(spec())
    pg["status"] = status
    st = backend.read_status([pg])
    assert (st.admitted, st.reason) == (admitted, reason)


def test_map_valued_fields_gangweb_owns_are_replaced_not_merged():
    """A key added by hand to Volcano's minTaskMember, KAI's topologyConstraint or a KAI subGroups item is drift; the
    patch removes it (a merge patch would keep it for ever)."""
    volcano = VolcanoV1beta1()
    [want] = volcano.build_gang_objects(spec())
    have = {**want, "spec": {**want["spec"], "minTaskMember": {"a": 1, "leader": 1, "worker": 2}}}
    drift = volcano.diff(want, have)
    assert drift.fields == ["minTaskMember"] and not drift.replace
    assert drift.patch == {"spec": {"minTaskMember": {"a": None, "leader": 1, "worker": 2}}}

    kai = KaiV2alpha2()
    [want] = kai.build_gang_objects(spec(topology={"topology": "net", "requiredTopologyLevel": "rack"}))
    have = {**want, "spec": {**want["spec"], "topologyConstraint": {**want["spec"]["topologyConstraint"],
                                                                     "preferredTopologyLevel": "block"},
                             "subGroups": [{"name": "leader", "minMember": 1},
                                           {"name": "worker", "minMember": 2, "parent": "x"}]}}
    drift = kai.diff(want, have)
    assert drift.fields == ["subGroups", "topologyConstraint"] and not drift.replace
    assert drift.patch == {"spec": {
        "subGroups": [{"name": "leader", "minMember": 1}, {"name": "worker", "minMember": 2}],
        "topologyConstraint": {"preferredTopologyLevel": None, "topology": "net", "requiredTopologyLevel": "rack"}}}
    assert kai.diff(want, {**want, "metadata": {**want["metadata"], "uid": "u"}}).in_sync
