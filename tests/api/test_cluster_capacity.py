"""`GET /api/v1/clusters/<name>/capacity/` and the cluster page's capacity section: one service, the same numbers;
who may read the cluster may read its capacity; node rows are paginated; what cannot be read is `unknown`, with why.
(Against a real control plane, compared with what the Kubernetes API lists: tests/cluster/test_cluster_capacity.py.)"""
import pytest
from rest_framework.test import APIClient

from scheduling.choices import GangPhase
from scheduling.models import ClusterNodes, GangJob
from tests import builders

pytestmark = pytest.mark.django_db
A100 = "NVIDIA-A100-SXM4-80GB"
GIB = 2**30


def node(name, gpus, product=None, cpu=64, memory_gib=512):
    labels = {"kubernetes.io/hostname": name, **({"nvidia.com/gpu.product": product} if product else {})}
    return {"name": name, "labels": labels,
            "allocatable": {"nvidia.com/gpu": gpus, "cpu": cpu, "memory": memory_gib * GIB}}


@pytest.fixture
def world(admin_user, enqueued, queue_syncs):
    """Cluster "local" with three listed nodes (two A100 x 8, one CPU-only) and a gangweb job holding 3 GPUs,
    6 cores and 24 GiB on gpu-0 (one bound, running pod); "spare" whose nodes were never listed."""
    local = builders.make_cluster("local", capacity={"nodes": 3, "allocatable": {
        "nvidia.com/gpu": 16, "cpu": 192, "memory": 1536 * GIB}, "largest": {}})
    builders.make_cluster("spare")
    ClusterNodes.objects.create(cluster=local, nodes=[node("cpu-0", 0), node("gpu-0", 8, A100),
                                                      node("gpu-1", 8, A100)])
    queue = builders.make_queue("team-a", clusters=[local])
    template = builders.make_template("llm", pod_sets=[builders.pod_set(
        "worker", replicas=1, containers=[builders.container(gpu=3, cpu="6", memory="24Gi")])])
    job = builders.make_job(template, queue, local, phase=GangPhase.RUNNING, user=admin_user)
    GangJob.objects.filter(pk=job.pk).update(observed={
        "pods": [{"name": "p-0", "node": "gpu-0", "phase": "Running", "reason": "", "pod_set": "worker"}],
        "pod_counts": {"bound": 1}})
    return local


def test_the_capacity_says_per_node_per_gpu_type_and_in_total_what_is_allocatable_used_and_free(api, world):
    r = api.get("/api/v1/clusters/local/capacity/")
    assert r.status_code == 200, r.data
    cap = r.data
    assert (cap["known"], cap["nodes"], cap["units"]) == (True, 3, {"gpu": "GPUs", "cpu": "CPU cores",
                                                                    "memory": "GiB"})
    # No credentials: the other pods cannot be read, and the answer says so instead of guessing.
    assert cap["others"]["known"] is False and cap["others"]["message"].startswith("unknown: pods could not be listed")
    assert cap["free_is_upper_bound"] is True
    assert cap["totals"] == {"allocatable": {"gpu": 16, "cpu": 192, "memory": 1536},
                             "in_use_gangweb": {"gpu": 3, "cpu": 6, "memory": 24}, "in_use_others": None,
                             "free": {"gpu": 13, "cpu": 186, "memory": 1512}}
    assert cap["gpu_types"] == [{"product": A100, "nodes": 2, "allocatable": 16, "in_use_gangweb": 3,
                                 "in_use_others": None, "free": 13}]
    rows = {n["name"]: n for n in cap["node_rows"]["results"]}
    assert cap["node_rows"]["count"] == 3 and list(rows) == ["cpu-0", "gpu-0", "gpu-1"]
    assert rows["gpu-0"]["free"] == {"gpu": 5, "cpu": 58, "memory": 488}
    assert rows["gpu-0"]["gpu_product"] == A100 and rows["cpu-0"]["gpu_product"] == ""


def test_node_rows_are_paginated_and_a_bad_page_is_a_400_naming_the_parameter(api, world):
    r = api.get("/api/v1/clusters/local/capacity/", {"offset": 1, "limit": 1})
    assert [n["name"] for n in r.data["node_rows"]["results"]] == ["gpu-0"]
    assert r.data["node_rows"]["count"] == 3 and r.data["totals"]["allocatable"]["gpu"] == 16  # totals: every node
    for params, field in (({"limit": 0}, "limit"), ({"limit": 10_000}, "limit"), ({"offset": "x"}, "offset")):
        r = api.get("/api/v1/clusters/local/capacity/", params)
        assert r.status_code == 400 and list(r.data) == [field], r.data


