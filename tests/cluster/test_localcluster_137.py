"""The local control plane on Kubernetes 1.37: scheduling.k8s.io/v1beta1 is served (v1alpha2 is gone), gangs are
all-or-nothing under GenericWorkload alone, minCount is mutable and everything else immutable, the protection
controller removes the PodGroup finalizer once the pods finish, and a 1.36 control plane upgrades in place.

Real processes throughout (kube-apiserver, kube-scheduler, kube-controller-manager, etcd, kwok). The python client
has no v1beta1 Workload/PodGroup API, so these go through CustomObjectsApi (any /apis/<group>/<version> path).
"""
from __future__ import annotations

import time

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

import localcluster
from localcluster.processes import wait_until
from tests.cluster.test_localcluster import POOL_LABEL, api_error, make_pod, pods_by_name

pytestmark = pytest.mark.cluster
GROUP, VERSION = "scheduling.k8s.io", "v1beta1"


def make_workload(name: str, template: str, min_count: int, **template_fields) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workload", "metadata": {"name": name},
            "spec": {"podGroupTemplates": [{"name": template, "schedulingPolicy": {"gang": {"minCount": min_count}},
                                            **template_fields}]}}


def make_pod_group(name: str, workload: str, template: str, min_count: int, **spec_fields) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"workloadRef": {"workloadName": workload, "templateName": template},
                     "schedulingPolicy": {"gang": {"minCount": min_count}}, **spec_fields}}


