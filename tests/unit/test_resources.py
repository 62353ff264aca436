"""minResources per pod and per gang: Kubernetes' sidecar/init/overhead rules, limits as requests, all names."""
import copy
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from scheduling.kube import resources
from scheduling.services.templates import specs as template_service
from tests import builders


def c(name, cpu=None, gpu_limit=None, restart=None, **requests):
    res = {}
    if cpu is not None:
        res["requests"] = {"cpu": cpu, **requests}
    if gpu_limit is not None:
        res["limits"] = {"nvidia.com/gpu": gpu_limit}
    out = {"name": name, "image": "img", "resources": res}
    if restart:
        out["restartPolicy"] = restart
    return out


@pytest.mark.parametrize("pod_spec, expected", [
    ({"containers": [c("main", "1")], "initContainers": [c("sidecar", "1", restart="Always")],
      "overhead": {"cpu": "1"}}, {"cpu": Decimal(3)}),
    ({"containers": [c("main", "1")], "initContainers": [c("init", "4")]}, {"cpu": Decimal(4)}),
    ({"containers": [c("main", gpu_limit="2")]}, {"nvidia.com/gpu": Decimal(2)}),
    # a regular init container runs next to the sidecars started before it
    ({"containers": [c("main", "1")],
      "initContainers": [c("sidecar", "2", restart="Always"), c("init", "3")]}, {"cpu": Decimal(5)}),
    ({"containers": [c("a", "500m", memory="1Gi"), c("b", "1500m", memory="1Gi")]},
     {"cpu": Decimal(2), "memory": Decimal(2 * 1024**3)}),
], ids=["main+sidecar+overhead=3cpu", "init4-main1=4cpu", "gpu-limit-only=2gpu", "init-after-sidecar",
        "sum-of-containers"])
def test_pod_requests_follow_kubernetes_rules(pod_spec, expected):
    original = copy.deepcopy(pod_spec)
    assert resources.pod_requests(pod_spec) == expected
    assert pod_spec == original  # input not mutated


def test_template_override_of_4_cpu_and_1_gpu_times_2_pods_gives_cpu_8_gpu_2():
    spec = template_service.validate_template_spec(builders.template_spec(
        pod_sets=[builders.pod_set("worker", replicas=2, containers=[
            {"name": "main", "image": "img", "resources": {"requests": {"cpu": "1"}}}])]))
    resolved = template_service.render(spec, {"podSets": {"worker": {"resources": {"cpu": "4",
                                                                                   "nvidia.com/gpu": "1"}}}})
    total = resources.as_resource_list(resources.gang_requests(resolved["podSets"]))
    assert total == {"cpu": "8", "nvidia.com/gpu": "2"}
    assert spec["podSets"][0]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}


def test_every_resource_name_is_kept_and_formatted():
    pod_sets = [{"replicas": 3, "template": {"spec": {"containers": [
        {"name": "m", "resources": {"requests": {"cpu": "250m", "memory": "1Gi", "ephemeral-storage": "10Gi"},
                                    "limits": {"nvidia.com/gpu": "1", "example.com/fpga": "2"}}}]}}}]
    assert resources.as_resource_list(resources.gang_requests(pod_sets)) == {
        "cpu": "750m", "memory": str(3 * 1024**3), "ephemeral-storage": str(30 * 1024**3),
        "nvidia.com/gpu": "3", "example.com/fpga": "6"}


def test_a_runtime_class_overhead_replaces_the_pods_own_and_an_unknown_class_adds_only_the_pods_own():
    pod = {"containers": [c("main", "1")], "runtimeClassName": "kata", "overhead": {"cpu": "100m"}}
    kata = {"kata": {"cpu": Decimal("0.25")}}
    assert resources.pod_requests(pod, kata) == {"cpu": Decimal("1.25")}  # admission writes the class's overhead
    assert resources.pod_requests(pod, {"gvisor": {"cpu": Decimal(1)}}) == {"cpu": Decimal("1.1")}
    assert resources.pod_requests(pod) == {"cpu": Decimal("1.1")}


def test_the_cached_runtime_classes_of_a_hostile_cluster_count_only_what_parses():
    from scheduling.kube import runtime_classes
    from scheduling.models import Cluster

    cluster = Cluster(name="c", runtime_classes={"kata": {"cpu": "250m", "memory": "128Mi"}, "runc": {},
                                                 "bad": {"cpu": "lots"}, "neg": {"cpu": "-1"}, "odd": "x"})
    assert runtime_classes.overheads(cluster) == {"kata": {"cpu": Decimal("0.25"), "memory": Decimal(128 * 2**20)}}
    assert runtime_classes.overheads(None) == {}
    spec = {"podSets": [{"name": "w", "replicas": 1, "template": {"spec": {"containers": []}}}]}
    assert runtime_classes.for_spec(cluster, spec) == {}  # a spec naming no RuntimeClass never reads the row
    spec["podSets"][0]["template"]["spec"]["runtimeClassName"] = "kata"
    assert set(runtime_classes.for_spec(cluster, spec)) == {"kata"}


@pytest.mark.parametrize("pod_level, expected", [
    ({"requests": {"cpu": "3"}}, {"cpu": Decimal(3), "memory": Decimal(2**30), "nvidia.com/gpu": Decimal(1)}),
    # a pod-level limit becomes the request only for a resource no container requests (defaultPodRequests)
    ({"limits": {"cpu": "6", "memory": "8Gi"}}, {"cpu": Decimal(1), "memory": Decimal(2**30),
                                                "nvidia.com/gpu": Decimal(1)}),
    ({"limits": {"hugepages-2Mi": "64Mi"}}, {"cpu": Decimal(1), "memory": Decimal(2**30), "nvidia.com/gpu": Decimal(1),
                                             "hugepages-2Mi": Decimal(64 * 2**20)}),
    # GPUs are not a pod-level resource: the containers' count stands
    ({"requests": {"nvidia.com/gpu": "4"}},
     {"cpu": Decimal(1), "memory": Decimal(2**30), "nvidia.com/gpu": Decimal(1)}),
], ids=["requests", "limits-only", "hugepages-limit", "gpu-not-pod-level"])
def test_pod_level_resources_follow_pod_requests(pod_level, expected):
    pod = {"containers": [{"name": "m", "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                      "limits": {"nvidia.com/gpu": "1"}}}], "resources": pod_level}
    assert resources.pod_requests(pod) == expected


@pytest.mark.parametrize("field, value, where", [
    ("resources", {"requests": {"cpu": "lots"}}, "spec.podSets[0].template.spec.resources.requests.cpu"),
    ("resources", {"limits": {"nvidia.com/gpu": "0.5"}},
     "spec.podSets[0].template.spec.resources.limits.nvidia.com/gpu"),
    ("resources", ["cpu"], "spec.podSets[0].template.spec.resources"),
    ("runtimeClassName", "Not_A_Name", "spec.podSets[0].template.spec.runtimeClassName"),
])
def test_a_template_with_unreadable_pod_level_resources_is_refused_naming_the_field(field, value, where):
    pod_set = builders.pod_set("worker")
    pod_set["template"]["spec"][field] = value
    with pytest.raises(ValidationError) as refused:
        template_service.validate_template_spec(builders.template_spec(pod_sets=[pod_set]))
    assert where in refused.value.message_dict
