"""Single submits that wait are reconciled together (reconcile/jobs/coalesce.py): the task of one submit takes the
other waiting submits of its cluster into one batch, and the tasks queued for those then cost no request."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling import tasks
from scheduling.backends import kai_v2alpha2
from scheduling.choices import GangPhase
from scheduling.kube import objects
from scheduling.kube.objects import JOB, SERVICE
from scheduling.models import GangJob, PhaseTransition, ReconcileAttempt
from scheduling.reconcile import jobs
from scheduling.services.jobs import lifecycle as job_service

from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]


def requests(prefix: str) -> int:
    return sum(n for verb, n in objects.requests.counts.items() if verb.startswith(prefix))


def statements(queries) -> list[str]:
    # Savepoints are the test's transaction around each atomic block; outside tests BEGIN/COMMIT instead.
    return [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]


def test_waiting_single_submits_are_dispatched_by_one_batch(world):
    waiting = [world.submit(backend="kai", replicas=1) for _ in range(4)]
    ids = [j.pk for j in waiting]
    objects.requests.reset()
    with CaptureQueriesContext(connection) as queries:
        result = jobs.reconcile_submitted(ids[2], task_id="task-of-the-third")
    assert result.error is None and any(a.startswith("create ") for a in result.actions)
    # No snapshot (the batch recorded the four's backends: nothing gangweb made of them can exist yet), one LIST of
    # the namespace's LimitRanges (kube/limit_ranges.py, kept for the namespace), then each job's three creates. One
    # pass each would LIST a gang kind, Jobs, Services and pods 4x.
    assert requests("LIST ") == requests("LIST core/limitranges") == 1
    assert requests("CREATE ") == 4 * 3
    assert objects.requests.total() == requests("LIST ") + requests("CREATE ")
    # The take (the job's row locked, the clean-ups due to take along, none here, the other waiting ones, one UPDATE
    # claiming them), the batch as a bulk submit's (tests/cluster/test_batch_snapshot.py: 2 + 6 a job + the
    # pod-policy read of each template version, here one per job: world.submit makes a template per job), one
    # UPDATE releasing the claims.
    sql = statements(queries)
    assert len(sql) == 4 + 2 + 4 * (6 + 1) + 1
    assert sum(q.startswith("UPDATE") and "claimed_by" in q for q in sql) == 2
    assert set(GangJob.objects.filter(pk__in=ids).values_list("phase", "claimed_by", "claimed_until")) == {
        (GangPhase.DISPATCHED, "", None)}
    assert PhaseTransition.objects.filter(job_id__in=ids, phase=GangPhase.DISPATCHED).count() == 4
    assert ReconcileAttempt.objects.filter(job_id__in=ids).count() == 4


def test_the_queued_task_of_a_submit_dispatched_since_sends_no_request(world):
    first, second = world.submit(backend="kai", replicas=1), world.submit(backend="kai", replicas=1)
    jobs.reconcile_submitted(first.pk, task_id="task-of-the-first")  # takes the second along
    assert GangJob.objects.get(pk=second.pk).phase == GangPhase.DISPATCHED

    objects.requests.reset()
    with CaptureQueriesContext(connection) as queries:
        tasks.reconcile_job.apply(args=(second.pk,), kwargs={"submitted": True}).get()
    assert objects.requests.total() == 0
    assert len(statements(queries)) == 1  # its row, locked and read
    assert ReconcileAttempt.objects.filter(job_id=second.pk).count() == 1  # the batch's pass only

    # Level-triggered still: a task queued for a change (no `submitted`) runs a full pass, reading the cluster.
    tasks.reconcile_job.apply(args=(second.pk,)).get()
    assert requests("LIST ") > 0
    assert ReconcileAttempt.objects.filter(job_id=second.pk).count() == 2


def live(objs):
    return [o for o in objs if not o["metadata"].get("deletionTimestamp")]


def test_a_cancel_of_a_job_taken_into_a_batch_still_wins(world, monkeypatch):
    waiting = [world.submit(backend="kai", replicas=1) for _ in range(3)]
    victim = waiting[1]
    run_pass = jobs.batch.run_pass

    def cancel_first(job, **kwargs):
        if job.pk == victim.pk:  # the batch read the job (run asked); the cancel lands now, its own pass runs first
            job_service.cancel(world.user, GangJob.objects.get(pk=victim.pk))
            assert world.reconcile(victim).error is None
            assert GangJob.objects.get(pk=victim.pk).phase == GangPhase.CANCELLED
        return run_pass(job, **kwargs)  # then the batch's pass goes on with what it read

    monkeypatch.setattr(jobs.batch, "run_pass", cancel_first)
    jobs.reconcile_submitted(waiting[0].pk, task_id="task-of-the-first")

    for ref in (kai_v2alpha2.POD_GROUP, JOB, SERVICE):
        assert live(world.gang(victim, ref)) == [], ref.kind
    victim.refresh_from_db()
    assert victim.phase == GangPhase.CANCELLED
    assert list(victim.transitions.values_list("phase", flat=True)).count(GangPhase.CANCELLED) == 1
    assert {GangJob.objects.get(pk=j.pk).phase for j in (waiting[0], waiting[2])} == {GangPhase.DISPATCHED}
    # The victim's own submit task is a full pass now (cancel asked), and it finishes the cleanup.
    wait_for(lambda: jobs.reconcile_submitted(victim.pk) and GangJob.objects.get(pk=victim.pk).cleaned_up_at, 60,
             "the cleanup")
