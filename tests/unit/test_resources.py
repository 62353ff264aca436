"""minResources per pod and per gang: Kubernetes' sidecar/init/overhead rules, limits as requests, all names."""
import copy
from decimal import Decimal

import pytest

from scheduling.kube import resources
from scheduling.services import templates as template_service
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
