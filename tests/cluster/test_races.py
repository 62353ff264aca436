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
