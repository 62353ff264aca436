"""Submit warnings from what gangweb knows of the cluster: a pod bigger than any node, a job bigger than the
cluster, a PriorityClass or RuntimeClass the cluster lacks, a scheduler the cluster's settings do not list. They
warn and never refuse; a list gangweb has not read says nothing."""
from datetime import UTC, datetime

import pytest
from django.core.cache import cache

from scheduling.models import Cluster
from scheduling.services.clusters import warnings as cluster_warnings
from tests import builders

CAPACITY = {"nodes": 4, "allocatable": {"cpu": 256, "memory": 4 * 2**40, "nvidia.com/gpu": 32},
            "largest": {"cpu": 64, "memory": 2**40, "nvidia.com/gpu": 8}}
PROBED = {"health": "Healthy", "last_probe_at": datetime(2026, 12, 1, tzinfo=UTC)}


def cluster(**fields) -> Cluster:
    """An unsaved cluster as `cluster_warnings.views` hands it over (no database needed)."""
    base = {"id": 1, "name": "gpu-a", "capacity": CAPACITY, "priority_classes": ["high", "system-cluster-critical"],
            "runtime_classes": {"kata": {"cpu": "250m"}}, "scheduler_names": {"kai": "kai-scheduler"}, **PROBED}
    return Cluster(**{**base, **fields})


def spec(replicas=2, gpu=4, **pod_spec) -> dict:
    ps = builders.pod_set("worker", replicas=replicas, containers=[builders.container(cpu="1", memory="1Gi", gpu=gpu)])
    ps["template"]["spec"].update(pod_spec)
    return {"podSets": [ps]}


def codes(warnings) -> list[str]:
    return [w["code"] for w in warnings]


def test_a_job_that_fits_and_names_what_the_cluster_has_gets_no_warning():
    resolved = spec(priorityClassName="high", runtimeClassName="kata")
    assert cluster_warnings.submit_warnings(cluster(), resolved, "", "k8s-workload") == []


def test_a_pod_bigger_than_every_node_warns_with_the_pod_and_node_numbers():
    (w,) = cluster_warnings.submit_warnings(cluster(), spec(replicas=2, gpu=12), "", "k8s-workload")
    assert w == {"code": "NeverFitsNode", "field": "podSets[0].template.spec",
                 "message": "one pod of pod set 'worker' asks 12 GPUs; the largest node of cluster 'gpu-a' has 8 GPUs "
                            "allocatable, so it waits until a bigger node joins"}


def test_a_job_bigger_than_the_whole_cluster_warns_with_both_totals():
    (w,) = cluster_warnings.submit_warnings(cluster(), spec(replicas=5, gpu=8), "", "k8s-workload")
    assert w["code"] == "NeverFitsCluster" and w["field"] == "podSets"
    assert w["message"] == ("the job asks 40 GPUs in all; the schedulable nodes of cluster 'gpu-a' have 32 GPUs "
                            "together, so it waits until nodes are added")


def test_runtime_class_overhead_counts_toward_the_largest_node():
    """kata adds 250m per pod (kube.resources): 63.9 + 0.25 cores no longer fit a 64-core node."""
    resolved = {"podSets": [builders.pod_set("worker", replicas=1,
                                             containers=[builders.container(cpu="63900m", memory="1Gi")])]}
    assert cluster_warnings.submit_warnings(cluster(), resolved, "", "k8s-workload") == []
    resolved["podSets"][0]["template"]["spec"]["runtimeClassName"] = "kata"
    assert codes(cluster_warnings.submit_warnings(cluster(), resolved, "", "k8s-workload")) == ["NeverFitsNode"]


def fpga_spec(fpga="1", gpu=None, name="worker") -> dict:
    c = builders.container(cpu="1", memory="1Gi", gpu=gpu)
    c["resources"]["requests"]["example.com/fpga"] = fpga
    return {"podSets": [builders.pod_set(name, replicas=2, containers=[c])]}


def test_an_extended_resource_no_node_offers_warns_naming_it():
    (w,) = cluster_warnings.submit_warnings(cluster(), fpga_spec(), "", "k8s-workload")
    assert w == {"code": "UnknownResource", "field": "podSets[0].template.spec",
                 "message": "pod set 'worker' asks 1 example.com/fpga, and no schedulable node of cluster 'gpu-a' "
                            "offers example.com/fpga (none lists it as allocatable): its pods wait until such a node "
                            "joins, unless a DRA DeviceClass provides it"}


def test_gpus_on_a_cluster_without_gpus_say_no_node_offers_them_instead_of_never_fits():
    no_gpus = {"nodes": 2, "allocatable": {"cpu": 128, "memory": 2**40}, "largest": {"cpu": 64, "memory": 2**39}}
    warnings = cluster_warnings.submit_warnings(cluster(capacity=no_gpus), spec(gpu=1), "", "k8s-workload")
    assert codes(warnings) == ["UnknownResource"]
    assert "asks 1 GPU, and no schedulable node of cluster 'gpu-a' offers nvidia.com/gpu" in warnings[0]["message"]


