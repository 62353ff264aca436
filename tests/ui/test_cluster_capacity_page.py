"""The cluster page's capacity section in the browser: totals, GPUs by type and nodes, with the API's numbers;
screenshot docs/screenshots/cluster-capacity.png. The demo cluster has no API server: the read of other pods is a
stand-in here (the real read against kube-apiserver and kwok: tests/cluster/test_cluster_capacity.py)."""
import pytest

from scheduling.choices import GangPhase
from scheduling.models import Cluster, ClusterNodes, GangJob
from scheduling.services.clusters import capacity as cluster_capacity
from tests.ui import demo
from tests.ui.browser import ARTIFACTS, DOCS_SCREENSHOTS

pytestmark = [pytest.mark.ui, pytest.mark.django_db(transaction=True)]
GIB = 2**30
H100, L4 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4"


def nodes():
    out = [{"name": f"gpu-h100-{i}", "labels": {"nvidia.com/gpu.product": H100},
            "allocatable": {"nvidia.com/gpu": 8, "cpu": 96, "memory": 1024 * GIB}} for i in range(4)]
    out += [{"name": f"gpu-l4-{i}", "labels": {"nvidia.com/gpu.product": L4},
             "allocatable": {"nvidia.com/gpu": 4, "cpu": 48, "memory": 192 * GIB}} for i in range(2)]
    out.append({"name": "cpu-0", "labels": {}, "allocatable": {"nvidia.com/gpu": 0, "cpu": 64, "memory": 256 * GIB}})
    return out


def section_screenshot(page, name: str) -> None:
    """The capacity section alone, as tests/ui/browser.screenshot saves a page (docs copy with
    GANGWEB_UPDATE_SCREENSHOTS=1)."""
    import os

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.locator("#capacity").screenshot(path=str(path))
    if os.environ.get("GANGWEB_UPDATE_SCREENSHOTS") == "1":
        (DOCS_SCREENSHOTS / path.name).write_bytes(path.read_bytes())


def test_the_cluster_page_shows_capacity_by_gpu_type_and_node(admin_page, admin_user, api, monkeypatch):
    demo.populate(admin_user)
    local = Cluster.objects.get(name="local")
    listed = nodes()
    Cluster.objects.filter(pk=local.pk).update(capacity={"nodes": len(listed), "allocatable": {
        "nvidia.com/gpu": 40, "cpu": 544, "memory": 4736 * GIB}, "largest": {}})
    ClusterNodes.objects.create(cluster=local, nodes=listed)
    # The running demo jobs' pods, bound one per node in turn over the H100 nodes.
    h100 = [n["name"] for n in listed[:4]]
    at = 0
    for job in GangJob.objects.filter(cluster=local, phase=GangPhase.RUNNING):
        pods = []
        for ps in job.resolved_spec["podSets"]:
            for i in range(ps["replicas"]):
                pods.append({"name": f"{job.name}-{ps['name']}-{i}", "node": h100[at % 4], "phase": "Running",
                             "reason": "", "pod_set": ps["name"]})
                at += 1
        GangJob.objects.filter(pk=job.pk).update(observed={"pods": pods, "pod_counts": {"bound": len(pods)}})
    others = {"gpu-l4-0": {"nvidia.com/gpu": 2, "cpu": 6, "memory": 24 * GIB},
              "gpu-h100-3": {"nvidia.com/gpu": 1, "cpu": 4, "memory": 16 * GIB}}
    monkeypatch.setattr(cluster_capacity, "others_by_node", lambda c: (others, {
        "known": True, "message": "", "pods": 3, "unreadable": 0}))

    answer = api.get("/api/v1/clusters/local/capacity/").data
    page = admin_page
    page.goto("/clusters/local/")
    section = page.locator("#capacity")
    gpu_row = section.locator("#capacity-totals tr[data-resource=gpu]").inner_text()
    totals = answer["totals"]
    assert totals["allocatable"]["gpu"] == 40 and totals["in_use_others"]["gpu"] == 3
    for key in ("allocatable", "in_use_gangweb", "in_use_others", "free"):
        assert f"{totals[key]['gpu']} GPUs" in gpu_row, (key, gpu_row)
    types = section.locator("#capacity-gpu-types").inner_text()
    assert H100 in types and L4 in types
    assert section.locator("#capacity-nodes tr[data-node='gpu-l4-0']").inner_text().split("\t")[2] == "2 / 4 GPUs"
    section_screenshot(page, "cluster-capacity")
    page.goto("/")
    # The overview reads no cluster: from the placed (Scheduled and Running) jobs' requests, an upper bound.
    (overview,) = cluster_capacity.totals_for([Cluster.objects.get(name="local")]).values()
    card = page.locator("#cluster-local")
    assert card.locator("tr[data-resource=gpu] td.capacity").inner_text() == "40"
    assert card.locator("tr[data-resource=gpu] td.free").inner_text() == f"≤ {overview['free']['gpu']}"
    assert card.locator("tr[data-resource=gpu] td.in-use").inner_text() == f"{overview['in_use_gangweb']['gpu']}"
    # The demo's KAI report of the leaf queues adds up to its top-level queue's 16 GPUs.
    assert card.locator(".reported-by").inner_text().startswith("The schedulers report 16 GPUs, ")
    assert "7 schedulable nodes" in card.inner_text()
    assert not page.js_errors
