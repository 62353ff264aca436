"""A resync under a backlog (issue 16) on the real control plane: bounded per run and going on where it stopped,
one per cluster at a time, and a soft time limit is recorded and raised again, never swallowed by the per-job
error handling."""
from __future__ import annotations

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from scheduling.choices import GangPhase
from scheduling.models import GangJob, ReconcileAttempt, leases
from scheduling.reconcile import jobs as job_reconcile
from scheduling.reconcile import resync

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]


def phases(jobs) -> list[str]:
    by_pk = dict(GangJob.objects.filter(pk__in=[j.pk for j in jobs]).values_list("pk", "phase"))
    return [by_pk[j.pk] for j in jobs]


def test_a_bounded_resync_dispatches_a_backlog_over_successive_runs_in_turn(world):
    jobs = [world.submit(backend="kai", replicas=1) for _ in range(5)]

    first = resync.resync_cluster(world.cluster, max_jobs=2)
    assert (first["jobs"], first["acted"], first["left"]) == (2, 2, 3)
    assert phases(jobs) == [GangPhase.DISPATCHED] * 2 + [GangPhase.SUBMITTED] * 3

    second = resync.resync_cluster(world.cluster, max_jobs=2)
    assert (second["jobs"], second["acted"], second["left"]) == (2, 2, 3)  # left: not reached by this run
    third = resync.resync_cluster(world.cluster, max_jobs=2)
    assert third["acted"] == 1  # the last one, then the first again (in sync: nothing to do)
    assert phases(jobs) == [GangPhase.DISPATCHED] * 5


def test_a_resync_out_of_time_stops_and_the_next_goes_on(world):
    jobs = [world.submit(backend="kai", replicas=1) for _ in range(3)]
    stats = resync.resync_cluster(world.cluster, budget_seconds=0)
    assert (stats["jobs"], stats["left"]) == (1, 2)  # out of time at once, yet one job per run goes through
    stats = resync.resync_cluster(world.cluster)
    assert (stats["jobs"], stats["acted"], stats["left"]) == (3, 2, 0)
    assert phases(jobs) == [GangPhase.DISPATCHED] * 3


def test_a_soft_time_limit_in_a_jobs_pass_ends_the_resync_recorded_and_raised(world, monkeypatch):
    jobs = [world.submit(backend="kai", replicas=1) for _ in range(3)]
    real_run_pass = job_reconcile.run_pass

    def run_pass(job, **kwargs):  # Celery's soft limit lands during the second job's pass
        if job.pk == jobs[1].pk:
            raise SoftTimeLimitExceeded()
        return real_run_pass(job, **kwargs)

    monkeypatch.setattr(job_reconcile, "run_pass", run_pass)

    with pytest.raises(SoftTimeLimitExceeded):
        resync.resync_all()

    attempt = ReconcileAttempt.objects.filter(kind=ReconcileAttempt.KIND_RESYNC).latest("id")
    assert attempt.reason == resync.TIME_LIMIT and "jobs=2" in attempt.actions and "left=1" in attempt.actions
    assert phases(jobs) == [GangPhase.DISPATCHED, GangPhase.SUBMITTED, GangPhase.SUBMITTED]
    assert leases.acquire(resync.lease_name(world.cluster), 60)  # released on the way out


def test_while_one_resync_of_a_cluster_runs_another_does_nothing(world):
    job = world.submit(backend="kai", replicas=1)
    held = leases.acquire(resync.lease_name(world.cluster), resync.LEASE_SECONDS)  # a resync in another worker

    assert resync.resync_all() == {"local": {"skipped": 1}}
    assert phases([job]) == [GangPhase.SUBMITTED]

    leases.release(resync.lease_name(world.cluster), held)
    assert resync.resync_all()["local"]["acted"] == 1