def test_an_extended_resource_a_node_offers_is_checked_like_any_other():
    offered = {"nodes": 2, "allocatable": {**CAPACITY["allocatable"], "example.com/fpga": 4},
               "largest": {**CAPACITY["largest"], "example.com/fpga": 2}}
    assert cluster_warnings.submit_warnings(cluster(capacity=offered), fpga_spec("2"), "", "k8s-workload") == []
    # a zero request asks nothing; a DRA DeviceClass's implicit name is never in a node's allocatable
    assert cluster_warnings.submit_warnings(cluster(), fpga_spec("0"), "", "k8s-workload") == []
    dra = spec(gpu=None)
    dra["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "deviceclass.resource.kubernetes.io/gpu.example.com"] = "1"
    assert cluster_warnings.submit_warnings(cluster(), dra, "", "k8s-workload") == []


def test_an_unknown_capacity_says_nothing_about_resources():
    assert cluster_warnings.submit_warnings(cluster(capacity={}), fpga_spec(), "", "k8s-workload") == []


@pytest.mark.parametrize("job_class, pod_class, field", [
    ("urgent", None, "priority_class_name"),
    ("", "urgent", "podSets[0].template.spec.priorityClassName"),
])
def test_a_priority_class_the_cluster_lacks_warns_naming_the_field(job_class, pod_class, field):
    resolved = spec(**({"priorityClassName": pod_class} if pod_class else {}))
    (w,) = cluster_warnings.submit_warnings(cluster(), resolved, job_class, "kai")
    assert w == {"code": "UnknownPriorityClass", "field": field,
                 "message": "cluster 'gpu-a' has no PriorityClass 'urgent': its API server will refuse to create "
                            "the job's pods until one is created"}


def test_the_jobs_own_priority_class_replaces_the_templates():
    """desired.py writes the job's class into every pod: a template's unknown class is then never sent."""
    assert cluster_warnings.submit_warnings(cluster(), spec(priorityClassName="urgent"), "high", "kai") == []


def test_a_runtime_class_the_cluster_lacks_warns():
    (w,) = cluster_warnings.submit_warnings(cluster(), spec(runtimeClassName="gvisor"), "", "k8s-workload")
    assert (w["code"], w["field"]) == ("UnknownRuntimeClass", "podSets[0].template.spec.runtimeClassName")
    assert "no RuntimeClass 'gvisor'" in w["message"]


def test_lists_gangweb_has_not_read_say_nothing():
    """No PriorityClass list (never probed, or the LIST refused) and a cluster never probed healthy: no class
    warnings, whatever the spec names; no capacity known: no fit warnings."""
    unknown = cluster(priority_classes=[], runtime_classes={}, capacity={}, health="Unknown", last_probe_at=None)
    resolved = spec(replicas=9, gpu=64, priorityClassName="x", runtimeClassName="y")
    assert cluster_warnings.submit_warnings(unknown, resolved, "z", "k8s-workload") == []


def test_a_scheduler_the_cluster_does_not_list_warns_unless_the_backend_stamps_its_own():
    resolved = spec(schedulerName="my-scheduler")
    (w,) = cluster_warnings.submit_warnings(cluster(), resolved, "", "k8s-workload")
    assert w == {"code": "UnknownScheduler", "field": "podSets[0].template.spec.schedulerName",
                 "message": "the pods name scheduler 'my-scheduler', which cluster 'gpu-a' does not list (it lists "
                            "default-scheduler, kai-scheduler): nothing may ever schedule them"}
    assert cluster_warnings.submit_warnings(cluster(), spec(schedulerName="kai-scheduler"), "", "k8s-workload") == []
    # KAI's backend writes the cluster's KAI scheduler name into every pod: the template's never reaches the cluster.
    assert cluster_warnings.submit_warnings(cluster(), resolved, "", "kai") == []


@pytest.mark.django_db
def test_views_read_every_cluster_in_one_query_then_from_the_cache(django_assert_num_queries):
    cache.clear()
    a = builders.make_cluster("a", capacity=CAPACITY, priority_classes=["high"])
    b = builders.make_cluster("b")
    with django_assert_num_queries(1):
        views = cluster_warnings.views([a.id, b.id, a.id])
    assert views[a.id].capacity == CAPACITY and views[a.id].priority_classes == ["high"]
    assert views[a.id].kubeconfig == ""  # credentials are never part of the view
    with django_assert_num_queries(0):
        assert set(cluster_warnings.views([a.id, b.id])) == {a.id, b.id}


@pytest.mark.django_db
def test_a_submit_returns_the_warnings_and_creates_the_job(api, setup):
    template, queue, local = setup
    cache.clear()
    Cluster.objects.filter(pk=local.pk).update(capacity=CAPACITY, priority_classes=["high"])
    body = builders.submit_body(template, queue, local, priority_class_name="urgent")
    r = api.post("/api/v1/jobs/", body, format="json")
    assert r.status_code == 201, r.data
    assert [w for w in r.data["warnings"] if w["code"] == "UnknownPriorityClass"] == [{
        "code": "UnknownPriorityClass", "field": "priority_class_name",
        "message": "cluster 'local' has no PriorityClass 'urgent': its API server will refuse to create the job's "
                   "pods until one is created"}]
