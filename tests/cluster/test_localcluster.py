"""The local control plane behaves like a real Kubernetes cluster with gang scheduling (issue 2, "done when").

Every test talks to real processes: kube-apiserver, kube-scheduler, kube-controller-manager, etcd and kwok. The
tests of the scheduling.k8s.io/v1alpha2 API hold on 1.36 only (marked); test_localcluster_137.py has the 1.37
(v1beta1) counterparts.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

import localcluster
from localcluster.binaries import REPO_DIR
from localcluster.processes import is_running, wait_until
from localcluster.state import load_state

pytestmark = pytest.mark.cluster

POOL_LABEL = "gangweb.io/test-pool"
SCHED_GROUP, SCHED_VERSION = "scheduling.k8s.io", "v1alpha2"
KAI_GROUP = "scheduling.run.ai"


# ---- builders -----------------------------------------------------------------------------------------------
def make_pod(name: str, *, gpus: int = 0, pod_group: str | None = None, pool: str | None = None,
             annotations: dict[str, str] | None = None) -> dict:
    """A pod that never pulls anything (kwok runs it), optionally in a gang and pinned to a node pool."""
    container = {"name": "main", "image": "registry.invalid/fake:1",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    if gpus:
        container["resources"]["limits"] = {localcluster.GPU_RESOURCE: str(gpus)}
    spec: dict = {"containers": [container], "restartPolicy": "Never", "terminationGracePeriodSeconds": 0}
    if pod_group:
        spec["schedulingGroup"] = {"podGroupName": pod_group}
    if pool:
        spec["nodeSelector"] = {POOL_LABEL: pool}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": dict(annotations or {})}, "spec": spec}


def make_workload(name: str, template: str, min_count: int) -> dict:
    return {"apiVersion": f"{SCHED_GROUP}/{SCHED_VERSION}", "kind": "Workload", "metadata": {"name": name},
            "spec": {"podGroupTemplates": [{"name": template, "schedulingPolicy": {"gang": {"minCount": min_count}}}]}}


def make_pod_group(name: str, workload: str, template: str, min_count: int) -> dict:
    return {"apiVersion": f"{SCHED_GROUP}/{SCHED_VERSION}", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"podGroupTemplateRef": {"workload": {"workloadName": workload, "podGroupTemplateName": template}},
                     "schedulingPolicy": {"gang": {"minCount": min_count}}}}


def make_kai_queue(name: str, parent: str | None = None, gpu_quota: float = 8) -> dict:
    spec: dict = {"resources": {"gpu": {"quota": gpu_quota, "limit": -1, "overQuotaWeight": 1},
                                "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                                "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": f"{KAI_GROUP}/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def api_error(exc: ApiException) -> dict:
    return json.loads(exc.body)


def pods_by_name(core: client.CoreV1Api, namespace: str) -> dict[str, client.V1Pod]:
    return {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}


@pytest.fixture
def node_pool(kube_cluster, kube_namespace):
    """A label value no default node carries; nodes added through ``add(...)`` join it and are removed afterwards."""
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


# ---- the API is there ----------------------------------------------------------------------------------------
@pytest.mark.k8s_version("1.36")
def test_scheduling_v1alpha2_is_served_with_workloads_and_pod_groups(kube_api):
    resources = client.SchedulingV1alpha2Api(kube_api).get_api_resources()
    served = {r.name: r for r in resources.resources}
    assert resources.group_version == "scheduling.k8s.io/v1alpha2"
    assert {"workloads", "podgroups", "podgroups/status"} <= set(served)
    assert served["podgroups"].namespaced and served["workloads"].namespaced
    assert "workloads/status" not in served  # a Workload is a template only


def test_default_nodes_are_four_ready_untainted_gpu_nodes_in_racks(kube_api):
    nodes = {n.metadata.name: n for n in client.CoreV1Api(kube_api).list_node(
        label_selector=f"{localcluster.FAKE_NODE_LABEL}=true").items}
    defaults = {name: n for name, n in nodes.items() if name in {"node-0", "node-1", "node-2", "node-3"}}
    assert len(defaults) == 4
    for node in defaults.values():
        assert node.status.allocatable[localcluster.GPU_RESOURCE] == "8"
        assert node.status.allocatable["cpu"] == "64"
        assert not node.spec.taints
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    racks = {name: n.metadata.labels[localcluster.RACK_LABEL] for name, n in defaults.items()}
    assert racks == {"node-0": "rack-0", "node-1": "rack-0", "node-2": "rack-1", "node-3": "rack-1"}
    assert {n.metadata.labels[localcluster.BLOCK_LABEL] for n in defaults.values()} == {"block-0"}


# ---- gang scheduling -----------------------------------------------------------------------------------------
@pytest.mark.k8s_version("1.36")
def test_gang_of_three_binds_nothing_with_room_for_two_then_all_run_after_a_node_is_added(
    kube_cluster, kube_api, kube_namespace, node_pool
):
    ns = kube_namespace
    core, sched = client.CoreV1Api(kube_api), client.SchedulingV1alpha2Api(kube_api)
    node_pool("a", gpus=2)  # room for 2 one-GPU pods only
    sched.create_namespaced_workload(ns, make_workload("train", "workers", 3))
    sched.create_namespaced_pod_group(ns, make_pod_group("train-workers", "train", "workers", 3))
    for i in range(3):
        core.create_namespaced_pod(ns, make_pod(f"worker-{i}", gpus=1, pod_group="train-workers", pool=node_pool.pool))

    def pod_group_condition(type_: str):
        pg = sched.read_namespaced_pod_group("train-workers", ns)
        return next((c for c in (pg.status and pg.status.conditions) or [] if c.type == type_), None)

    wait_until(lambda: (c := pod_group_condition("PodGroupScheduled")) is not None and c.status == "False",
               60, "PodGroupScheduled=False on the PodGroup")
    time.sleep(3)  # a partial bind would show within a scheduling cycle or two
    pods = pods_by_name(core, ns)
    assert [p.spec.node_name for p in pods.values()] == [None, None, None]
    unschedulable = pod_group_condition("PodGroupScheduled")
    assert unschedulable.reason == "Unschedulable"
    print("PodGroupScheduled while short of room:", unschedulable.reason, "|", unschedulable.message)
    for pod in pods.values():
        cond = next(c for c in pod.status.conditions if c.type == "PodScheduled")
        print(pod.metadata.name, "PodScheduled:", cond.status, cond.reason, "|", cond.message)

    node_pool("b", gpus=2)

    def all_running() -> bool:
        pods = pods_by_name(core, ns).values()
        return len(pods) == 3 and all(p.spec.node_name and p.status.phase == "Running" for p in pods)

    wait_until(all_running, 120, "all 3 gang pods bound and Running")
    scheduled = pod_group_condition("PodGroupScheduled")
    print("PodGroupScheduled once placed:", scheduled.status, scheduled.reason, "|", scheduled.message)
    assert scheduled.status == "True"
    assert {p.spec.node_name for p in pods_by_name(core, ns).values()} == {f"{ns}-a", f"{ns}-b"}


@pytest.mark.k8s_version("1.36")
def test_pod_group_scheduling_policy_is_immutable(kube_api, kube_namespace):
    ns = kube_namespace
    sched = client.SchedulingV1alpha2Api(kube_api)
    sched.create_namespaced_workload(ns, make_workload("train", "workers", 3))
    sched.create_namespaced_pod_group(ns, make_pod_group("train-workers", "train", "workers", 3))

    with pytest.raises(ApiException) as raised:
        sched.patch_namespaced_pod_group("train-workers", ns, {"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})

    error = api_error(raised.value)
    print("PodGroup schedulingPolicy update:", json.dumps(error))
    assert raised.value.status == 422
    assert error["reason"] == "Invalid"
    assert any(c["field"].startswith("spec.schedulingPolicy") and "immutable" in c["message"]
               for c in error["details"]["causes"])
    read_back = sched.read_namespaced_pod_group("train-workers", ns)
    assert read_back.spec.scheduling_policy.gang.min_count == 3


@pytest.mark.k8s_version("1.36")
def test_workload_spec_is_immutable_too(kube_api, kube_namespace):
    sched = client.SchedulingV1alpha2Api(kube_api)
    sched.create_namespaced_workload(kube_namespace, make_workload("train", "workers", 3))
    patch = {"spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}}]}}

    with pytest.raises(ApiException) as raised:
        sched.patch_namespaced_workload("train", kube_namespace, patch)

    print("Workload podGroupTemplates update:", raised.value.body)
    assert raised.value.status == 422


@pytest.mark.k8s_version("1.36")
def test_pod_group_admission_requires_its_workload_and_template(kube_api, kube_namespace):
    ns, sched = kube_namespace, client.SchedulingV1alpha2Api(kube_api)
    with pytest.raises(ApiException) as no_workload:
        sched.create_namespaced_pod_group(ns, make_pod_group("train-workers", "train", "workers", 3))
    sched.create_namespaced_workload(ns, make_workload("train", "workers", 3))
    with pytest.raises(ApiException) as no_template:
        sched.create_namespaced_pod_group(ns, make_pod_group("train-workers", "train", "launcher", 3))

    assert (no_workload.value.status, api_error(no_workload.value)["reason"]) == (403, "Forbidden")
    assert 'PodGroup rejected: Workload "train" not found' in api_error(no_workload.value)["message"]
    assert no_template.value.status == 403
    assert 'PodGroupTemplate "launcher" not found in Workload "train"' in api_error(no_template.value)["message"]
    # The policy is copied, not checked: a PodGroup may differ from its template.
    sched.create_namespaced_pod_group(ns, make_pod_group("train-workers", "train", "workers", 2))


@pytest.mark.k8s_version("1.36")
def test_pod_group_protection_finalizer_holds_deletion_until_its_pods_finish(kube_api, kube_namespace):
    ns = kube_namespace
    core, sched = client.CoreV1Api(kube_api), client.SchedulingV1alpha2Api(kube_api)
    sched.create_namespaced_workload(ns, make_workload("train", "workers", 2))
    created = sched.create_namespaced_pod_group(ns, make_pod_group("train-workers", "train", "workers", 2))
    assert created.metadata.finalizers == ["scheduling.k8s.io/podgroup-protection"]  # set on create
    for i in range(2):
        core.create_namespaced_pod(ns, make_pod(f"worker-{i}", pod_group="train-workers"))
    wait_until(lambda: all(p.status.phase == "Running" for p in pods_by_name(core, ns).values()), 60, "pods Running")

    sched.delete_namespaced_pod_group("train-workers", ns)
    time.sleep(2)
    terminating = sched.read_namespaced_pod_group("train-workers", ns)
    assert terminating.metadata.deletion_timestamp is not None
    finish = {"metadata": {"annotations": {localcluster.SIM_EXIT_ANNOTATION: "0"}}}
    for i in range(2):
        core.patch_namespaced_pod(f"worker-{i}", ns, finish)

    def gone() -> bool:
        try:
            sched.read_namespaced_pod_group("train-workers", ns)
            return False
        except ApiException as e:
            return e.status == 404

    wait_until(gone, 60, "PodGroup removed once its pods Succeeded")


# ---- pods finish on demand -----------------------------------------------------------------------------------
def test_pods_run_and_finish_as_their_annotations_say(kube_api, kube_namespace):
    ns, core = kube_namespace, client.CoreV1Api(kube_api)
    exit_ = localcluster.SIM_EXIT_ANNOTATION
    core.create_namespaced_pod(ns, make_pod("ok", annotations={exit_: "0"}))
    core.create_namespaced_pod(ns, make_pod("fails", annotations={exit_: "3"}))
    created = time.monotonic()
    core.create_namespaced_pod(ns, make_pod("timed", annotations={localcluster.SIM_DURATION_ANNOTATION: "4s"}))
    core.create_namespaced_pod(ns, make_pod("forever"))

    wait_until(lambda: pods_by_name(core, ns)["ok"].status.phase == "Succeeded", 30, "pod ok Succeeded")
    wait_until(lambda: pods_by_name(core, ns)["fails"].status.phase == "Failed", 30, "pod fails Failed")
    failed = pods_by_name(core, ns)["fails"].status.container_statuses[0].state.terminated
    assert (failed.exit_code, failed.reason) == (3, "Error")
    wait_until(lambda: pods_by_name(core, ns)["forever"].status.phase == "Running", 30, "pod forever Running")
    assert pods_by_name(core, ns)["timed"].status.phase == "Running"

    wait_until(lambda: pods_by_name(core, ns)["timed"].status.phase == "Succeeded", 30, "pod timed Succeeded")
    # KWOK counts the 4 s from the pod's own timestamps, which the API server keeps in whole seconds: up to 1 s of
    # them can lie before `created` on this host's clock.
    assert time.monotonic() - created >= 3
    time.sleep(1)
    assert pods_by_name(core, ns)["forever"].status.phase == "Running"  # nothing finishes by itself

    core.patch_namespaced_pod("forever", ns, {"metadata": {"annotations": {exit_: "1"}}})
    wait_until(lambda: pods_by_name(core, ns)["forever"].status.phase == "Failed", 30, "pod forever Failed")

    core.delete_namespaced_pod("ok", ns)
    wait_until(lambda: "ok" not in pods_by_name(core, ns), 30, "pod ok deleted")


def test_nodes_can_be_added_and_removed_at_run_time(kube_cluster, kube_api, kube_namespace):
    name = f"{kube_namespace}-extra"[:63]
    kube_cluster.add_node(name, cpu="32", memory="128Gi", gpus=4, labels={localcluster.RACK_LABEL: "rack-9"})
    node = client.CoreV1Api(kube_api).read_node(name)
    assert node.status.allocatable[localcluster.GPU_RESOURCE] == "4"
    assert node.status.capacity["memory"] == "128Gi"
    assert node.metadata.labels[localcluster.RACK_LABEL] == "rack-9"

    kube_cluster.remove_node(name)

    with pytest.raises(ApiException) as raised:
        client.CoreV1Api(kube_api).read_node(name)
    assert raised.value.status == 404


# ---- third-party CRDs ----------------------------------------------------------------------------------------
def test_kai_queue_tree_and_pod_group_status_round_trip(kube_api, kube_namespace):
    ns = kube_namespace
    custom = client.CustomObjectsApi(kube_api)
    parent, children = f"{ns}-dept", [f"{ns}-team-a", f"{ns}-team-b"]
    try:
        custom.create_cluster_custom_object(KAI_GROUP, "v2", "queues", make_kai_queue(parent, gpu_quota=8))
        for child in children:
            custom.create_cluster_custom_object(KAI_GROUP, "v2", "queues", make_kai_queue(child, parent, 4))

        queues = custom.list_cluster_custom_object(KAI_GROUP, "v2", "queues")["items"]
        tree = {q["metadata"]["name"]: q["spec"].get("parentQueue") for q in queues
                if q["metadata"]["name"] in {parent, *children}}
        assert tree == {parent: None, children[0]: parent, children[1]: parent}
        assert custom.get_cluster_custom_object(KAI_GROUP, "v2", "queues", children[0])["spec"]["resources"][
            "gpu"] == {"quota": 4, "limit": -1, "overQuotaWeight": 1}

        pod_group = {"apiVersion": f"{KAI_GROUP}/v2alpha2", "kind": "PodGroup", "metadata": {"name": "train"},
                     "spec": {"minMember": 3, "queue": children[0], "preemptibility": "preemptible"}}
        custom.create_namespaced_custom_object(KAI_GROUP, "v2alpha2", ns, "podgroups", pod_group)
        condition = {
            "type": "UnschedulableOnNodePool", "nodePool": "default", "status": "True", "transitionID": "0",
            "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "Unschedulable",
            "message": "Resources were found for 2 pods while 3 are required for gang scheduling.",
            "reasons": [{
                "reason": "OverLimit",
                "message": f"{children[0]} quota has reached the allowable limit",
                "details": {"queueDetails": {"name": children[0], "queueResourceLimits": {"nvidia.com/gpu": "4"},
                                             "podGroupRequestedResources": {"nvidia.com/gpu": "3"}}},
            }],
        }
        custom.patch_namespaced_custom_object_status(
            KAI_GROUP, "v2alpha2", ns, "podgroups", "train", {"status": {"schedulingConditions": [condition]}})

        read_back = custom.get_namespaced_custom_object(KAI_GROUP, "v2alpha2", ns, "podgroups", "train")
        assert read_back["status"]["schedulingConditions"] == [condition]
        assert read_back["spec"] == pod_group["spec"]

        # Through the main resource, status is ignored: that is what the status subresource means.
        read_back["status"] = {"schedulingConditions": []}
        read_back["spec"]["minMember"] = 4
        custom.replace_namespaced_custom_object(KAI_GROUP, "v2alpha2", ns, "podgroups", "train", read_back)
        again = custom.get_namespaced_custom_object(KAI_GROUP, "v2alpha2", ns, "podgroups", "train")
        assert again["spec"]["minMember"] == 4
        assert again["status"]["schedulingConditions"] == [condition]
    finally:
        for name in [*children, parent]:
            try:
                custom.delete_cluster_custom_object(KAI_GROUP, "v2", "queues", name)
            except ApiException as e:
                if e.status != 404:
                    raise


@pytest.mark.parametrize(
    "group, version, plural, body, message",
    [
        ("scheduling.run.ai", "v2alpha2", "podgroups", {"spec": {"minMember": -1}}, "greater than or equal to 0"),
        ("scheduling.run.ai", "v2alpha2", "podgroups", {"spec": {"preemptibility": "sometimes"}}, "Unsupported value"),
        ("scheduling.x-k8s.io", "v1alpha1", "podgroups", {"spec": {"minMember": 0}}, "greater than or equal to 1"),
        ("scheduling.volcano.sh", "v1beta1", "podgroups", {"spec": {"minMember": -1}}, "greater than or equal to 0"),
    ],
)
def test_crd_schemas_reject_invalid_pod_groups(kube_api, kube_namespace, group, version, plural, body, message):
    obj = {"apiVersion": f"{group}/{version}", "kind": "PodGroup", "metadata": {"name": "bad"}, **body}

    with pytest.raises(ApiException) as raised:
        client.CustomObjectsApi(kube_api).create_namespaced_custom_object(group, version, kube_namespace, plural, obj)

    assert raised.value.status == 422
    assert message in api_error(raised.value)["message"]


def test_scheduler_plugins_and_volcano_objects_round_trip(kube_api, kube_namespace):
    ns, custom = kube_namespace, client.CustomObjectsApi(kube_api)
    custom.create_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "train"},
        "spec": {"minMember": 3, "minResources": {"nvidia.com/gpu": "3"}, "scheduleTimeoutSeconds": 60}})
    custom.patch_namespaced_custom_object_status("scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", "train",
                                                 {"status": {"phase": "Scheduling", "running": 0}})
    coscheduling = custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", "train")
    assert coscheduling["status"]["phase"] == "Scheduling"

    queue = f"{ns}-q"
    custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": queue},
        "spec": {"weight": 1, "capability": {"nvidia.com/gpu": "16"}, "reclaimable": True}})
    try:
        custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "train"},
            "spec": {"minMember": 3}})
        volcano = custom.get_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", "train")
        assert volcano["spec"]["queue"] == "default"  # defaulted by the schema, as upstream
        volcano["spec"]["queue"] = queue
        volcano["status"] = {"phase": "Inqueue"}  # no status subresource: status goes with the object
        custom.replace_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", "train", volcano)
        again = custom.get_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", "train")
        assert (again["spec"]["queue"], again["status"]["phase"]) == (queue, "Inqueue")
    finally:
        custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", queue)


def test_kai_topology_levels_are_validated_and_immutable(kube_api, kube_namespace):
    custom, name = client.CustomObjectsApi(kube_api), f"{kube_namespace}-net"
    levels = [{"nodeLabel": localcluster.BLOCK_LABEL, "alias": "block"},
              {"nodeLabel": localcluster.RACK_LABEL, "alias": "rack"},
              {"nodeLabel": "kubernetes.io/hostname"}]
    body = {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": levels}}
    with pytest.raises(ApiException) as hostname_first:
        custom.create_cluster_custom_object("kai.scheduler", "v1alpha1", "topologies",
                                            {**body, "spec": {"levels": levels[::-1]}})
    assert "lowest level" in hostname_first.value.body

    custom.create_cluster_custom_object("kai.scheduler", "v1alpha1", "topologies", body)
    try:
        renamed = [dict(levels[0], alias="superpod"), *levels[1:]]
        custom.patch_cluster_custom_object("kai.scheduler", "v1alpha1", "topologies", name,
                                           {"spec": {"levels": renamed}})
        with pytest.raises(ApiException) as relabelled:
            custom.patch_cluster_custom_object("kai.scheduler", "v1alpha1", "topologies", name,
                                               {"spec": {"levels": [{"nodeLabel": "zone"}, *levels[1:]]}})
        assert relabelled.value.status == 422 and "immutable" in relabelled.value.body
    finally:
        custom.delete_cluster_custom_object("kai.scheduler", "v1alpha1", "topologies", name)


# ---- down leaves nothing behind ------------------------------------------------------------------------------
def _small_config(tmp_path: Path, **overrides) -> localcluster.ClusterConfig:
    return localcluster.ClusterConfig(state_dir=tmp_path / "state", nodes=1, install_crds=False,
                                      die_with_parent=True, timeout=120, **overrides)


def _assert_all_stopped(records, temp_dirs=()):
    """No recorded PID still names the process we started (a zombie or a reused PID does not count)."""
    assert records, "no process was recorded"
    assert [f"{r.name} pid {r.pid}" for r in records if is_running(r)] == []
    assert [d for d in temp_dirs if Path(d).exists()] == []


def test_down_stops_every_process_of_a_cluster_that_came_up(tmp_path, local_binaries):
    cluster = localcluster.up(_small_config(tmp_path))
    records = list(cluster.state.processes)
    etcd_dirs = list(cluster.state.temp_dirs)
    assert [r.name for r in records] == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
    assert all(is_running(r) for r in records)

    localcluster.down(tmp_path / "state")

    _assert_all_stopped(records, etcd_dirs)
    assert not (tmp_path / "state" / "state.json").exists()
    assert not (tmp_path / "state" / "pki").exists()
    assert (tmp_path / "state" / "logs" / "kube-apiserver.log").exists()  # logs stay for post-mortems


def test_down_stops_what_an_interrupted_up_had_started(tmp_path, local_binaries):
    state_dir = tmp_path / "state"
    up_cli = subprocess.Popen(
        [sys.executable, "-m", "localcluster", "up", "--state-dir", str(state_dir), "--nodes", "1"],
        cwd=REPO_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        def apiserver_started() -> bool:
            state = load_state(state_dir)
            return bool(state and state.process("kube-apiserver"))

        wait_until(apiserver_started, 60, "up to start kube-apiserver")
    finally:
        up_cli.send_signal(signal.SIGKILL)  # no cleanup chance: as if the terminal died mid-up
        up_cli.wait()
        state = load_state(state_dir)
        alive_before_down = [r.name for r in state.processes if is_running(r)]
        localcluster.down(state_dir)  # in `finally`: even a failed assertion below must not leak processes

    assert not state.ready
    assert "etcd" in alive_before_down  # the processes outlived the killed `up`: down had work to do
    _assert_all_stopped(state.processes, state.temp_dirs)
    assert load_state(state_dir) is None


def test_up_that_fails_half_way_stops_what_it_started(tmp_path, local_binaries):
    crashing_kwok = tmp_path / "kwok"
    crashing_kwok.write_text("#!/bin/sh\necho 'kwok: simulated crash' >&2\nexit 3\n")
    crashing_kwok.chmod(crashing_kwok.stat().st_mode | stat.S_IEXEC)
    real = local_binaries
    binaries = localcluster.Binaries(real.etcd, real.kube_apiserver, real.kube_controller_manager,
                                     real.kube_scheduler, crashing_kwok)

    with pytest.raises(localcluster.ClusterStartError) as raised:
        localcluster.up(_small_config(tmp_path, binaries=binaries))

    assert "kwok exited with code 3" in str(raised.value)
    assert "simulated crash" in str(raised.value)  # the log tail is in the message
    assert {r.name for r in raised.value.processes} >= {"etcd", "kube-apiserver"}
    _assert_all_stopped(raised.value.processes)
    assert load_state(tmp_path / "state") is None
    assert localcluster.status(tmp_path / "state").components == []


def test_status_reports_live_components_and_their_memory(kube_cluster):
    if kube_cluster.state is None:
        pytest.fail("status needs a cluster started by this run (unset GANGWEB_TEST_KUBECONFIG)")
    report = kube_cluster.status()
    assert report.running and report.ready
    # + "kueue" when a test of this session asked for the `kueue_cluster` fixture before this one
    names = [c.name for c in report.components]
    assert names in (["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"],
                     ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kueue"])
    assert report.total_rss_bytes > 50 * 2**20
    print("RSS MiB:", {c.name: round(c.rss_bytes / 2**20, 1) for c in report.components},
          "total", round(report.total_rss_bytes / 2**20, 1), "timings", kube_cluster.state.timings)


def test_apiserver_reports_the_pinned_version(kube_api):
    version = client.VersionApi(kube_api).get_code()
    pinned = localcluster.resolve_k8s_version()
    assert os.environ.get("GANGWEB_TEST_KUBECONFIG") or (
        version.git_version == "v" + pinned and version.minor == pinned.split(".")[1])
