"""Submit-to-Running against a raw client (bench/running_raw.py): the stages a job's interval is split into, the gang
times a pod watch yields, and gangweb's extra time per stage."""
from bench.running_raw import RunningWatch, stage_intervals


def _pod(name: str, uid: str, node: str | None = None, phase: str = "Pending") -> dict:
    return {"metadata": {"name": name, "labels": {"gangweb.io/job-uid": uid}},
            "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}


def test_a_gang_is_running_when_its_last_pod_is_seen_running():
    watch = RunningWatch(None, "ns")
    watch.note(_pod("a-0", "u1"), 100.0)
    watch.note(_pod("a-1", "u1"), 100.5)
    watch.note(_pod("a-0", "u1", "n1"), 101.0)
    watch.note(_pod("a-1", "u1", "n2"), 101.2)
    watch.note(_pod("a-0", "u1", "n1", "Running"), 102.0)
    assert watch.gangs()["u1"] == {"pods": 2, "seen": 100.5, "bound": 101.2, "running": None}
    watch.note(_pod("a-1", "u1", "n2", "Running"), 103.5)
    watch.note(_pod("a-1", "u1", "n2", "Running"), 109.0)  # a later event does not move the first time seen Running
    assert watch.gangs()["u1"] == {"pods": 2, "seen": 100.5, "bound": 101.2, "running": 103.5}


def test_the_stages_of_a_gangweb_job_add_up_to_post_to_running_recorded():
    gang = {"pods": 4, "seen": 12.0, "bound": 12.5, "running": 13.0}
    stages = stage_intervals(10.0, 11.5, gang, recorded=14.25)
    assert stages == {"start_to_created": 1.5, "created_to_pods_seen": 0.5, "pods_seen_to_bound": 0.5,
                      "bound_to_running": 0.5, "running_to_recorded": 1.25}
    assert sum(stages.values()) == 14.25 - 10.0


def test_a_stage_whose_end_is_unknown_is_left_out_with_the_next():
    stages = stage_intervals(10.0, 10.25, {"pods": 4, "seen": 11.0, "bound": None, "running": None})
    assert stages == {"start_to_created": 0.25, "created_to_pods_seen": 0.75}


def test_gangweb_extra_time_is_the_difference_per_stage_largest_first():
    from bench.running_raw import extra_by_stage

    gangweb = {"start_to_created": 985.7, "created_to_pods_seen": 237.5, "pods_seen_to_bound": 341.6,
               "bound_to_running": 107.8, "running_to_recorded": 35.5}
    raw = {"start_to_created": 220.5, "created_to_pods_seen": 305.1, "pods_seen_to_bound": 313.1,
           "bound_to_running": 128.5}
    assert extra_by_stage(gangweb, raw) == {"start_to_created": 765.2, "running_to_recorded": 35.5,
                                            "pods_seen_to_bound": 28.5, "bound_to_running": -20.7,
                                            "created_to_pods_seen": -67.6}
