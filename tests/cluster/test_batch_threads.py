"""A bulk-reconcile batch outside a transaction (as in the worker) runs its passes from several threads."""
from __future__ import annotations

import threading

import pytest

from scheduling.choices import GangPhase
from scheduling.kube import objects
from scheduling.models import GangJob, PhaseTransition, ReconcileAttempt
from scheduling.reconcile import jobs

# Committed rows: the batch's threads use connections of their own, which see only what is committed.
pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def test_a_threaded_batch_dispatches_every_job_once(world, monkeypatch):
    batch = [world.submit(backend="kai", replicas=1) for _ in range(7)]
    seen = set()
    run_pass = jobs.run_pass

    def recording(job, **kwargs):
        seen.add(threading.current_thread().name)
        return run_pass(job, **kwargs)

    monkeypatch.setattr(jobs.batch, "run_pass", recording)  # the batch's own reference (reconcile/jobs/batch.py)
    objects.requests.reset()
    assert jobs.reconcile_many([j.pk for j in batch], threads=3) == {"ok": 7, "failed": 0, "requeued": 0}
    assert len(seen) == 3 and all(name.startswith("reconcile-batch") for name in seen)
    assert sum(n for verb, n in objects.requests.counts.items() if verb.startswith("CREATE ")) == 7 * 3
    ids = [j.pk for j in batch]
    assert set(GangJob.objects.filter(pk__in=ids).values_list("phase", "backend_plugin")) == {
        (GangPhase.DISPATCHED, "kai-v2alpha2")}
    assert PhaseTransition.objects.filter(job_id__in=ids, phase=GangPhase.DISPATCHED).count() == 7
    assert ReconcileAttempt.objects.filter(job_id__in=ids).count() == 7

    # Level-triggered: the same batch again finds everything in place and creates nothing.
    objects.requests.reset()
    assert jobs.reconcile_many(ids, threads=3) == {"ok": 7, "failed": 0, "requeued": 0}
    assert not any(verb.startswith("CREATE ") for verb in objects.requests.counts)
    assert PhaseTransition.objects.filter(job_id__in=ids, phase=GangPhase.DISPATCHED).count() == 7


def test_the_batch_threads_keep_their_database_connections_from_one_batch_to_the_next(world, monkeypatch):
    from django.db import connection

    first = [world.submit(backend="kai", replicas=1) for _ in range(3)]
    second = [world.submit(backend="kai", replicas=1) for _ in range(3)]
    used: dict[str, set] = {"first": set(), "second": set()}
    batch = ["first"]
    run_pass = jobs.run_pass

    def recording(job, **kwargs):
        result = run_pass(job, **kwargs)
        used[batch[0]].add(id(connection.connection))  # the thread's open driver connection after its pass
        return result

    monkeypatch.setattr(jobs.batch, "run_pass", recording)
    assert jobs.reconcile_many([j.pk for j in first], threads=3) == {"ok": 3, "failed": 0, "requeued": 0}
    batch[0] = "second"
    assert jobs.reconcile_many([j.pk for j in second], threads=3) == {"ok": 3, "failed": 0, "requeued": 0}
    # Each batch opened no connection of its own: its threads went on with theirs (was: a new one per thread and
    # batch, closed at its end: a PostgreSQL connection's set-up and authentication each time).
    assert len(used["first"]) == 3
    assert used["second"] <= used["first"]
