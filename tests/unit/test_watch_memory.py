"""The watch cache holds the live jobs' objects, not every finished pod and Job left in the cluster (issue 16: the
watcher grew from 172 to 793 MiB over a soak). Events are fed to the cache directly; no API server is involved."""
from __future__ import annotations

import uuid

import pytest

from scheduling.reconcile import cluster_watcher as watches
from scheduling.reconcile.cluster_watcher import JOB, POD, ClusterWatcher


def labelled(kind_ref, name: str, job_uid: str | None, phase: str | None = None) -> dict:
    labels = {"gangweb.io/instance": "test"}
    if job_uid:
        labels["gangweb.io/job-uid"] = job_uid
    obj = {"metadata": {"name": name, "namespace": "ns", "uid": str(uuid.uuid4()), "resourceVersion": "1",
                        "labels": labels}}
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def a_watcher(finished: set[str]) -> ClusterWatcher:
    asked = []

    def finished_with(job_uids):
        asked.append(list(job_uids))
        return {u for u in job_uids if u in finished}

    w = ClusterWatcher("test", api=None, kinds=[], instance="test", on_change=lambda *a: None,
                       finished_with=finished_with)
    w.asked = asked
    return w


def run_jobs(w: ClusterWatcher, count: int, pods_per_job: int = 4) -> list[str]:
    jobs = [str(uuid.uuid4()) for _ in range(count)]
    for job in jobs:
        w.apply_event(JOB, "ADDED", labelled(JOB, f"{job[:8]}-w", job))
        for i in range(pods_per_job):
            w.apply_event(POD, "ADDED", labelled(POD, f"{job[:8]}-w-{i}", job, "Succeeded"))
    return jobs


def test_finished_jobs_leave_the_cache_at_the_next_sweep_and_live_ones_stay():
    finished_jobs: set[str] = set()
    w = a_watcher(finished_jobs)
    done = run_jobs(w, 500)
    live = run_jobs(w, 3)
    finished_jobs.update(done)
    assert w.cached_objects() == 503 * 5

    assert w.sweep() == 500 * 5
    assert w.cached_objects() == 3 * 5
    assert set(w._by_job) == set(live)
    assert sorted(w.asked[0]) == sorted(done + live)  # one question about every cached job


def test_the_cache_does_not_grow_with_finished_jobs_however_many_run():
    finished_jobs: set[str] = set()
    w = a_watcher(finished_jobs)
    sizes = []
    for _ in range(5):  # five rounds of 200 jobs that run and finish
        finished_jobs.update(run_jobs(w, 200))
        w.sweep()
        sizes.append(w.cached_objects())
    assert sizes == [0] * 5


def test_later_events_of_a_forgotten_job_are_not_cached_again():
    w = a_watcher(set())
    (job,) = run_jobs(w, 1, pods_per_job=1)
    w.forget([job])
    w.apply_event(POD, "MODIFIED", labelled(POD, "late", job, "Succeeded"))  # e.g. the garbage collector's update
    assert w.cached_objects() == 0 and job not in w._dirty


def test_objects_without_a_job_label_are_not_cached():
    w = a_watcher(set())
    for i in range(50):
        w.apply_event(POD, "ADDED", labelled(POD, f"stray-{i}", None, "Running"))
    assert w.cached_objects() == 0


def test_the_forgotten_set_is_bounded(monkeypatch):
    monkeypatch.setattr(watches, "FORGOTTEN_MAX", 10)
    w = a_watcher(set())
    jobs = [str(uuid.uuid4()) for _ in range(25)]
    w.forget(jobs)
    assert list(w._forgotten) == jobs[-10:]


def test_a_failing_question_keeps_everything_until_the_next_sweep():
    w = a_watcher(set())
    run_jobs(w, 2)

    def broken(_uids):
        raise RuntimeError("database restarting")

    w.finished_with = broken
    assert w.sweep() == 0 and w.cached_objects() == 10


@pytest.mark.django_db(transaction=True)  # finished_with closes old connections, as in its thread
def test_finished_with_names_cleaned_up_jobs_and_labels_of_no_job():
    from django.utils import timezone

    from scheduling.choices import GangPhase
    from scheduling.models import GangJob
    from scheduling.reconcile.watching import finished_with
    from tests import builders

    cluster = builders.make_cluster("local")
    queue = builders.make_queue("team-a", clusters=[cluster])
    version = builders.make_template("llm")

    def job(**fields):
        return GangJob.objects.create(name=f"j-{uuid.uuid4().hex[:6]}", template_version=version, queue=queue,
                                      cluster=cluster, resolved_spec=version.spec, **fields)

    running = job(phase=GangPhase.RUNNING)
    succeeded_not_cleaned = job(phase=GangPhase.SUCCEEDED)
    cleaned = job(phase=GangPhase.SUCCEEDED, cleaned_up_at=timezone.now())
    stranger = str(uuid.uuid4())
    values = [str(running.uid), str(succeeded_not_cleaned.uid), str(cleaned.uid), stranger, "not-a-uuid"]
    assert finished_with(values) == {str(cleaned.uid), stranger, "not-a-uuid"}
