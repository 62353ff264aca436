"""Claims of a single submit's batch (reconcile/jobs/coalesce.py `take`): which waiting jobs it takes, and that two
takers never take one job. No cluster: `take` only reads and writes rows."""
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from scheduling.choices import DesiredState
from scheduling.choices import GangPhase as P
from scheduling.models import GangJob
from scheduling.reconcile.jobs import coalesce
from scheduling.services.jobs import lifecycle as job_service
from scheduling.work import enqueue
from tests import builders

pytestmark = pytest.mark.django_db


def submits(setup, user, n, cluster=None):
    template, queue, default_cluster = setup
    return [builders.make_job(template, queue, cluster or default_cluster, user=user).pk for _ in range(n)]


def test_a_take_claims_the_job_and_the_waiting_ones_of_its_cluster_oldest_first(setup, admin_user, enqueued):
    template, queue, cluster = setup
    other = builders.make_cluster("other")
    queue.clusters.add(other)
    waiting = submits(setup, admin_user, 4)
    elsewhere = submits(setup, admin_user, 1, cluster=other)
    dispatched = builders.make_job(template, queue, cluster, phase=P.DISPATCHED, user=admin_user).pk
    failed_before = submits(setup, admin_user, 1)[0]
    GangJob.objects.filter(pk=failed_before).update(phase_reason="NamespaceNotFound")  # its own task retries it
    cancelling = submits(setup, admin_user, 1)[0]
    GangJob.objects.filter(pk=cancelling).update(desired_state=DesiredState.CANCEL)
    held = submits(setup, admin_user, 1)[0]
    GangJob.objects.filter(pk=held).update(claimed_by="another-task",
                                           claimed_until=timezone.now() + timedelta(seconds=60))
    lapsed = submits(setup, admin_user, 1)[0]  # its taker died: the claim expired
    GangJob.objects.filter(pk=lapsed).update(claimed_by="dead-task",
                                             claimed_until=timezone.now() - timedelta(seconds=1))

    ended = builders.make_job(template, queue, cluster, phase=P.SUCCEEDED, user=admin_user).pk
    # The clean-ups due in the cluster (an ended job, a cancel asked) ride along first; the waiting fill the rest.
    assert coalesce.take(waiting[2], "t1", limit=4) == (coalesce.CLAIMED, [waiting[2], waiting[0], cancelling,
                                                                           ended])
    assert coalesce.release([ended, cancelling], "t1") == 2
    # Taken along again once RIDE_AGAIN_SECONDS have passed (their passes did not finish them).
    GangJob.objects.filter(pk__in=[ended, cancelling]).update(
        cleanup_rode_at=timezone.now() - timedelta(seconds=coalesce.RIDE_AGAIN_SECONDS + 1))
    assert coalesce.take(waiting[2], "t1", limit=6) == (coalesce.CLAIMED, [waiting[2], waiting[0], waiting[1],
                                                                           waiting[3], cancelling, ended])
    assert coalesce.release([ended, cancelling], "t1") == 2
    GangJob.objects.filter(pk__in=[ended, cancelling]).update(cleaned_up_at=timezone.now())  # done: no more along
    assert set(GangJob.objects.filter(claimed_by="t1").values_list("pk", flat=True)) == set(waiting)
    assert coalesce.take(waiting[0], "t2") == (coalesce.TAKEN, [])  # t1 holds it: t1's batch does it
    assert coalesce.take(waiting[0], "t1", limit=1) == (coalesce.CLAIMED, [waiting[0]])  # t1 redelivered: its own
    assert coalesce.take(lapsed, "t3") == (coalesce.CLAIMED, [lapsed])
    assert coalesce.take(failed_before, "t4") == (coalesce.CLAIMED, [failed_before])  # its own task: yes
    assert coalesce.take(elsewhere[0], "t5") == (coalesce.CLAIMED, elsewhere)
    assert coalesce.take(dispatched, "t6") == (coalesce.DISPATCHED, [])
    assert coalesce.take(cancelling, "t7") == (coalesce.ASKED, [])
    assert coalesce.take(held, "t8") == (coalesce.TAKEN, [])
    assert coalesce.take(10**9, "t9") == (coalesce.GONE, [])

    assert coalesce.release(waiting, "t2") == 0  # not t2's
    assert coalesce.release(waiting, "t1") == 4
    assert not GangJob.objects.filter(pk__in=waiting).exclude(claimed_by="").exists()
    assert not GangJob.objects.filter(pk__in=waiting, claimed_until__isnull=False).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks (FOR UPDATE SKIP LOCKED) need PostgreSQL "
                                                               "(run with DATABASE_URL=postgres://...)")