class Sched:
    """Workload/PodGroup v1beta1 calls on one namespace."""

    def __init__(self, api, namespace: str):
        self.co, self.ns = client.CustomObjectsApi(api), namespace

    def create(self, plural: str, body: dict) -> dict:
        return self.co.create_namespaced_custom_object(GROUP, VERSION, self.ns, plural, body)

    def get(self, plural: str, name: str) -> dict:
        return self.co.get_namespaced_custom_object(GROUP, VERSION, self.ns, plural, name)

    def patch(self, plural: str, name: str, body: dict) -> dict:
        return self.co.patch_namespaced_custom_object(GROUP, VERSION, self.ns, plural, name, body)

    def delete(self, plural: str, name: str) -> None:
        self.co.delete_namespaced_custom_object(GROUP, VERSION, self.ns, plural, name)

    def condition(self, name: str, type_: str) -> dict | None:
        pg = self.get("podgroups", name)
        return next((c for c in (pg.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


@pytest.fixture
def sched(kube_api, kube_namespace) -> Sched:
    return Sched(kube_api, kube_namespace)


@pytest.fixture
def node_pool(kube_cluster, kube_namespace):
    added: list[str] = []

    def add(suffix: str, gpus: int) -> str:
        name = f"{kube_namespace}-{suffix}"[:63]
        kube_cluster.add_node(name, cpu="16", memory="64Gi", gpus=gpus, labels={POOL_LABEL: kube_namespace})
        added.append(name)
        return name

    add.pool = kube_namespace
    yield add
    for name in added:
        kube_cluster.remove_node(name)


@pytest.mark.k8s_version("1.37")
def test_v1beta1_is_served_and_v1alpha2_is_not(kube_api):
    groups = {g.name: g for g in client.ApisApi(kube_api).get_api_versions().groups}
    versions = {v.version for v in groups["scheduling.k8s.io"].versions}
    assert "v1beta1" in versions and "v1alpha2" not in versions
    resources = {r["name"]: r for r in kube_api.call_api(
        "/apis/scheduling.k8s.io/v1beta1", "GET", response_types_map={200: "object"}, auth_settings=["BearerToken"],
        _return_http_data_only=True)["resources"]}
    assert {"workloads", "podgroups", "podgroups/status"} <= set(resources)
    assert client.VersionApi(kube_api).get_code().git_version == "v1.37.2"


@pytest.mark.k8s_version("1.37")
def test_gang_of_three_binds_nothing_with_room_for_two_then_all_run_after_a_node_is_added(
        kube_api, kube_namespace, sched, node_pool):
    core = client.CoreV1Api(kube_api)
    node_pool("a", gpus=2)
    sched.create("workloads", make_workload("train", "workers", 3))
    sched.create("podgroups", make_pod_group("train-workers", "train", "workers", 3))
    for i in range(3):
        core.create_namespaced_pod(kube_namespace, make_pod(f"worker-{i}", gpus=1, pod_group="train-workers",
                                                            pool=node_pool.pool))
    wait_until(lambda: (c := sched.condition("train-workers", "PodGroupInitiallyScheduled")) is not None
               and c["status"] == "False", 60, "PodGroupInitiallyScheduled=False")
    time.sleep(3)
    assert [p.spec.node_name for p in pods_by_name(core, kube_namespace).values()] == [None, None, None]
    assert sched.condition("train-workers", "PodGroupInitiallyScheduled")["reason"] == "Unschedulable"

    node_pool("b", gpus=2)
    wait_until(lambda: all(p.spec.node_name and p.status.phase == "Running"
                           for p in pods_by_name(core, kube_namespace).values()), 120, "all 3 Running")
    scheduled = sched.condition("train-workers", "PodGroupInitiallyScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("True", "Scheduled")


@pytest.mark.k8s_version("1.37")
def test_min_count_is_patched_in_place_and_priority_class_is_immutable(kube_api, sched):
    sched.create("workloads", make_workload("train", "workers", 3))
    created = sched.create("podgroups", make_pod_group("train-workers", "train", "workers", 3))

    patched = sched.patch("podgroups", "train-workers", {"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
    assert patched["metadata"]["uid"] == created["metadata"]["uid"]
    assert patched["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    template = sched.get("workloads", "train")["spec"]["podGroupTemplates"][0]
    template["schedulingPolicy"]["gang"]["minCount"] = 2
    workload = sched.patch("workloads", "train", {"spec": {"podGroupTemplates": [template]}})
    assert workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] == 2

    for change in ({"priorityClassName": "system-cluster-critical"}, {"disruptionMode": {"all": {}}},
                   {"schedulingPolicy": {"gang": None, "basic": {}}},
                   {"workloadRef": {"workloadName": "train", "templateName": "other"}}):
        with pytest.raises(ApiException) as refused:
            sched.patch("podgroups", "train-workers", {"spec": change})
        assert refused.value.status == 422, (change, refused.value.body)
        print("refused", change, api_error(refused.value)["message"][:200])
    assert sched.get("podgroups", "train-workers")["spec"]["disruptionMode"] == {"single": {}}  # the default


@pytest.mark.k8s_version("1.37")
def test_priority_class_and_disruption_mode_are_served(kube_api, sched, priority_classes):
    user_priority_class = priority_classes(1000)
    sched.create("workloads", make_workload("train", "workers", 2, priorityClassName=user_priority_class,
                                            disruptionMode={"all": {}}))
    pg = sched.create("podgroups", make_pod_group("train-workers", "train", "workers", 2,
                                                  priorityClassName=user_priority_class,
                                                  disruptionMode={"all": {}}))
    assert pg["spec"]["priorityClassName"] == user_priority_class
    assert pg["spec"]["priority"] == 1000  # filled by admission from the class
    assert pg["spec"]["disruptionMode"] == {"all": {}}
    template = sched.get("workloads", "train")["spec"]["podGroupTemplates"][0]
    assert template["disruptionMode"] == {"all": {}} and template["priorityClassName"] == user_priority_class


@pytest.mark.k8s_version("1.37")
def test_a_podgroup_of_a_system_priority_class_is_refused(kube_api, sched):
    """`spec.priority` is capped at HighestUserDefinablePriority (1e9), and admission fills it from the class, so a
    PodGroup naming `system-cluster-critical` (2e9) is invalid; the Workload template is not filled and passes."""
    sched.create("workloads", make_workload("train", "workers", 2, priorityClassName="system-cluster-critical"))
    with pytest.raises(ApiException) as refused:
        sched.create("podgroups", make_pod_group("train-workers", "train", "workers", 2,
                                                 priorityClassName="system-cluster-critical"))
    assert refused.value.status == 422
    error = api_error(refused.value)
    assert [c["field"] for c in error["details"]["causes"]] == ["spec.priority"], error
    assert "must be less than or equal to 1000000000" in error["message"]


@pytest.mark.k8s_version("1.37")
def test_protection_controller_keeps_the_finalizer_while_pods_run_and_removes_it_after(kube_api, kube_namespace,
                                                                                        sched):
    core = client.CoreV1Api(kube_api)
    sched.create("workloads", make_workload("train", "workers", 2))
    created = sched.create("podgroups", make_pod_group("train-workers", "train", "workers", 2))
    assert created["metadata"]["finalizers"] == ["scheduling.k8s.io/podgroup-protection"]
    for i in range(2):
        core.create_namespaced_pod(kube_namespace, make_pod(f"worker-{i}", pod_group="train-workers"))
    wait_until(lambda: all(p.status.phase == "Running" for p in pods_by_name(core, kube_namespace).values()),
               60, "pods Running")
    sched.delete("podgroups", "train-workers")
    time.sleep(3)
    terminating = sched.get("podgroups", "train-workers")
    assert terminating["metadata"].get("deletionTimestamp")
    assert terminating["metadata"]["finalizers"] == ["scheduling.k8s.io/podgroup-protection"]
    for i in range(2):
        core.patch_namespaced_pod(f"worker-{i}", kube_namespace,
                                  {"metadata": {"annotations": {localcluster.SIM_EXIT_ANNOTATION: "0"}}})

    def gone() -> bool:
        try:
            sched.get("podgroups", "train-workers")
            return False
        except ApiException as e:
            return e.status == 404

    wait_until(gone, 60, "PodGroup removed by the protection controller once its pods Succeeded")


@pytest.mark.k8s_version("1.36", upgrade_to="1.37.2")
def test_a_136_control_plane_upgrades_in_place_to_137_and_running_pods_stay(tmp_path):
    """switch_version: same etcd, ports and certificates; nodes and running pods survive; the API set changes."""
    state_dir = tmp_path / "state"
    cluster = localcluster.up(localcluster.ClusterConfig(state_dir=state_dir, k8s_version="1.36.3", nodes=1,
                                                         install_crds=False, die_with_parent=True))
    try:
        with cluster.api_client() as api:
            core = client.CoreV1Api(api)
            core.create_namespace({"metadata": {"name": "up"}})
            wait_until(lambda: _has_sa(core, "up"), 30, "default SA")
            core.create_namespaced_pod("up", make_pod("stays"))
            wait_until(lambda: core.read_namespaced_pod("stays", "up").status.phase == "Running", 60, "Running")
            before = core.read_namespaced_pod("stays", "up")
        started = time.monotonic()
        upgraded = localcluster.switch_version(state_dir, "1.37.2", die_with_parent=True)
        took = time.monotonic() - started
        print(f"1.36.3 -> 1.37.2 in place: {took:.1f}s")
        assert upgraded.state.k8s_version == "1.37.2" and localcluster.status(state_dir).running
        with upgraded.api_client() as api:
            assert client.VersionApi(api).get_code().git_version == "v1.37.2"
            core = client.CoreV1Api(api)
            after = core.read_namespaced_pod("stays", "up")
            assert (after.metadata.uid, after.status.phase, after.spec.node_name) == (
                before.metadata.uid, "Running", before.spec.node_name)
            versions = {v.version for g in client.ApisApi(api).get_api_versions().groups
                        if g.name == "scheduling.k8s.io" for v in g.versions}
            assert "v1beta1" in versions and "v1alpha2" not in versions
    finally:
        localcluster.down(state_dir)


def _has_sa(core, namespace: str) -> bool:
    try:
        core.read_namespaced_service_account("default", namespace)
        return True
    except ApiException as e:
        if e.status == 404:
            return False
        raise
