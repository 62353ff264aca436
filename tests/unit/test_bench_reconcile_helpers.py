"""The reconcile and submit-to-Running benchmarks' pure helpers: the worker log's batch lines read back, kube-
scheduler's bind time from pod and PodGroup timestamps, the table rows, and the raw clients' failure report."""
import pytest

from bench import batch_log, raw_clients, running
from bench.table import render

LOG = """\
[12:00:00,100: INFO/ForkPoolWorker-1] reconcile batch start: jobs=50 first=101 waited_s=0.412 pid=12 at=1000.5
[12:00:00,200: INFO/ForkPoolWorker-2] reconcile batch start: jobs=50 first=151 waited_s=20.250 pid=13 at=1020.0
[12:00:03,000: INFO/ForkPoolWorker-1] reconcile batch end: jobs=50 first=101 ok=50 failed=0 requeued=0 read_s=0.200 \
passes_s=3.100 total_s=3.300 requests=206 throttle_wait_s=1.250 throttle_waits=40 threads=4 pid=12 at=1003.8
[12:00:04,000: INFO/ForkPoolWorker-2] reconcile batch end: jobs=50 first=151 ok=49 failed=1 requeued=0 read_s=0.300 \
passes_s=2.000 total_s=2.300 requests=194 throttle_wait_s=0.000 throttle_waits=0 threads=4 pid=13 at=1022.3
[2026-12-02 12:00:05,000: WARNING/MainProcess] something else entirely
"""


def test_the_batch_lines_are_read_back_per_first_job_with_numbers():
    batches = batch_log.parse(LOG)
    assert sorted(batches) == [101, 151]
    assert batches[151]["start"] == {"jobs": 50, "first": 151, "waited_s": 20.25, "pid": 13, "at": 1020.0}
    assert batches[101]["end"]["requests"] == 206 and batches[101]["end"]["throttle_wait_s"] == 1.25


def test_a_round_sums_its_batches_and_names_the_longest_wait():
    figures = batch_log.for_jobs(batch_log.parse(LOG), list(range(101, 201)), submitted_at=1000.0)
    assert figures == {"batches": 2, "waited_s_max": 20.25, "read_s_max": 0.3, "list_s_max": 0.0, "lists": 0,
                       "listed": 0, "fresh": 0, "kinds": [], "passes_s_max": 3.1,
                       "total_s_max": 3.3, "requests": 400, "requests_per_job": 4.0, "throttle_wait_s": 1.25,
                       "throttle_waits": 40, "submit_to_last_start_s": 20.0}
    assert batch_log.for_jobs(batch_log.parse(LOG), [1, 2])["batches"] == 0


CLAIMS = """\
[12:00:00,100: INFO/ForkPoolWorker-1] reconcile claim: job=7 found=claimed claim_s=0.020 jobs=3 ids=7,5,6 pid=12 \
at=1000.0
[12:00:00,200: INFO/ForkPoolWorker-2] reconcile claim: job=5 found=dispatched claim_s=0.004 jobs=0 ids=- pid=13 \
at=1002.0
[12:00:00,300: INFO/ForkPoolWorker-1] reconcile batch start: jobs=3 first=5 waited_s=0.4 pid=12 at=1000.05
[12:00:01,000: INFO/ForkPoolWorker-1] reconcile batch end: jobs=3 first=5 ok=3 failed=0 requeued=0 fresh=0 \
read_s=0.450 list_s=0.400 lists=5 listed=0 kinds=workloads:0.100/1/0,pods:0.300/1/0 passes_s=1.0 total_s=1.45 \
requests=17 throttle_wait_s=0.000 throttle_waits=0 threads=4 pid=12 at=1001.5
"""


def test_each_submits_time_to_dispatched_is_split_by_the_claim_and_batch_lines():
    claims = batch_log.parse_claims(CLAIMS)
    assert claims[7]["ids"] == [7, 5, 6] and claims[5]["ids"] == [] and claims[5]["found"] == "dispatched"
    split = batch_log.dispatch_split(claims, batch_log.parse(CLAIMS), {5: 999.0, 7: 999.5, 8: 999.9},
                                     {5: 1001.0, 7: 1001.2})
    # Job 5: its own task started 3 s after its POST, but job 7's task had claimed it 1 s after; the batch read for
    # 0.45 s (0.4 of it the LISTs) from its start at 1000.05, so its pass ended 0.5 s after the read.
    assert split[5] == pytest.approx({"task_wait": 3.0, "to_claimed": 1.0, "claim": 0.02, "read": 0.45,
                                      "list": 0.4, "pass": 0.5})
    assert split[7] == pytest.approx({"to_claimed": 0.5, "claim": 0.02, "read": 0.45, "list": 0.4, "pass": 0.7,
                                      "task_wait": 0.5})
    assert split[8] == {}  # no line names it: nothing known
    figures = batch_log.for_jobs(batch_log.parse(CLAIMS), [5, 6, 7])
    assert (figures["lists"], figures["list_s_max"], figures["kinds"]) == (
        5, 0.4, ["workloads:0.100/1/0,pods:0.300/1/0"])


def _pod(uid, created, scheduled):
    conditions = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}] if scheduled else []
    return {"metadata": {"labels": {running.LABEL_JOB_UID: uid}, "creationTimestamp": created},
            "status": {"conditions": conditions}}


