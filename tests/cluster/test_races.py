"""Races between passes of one job: a cancel that lands while a slower pass is dispatching the job."""
from __future__ import annotations

import pytest
from django.utils import timezone

from scheduling.backends import kai_v2alpha2
from scheduling.choices import GangPhase
from scheduling.kube.objects import JOB, POD, SERVICE
from scheduling.models import GangJob
from scheduling.reconcile import jobs
from scheduling.services.jobs import lifecycle as job_service

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
KAI_PG = kai_v2alpha2.POD_GROUP


def live(objs):
    return [o for o in objs if not o["metadata"].get("deletionTimestamp")]


@pytest.mark.parametrize("dispatched", [False, True], ids=["first-dispatch", "redispatch"])
def test_a_cancel_during_a_dispatching_pass_leaves_no_objects_behind(world, dispatched):
    job = world.submit(backend="kai", replicas=2)
    if dispatched:  # the cancel pass takes the normal path (backend known), and still finds nothing yet
        GangJob.objects.filter(pk=job.pk).update(backend_plugin="kai-v2alpha2")
    slow = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)  # pass A read the job: Run

    job_service.cancel(world.user, GangJob.objects.get(pk=job.pk))
    fast = world.reconcile(job)  # pass B: nothing in the cluster yet, so the job ends Cancelled and cleaned up
    assert fast.error is None
    job.refresh_from_db()
    assert job.phase == GangPhase.CANCELLED and job.cleaned_up_at is not None

    jobs.run_pass(slow)  # pass A goes on with what it read: it must not leave a gang running for a cancelled job

    # Pass A created nothing: without a backend (none is ever recorded on a cancelled job, and no pass creates
    # without one), or, dispatched, because it reads the row again before its first create.
    for ref in (KAI_PG, JOB, SERVICE, POD):
        assert world.gang(job, ref) == [], ref.kind
    job.refresh_from_db()
    assert job.phase == GangPhase.CANCELLED and job.cleaned_up_at is not None
    assert list(job.transitions.values_list("phase", flat=True)).count(GangPhase.CANCELLED) == 1
    assert job.backend_plugin == ("kai-v2alpha2" if dispatched else "")


def test_a_pass_that_loaded_a_job_before_it_ended_creates_nothing(world):
    """The SIGSTOP fault run (issue 31): a resync loaded a Running job's row, the job ended and its clean-up deleted
    its gang and set `cleaned_up_at`, then the resync's pass found the gang gone and made it again; nothing deleted
    it after. Now such a pass reads the row again before its first create and makes nothing
    (tests/cluster/test_left_behind.py: the same with a job that really ran)."""
    job = world.submit(backend="kai", replicas=2)
    slow = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)  # a resync's row: not ended
    now = timezone.now()
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.SUCCEEDED, finished_at=now, cleaned_up_at=now)

    result = jobs.run_pass(slow)

    assert not any(a.startswith("create ") for a in result.actions)
    assert any(a.startswith("the job is Succeeded since this pass loaded it") for a in result.actions)
    for ref in (KAI_PG, JOB, SERVICE):
        assert world.gang(job, ref) == [], ref.kind
    job.refresh_from_db()
    assert job.phase == GangPhase.SUCCEEDED and job.cleaned_up_at == now  # its clean-up's mark stands: nothing
