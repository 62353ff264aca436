"""services.cluster_usage: what gangweb's Scheduled and Running jobs hold in a cluster (the ClusterBusy fact)."""
import pytest

from scheduling.choices import GangPhase as P
from scheduling.models import GangJob
from scheduling.services import cluster_usage
from tests import builders

pytestmark = pytest.mark.django_db


def test_in_use_sums_the_placed_jobs_of_the_cluster_in_base_units(setup, admin_user):
    template, queue, cluster = setup
    for name, phase in (("run", P.RUNNING), ("sched", P.SCHEDULED), ("wait", P.QUEUED), ("done", P.SUCCEEDED)):
        builders.make_job(template, queue, cluster, name=name, phase=phase, user=admin_user)
    GangJob.objects.filter(name="run").update(requested_gpu=16, requested_cpu_millicores=4500,
                                              requested_memory_bytes=2 * 2**30)
    GangJob.objects.filter(name="sched").update(requested_gpu=8, requested_cpu_millicores=500,
                                                requested_memory_bytes=2**30)
    GangJob.objects.filter(name__in=["wait", "done"]).update(requested_gpu=100)  # not placed: not counted
    assert cluster_usage.in_use(cluster.id) == {"nvidia.com/gpu": 24, "cpu": 5.0, "memory": 3 * 2**30}


def test_in_use_is_remembered_for_a_few_seconds_per_cluster(setup, admin_user, django_assert_num_queries):
    template, queue, cluster = setup
    cluster_usage.in_use(cluster.id)
    with django_assert_num_queries(0):
        assert cluster_usage.in_use(cluster.id) == {"nvidia.com/gpu": 0, "cpu": 0.0, "memory": 0}
