"""Why-pending leads with the fact that blocks for good: the cluster (or any one node) is too small for the gang,
or the queue's limit leaves too little; each fact is structured (code, numbers) and said in one sentence."""
import pytest

from scheduling.backends.base import GangStatus
from scheduling.choices import GangPhase as P
from scheduling.observe import capacity, why_pending
from scheduling.observe.phases import JobShape
from scheduling.observe.pods import pod_facts
from tests.kube_objects import kai_over_limit, pod, seen, t

from .test_observe_why_pending import kai_status, pods


def node(name, gpus=8, cpu="64", memory="512Gi", ready=True, cordoned=False):
    return {"metadata": {"name": name}, "spec": {"unschedulable": True} if cordoned else {},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus), "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def spec(replicas, gpu, cpu="1"):
    return {"podSets": [{"name": "worker", "replicas": replicas, "template": {"spec": {"containers": [
        {"name": "main", "resources": {"requests": {"cpu": cpu}, "limits": {"nvidia.com/gpu": str(gpu)}}}]}}}]}


def test_capacity_counts_only_ready_uncordoned_nodes_and_keeps_the_largest():
    summary = capacity.summarize([node("a", gpus=4), node("b", gpus=2), node("down", gpus=8, ready=False),
                                  node("cordoned", gpus=8, cordoned=True)])
    assert summary["nodes"] == 2
    assert summary["allocatable"]["nvidia.com/gpu"] == 6 and summary["largest"]["nvidia.com/gpu"] == 4
    assert summary["allocatable"]["cpu"] == 128 and summary["allocatable"]["memory"] == 2 * 512 * 2**30


def test_per_pod_requests_take_limits_when_no_request_is_set():
    assert capacity.pod_requests(spec(2, gpu=8, cpu="500m")) == [{"cpu": 0.5, "nvidia.com/gpu": 8}]


def explain(shape, job_spec, cluster_nodes, gang=None, queue_limits=None, in_use=None):
    return why_pending.explain(
        P.QUEUED, seen(shape, gang or GangStatus(), pods(shape.total, unschedulable="0/2 nodes are available")),
        job_requests=why_pending.job_requests(job_spec), capacity=capacity.summarize(cluster_nodes),
        per_pod=capacity.pod_requests(job_spec), in_use=(lambda: in_use) if in_use is not None else None)


def test_a_gang_bigger_than_the_whole_cluster_says_so_first_with_numbers():
    why = explain(JobShape(min_member=2, total=2), spec(2, gpu=8), [node("a", gpus=4), node("b", gpus=4)])
    assert why["blocking"][0] == {
        "code": "ExceedsClusterCapacity", "resource": "nvidia.com/gpu", "needs": 16, "available": 8, "nodes": 2,
        "message": "needs 16 GPUs; the cluster has 8 allocatable in total (2 schedulable nodes)"}
    assert why["summary"].startswith("This job needs 16 GPUs; the cluster has 8 allocatable in total "
                                     "(2 schedulable nodes).")
    assert why["reason"] == "Unschedulable"  # the scheduler's code stays; the blocking fact comes first


def test_a_pod_bigger_than_any_node_says_so_even_when_the_total_would_do():
    why = explain(JobShape(min_member=1, total=1), spec(1, gpu=8), [node("a", gpus=4), node("b", gpus=4)])
    assert [f["code"] for f in why["blocking"]] == ["NoNodeFits"]
    assert why["blocking"][0]["per_pod"] == 8 and why["blocking"][0]["largest_node"] == 4
    assert why["summary"].startswith("One pod needs 8 GPUs; the largest node has 4 allocatable.")


def test_a_gang_that_fits_the_cluster_states_no_capacity_fact():
    why = explain(JobShape(min_member=2, total=2), spec(2, gpu=4), [node("a", gpus=4), node("b", gpus=4)])
    assert why["blocking"] == []
    assert why["summary"].startswith("Not enough room for the whole gang")


def test_a_gang_that_fits_the_cluster_but_not_next_to_the_placed_jobs_says_how_much_is_free():
    """4 nodes x 8 GPUs, gangweb's running jobs hold 18 GPUs: a 3 x 8 GPU gang fits the cluster, not now."""
    nodes = [node(n, gpus=8) for n in "abcd"]
    why = explain(JobShape(min_member=3, total=3), spec(3, gpu=8), nodes,
                  in_use={"nvidia.com/gpu": 18, "cpu": 3.5, "memory": 0})
    assert why["blocking"] == [{
        "code": "ClusterBusy", "resource": "nvidia.com/gpu", "needs": 24, "allocatable": 32, "in_use": 18,
        "free": 14, "message": "needs 24 GPUs; gangweb's running jobs hold 18 of the cluster's 32 allocatable, so "
                               "at most 14 are free now"}]
    assert why["summary"].startswith("This job needs 24 GPUs; gangweb's running jobs hold 18 of the cluster's 32 "
                                     "allocatable, so at most 14 are free now. Not enough room for the whole gang")


