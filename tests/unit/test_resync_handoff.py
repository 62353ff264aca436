"""The resync hands a backlog of never-dispatched jobs to batch tasks (reconcile/resync_handoff.py) instead of
passing them one by one, and the next resyncs leave them to those tasks for the grace."""
import pytest

from scheduling.choices import DesiredState
from scheduling.choices import GangPhase as P
from scheduling.models import GangJob
from scheduling.reconcile import resync, resync_handoff
from scheduling.work import enqueue
from tests import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def backlog(setup, admin_user):
    """120 submits whose own tasks are long gone (no `task_queued_at`), and three jobs that are not submits."""
    template, queue, cluster = setup
    waiting = [builders.make_job(template, queue, cluster, user=admin_user).pk for _ in range(120)]
    dispatched = builders.make_job(template, queue, cluster, user=admin_user, phase=P.DISPATCHED).pk
    erring, cancelling = (builders.make_job(template, queue, cluster, user=admin_user).pk for _ in range(2))
    GangJob.objects.filter(pk=erring).update(phase_reason="ClusterUnreachable")  # retried by its own task
    GangJob.objects.filter(pk=cancelling).update(desired_state=DesiredState.CANCEL)
    GangJob.objects.update(task_queued_at=None)
    return cluster, waiting, [dispatched, erring, cancelling]


def test_never_dispatched_jobs_go_to_batch_tasks_and_the_next_resync_leaves_them_to_those(backlog, sent_tasks):
    cluster, waiting, others = backlog
    assert resync_handoff.never_dispatched([*waiting, *others]) == set(waiting)
    assert resync_handoff.HAND_OFF_AT == enqueue.BATCH == 50

    assert resync_handoff.hand_off(list(reversed(waiting))) == set(waiting)
    assert [(name, len(args[0])) for name, args in sent_tasks] == [(enqueue.RECONCILE_JOBS, 50)] * 2 + [
        (enqueue.RECONCILE_JOBS, 20)]
    assert [i for _, args in sent_tasks for i in args[0]] == sorted(waiting)  # ascending, each job once
    assert [o["kwargs"] for o in sent_tasks.options] == [{"waiting_only": True}] * 3
    assert not GangJob.objects.filter(pk__in=waiting, task_queued_at__isnull=True).exists()
    # Within the grace the resync leaves them to their batches; the rest it passes itself.
    assert {j.pk for j in resync.jobs_to_resync(cluster, grace_seconds=60)} == set(others)


def test_a_broker_that_refuses_leaves_the_unsent_jobs_to_the_next_resync(backlog, monkeypatch):
    cluster, waiting, others = backlog
    sent = []

    def send(name, *args, **_):
        if sent:
            raise ConnectionError("broker down")
        sent.append(args[0])

    monkeypatch.setattr(enqueue, "send", send)
    assert resync_handoff.hand_off(waiting) == set(sorted(waiting)[:50])
    assert sent == [sorted(waiting)[:50]]
    assert {j.pk for j in resync.jobs_to_resync(cluster, grace_seconds=60)} == {*sorted(waiting)[50:], *others}


def test_a_handed_off_batch_passes_only_the_jobs_not_dispatched_meanwhile(backlog, monkeypatch):
    from scheduling.reconcile.jobs import batch

    cluster, waiting, (dispatched, erring, cancelling) = backlog
    passed = []
    monkeypatch.setattr(batch, "reconcile_many", lambda ids, **_: passed.append(sorted(ids)) or {"ok": len(ids)})
    batch.reconcile_claimed([waiting[0], dispatched, cancelling, waiting[1]], task_id="t1", waiting_only=True)
    assert passed == [sorted([waiting[0], waiting[1]])]
    batch.reconcile_claimed([waiting[0], dispatched], task_id="t2")  # a bulk submit's own batch: every job
    assert passed[-1] == sorted([waiting[0], dispatched])


def test_jobs_the_broker_would_not_take_are_passed_by_the_resync_itself(backlog, monkeypatch):
    """Hostile pass 39: when the broker refused a hand-off, the resync dropped every never-dispatched job from its
    own turn, sent or not, so while the broker stayed down they were neither batched nor passed. Only the jobs
    whose batch was queued are left out of the resync's turn; the others are passed as before the hand-off."""
    from contextlib import nullcontext

    cluster, waiting, others = backlog
    sent, passed = [], []

    def send(name, *args, **_):
        if sent:
            raise ConnectionError("broker down")
        sent.append(args[0])

    monkeypatch.setattr(enqueue, "send", send)
    monkeypatch.setattr(resync.kube_client, "api_client", lambda c: object())
    monkeypatch.setattr(resync.stranded, "clean", lambda c, api: 0)
    monkeypatch.setattr(resync, "cluster_snapshot", lambda c, api: nullcontext(object()))
    monkeypatch.setattr(resync, "orphans_and_suspects", lambda c, snap: (0, []))
    monkeypatch.setattr(resync.left_behind, "reopen", lambda c, api, snap, suspects: [])
    monkeypatch.setattr(resync, "resync_job", lambda job, *_: passed.append(job.pk) or (False, False))
    stats = resync.resync_cluster(cluster, grace_seconds=60, max_jobs=1000, budget_seconds=600)
    assert stats["handed_off"] == 50 and sent == [sorted(waiting)[:50]]
    assert sorted(passed) == sorted([*sorted(waiting)[50:], *others])
