"""gangweb's own usage estimate per queue: one parse per distinct spec, the same sums as job by job."""
import pytest

from scheduling.kube.kai_units import RESOURCES
from scheduling.models import GangJob
from scheduling.views.display import requests_of_spec
from scheduling.views.queues import job_usage
from tests import builders

pytestmark = pytest.mark.django_db


def test_usage_counts_every_active_job_and_only_running_ones_as_allocated(api, setup):
    template, queue, cluster = setup
    bodies = [builders.submit_body(template, queue, cluster) for _ in range(3)]
    bodies.append(builders.submit_body(template, queue, cluster, overrides={"podSets": {"worker": {"replicas": 4}}}))
    assert api.post("/api/v1/jobs/bulk/", {"jobs": bodies}, format="json").status_code == 201
    GangJob.objects.filter(name__in=[bodies[0]["name"], bodies[3]["name"]]).update(phase="Running")
    GangJob.objects.filter(name=bodies[1]["name"]).update(phase="Succeeded")  # finished: not counted

    usage = job_usage()[queue.id]
    active = GangJob.objects.exclude(phase="Succeeded")
    expected_requested = {r: sum(requests_of_spec(j.resolved_spec)[r] for j in active) for r in RESOURCES}
    expected_allocated = {r: sum(requests_of_spec(j.resolved_spec)[r] for j in active.filter(phase="Running"))
                          for r in RESOURCES}
    assert usage["jobs"] == 3
    assert usage["requested"] == pytest.approx(expected_requested)
    assert usage["allocated"] == pytest.approx(expected_allocated)
    assert usage["requested"]["cpu"] == pytest.approx(2000 + 2000 + 4000)  # millicores: 2, 2 and 4 pods of 1 CPU
