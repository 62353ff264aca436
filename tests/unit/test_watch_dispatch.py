"""The watch's dispatcher: what one change costs, and how many observations a burst of changes makes (issue 23: a
watch that keeps up with pod churn). LISTs and events are fed to the cache directly (`apply_list`, `apply_event`);
no API server or database is involved.
"""
from __future__ import annotations

import threading
import time
import uuid

from prometheus_client import REGISTRY

from scheduling.reconcile.cluster_watcher import JOB, POD, ClusterWatcher


def a_pod(name: str, job_uid: str, rv: int, reason: str = "") -> dict:
    state = {"waiting": {"reason": reason}} if reason else {"running": {"startedAt": "2026-12-02T10:00:00Z"}}
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": str(rv),
                         "labels": {"gangweb.io/instance": "test", "gangweb.io/job-uid": job_uid},
                         "managedFields": [{"manager": "kwok", "fieldsV1": {"f:status": {}}}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "main", "state": state}]}}


class Recorder:
    """on_change that records each call and, per job, whether two calls ever overlapped."""

    def __init__(self, seconds: float = 0.0):
        self.seconds = seconds
        self.calls: list[tuple[str, list[dict]]] = []
        self.in_flight: set[str] = set()
        self.overlaps = 0
        self.threads: set[str] = set()
        self.lock = threading.Lock()
        self.during: dict[str, callable] = {}  # job UID -> called once inside its first observation

    def __call__(self, job_uid, objects, deleted):
        with self.lock:
            self.overlaps += job_uid in self.in_flight
            self.in_flight.add(job_uid)
            self.threads.add(threading.current_thread().name)
        action = self.during.pop(job_uid, None)
        if action is not None:
            action()
        time.sleep(self.seconds)
        with self.lock:
            self.in_flight.discard(job_uid)
            self.calls.append((job_uid, [dict(p) for p in objects.pods]))


def listed(w: ClusterWatcher) -> ClusterWatcher:
    """`w` after the first LIST of every kind it watches came back empty, as a watcher's start does before its
    watches deliver events: its dispatcher observes only once every kind is listed."""
    for ref in w.kinds:
        w.apply_list(ref, [])
    return w