def test_a_gangs_bind_runs_from_its_last_pod_created_to_its_last_pod_scheduled():
    pods = [_pod("a", "2026-12-02T12:00:00Z", "2026-12-02T12:00:03Z"),
            _pod("a", "2026-12-02T12:00:01Z", "2026-12-02T12:00:02Z"),
            _pod("b", "2026-12-02T12:00:05Z", "2026-12-02T12:00:05Z"),
            _pod("c", "2026-12-02T12:00:05Z", None)]  # not bound: its gang is left out, its pod too
    per_gang, per_pod = running.gang_bind_seconds(pods)
    assert per_gang == {"a": 2.0, "b": 0.0}
    assert sorted(per_pod) == [0.0, 1.0, 3.0]


def test_a_podgroup_is_timed_from_its_creation_to_podgroupscheduled():
    groups = [{"metadata": {"creationTimestamp": "2026-12-02T12:00:00Z"}, "status": {"conditions": [
        {"type": "PodGroupScheduled", "status": "True", "lastTransitionTime": "2026-12-02T12:00:04Z"}]}},
        {"metadata": {"creationTimestamp": "2026-12-02T12:00:00Z"}, "status": {}}]
    assert running.group_scheduled_seconds(groups) == [4.0]


def test_the_stages_of_a_job_split_its_time_from_post_to_running_on_one_clock():
    posted = [(100.0, 1), (100.05, 2)]
    timeline = {1: {"uid": "a", "dispatched": 100.5, "running": 103.0, "running_at": 102.0},
                2: {"uid": "b", "dispatched": 100.6}}  # not Running: left out
    seen = {"p0": {"job_uid": "a", "seen": 101.0, "bound": 101.5},
            "p1": {"job_uid": "a", "seen": 101.2, "bound": 102.2}}
    figures = running._figures(posted, timeline, seen, [], [])
    assert figures["submit_to_running"] == {"p50_ms": 3000.0, "p99_ms": 3000.0, "n": 1}
    assert figures["submit_to_running_cluster_time"]["p50_ms"] == 2000.0
    assert figures["scheduler_gang_bind_watch"]["p50_ms"] == 1000.0
    assert figures["stages_p50_ms"] == {"post_to_dispatched": 500.0, "dispatched_to_pods_seen": 700.0,
                                       "pods_seen_to_bound_seen": 1000.0, "bound_to_running_recorded": 800.0}


def test_the_table_has_the_saturated_reconcile_and_the_submit_to_running_rows():
    results = {
        "reconcile": {"jobs": 300, "pods_per_job": 4, "ratio": 0.85, "ok": True, "ratio_min": 0.71, "ratio_max": 0.93,
                      "load_average": {"before": [2.5, 3.0, 3.1], "after": [6.25, 4.0, 3.2]},
                      "gangweb": {"jobs_per_s": 20.4, "submit_to_dispatched_p50_ms": 2500.0,
                                  "submit_to_dispatched_p99_ms": 4800.0},
                      "saturated": {"jobs_per_s": 24.0, "clients": 8}, "serial": {"jobs_per_s": 9.5}},
        "running": {"jobs": 100, "pods_per_job": 4, "rate_per_s": 20.0, "running": 100,
                    "submit_to_running": {"p50_ms": 3000.0, "p99_ms": 6000.0},
                    "scheduler_gang_bind_watch": {"p50_ms": 150.0, "p99_ms": 900.0},
                    "scheduler_gang_bind": {"p50_ms": 0.0, "p99_ms": 1000.0}}}
    text = render({"results": results})
    assert ("| Reconcile, 300 jobs x 4 pods | 20.4 jobs/s, submit-to-dispatched p50 2500.0 ms, p99 4800.0 ms | "
            "24.0 jobs/s (8 concurrent raw clients, saturated); serial loop 9.5 jobs/s; load 2.5-6.25 | "
            "0.85x (rounds 0.71-0.93; goal >= 0.8x) | yes |"
            ) in text
    assert ("| Submit to Running, 100 jobs x 4 pods at 20/s | POST to Running recorded: p50 3000.0 ms, p99 6000.0 ms "
            "(100/100 Running) | kube-scheduler gang bind p50 150.0 ms, p99 900.0 ms (watch; cluster timestamps p50 "
            "0.0 ms, p99 1000.0 ms) | 20.0x at p50 (no goal) | - |") in text


def test_raw_clients_that_cannot_reach_the_server_fail_the_run_naming_the_error(setup):
    from scheduling.kube.objects import JOB
    from tests.unit.test_reconcile_offline import DEAD

    cluster = setup[2]
    cluster.kubeconfig = DEAD
    jobs = [[(JOB, {"metadata": {"name": f"j{i}", "namespace": "default"}})] for i in range(3)]
    with pytest.raises(RuntimeError, match=r"2 of 2 raw clients failed; first: \w+"):
        raw_clients.run(cluster, JOB, jobs, clients=2)
    assert raw_clients.unthrottled(cluster).api_qps == raw_clients.RAW_QPS and cluster.api_qps is None


def test_cpu_seconds_are_read_from_proc_and_differenced_per_group():
    import os

    from bench import cpu

    burn = sum(i * i for i in range(300_000))  # noqa: F841 - some CPU of this process
    assert cpu.process_seconds(os.getpid()) > 0 and cpu.process_seconds(2 ** 22 + 7) == 0.0
    assert os.getpid() in cpu.tree(os.getpid())
    busy, total = cpu.machine()
    assert 0 < busy <= total
    before = {"worker": 1.0, "control_plane": 2.0, "machine_busy": 10.0, "machine_total": 40.0}
    after = {"worker": 1.5, "control_plane": 3.25, "machine_busy": 13.0, "machine_total": 44.0}
    assert cpu.spent(before, after) == {"worker": 0.5, "control_plane": 1.25, "machine_busy_pct": 75.0}