def test_two_takers_at_once_never_take_the_same_job(setup, admin_user, enqueued):
    ids = submits(setup, admin_user, 5)
    first: list = []
    taken, finish = threading.Event(), threading.Event()

    def taker():  # takes 3 jobs, and holds its transaction open (locks, uncommitted claims) until told
        try:
            with transaction.atomic():
                first.extend(coalesce.take(ids[0], "first", limit=3)[1])
                taken.set()
                finish.wait(30)
        finally:
            taken.set()
            connection.close()

    thread = threading.Thread(target=taker)
    thread.start()
    try:
        assert taken.wait(30)
        assert first == ids[:3]
        # The first taker's rows are locked and their claims not committed: skipped, not waited for (a take that
        # waited would hit the lock timeout and fail the test, instead of stalling until the first one commits).
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '10s'")
        found, second = coalesce.take(ids[4], "second", limit=5)
    finally:
        finish.set()
        thread.join(30)
    assert (found, second) == (coalesce.CLAIMED, [ids[4], ids[3]])
    claims = dict(GangJob.objects.filter(pk__in=ids).values_list("pk", "claimed_by"))
    assert claims == {**{pk: "first" for pk in ids[:3]}, **{pk: "second" for pk in ids[3:]}}
    assert coalesce.take(ids[1], "third") == (coalesce.TAKEN, [])  # committed now: a live claim


def test_a_single_submit_queues_its_task_as_a_submit_and_a_cancel_as_a_change(setup, admin_user, sent_tasks):
    template, queue, cluster = setup
    job = builders.make_job(template, queue, cluster, user=admin_user)
    job_service.cancel(admin_user, job)
    assert sent_tasks == [(enqueue.RECONCILE_JOB, (job.pk,)), (enqueue.RECONCILE_JOB, (job.pk,))]
    # the cancel's task runs a full pass, on the clean-up queue (never behind the dispatch backlog)
    assert sent_tasks.options == [{"kwargs": {"submitted": True}}, {"kwargs": {"cleanup": True}}]


def test_a_flood_of_clean_ups_leaves_half_of_a_submits_batch_to_the_clusters_waiting_submits(setup, admin_user,
                                                                                               enqueued):
    """Hostile pass 39: one tenant's jobs ending (or cancelled) by the hundred made every submit's batch all
    clean-ups (they rode along first, up to the whole batch), so another team's waiting submits were dispatched one
    per task instead of a batch each, for as long as the flood lasted. Clean-ups take at most half the places
    besides the task's own job while submits wait; the rest go to the waiting submits, oldest first."""
    template, queue, cluster = setup
    ended = [builders.make_job(template, queue, cluster, phase=P.SUCCEEDED, user=admin_user).pk for _ in range(10)]
    waiting = submits(setup, admin_user, 10)
    found, ids = coalesce.take(waiting[-1], "t1", limit=10)
    assert found == coalesce.CLAIMED
    # The task's own job, 4 waiting submits (oldest first), then 5 clean-ups (oldest first): 9 places, 5 of them.
    assert ids == [waiting[-1], *waiting[:4], *ended[:5]]
    coalesce.release(ids, "t1")
    # With no submit left waiting, the clean-ups fill the batch (not the ones just taken along: RIDE_AGAIN_SECONDS).
    GangJob.objects.filter(pk__in=waiting[:-1]).update(phase=P.DISPATCHED)
    GangJob.objects.filter(pk__in=ended[:2]).update(cleanup_rode_at=None)
    assert coalesce.take(waiting[-1], "t2", limit=10) == (coalesce.CLAIMED, [waiting[-1], *ended[:2], *ended[5:]])
