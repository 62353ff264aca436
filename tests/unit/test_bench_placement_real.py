"""bench/placement_real.py's pure parts: the bodies it submits, the baseline's split (the simulation's), the ends it
reads from batch/v1 Jobs, the pod samples and what they add up to, and the pairs of runs it compares."""
from datetime import datetime

import pytest

from bench import placement, placement_real, two_clusters


def epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_both_benches_draw_the_same_jobs_and_the_split_follows_the_proportion():
    jobs = placement.draw_jobs(2, 500)
    assert jobs == placement.draw_jobs(2, 500) and set(jobs) == {1, 2, 4, 8}
    assert sum(jobs) == 1935  # seed 2's GPUs, as bench/results/placement-2026-12-06.json has them
    targets = placement.split(jobs, 0.75, 48, 16)
    to_big = sum(g for g, t in zip(jobs, targets, strict=True) if t == 0)
    assert to_big / sum(jobs) == pytest.approx(0.75, abs=0.01)
    assert placement.split([8, 8], 0.0, 48, 4) == [0, 0]  # too big for the small cluster: the other one


def test_bodies_name_the_cluster_for_the_baseline_and_leave_it_out_for_gangweb():
    named = placement_real.bodies([4, 1], "ns", [0, 1])
    assert [b["cluster"] for b in named] == ["big", "small"]
    assert named[0]["overrides"] == {"podSets": {"worker": {"replicas": 4}}}
    assert all("cluster" not in b for b in placement_real.bodies([4, 1], "ns", None))
    spec = two_clusters.template_spec(20)
    assert spec["podSets"][0]["template"]["metadata"]["annotations"]["gangweb.io/sim-duration"] == "20s"


def k8s_job(uid, complete, at=None):
    conditions = [{"type": "Complete", "status": "True"}] if complete else []
    return {"metadata": {"labels": {"gangweb.io/job-uid": uid}},
            "status": {"conditions": conditions, **({"completionTime": at} if at else {})}}


def test_a_job_ends_when_all_its_jobs_are_complete_at_the_latest_completion_time():
    ends = placement_real.job_ends([
        k8s_job("a", True, "2026-12-06T19:30:00Z"), k8s_job("a", True, "2026-12-06T19:30:07Z"),
        k8s_job("b", True, "2026-12-06T19:31:00Z"), k8s_job("b", False),
        {"metadata": {"labels": {}}, "status": {}}])
    assert ends == {"a": {"complete": True, "end": epoch("2026-12-06T19:30:07+00:00")},
                    "b": {"complete": False, "end": None}}
    assert placement_real.parse_time("junk") is None and placement_real.parse_time(None) is None


def pod(uid, gpus, node=None):
    return {"metadata": {"labels": {"gangweb.io/job-uid": uid}},
            "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}


def test_a_pod_sample_counts_bound_gpus_and_each_waiting_gang():
    sample = placement_real.pod_sample([pod("a", 1, "n1"), pod("a", 1, "n2"), pod("b", 1), pod("b", 1),
                                        pod("c", 1)])
    assert sample == {"used": 2.0, "waiting": {"b": 2.0, "c": 1.0}, "uids": {"a", "b", "c"}}


def test_samples_count_over_capacity_jobs_on_both_and_room_idle_while_the_other_waits():
    caps = {"big": 8.0, "small": 4.0}
    samples = [
        # small has 3 GPUs free and nothing waiting while big waits on a 2-GPU gang: 3 GPUs x 5 s idle
        {"t": 0, "big": {"used": 8.0, "waiting": {"x": 2.0}, "uids": {"x", "y"}},
         "small": {"used": 1.0, "waiting": {}, "uids": {"z"}}},
        # big over its GPUs (never from kube-scheduler; counted if it were), job y live on both
        {"t": 5, "big": {"used": 9.0, "waiting": {}, "uids": {"y"}},
         "small": {"used": 4.0, "waiting": {}, "uids": {"y"}}},
        # small has 1 GPU free, the gang waiting on big asks 2: not idle for it
        {"t": 10, "big": {"used": 8.0, "waiting": {"x": 2.0}, "uids": {"x"}},
         "small": {"used": 3.0, "waiting": {}, "uids": set()}},
    ]
    out = placement_real.summarize_samples(samples, caps, 5.0)
    assert out["over_capacity_samples"] == 1 and out["live_on_both_samples"] == 1
    assert out["idle_gpu_seconds_while_other_waits"] == {"big": 0.0, "small": 15.0}
    assert out["most_gpus_used"] == {"big": 9.0, "small": 4.0}
    assert out["mean_use"]["small"] == pytest.approx((0.25 + 1 + 0.75) / 3, abs=0.001)


def test_each_gangweb_run_is_compared_with_the_baseline_next_to_it():
    runs = [{"mode": "baseline", "namespace": "b0", "makespan_s": 600.0, "request_ms_per_job_median": 2.0},
            {"mode": "gangweb", "namespace": "g1", "makespan_s": 630.0, "request_ms_per_job_median": 2.5},
            {"mode": "gangweb", "namespace": "g2", "makespan_s": 570.0, "request_ms_per_job_median": 2.4},
            {"mode": "baseline", "namespace": "b3", "makespan_s": 600.0, "request_ms_per_job_median": 2.2}]
    assert placement_real.pairs(runs) == [
        {"gangweb": "g1", "baseline": "b0", "ratio": 1.05, "decision_ms_per_job": 0.5},
        {"gangweb": "g2", "baseline": "b3", "ratio": 0.95, "decision_ms_per_job": 0.2}]


def test_the_move_rounds_are_read_from_the_workers_log():
    log = ("[2026-12-06 19:00:00,000: INFO/ForkPoolWorker-1] moves: {'claimed': 3, 'moved_from_lost': 0}\n"
           "[2026-12-06 19:00:10,000: INFO/ForkPoolWorker-2] moves: {'claimed': 0, 'moved_from_lost': 0, "
           "'reported': 1}\n[2026-12-06 19:00:20,000: INFO/ForkPoolWorker-1] moves: {'claimed': 2}\n")
    assert placement_real.move_rounds(log) == {"rounds": 2, "claimed": 5}
