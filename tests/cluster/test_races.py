"""Races between passes of one job: a cancel that lands while a slower pass is dispatching the job."""
from __future__ import annotations

import pytest

from scheduling.backends import kai_v2alpha2
from scheduling.choices import GangPhase
from scheduling.kube.objects import JOB, POD, SERVICE
from scheduling.models import GangJob
from scheduling.reconcile import jobs
from scheduling.services import jobs as job_service

from .reconcile_support import wait_for

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

    for ref in (KAI_PG, JOB, SERVICE):
        assert live(world.gang(job, ref)) == [], ref.kind
    job.refresh_from_db()
    assert job.phase == GangPhase.CANCELLED
    assert list(job.transitions.values_list("phase", flat=True)).count(GangPhase.CANCELLED) == 1
    if not dispatched:
        # No backend is ever recorded on a cancelled job, and no pass creates without one: pass A created nothing.
        assert job.backend_plugin == "" and job.cleaned_up_at is not None
        for ref in (KAI_PG, JOB, SERVICE, POD):
            assert world.gang(job, ref) == [], ref.kind
        return
    assert job.cleaned_up_at is None  # so the resync keeps looking until everything is really gone

    wait_for(lambda: world.reconcile(job) and GangJob.objects.get(pk=job.pk).cleaned_up_at, 60, "the cleanup")


def test_a_pass_that_recreates_a_job_which_ended_meanwhile_leaves_it_to_its_clean_up(world):
    """The SIGSTOP fault run (issue 31): a resync loaded a Running job's row, the job ended and its clean-up deleted
    its gang and set `cleaned_up_at`, then the resync's pass found the gang gone and made it again; nothing deleted
    it after. Now such a pass clears `cleaned_up_at`, so the next clean-up or resync takes the job."""
    from django.utils import timezone

    from scheduling.reconcile import resync

    job = world.submit(backend="kai", replicas=2)
    slow = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)  # a resync's row: not ended
    now = timezone.now()
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.SUCCEEDED, finished_at=now, cleaned_up_at=now)

    result = jobs.run_pass(slow)

    assert any(a.startswith("create ") for a in result.actions)  # it did make the gang again
    assert any("meanwhile" in a for a in result.actions)
    job.refresh_from_db()
    assert job.phase == GangPhase.SUCCEEDED and job.cleaned_up_at is None
    assert live(world.gang(job, KAI_PG))  # what it made is there, and the job is due for its clean-up:
    assert job in resync.jobs_to_resync(world.cluster)  # Succeeded: due because cleaned_up_at is empty again
