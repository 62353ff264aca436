"""The job page shows a pending job's start-time estimate with its evidence, and updates it when a job ends
(computed on read): a cluster of 8 GPUs held by one job that has run 20 of the 60 min similar jobs ran."""
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.choices import GangPhase
from scheduling.models import GangJob, PhaseTransition
from tests import builders

pytestmark = pytest.mark.django_db


def test_the_job_page_shows_the_estimated_start_and_why(ui, admin_user):
    cluster = builders.make_cluster("local", capacity={"nodes": 1, "allocatable": {
        "nvidia.com/gpu": 8, "cpu": 64, "memory": 10**12}})
    team_a = builders.make_queue("team-a", clusters=[cluster])
    template = builders.make_template("gpu", pod_sets=[builders.pod_set(replicas=1, containers=[
        builders.container(gpu=4)])])
    start = timezone.now() - timedelta(hours=3)
    for i in range(5):
        done = builders.make_job(template, team_a, cluster, name=f"done-{i}", user=admin_user)
        PhaseTransition.objects.create(job=done, phase=GangPhase.RUNNING, at=start, source="test")
        PhaseTransition.objects.create(job=done, phase=GangPhase.SUCCEEDED, at=start + timedelta(minutes=60),
                                       source="test")
        GangJob.objects.filter(pk=done.pk).update(phase=GangPhase.SUCCEEDED)
    big = builders.make_job(template, team_a, cluster, name="big", user=admin_user, phase=GangPhase.RUNNING,
                            at=timezone.now() - timedelta(minutes=20, seconds=4), requested_gpu=8)
    waiting = builders.make_job(template, team_a, cluster, name="waiting", user=admin_user, phase=GangPhase.QUEUED)

    page = ui.get(f"/jobs/{waiting.pk}/").content.decode()
    assert '<p id="job-estimate" data-status="estimated">Estimated start: <strong>p50 in 40 min (' in page
    assert "; p90 in 40 min (" in page
    assert ("jobs like big (same template and queue) ran 60 min (p50) over 5 runs and big has run 20 min; first in "
            "line in team-a; needs 4 GPUs, 0 free now, 8 once big ends") in page

    GangJob.objects.filter(pk=big.pk).update(phase=GangPhase.SUCCEEDED)
    live = ui.get(f"/jobs/{waiting.pk}/live/").content.decode()
    assert 'data-status="now"' in live and "could start now: the room it needs is free" in live
    assert 'id="job-estimate"' not in ui.get(f"/jobs/{big.pk}/").content.decode()
