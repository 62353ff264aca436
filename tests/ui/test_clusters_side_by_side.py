"""The overview's clusters side by side in the browser: two clusters with known nodes, running and waiting jobs, and
a scheduler's report, with the API's numbers in each card; an unreachable one says unknown and why; screenshot
docs/screenshots/clusters-side-by-side.png (with GANGWEB_UPDATE_SCREENSHOTS=1). The clusters have no API server:
the overview reads none (services/clusters/summary.py)."""
import pytest
from django.utils import timezone

from scheduling.choices import ClusterHealth, GangPhase, QueueFamily, SyncState
from scheduling.models import QueueClusterState
from tests import builders
from tests.ui.browser import screenshot

pytestmark = [pytest.mark.ui, pytest.mark.django_db(transaction=True)]
GIB = 2**30
SERVED_KAI = {"read": True, "scheduler": "kai-scheduler", "by": "Event from kai-scheduler"}


def test_the_overview_shows_two_clusters_side_by_side_with_the_apis_numbers(admin_page, admin_user, api):
    now = timezone.now()
    west = builders.make_cluster(
        "gpu-west", health=ClusterHealth.HEALTHY, server_version="v1.37.2", last_probe_at=now,
        available_backends=["kai-v2alpha2", "k8s-workload-v1alpha2"],
        capacity={"nodes": 8, "allocatable": {"nvidia.com/gpu": 64, "cpu": 768, "memory": 8192 * GIB}, "largest": {}},
        scheduler_presence={"kai": {**SERVED_KAI, "seen_at": now.isoformat()},
                            "k8s-workload": {"read": True, "scheduler": "default-scheduler",
                                             "seen_at": now.isoformat(), "by": "Lease kube-system/kube-scheduler"}})
    east = builders.make_cluster(
        "gpu-east", health=ClusterHealth.HEALTHY, server_version="v1.36.3", last_probe_at=now,
        available_backends=["kai-v2alpha2"],
        capacity={"nodes": 2, "allocatable": {"nvidia.com/gpu": 16, "cpu": 192, "memory": 2048 * GIB},
                  "largest": {}},
        scheduler_presence={"kai": {**SERVED_KAI, "seen_at": None}})
    builders.make_cluster("cpu-lab", health=ClusterHealth.UNREACHABLE, server_version="v1.35.2", last_probe_at=now,
                          health_message="dial tcp 10.0.0.12:6443: connect: connection refused",
                          capacity={"nodes": 3, "allocatable": {"cpu": 96, "memory": 384 * GIB}, "largest": {}})
    research = builders.make_queue("research", gpu_quota=48, clusters=[west, east])
    train = builders.make_template("llm-pretrain", pod_sets=[builders.pod_set(
        "worker", replicas=4, containers=[builders.container(cpu="16", memory="128Gi", gpu=2)])])
    for cluster, phases in ((west, [GangPhase.RUNNING] * 3 + [GangPhase.SCHEDULED, GangPhase.QUEUED]),
                            (east, [GangPhase.RUNNING, GangPhase.QUEUED, GangPhase.QUEUED, GangPhase.SUBMITTED])):
        for i, phase in enumerate(phases):
            builders.make_job(train, research, cluster, name=f"{cluster.name}-{i}", phase=phase, user=admin_user)
    QueueClusterState.objects.create(
        policy=research, cluster=west, family=QueueFamily.KAI, state=SyncState.IN_SYNC, status_at=now,
        status={"allocated": {"gpu": 32, "cpu": 256000, "memory": 2048 * GIB / 10**6}})

    answer = {c["name"]: c for c in api.get("/api/v1/clusters/summary/").data["clusters"]}
    # Each job asks 8 GPUs, 64 cores, 512 GiB: west holds 4 placed jobs and has 1 waiting; east 1 and 3.
    assert answer["gpu-west"]["in_use"]["gangweb"] == {"gpu": 32, "cpu": 256, "memory": 2048}
    assert answer["gpu-east"]["waiting"] == {"jobs": 3, "requested": {"gpu": 24, "cpu": 192, "memory": 1536}}

    page = admin_page
    page.goto("/")
    for name in ("gpu-west", "gpu-east"):
        card, summary = page.locator(f"#cluster-{name}"), answer[name]
        for r, unit in (("gpu", "GPUs"), ("cpu", "CPU cores"), ("memory", "Memory, GiB")):
            row = card.locator(f"tr[data-resource={r}]")
            assert row.locator("th").inner_text() == unit
            assert row.locator("td.in-use").inner_text() == f"{summary['in_use']['gangweb'][r]:,}"
            assert row.locator("td.capacity").inner_text() == f"{summary['capacity']['allocatable'][r]:,}"
            assert row.locator("td.free").inner_text() == f"≤ {summary['free'][r]:,}"
            assert row.locator("td.waiting").inner_text() == f"{summary['waiting']['requested'][r]:,}"
        assert card.locator(".cluster-jobs").inner_text().startswith(
            f"{summary['in_use']['jobs']} running · {summary['waiting']['jobs']} waiting")
    west_card, east_card = page.locator("#cluster-gpu-west"), page.locator("#cluster-gpu-east")
    assert west_card.locator("tr[data-resource=gpu] td.in-use").inner_text() == "32"
    assert west_card.locator(".reported-by").inner_text().startswith(
        "The schedulers report 32 GPUs, 256 CPU cores and 2,048 GiB allocated to gangweb's queues (KAI queue status, ")
    assert west_card.locator("tr[data-resource=gpu] td.free").inner_text() == "≤ 32"
    assert west_card.locator("tr[data-resource=memory] td.free").inner_text() == "≤ 6,144"
    assert east_card.locator("tr[data-resource=gpu] td.free").inner_text() == "≤ 8"
    assert "kai: API served · no kai-scheduler seen" in east_card.inner_text()
    # Side by side: the two cards share a row.
    west_box, east_box = west_card.bounding_box(), east_card.bounding_box()
    assert abs(west_box["y"] - east_box["y"]) < 1 and west_box["x"] != east_box["x"]
    lab = page.locator("#cluster-cpu-lab")
    assert lab.locator(".badge").inner_text() == "unreachable"
    assert "connection refused" in lab.locator(".reach-message").inner_text()
    assert lab.locator("tr[data-resource=cpu] td.capacity").inner_text() == "unknown"
    assert "Capacity unknown: the cluster is unreachable; the figures are as last listed: 0 GPUs, 96 CPU cores, " \
           "384 GiB." in lab.inner_text()
    page.locator("#h-clusters").scroll_into_view_if_needed()
    screenshot(page, "clusters-side-by-side")
    assert not page.js_errors
