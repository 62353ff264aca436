"""The capacity API on the real control plane equals what the Kubernetes API itself lists (as `kubectl get nodes`
and `kubectl describe node` read it): per node its allocatable, and what the pods bound there request, split into
gangweb's job's pod and pods gangweb does not manage; free is the rest. GPU types from `nvidia.com/gpu.product`."""
from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
from kubernetes import client
from kubernetes.utils import parse_quantity

localcluster = pytest.importorskip("localcluster")

from scheduling.amounts import for_api  # noqa: E402
from scheduling.models import ClusterNodes, GangJob, QueuePolicy  # noqa: E402
from scheduling.services.jobs import lifecycle as job_service  # noqa: E402
from scheduling.services.templates import versions as template_versions  # noqa: E402
from tests import builders  # noqa: E402

from .reconcile_support import wait_for  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]
POOL_LABEL = "gangweb.io/test-pool"
PRODUCT = "NVIDIA-H100-TEST"  # not the default nodes' product (localcluster/nodes.py): one node of it
L4 = "NVIDIA-L4-TEST"
RESOURCES = {"gpu": "nvidia.com/gpu", "cpu": "cpu", "memory": "memory"}
GIB = Decimal(2**30)


@pytest.fixture
def pool(kube_cluster, kube_namespace):
    """Two fake nodes of this test only: an 8-GPU H100 node and a 4-GPU L4 node."""
    names = [f"{kube_namespace[:40]}-h100", f"{kube_namespace[:40]}-l4"]
    kube_cluster.add_node(names[0], gpus=8, labels={POOL_LABEL: kube_namespace, "nvidia.com/gpu.product": PRODUCT})
    kube_cluster.add_node(names[1], gpus=4, cpu="32", memory="256Gi",
                          labels={POOL_LABEL: kube_namespace, "nvidia.com/gpu.product": L4})
    yield names
    for name in names:
        kube_cluster.remove_node(name, wait=False)


def in_answer(resource: str, amount: Decimal):
    """A base amount as the capacity answer writes it (GPUs, CPU cores, GiB)."""
    return for_api(amount / GIB if resource == "memory" else amount)


def what_kubernetes_lists(core: client.CoreV1Api, node: str) -> tuple[dict, dict]:
    """(allocatable, requests of its bound pods not finished), base units, read straight from the API server."""
    allocatable = {r: parse_quantity(core.read_node(node).status.allocatable.get(k, "0")) for r, k in RESOURCES.items()}
    used = dict.fromkeys(RESOURCES, Decimal(0))
    for pod in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        for c in pod.spec.containers:
            for r, k in RESOURCES.items():
                used[r] += parse_quantity(((c.resources and c.resources.requests) or {}).get(k, "0"))
    return allocatable, used


def test_the_capacity_api_equals_what_the_kubernetes_api_lists(api, world, watcher, pool, kube_api):
    core = client.CoreV1Api(kube_api)
    h100, l4 = pool
    wait_for(lambda: (row := ClusterNodes.objects.filter(cluster=world.cluster).first()) is not None
             and {n["name"] for n in row.nodes} >= set(pool), timeout=60, what="the pool's nodes in ClusterNodes")

    # gangweb's job: one pod of 3 GPUs pinned to the H100 node.
    ps = builders.pod_set("worker", replicas=1, containers=[builders.container(cpu="2", memory="8Gi", gpu=3)])
    ps["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": h100}
    version = template_versions.create_template(world.user, f"t-{uuid.uuid4().hex[:8]}", "",
                                               builders.template_spec(pod_sets=[ps]))
    job, _ = job_service.submit(world.user, builders.submit_body(
        version, QueuePolicy.objects.get(name="team-a"), world.cluster, name="holder", namespace=world.namespace))
    assert world.reconcile(job).error is None
    wait_for(lambda: ((GangJob.objects.get(pk=job.pk).observed or {}).get("pods") or [{}])[0].get("node") == h100,
             timeout=90, what="gangweb's pod bound to the H100 node and observed")
    # A pod gangweb does not manage, bound to each node by hand.
    for node, gpus in ((h100, "2"), (l4, "1")):
        core.create_namespaced_pod(world.namespace, {
            "metadata": {"name": f"foreign-{node[-5:]}"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.example/other:1", "resources": {
                "requests": {"cpu": "1500m", "memory": "3Gi", "nvidia.com/gpu": gpus},
                "limits": {"nvidia.com/gpu": gpus}}}]}})

    r = api.get(f"/api/v1/clusters/{world.cluster.name}/capacity/", {"limit": 200})
    assert r.status_code == 200, r.data
    cap = r.data
    assert cap["known"] and cap["others"]["known"], cap["others"]
    rows = {n["name"]: n for n in cap["node_rows"]["results"]}
    assert cap["node_rows"]["count"] == len(ClusterNodes.objects.get(cluster=world.cluster).nodes)
    for node in pool:
        allocatable, used = what_kubernetes_lists(core, node)
        row = rows[node]
        for res in RESOURCES:
            assert row["allocatable"][res] == in_answer(res, allocatable[res]), (node, res)
            both = Decimal(str(row["in_use_gangweb"][res])) + Decimal(str(row["in_use_others"][res]))
            assert for_api(both) == in_answer(res, used[res]), (node, res, row)
            assert row["free"][res] == in_answer(res, max(allocatable[res] - used[res], Decimal(0))), (node, res)
    assert (rows[h100]["in_use_gangweb"]["gpu"], rows[h100]["in_use_others"]["gpu"], rows[h100]["free"]["gpu"]) == \
        (3, 2, 3)
    assert (rows[l4]["in_use_gangweb"]["gpu"], rows[l4]["in_use_others"]["gpu"], rows[l4]["free"]["gpu"]) == (0, 1, 3)
    assert rows[h100]["gpu_product"] == PRODUCT and rows[l4]["gpu_product"] == L4
    types = {t["product"]: t for t in cap["gpu_types"]}
    assert types[PRODUCT] == {"product": PRODUCT, "nodes": 1, "allocatable": 8, "in_use_gangweb": 3,
                              "in_use_others": 2, "free": 3}
    assert types[L4] == {"product": L4, "nodes": 1, "allocatable": 4, "in_use_gangweb": 0, "in_use_others": 1,
                         "free": 3}