def test_a_cluster_whose_nodes_were_never_listed_is_unknown_and_says_why(api, world):
    r = api.get("/api/v1/clusters/spare/capacity/")
    assert r.status_code == 200
    assert (r.data["known"], r.data["totals"]) == (False, None)
    assert r.data["message"] == "unknown: gangweb's watcher has not listed this cluster's nodes yet"


def test_who_may_not_read_the_cluster_may_not_read_its_capacity(world):
    user = builders.make_user("pin")
    builders.grant(builders.make_queue("pinned", clusters=[world]), "submitter", user=user)
    client = APIClient()
    client.force_authenticate(user)
    assert client.get("/api/v1/clusters/local/capacity/").status_code == 200
    assert client.get("/api/v1/clusters/spare/capacity/").status_code == 404
    assert APIClient().get("/api/v1/clusters/local/capacity/").status_code in (401, 403)


def test_the_cluster_page_and_the_overview_show_the_apis_numbers(api, client, admin_user, world):
    cap = api.get("/api/v1/clusters/local/capacity/").data
    client.force_login(admin_user)
    page = client.get("/clusters/local/")
    assert page.status_code == 200
    section = page.context["capacity"]
    assert {k: section[k] for k in cap} == cap  # the same service's answer
    html = page.content.decode()
    assert '<tr data-resource="gpu"><th scope="row">GPUs</th>' in html
    assert "<td class=\"num\">16 GPUs</td>" in html and "<td class=\"num\">3 GPUs</td>" in html
    assert "<td class=\"num\">≤ 13 GPUs</td>" in html and "<td class=\"num\">≤ 1,512 GiB</td>" in html
    assert '<td class="num">5 / 8 GPUs</td>' in html  # gpu-0: free / allocatable
    overview = client.get("/").content.decode()
    local = overview[overview.index('id="cluster-local"'):overview.index('id="cluster-spare"')]
    assert '<tr data-resource="gpu"><th scope="row">GPUs</th>' in local and '<td class="num free">≤ 13</td>' in local
    assert '<tr data-resource="cpu"><th scope="row">CPU cores</th>\n        <td class="num capacity">192</td>\n' \
           '        <td class="num in-use">6</td>' in local
    assert "watcher has not listed this cluster&#x27;s nodes yet" in overview  # spare


def test_the_capacity_answer_costs_the_same_queries_for_3_nodes_and_1_job_as_for_60_nodes_and_20_jobs(
        api, admin_user, world):
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> int:
        cache.clear()  # nothing remembered from the last read
        with CaptureQueriesContext(connection) as captured:
            assert api.get("/api/v1/clusters/local/capacity/").status_code == 200
        return len(captured)

    small = queries()
    ClusterNodes.objects.filter(cluster=world).update(nodes=[node(f"gpu-{i:02d}", 8, A100) for i in range(60)])
    template = builders.make_template("more", pod_sets=[builders.pod_set(
        "worker", replicas=1, containers=[builders.container(gpu=1)])])
    queue = builders.make_queue("team-b", clusters=[world])
    for i in range(19):
        job = builders.make_job(template, queue, world, phase=GangPhase.RUNNING, user=admin_user)
        GangJob.objects.filter(pk=job.pk).update(observed={"pods": [
            {"name": f"p-{i}", "node": f"gpu-{i:02d}", "phase": "Running", "pod_set": "worker"}],
            "pod_counts": {"bound": 1}})
    assert queries() == small <= 8
    # gpu-0, where the first job's pod is, is no longer listed: only the 19 pods on listed nodes count.
    assert api.get("/api/v1/clusters/local/capacity/").data["totals"]["in_use_gangweb"]["gpu"] == 19


@pytest.mark.parametrize("count, message", [
    (0, "no schedulable nodes (Ready and not cordoned)"),
    (6000, "unknown per node: 6000 schedulable nodes, more than gangweb lists one by one (5,000)"),
])
def test_an_empty_node_list_says_whether_no_node_is_schedulable_or_too_many_are(api, world, count, message):
    spare = builders.make_cluster("empty", capacity={"nodes": count, "allocatable": {}, "largest": {}})
    ClusterNodes.objects.create(cluster=spare, nodes=[])
    r = api.get("/api/v1/clusters/empty/capacity/")
    assert (r.status_code, r.data["known"], r.data["message"], r.data["nodes"]) == (200, False, message, count)
