"""The Kubernetes 1.37 plugin (scheduling.k8s.io/v1beta1): objects it builds, drift it patches, drift it replaces,
status it reads, and that discovery picks it above v1alpha2. Field names as in k8s.io/api v0.37.2."""
import pytest

from scheduling.backends import registry
from scheduling.backends.k8s_workload_v1alpha2 import K8sWorkloadV1alpha2
from scheduling.backends.k8s_workload_v1beta1 import K8sWorkloadV1beta1
from tests.unit.test_backends import spec

BETA = "scheduling.k8s.io/v1beta1"
SERVED_137 = {"v1", "batch/v1", "scheduling.k8s.io/v1", BETA}
SERVED_136 = {"v1", "batch/v1", "scheduling.k8s.io/v1", "scheduling.k8s.io/v1alpha2"}


def observed(obj: dict, **spec_over) -> dict:
    """`obj` as the API server returns it: uid, priority filled by admission, PodGroup disruptionMode defaulted."""
    out = {**obj, "metadata": {**obj["metadata"], "uid": "u-1", "resourceVersion": "7"},
           "spec": {**obj["spec"], **spec_over}}
    if obj["kind"] == "PodGroup":
        out["spec"].setdefault("disruptionMode", {"single": {}})
        out["spec"].setdefault("priority", 1000)
        out["metadata"]["finalizers"] = ["scheduling.k8s.io/podgroup-protection"]
    return out


def test_discovery_picks_v1beta1_on_137_and_v1alpha2_on_136():
    assert registry.select("k8s-workload", SERVED_137) is K8sWorkloadV1beta1
    assert registry.select("k8s-workload", SERVED_136) is K8sWorkloadV1alpha2
    assert registry.select("k8s-workload", SERVED_136 | SERVED_137) is K8sWorkloadV1beta1
    assert registry.by_name("k8s-workload-v1beta1") is K8sWorkloadV1beta1


def test_builds_workload_then_podgroup_linked_by_workload_ref_with_priority_and_disruption_mode():
    workload, pg = K8sWorkloadV1beta1().build_gang_objects(spec(disruption_mode="all"))
    assert (workload["apiVersion"], workload["kind"], pg["apiVersion"], pg["kind"]) == (
        BETA, "Workload", BETA, "PodGroup")
    assert workload["spec"] == {"podGroupTemplates": [{
        "name": "gang", "schedulingPolicy": {"gang": {"minCount": 3}}, "priorityClassName": "train",
        "disruptionMode": {"all": {}}}]}
    assert pg["spec"] == {"workloadRef": {"workloadName": "train-abcd1234", "templateName": "gang"},
                          "schedulingPolicy": {"gang": {"minCount": 3}}, "priorityClassName": "train",
                          "disruptionMode": {"all": {}}}
    assert pg["metadata"]["name"] == workload["metadata"]["name"] == "train-abcd1234"


def test_without_priority_class_or_disruption_mode_neither_is_set():
    workload, pg = K8sWorkloadV1beta1().build_gang_objects(spec(priority_class_name=""))
    assert "priorityClassName" not in pg["spec"] and "disruptionMode" not in pg["spec"]
    assert set(workload["spec"]["podGroupTemplates"][0]) == {"name", "schedulingPolicy"}


def test_pods_point_at_the_podgroup_and_keep_the_default_scheduler():
    s = spec()
    pod = K8sWorkloadV1beta1().stamp_pod_template(s.pod_sets[0].template, s, s.pod_sets[0])
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "train-abcd1234"}
    assert "schedulerName" not in pod["spec"]


def test_server_defaults_are_not_drift():
    backend = K8sWorkloadV1beta1()
    for want in backend.build_gang_objects(spec()):
        assert backend.diff(want, observed(want)).in_sync


