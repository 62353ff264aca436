"""db.cluster_usage: what gangweb's Scheduled and Running jobs hold in a cluster (the ClusterBusy fact)."""
import pytest

from scheduling.choices import GangPhase as P
from scheduling.db import cluster_usage
from scheduling.models import GangJob
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


def pods_on(*rows):
    return {"pods": [dict(zip(("name", "node", "phase", "pod_set"), r, strict=False)) for r in rows],
            "pod_counts": {"bound": sum(1 for r in rows if r[1])}}


def test_by_node_sums_the_requests_of_gangwebs_bound_unfinished_pods_per_node(setup, admin_user):
    """The template's worker pod asks 1 CPU and 1 GiB: two bound pods on node-a, one on node-b (a row written
    before pods carried their pod set counts as the smallest pod set); finished pods, unbound pods and finished
    jobs hold nothing."""
    template, queue, cluster = setup
    run = builders.make_job(template, queue, cluster, name="run", phase=P.RUNNING, user=admin_user)
    old = builders.make_job(template, queue, cluster, name="old", phase=P.RUNNING, user=admin_user)
    done = builders.make_job(template, queue, cluster, name="done", phase=P.SUCCEEDED, user=admin_user)
    GangJob.objects.filter(pk=run.pk).update(observed=pods_on(
        ("r-0", "node-a", "Running", "worker"), ("r-1", "node-a", "Pending", "worker"),
        ("r-2", "node-b", "Succeeded", "worker"), ("r-3", "", "Pending", "worker")))
    GangJob.objects.filter(pk=old.pk).update(observed=pods_on(("o-0", "node-b", "Running")))
    GangJob.objects.filter(pk=done.pk).update(observed=pods_on(("d-0", "node-c", "Running", "worker")))
    assert cluster_usage.by_node(cluster.id) == {"node-a": {"cpu": 2, "memory": 2 * 2**30},
                                                 "node-b": {"cpu": 1, "memory": 2**30}}


def test_nodes_and_use_is_unknown_until_the_watcher_wrote_the_nodes(setup):
    from django.core.cache import cache

    from scheduling.models import ClusterNodes

    _, _, cluster = setup
    cache.clear()
    assert cluster_usage.nodes_and_use(cluster.id) == (None, {})
    nodes = [{"name": "node-a", "labels": {}, "allocatable": {"nvidia.com/gpu": 8}}]
    ClusterNodes.objects.create(cluster=cluster, nodes=nodes)
    cache.clear()
    assert cluster_usage.nodes_and_use(cluster.id) == (nodes, {})


def test_a_job_leaving_running_is_not_counted_by_the_next_answer_although_the_sum_was_just_remembered(
        setup, admin_user, django_capture_on_commit_callbacks):
    """The sum is remembered 5 s per cluster; a status write that moves a job out of Running (or into it) drops it
    once committed, so an answer made right after counts the cluster as it is now."""
    from scheduling.reconcile import status

    template, queue, cluster = setup
    run = builders.make_job(template, queue, cluster, name="run", phase=P.RUNNING, user=admin_user)
    GangJob.objects.filter(pk=run.pk).update(requested_gpu=16)
    assert cluster_usage.in_use(cluster.id)["nvidia.com/gpu"] == 16
    run.refresh_from_db()
    update = status.StatusUpdate.begin(run)
    update.fail(run, "Evicted", "gangweb ended it")
    with django_capture_on_commit_callbacks(execute=True):
        assert "phase" in status.write(run, update)
    assert cluster_usage.in_use(cluster.id)["nvidia.com/gpu"] == 0


def test_a_write_that_leaves_the_phase_alone_keeps_the_remembered_sum(setup, admin_user,
                                                                      django_capture_on_commit_callbacks):
    from scheduling.reconcile import status

    template, queue, cluster = setup
    run = builders.make_job(template, queue, cluster, name="run", phase=P.RUNNING, user=admin_user)
    GangJob.objects.filter(pk=run.pk).update(requested_gpu=16)
    assert cluster_usage.in_use(cluster.id)["nvidia.com/gpu"] == 16
    GangJob.objects.filter(pk=run.pk).update(requested_gpu=8)  # not a phase change: the sum stays remembered
    run.refresh_from_db()
    update = status.StatusUpdate.begin(run)
    update.say(run, "Cancelling", "deleting the job's cluster objects")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert status.write(run, update) == ["phase_reason", "phase_message"]
    assert callbacks == []
    assert cluster_usage.in_use(cluster.id)["nvidia.com/gpu"] == 16
