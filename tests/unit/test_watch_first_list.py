"""A watcher observes a job only once every kind it watches has been listed (issue 31): a job observed from its pods
while its PodGroup's LIST was still out got its Scheduled time from the pods' binds instead of the PodGroup's own
condition, and a timeline entry is never rewritten. LISTs and events are fed to the cache directly (`apply_list`,
`apply_event`), in the order a real start delivers them; no API server or database is involved.
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from scheduling.backends.k8s_workload_v1beta1 import K8sWorkloadV1beta1
from scheduling.choices import GangPhase as P
from scheduling.observe import phase_entries
from scheduling.reconcile import watch_dispatch
from scheduling.reconcile.cluster_watcher import JOB, POD, ClusterWatcher
from scheduling.reconcile.derive import unlisted_marked
from tests.kube_objects import t

POD_GROUP = K8sWorkloadV1beta1.POD_GROUP


def labelled(obj: dict, job_uid: str, rv: int) -> dict:
    obj["metadata"].update(uid=f"uid-{obj['metadata']['name']}", resourceVersion=str(rv),
                           labels={"gangweb.io/instance": "test", "gangweb.io/job-uid": job_uid})
    return obj


def a_pod(name: str, job_uid: str, rv: int, phase: str = "Pending") -> dict:
    return labelled({"metadata": {"name": name, "namespace": "ns"}, "status": {"phase": phase}}, job_uid, rv)


def a_podgroup(job_uid: str) -> dict:
    return labelled({"apiVersion": POD_GROUP.api_version, "kind": POD_GROUP.kind,
                     "metadata": {"name": "train-pg", "namespace": "ns"},
                     "status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True",
                                                "lastTransitionTime": "2026-12-06T10:00:00Z"}]}}, job_uid, 7)


class Seen:
    """on_change that records (job UID, pod phases, gang object names, unlisted kinds, monotonic time) per call,
    and `may_write` that records that the dispatcher looked at its marks."""

    def __init__(self):
        self.calls: list[tuple] = []
        self.looked = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, job_uid, objects, deleted):
        with self.lock:
            self.calls.append((job_uid, [p["status"]["phase"] for p in objects.pods],
                               [g["metadata"]["name"] for g in objects.gang], objects.unlisted, time.monotonic()))

    def may_write(self) -> bool:
        self.looked.set()
        return True


def wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


@pytest.fixture
def seen_watcher():
    seen = Seen()
    w = ClusterWatcher("first-list", api=None, kinds=[POD_GROUP], instance="test", on_change=seen,
                       may_write=seen.may_write)
    yield seen, w
    w.stop()


def test_a_job_is_not_observed_until_its_podgroups_list_is_in_and_then_from_it_and_its_latest_pods(seen_watcher):
    seen, w = seen_watcher
    job = str(uuid.uuid4())
    w.start_dispatch()
    w.apply_list(POD, [a_pod("train-0", job, 1), a_pod("train-1", job, 2)])
    w.apply_list(JOB, [])
    w.apply_event(POD, "MODIFIED", a_pod("train-0", job, 3, "Running"))  # the pods' watch goes on meanwhile
    assert w.unlisted() == ("podgroups.scheduling.k8s.io",)
    # The dispatcher has the job's mark and has passed its write fence; before the fix it observed within 50 ms.
    assert seen.looked.wait(30)
    assert not wait_for(lambda: seen.calls, timeout=3), seen.calls

    w.apply_list(POD_GROUP, [a_podgroup(job)])
    assert wait_for(lambda: seen.calls, timeout=30)
    time.sleep(0.2)  # nothing else is due: no second observation may follow
    assert [c[:4] for c in seen.calls] == [(job, ["Running", "Pending"], ["train-pg"], ())]


def test_a_kind_that_is_never_listed_holds_observations_back_only_so_long_and_they_then_name_it(monkeypatch):
    monkeypatch.setattr(watch_dispatch, "SYNC_WAIT_SECONDS", 0.5)
    seen = Seen()
    w = ClusterWatcher("never-listed", api=None, kinds=[POD_GROUP], instance="test", on_change=seen)
    job = str(uuid.uuid4())
    started = time.monotonic()
    w.start_dispatch()
    try:
        w.apply_list(POD, [a_pod("train-0", job, 1, "Running")])
        w.apply_list(JOB, [])
        assert wait_for(lambda: seen.calls, timeout=30)
    finally:
        w.stop()
    [(uid, pods, gang, unlisted, at)] = seen.calls
    assert (uid, pods, gang, unlisted) == (job, ["Running"], [], ("podgroups.scheduling.k8s.io",))
    assert at - started >= 0.5  # held back for the whole bound


def test_entries_observed_before_a_kind_was_listed_are_recorded_inferred_and_say_which_kind():
    entries = [phase_entries.Entry(P.SCHEDULED, t(6), "Pod ns/train-1", "Scheduled", "2 of 2 bound"),
               phase_entries.Entry(P.RUNNING, t(9), "Pod ns/train-0", "Running", "")]
    marked = unlisted_marked(entries, ("podgroups.scheduling.k8s.io", "jobs.batch"))
    note = "watch had not yet listed jobs.batch, podgroups.scheduling.k8s.io: time may be inferred"
    assert [(e.phase, e.at, e.inferred, e.message) for e in marked] == [
        (P.SCHEDULED, t(6), True, f"2 of 2 bound ({note})"), (P.RUNNING, t(9), True, note)]