def test_min_count_drift_on_the_podgroup_is_a_patch_of_that_number_alone():
    backend = K8sWorkloadV1beta1()
    _, pg = backend.build_gang_objects(spec())
    drift = backend.diff(pg, observed(pg, schedulingPolicy={"gang": {"minCount": 1}}))
    assert not drift.replace
    assert drift.fields == ["schedulingPolicy.gang.minCount"]
    assert drift.patch == {"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}


def test_min_count_drift_on_the_workload_template_patches_the_observed_list_keeping_server_fields():
    backend = K8sWorkloadV1beta1()
    workload, _ = backend.build_gang_objects(spec())
    edited = [{**workload["spec"]["podGroupTemplates"][0], "schedulingPolicy": {"gang": {"minCount": 2}},
               "priority": 1000}]
    drift = backend.diff(workload, observed(workload, podGroupTemplates=edited))
    assert not drift.replace and drift.fields == ["podGroupTemplates[gang].schedulingPolicy.gang.minCount"]
    assert drift.patch == {"spec": {"podGroupTemplates": [{
        "name": "gang", "schedulingPolicy": {"gang": {"minCount": 3}}, "priorityClassName": "train",
        "priority": 1000}]}}


@pytest.mark.parametrize("kind_index, field, value", [
    (1, "priorityClassName", "other"),
    (1, "disruptionMode", {"all": {}}),
    (1, "workloadRef", {"workloadName": "else", "templateName": "gang"}),
    (1, "schedulingPolicy", {"basic": {}}),
    (1, "schedulingPolicy", {"gang": {"minCount": 2}, "basic": {}}),
    (0, "podGroupTemplates", [{"name": "other", "schedulingPolicy": {"gang": {"minCount": 3}}}]),
    (0, "podGroupTemplates", []),
])
def test_drift_in_an_immutable_field_replaces_the_gang(kind_index, field, value):
    backend = K8sWorkloadV1beta1()
    want = backend.build_gang_objects(spec(disruption_mode="single"))[kind_index]
    drift = backend.diff(want, observed(want, **{field: value}))
    assert drift.replace and drift.patch is None and drift.fields == [field]


def test_min_count_and_priority_drift_together_replace():
    backend = K8sWorkloadV1beta1()
    _, pg = backend.build_gang_objects(spec())
    drift = backend.diff(pg, observed(pg, priorityClassName="other", schedulingPolicy={"gang": {"minCount": 1}}))
    assert drift.replace and drift.fields == ["priorityClassName", "schedulingPolicy"]


def test_status_from_podgroup_initially_scheduled_with_the_cluster_time():
    backend = K8sWorkloadV1beta1()
    _, pg = backend.build_gang_objects(spec())
    pg = observed(pg)
    pg["status"] = {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
                                    "message": "", "lastTransitionTime": "2026-12-01T21:00:05Z"}]}
    status = backend.read_status([pg])
    assert status.admitted is True and status.reason == "Scheduled" and status.scheduled_at_admission
    assert status.at.isoformat() == "2026-12-01T21:00:05+00:00"
    assert status.source == "PodGroup ml/train-abcd1234"
    pg["status"]["conditions"] = [{"type": "PodGroupInitiallyScheduled", "status": "False",
                                   "reason": "Unschedulable", "message": "0/4 nodes are available",
                                   "lastTransitionTime": "2026-12-01T21:00:01Z"}]
    status = backend.read_status([pg])
    assert (status.admitted, status.reason, status.message) == (False, "Unschedulable", "0/4 nodes are available")


def test_v1alpha2_condition_name_is_not_read_by_v1beta1():
    backend = K8sWorkloadV1beta1()
    _, pg = backend.build_gang_objects(spec())
    pg = observed(pg)
    pg["status"] = {"conditions": [{"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled",
                                    "lastTransitionTime": "2026-12-01T21:00:05Z"}]}
    assert backend.read_status([pg]).admitted is None


def test_disruption_target_takes_precedence():
    backend = K8sWorkloadV1beta1()
    _, pg = backend.build_gang_objects(spec())
    pg = observed(pg)
    pg["status"] = {"conditions": [
        {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
         "lastTransitionTime": "2026-12-01T21:00:05Z"},
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": "preempted",
         "lastTransitionTime": "2026-12-01T21:03:00Z"}]}
    status = backend.read_status([pg])
    assert (status.admitted, status.reason, status.message) == (True, "PreemptionByScheduler", "preempted")


def test_the_protection_finalizer_is_left_to_the_controller():
    assert K8sWorkloadV1beta1.releasable_finalizers == ()
    assert K8sWorkloadV1alpha2.releasable_finalizers == ("scheduling.k8s.io/podgroup-protection",)
