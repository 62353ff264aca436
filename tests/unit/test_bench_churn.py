"""The watch-churn benchmark's pure pieces: the status updates it writes, the RSS slope, its table row."""
from bench.churn import CRASH_REASON, PodState, status_patch
from bench.table import rows
from bench.watch_churn import slope_per_minute


def test_a_pod_alternates_between_crash_looping_and_running_with_one_more_restart_per_crash():
    pod = PodState("ns", "p-0", "main", "registry.example/train:1")
    states = []
    for _ in range(4):
        body = pod.next_patch()
        (status,) = body["status"]["containerStatuses"]  # the one container: a merge patch replaces the list
        assert set(body["status"]) == {"containerStatuses"}  # phase and conditions stay as they are
        assert (status["name"], status["image"]) == ("main", "registry.example/train:1")
        states.append((list(status["state"]), status["restartCount"], status["ready"]))
    assert states == [(["waiting"], 1, False), (["running"], 1, True), (["waiting"], 2, False), (["running"], 2, True)]
    crashed = status_patch("main", "img", 3, crashed=True)["status"]["containerStatuses"][0]
    assert crashed["state"]["waiting"]["reason"] == CRASH_REASON
    assert crashed["lastState"]["terminated"]["exitCode"] == 1


def test_the_rss_slope_is_per_minute_and_zero_when_flat():
    assert slope_per_minute([(0, 100.0), (30, 100.0), (60, 100.0)]) == 0.0
    assert slope_per_minute([(0, 100.0), (30, 101.0), (60, 102.0)]) == 2.0
    assert slope_per_minute([(0, 100.0)]) == 0.0


def test_the_table_row_states_lag_rate_and_writes_per_update():
    result = {"jobs": 200, "pods": 1600, "window_s": 120, "updates_per_s": 540.2, "goal_rate": 500, "goal_p99_s": 2.0,
              "ok": True, "lag": {"p50_s": 0.4, "p99_s": 1.2},
              "watcher": {"cpu_pct": 61.0, "rss_start_mib": 150.0, "rss_end_mib": 151.0},
              "per_update": {"job_row_writes": 0.31}}
    (row,) = rows({"watch_churn": result})
    assert row[0] == "Watch under churn, 200 running gangs x 8 pods"
    assert "p99 1.2 s at 540.2 pod updates/s" in row[1] and "0.31 job-row writes per update" in row[1]
    assert row[4] == "yes"


def test_the_churn_patches_each_pods_status_subresource_alternately_and_counts_what_was_accepted(tmp_path):
    from bench.churn import run
    from tests.fake_apiserver import RecordingServer

    with RecordingServer() as server:
        config = tmp_path / "kubeconfig"
        config.write_text(server.kubeconfig())
        pods = [["ns", f"p-{i}", "main", "img"] for i in range(4)]
        summary = run({"kubeconfig": str(config), "pods": pods, "rate": 40, "threads": 2, "seconds": 0.6})
    patches = [r for r in server.requests if r["method"] == "PATCH"]
    assert summary["ok"] == summary["sent"] == len(patches) > 0 and summary["errors"] == {}
    assert {r["path"] for r in patches} <= {f"/api/v1/namespaces/ns/pods/p-{i}/status" for i in range(4)}
    assert {r["headers"]["content-type"] for r in patches} == {"application/merge-patch+json"}
    assert {r["headers"]["authorization"] for r in patches} == {"Bearer recorded-token"}
    first = {}
    for r in patches:  # per pod: crash-looping, running, crash-looping, ...
        states = first.setdefault(r["path"], [])
        states.append(next(iter(r["body"]["status"]["containerStatuses"][0]["state"])))
    for states in first.values():
        assert states == ["waiting", "running"] * (len(states) // 2) + ["waiting"] * (len(states) % 2)


def test_the_watch_processs_counters_are_read_from_its_multiprocess_directory(tmp_path):
    import os
    import subprocess
    import sys

    from bench.watch_churn import watch_metrics

    script = ("from scheduling.observe import metrics as m\n"
              "m.WATCH_EVENTS.labels('local', 'pods', 'MODIFIED').inc(7)\n"
              "m.WATCH_EVENTS.labels('local', 'jobs.batch', 'MODIFIED').inc(100)\n"
              "m.WATCH_OBSERVATIONS.labels('local').inc(3)\n"
              "m.WATCH_RESTARTS.labels('local', 'pods', 'Gone').inc()\n"
              "for s in (0.2, 1.5, 4.0): m.WATCH_DELAY.labels('local').observe(s)\n")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}  # the watch process's mode, as the bench starts it
    subprocess.run([sys.executable, "-c", script], check=True, env=env)
    assert watch_metrics(tmp_path) == {"pod_events": 7, "observations": 3, "delay_sum": 5.7, "delay_count": 3,
                                       "delay_le_1": 1, "delay_le_2": 2, "restarts": 1}