def wait_for(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    raise AssertionError("timed out")


def test_a_burst_of_changes_to_a_jobs_pods_is_one_observation_holding_each_pods_latest_state():
    recorder = Recorder()
    w = listed(ClusterWatcher("burst", api=None, kinds=[], instance="test", on_change=recorder))
    busy, quiet = str(uuid.uuid4()), str(uuid.uuid4())
    rv = 0
    for i in range(8):
        rv += 1
        w.apply_event(POD, "ADDED", a_pod(f"busy-{i}", busy, rv))
    for round_ in range(25):  # 200 status changes over the 8 pods: restarts, as a crash-looping gang makes
        for i in range(8):
            rv += 1
            w.apply_event(POD, "MODIFIED", a_pod(f"busy-{i}", busy, rv, "CrashLoopBackOff" if round_ % 2 == 0 else ""))
    w.apply_event(JOB, "ADDED", {"metadata": {"name": "quiet", "namespace": "ns", "uid": "uid-quiet",
                                              "resourceVersion": "1", "labels": {"gangweb.io/job-uid": quiet}}})
    assert len(w._dirty) == 2  # 209 changes, 2 jobs marked: the set of marks is bounded by the jobs

    w.start_dispatch()
    try:
        wait_for(lambda: len(recorder.calls) >= 2)
        time.sleep(0.2)  # nothing else is due: no further observation may follow
    finally:
        w.stop()
    assert sorted(uid for uid, _ in recorder.calls) == sorted([busy, quiet])
    pods = next(p for uid, p in recorder.calls if uid == busy)
    assert [p["metadata"]["name"] for p in pods] == [f"busy-{i}" for i in range(8)]
    assert [p["status"]["containerStatuses"][0]["state"] for p in pods] == [{"waiting": {"reason": "CrashLoopBackOff"}}
                                                                            ] * 8
    assert all("managedFields" not in p["metadata"] for p in pods)  # never read, not kept


def test_observer_threads_share_a_round_and_never_observe_one_job_twice_at_once():
    recorder = Recorder(seconds=0.02)
    w = listed(ClusterWatcher("observers", api=None, kinds=[], instance="test", on_change=recorder, observers=4))
    jobs = [str(uuid.uuid4()) for _ in range(40)]
    for n, job in enumerate(jobs):
        w.apply_event(POD, "ADDED", a_pod(f"p-{n}", job, n + 1))
    # A change of the first job while it is being observed: it is observed again, after, with the new state.
    recorder.during[jobs[0]] = lambda: w.apply_event(POD, "MODIFIED", a_pod("p-0", jobs[0], 1000, "Error"))

    w.start_dispatch()
    try:
        wait_for(lambda: len(recorder.calls) >= 41, timeout=60)
        time.sleep(0.2)
    finally:
        w.stop()
    assert recorder.overlaps == 0
    assert sorted(uid for uid, _ in recorder.calls) == sorted([*jobs, jobs[0]])
    last_of_first = [pods for uid, pods in recorder.calls if uid == jobs[0]][-1]
    assert last_of_first[0]["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "Error"}}
    # The first round (40 jobs) was shared out over the 4 observers; the second, of one job, the dispatcher took itself.
    assert {t for t in recorder.threads if "-observe-" in t} == {f"watch-observers-observe-{i}" for i in range(4)}


def test_each_observation_is_counted_with_its_delay_from_the_first_mark():
    def value(name, **labels):
        return REGISTRY.get_sample_value(name, {"cluster": "counted", **labels}) or 0.0

    before = value("gangweb_watch_observations_total"), value("gangweb_watch_delay_seconds_count")
    recorder = Recorder()
    w = listed(ClusterWatcher("counted", api=None, kinds=[], instance="test", on_change=recorder))
    job = str(uuid.uuid4())
    for rv in range(1, 6):
        w.apply_event(POD, "MODIFIED", a_pod("p", job, rv))
    time.sleep(0.3)  # the job waits this long before the dispatcher runs: the delay counts from the first mark
    w.start_dispatch()
    try:
        wait_for(lambda: len(recorder.calls) == 1)
        time.sleep(0.1)
    finally:
        w.stop()
    assert value("gangweb_watch_observations_total") - before[0] == 1
    assert value("gangweb_watch_delay_seconds_count") - before[1] == 1
    assert value("gangweb_watch_delay_seconds_bucket", le="0.25") == 0  # this watcher's only observation: >= 0.3 s
    assert value("gangweb_watch_delay_seconds_bucket", le="1.0") == 1


def test_an_idle_observer_releases_what_it_opened_once_until_it_works_again(monkeypatch):
    from scheduling.reconcile import watch_dispatch

    monkeypatch.setattr(watch_dispatch, "OBSERVER_POLL_SECONDS", 0.02)
    monkeypatch.setattr(watch_dispatch, "OBSERVER_IDLE_SECONDS", 0.2)
    released: list[str] = []
    recorder = Recorder(seconds=0.02)
    w = listed(ClusterWatcher("idle", api=None, kinds=[], instance="test", on_change=recorder, observers=2,
                              on_exit=lambda: released.append(threading.current_thread().name)))
    for n in range(4):
        w.apply_event(POD, "ADDED", a_pod(f"i-{n}", str(uuid.uuid4()), n + 1))
    w.start_dispatch()
    try:
        wait_for(lambda: len(recorder.calls) == 4)
        workers = {t for t in recorder.threads if "-observe-" in t}
        wait_for(lambda: set(released) >= workers)
        time.sleep(0.5)  # idle on: released once, not once per poll
        assert sorted(released) == sorted(workers)
    finally:
        w.stop()
