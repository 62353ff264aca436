"""A resync under a backlog (issue 16): one per cluster at a time (a database lease), bounded per run and going on
where the previous run stopped, leaving jobs whose own task is queued to that task, and reading afresh a job whose
row changed after the snapshot was listed."""
from __future__ import annotations

import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from scheduling.choices import DesiredState, GangPhase
from scheduling.models import GangJob, Lease, leases
from scheduling.reconcile import resync, status
from scheduling.reconcile.jobs import claims
from tests import builders


@pytest.mark.parametrize(("cursor", "order"), [
    (0, [3, 5, 8, 13]),
    (5, [8, 13, 3, 5]),
    (13, [3, 5, 8, 13]),
    (99, [3, 5, 8, 13]),
    (4, [5, 8, 13, 3]),  # the job the cursor named is gone: go on from the next id
])
def test_a_bounded_resync_goes_on_after_the_last_job_it_looked_at(cursor, order):
    assert resync._order_from([3, 5, 8, 13], cursor) == order


def test_every_job_gets_its_turn_over_successive_bounded_runs():
    ids, cursor, seen = list(range(1, 11)), 0, []
    for _ in range(4):  # 3 per run, as resync_cluster slices them
        turn = resync._order_from(ids, cursor)[:3]
        seen += turn
        cursor = turn[-1]
    assert sorted(set(seen)) == ids


@pytest.mark.django_db
def test_a_lease_is_held_by_one_claimant_until_released_or_lapsed():
    first = leases.acquire("resync:cluster:1", 60)
    assert first and leases.acquire("resync:cluster:1", 60) is None
    assert leases.acquire("resync:cluster:2", 60)  # another cluster's lease is another row
    assert not leases.release("resync:cluster:1", "not-the-holder")
    assert leases.release("resync:cluster:1", first, cursor=42)
    assert leases.cursor_of("resync:cluster:1") == 42
    second = leases.acquire("resync:cluster:1", 60)
    assert second and second != first

    # A holder killed mid-run never releases; its lease lapses and the next run takes it.
    Lease.objects.filter(name="resync:cluster:1").update(expires_at=timezone.now() - timedelta(seconds=1))
    third = leases.acquire("resync:cluster:1", 60)
    assert third and not leases.release("resync:cluster:1", second)


@pytest.mark.django_db
def test_a_resync_of_a_cluster_whose_lease_is_held_does_nothing():
    cluster = builders.make_cluster("busy")
    leases.acquire(resync.lease_name(cluster), 60)
    assert resync.resync_cluster(cluster) == {"skipped": 1}
    assert not cluster.attempts.exists()


@pytest.mark.django_db
def test_the_periodic_resync_leaves_to_their_task_only_jobs_whose_task_is_queued_or_working(admin_user, enqueued):
    """Issue 31: a bulk batch that gave up on its jobs (API server down) recorded "not attempted", which bumped their
    `updated_at`, and a grace read from `updated_at` made the next two resyncs skip exactly them. The grace reads
    `task_queued_at` and the claims: a job whose task took it and let go is the next resync's at once."""
    cluster = builders.make_cluster("local")
    queue = builders.make_queue("team-a", clusters=[cluster])
    version = builders.make_template("llm")
    queued = builders.make_job(version, queue, cluster, user=admin_user)  # submitted: its task is in the broker
    lost = builders.make_job(version, queue, cluster, user=admin_user)  # its task was lost with the broker
    GangJob.objects.filter(pk=lost.pk).update(task_queued_at=timezone.now() - timedelta(seconds=120))
    gave_up = builders.make_job(version, queue, cluster, user=admin_user)
    working = builders.make_job(version, queue, cluster, user=admin_user)
    died = builders.make_job(version, queue, cluster, user=admin_user)
    cancelling = builders.make_job(version, queue, cluster, user=admin_user, phase=GangPhase.RUNNING,
                                   desired_state=DesiredState.CANCEL)
    with claims.holding([gave_up.pk], "bulk-task") as taken:  # the batch took it, recorded an error, let go
        assert taken == [gave_up.pk]
        status.record_error(GangJob.objects.get(pk=gave_up.pk), "ClusterUnreachable", "not attempted: down")
    assert claims.claim([working.pk, died.pk], "live-task") == sorted([working.pk, died.pk])
    GangJob.objects.filter(pk=died.pk).update(claimed_until=timezone.now() - timedelta(seconds=1))  # lapsed

    assert set(resync.jobs_to_resync(cluster, grace_seconds=60)) == {lost, gave_up, died}
    assert set(resync.jobs_to_resync(cluster)) == {queued, lost, gave_up, working, died, cancelling}
    assert GangJob.objects.get(pk=gave_up.pk).phase_reason == "ClusterUnreachable"  # its write did not hide it


@pytest.mark.django_db  # the database clock (scheduling/db/clock.py) is read on PostgreSQL
def test_a_job_changed_after_the_snapshot_was_listed_is_read_afresh():
    listed_at = time.time()
    before = SimpleNamespace(updated_at=timezone.now() - timedelta(seconds=5), created_at=None)
    after = SimpleNamespace(updated_at=timezone.now() + timedelta(seconds=1), created_at=None)
    assert not resync.changed_since(before, listed_at)
    assert resync.changed_since(after, listed_at)


@pytest.mark.django_db(transaction=True)
def test_a_heartbeat_keeps_a_short_lease_held_while_the_work_runs_and_a_killed_holder_frees_it_soon():
    """The worker-kill fault run: a worker killed mid-resync kept the cluster's lease for 360 s (the hard limit plus
    30) and every resync skipped it meanwhile. Now the lease is short and renewed while its holder lives."""
    token = leases.acquire("resync:cluster:7", 1.0)
    with leases.Heartbeat.of_lease("resync:cluster:7", token, seconds=1.0, every=0.2) as heartbeat:
        time.sleep(1.6)  # longer than the lease: only the heartbeat keeps it
        assert leases.acquire("resync:cluster:7", 1.0) is None
        assert not heartbeat.lost.is_set()
    # The holder "dies" (no release, no more beats): within the lease's 1 s someone else may take it.
    time.sleep(1.2)
    assert leases.acquire("resync:cluster:7", 1.0)


@pytest.mark.django_db(transaction=True)
def test_a_heartbeat_that_finds_its_lease_taken_says_so():
    token = leases.acquire("resync:cluster:8", 0.3)
    time.sleep(0.5)
    assert leases.acquire("resync:cluster:8", 60)  # lapsed: taken by another resync
    with leases.Heartbeat.of_lease("resync:cluster:8", token, seconds=1.0, every=0.1) as heartbeat:
        assert heartbeat.lost.wait(5)
    assert resync.LEASE_SECONDS <= 60  # a killed worker blocks a cluster's resync for at most a minute