def test_no_busy_fact_when_the_placed_jobs_leave_room_or_a_stronger_fact_blocks():
    nodes = [node(n, gpus=8) for n in "abcd"]
    asked = []

    def in_use():
        asked.append(1)
        return {"nvidia.com/gpu": 8}

    fits = why_pending.explain(P.QUEUED, seen(JobShape(3, 3), GangStatus(), pods(3, unschedulable="0/4 nodes")),
                               job_requests=why_pending.job_requests(spec(3, gpu=8)),
                               capacity=capacity.summarize(nodes), per_pod=capacity.pod_requests(spec(3, gpu=8)),
                               in_use=in_use)
    assert fits["blocking"] == [] and asked == [1]  # 24 of 24 free by gangweb's count: other pods or fragmentation
    never = why_pending.explain(P.QUEUED, seen(JobShape(5, 5), GangStatus(), pods(5, unschedulable="0/4 nodes")),
                                job_requests=why_pending.job_requests(spec(5, gpu=8)),
                                capacity=capacity.summarize(nodes), per_pod=capacity.pod_requests(spec(5, gpu=8)),
                                in_use=in_use)
    assert [f["code"] for f in never["blocking"]] == ["ExceedsClusterCapacity"] and asked == [1]  # not asked


def test_unknown_capacity_states_nothing():
    why = why_pending.explain(P.QUEUED, seen(JobShape(2, 2), GangStatus(), pods(2)),
                              job_requests={"nvidia.com/gpu": 16})
    assert why["blocking"] == []


def test_queue_over_limit_comes_after_capacity_with_in_use_limit_and_ask():
    gang = kai_status({"status": {"schedulingConditions": [
        {"type": "UnschedulableOnNodePool", "lastTransitionTime": "2026-01-01T00:00:03Z",
         "reasons": [kai_over_limit(limit="16", allocated="12", requested="8", quota="8")]}]}})
    why = explain(JobShape(min_member=1, total=1), spec(1, gpu=8), [node("a", gpus=4), node("b", gpus=4)],
                  gang=gang)
    assert [f["code"] for f in why["blocking"]] == ["NoNodeFits", "QueueOverLimit"]
    assert why["blocking"][1] == {"code": "QueueOverLimit", "queue": "team-a", "resource": "nvidia.com/gpu",
                                  "in_use": 12, "limit": 16, "needs": 8,
                                  "message": "queue team-a: 12 of 16 GPUs in use, limit 16, this gang needs 8"}
    assert why["summary"] == ("One pod needs 8 GPUs; the largest node has 4 allocatable. "
                              "Queue team-a: 12 of 16 GPUs in use, limit 16, this gang needs 8.")


def test_queue_over_limit_alone_leads_the_summary():
    gang = kai_status({"status": {"schedulingConditions": [
        {"type": "UnschedulableOnNodePool", "lastTransitionTime": "2026-01-01T00:00:03Z",
         "reasons": [kai_over_limit(limit="8", allocated="6", requested="4")]}]}})
    why = why_pending.explain(P.QUEUED, seen(JobShape(3, 3), gang, pods()))
    assert why["summary"] == "Queue team-a: 6 of 8 GPUs in use, limit 8, this gang needs 4."


@pytest.mark.parametrize("res,amount,words", [("nvidia.com/gpu", 1, "1 GPU"), ("cpu", 12, "12 CPU cores"),
                                               ("memory", 96 * 2**30, "96 GiB of memory")])
def test_amounts_read_as_people_say_them(res, amount, words):
    assert why_pending.amount(res, amount) == words


def test_capacity_is_unchanged_by_a_bound_gang():
    bound = [pod_facts(pod(name=f"p-{i}", bound=1)) for i in range(2)]
    assert why_pending.explain(P.QUEUED, seen(JobShape(2, 2), GangStatus(admitted=False, at=t(1)), bound),
                               capacity=capacity.summarize([node("a", gpus=1)]),
                               per_pod=[{"nvidia.com/gpu": 8}]) is None
