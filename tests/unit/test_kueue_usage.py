"""A Kueue-backed queue's usage, borrowed amounts and fair share come from its ClusterQueue's and Cohort's status;
the submit-time limit check reads the ClusterQueue's reserved quota and says so."""
import html

import pytest
from django.utils import timezone

from scheduling.choices import GangPhase, SyncState
from scheduling.kube import kueue_status
from scheduling.models import GangJob, QueueClusterState
from scheduling.queueing.tree import QueueTree
from scheduling.services.queues import allocation, kueue_usage, limits
from tests import builders

# A ClusterQueue (nominal 4 GPUs, borrowing limit 4) holding two 3-GPU Workloads, one borrowing, fair sharing on.
CQ_STATUS = {
    "conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads",
                    "lastTransitionTime": "2026-12-06T13:00:00Z"}],
    "flavorsReservation": [{"name": "gangweb-default", "resources": [
        {"name": "cpu", "total": "6", "borrowed": "0"},
        {"name": "memory", "total": "48Gi", "borrowed": "0"},
        {"name": "nvidia.com/gpu", "total": "6", "borrowed": "2"}]}],
    "flavorsUsage": [{"name": "gangweb-default", "resources": [
        {"name": "cpu", "total": "3", "borrowed": "0"},
        {"name": "memory", "total": "24Gi", "borrowed": "0"},
        {"name": "nvidia.com/gpu", "total": "3", "borrowed": "0"}]}],
    "pendingWorkloads": 1, "reservingWorkloads": 2, "admittedWorkloads": 1,
    "fairSharing": {"weightedShare": 500},
}


def test_a_cluster_queue_status_in_queue_units():
    assert kueue_status.cluster_queue(CQ_STATUS) == {
        "allocated": {"gpu": 6.0, "cpu": 6000, "memory": 51540},
        "borrowed": {"gpu": 2.0, "cpu": 0, "memory": 0},
        "admitted_usage": {"gpu": 3.0, "cpu": 3000, "memory": 25770},
        "admitted_borrowed": {"gpu": 0.0, "cpu": 0, "memory": 0},
        "pending": 1, "reserving": 2, "admitted": 1, "weighted_share": 500}


@pytest.mark.parametrize("status,expected", [
    ({"fairSharing": {"weightedShare": 0}}, {"pending": None, "reserving": None, "admitted": None,
                                             "weighted_share": 0}),  # a Cohort: its fair share only
    ({"flavorsReservation": "x", "pendingWorkloads": -1, "fairSharing": {"weightedShare": "9"}},
     {"pending": None, "reserving": None, "admitted": None, "weighted_share": None}),
    ({"flavorsReservation": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "total": "lots"}]}]},
     {"allocated": {"gpu": 0, "cpu": 0, "memory": 0}, "borrowed": {"gpu": 0, "cpu": 0, "memory": 0},
      "pending": None, "reserving": None, "admitted": None, "weighted_share": None}),
])
def test_hostile_or_partial_statuses(status, expected):
    assert kueue_status.cluster_queue(status) == expected


def test_the_fair_share_in_words():
    assert kueue_status.share_words(500) == ("borrowing: 0.5 of what the cohort can lend, divided by its weight "
                                             "(Kueue's weighted share 500)")
    assert kueue_status.share_words(None).startswith("unknown: Kueue reports no fair share")


@pytest.fixture
def kueue_queue(db):
    cluster = builders.make_cluster("local")
    queue = builders.make_queue("team-a", clusters=[cluster], gpu_quota=4, gpu_limit=8)
    state = QueueClusterState.objects.create(policy=queue, cluster=cluster, family="kueue", state=SyncState.IN_SYNC,
                                             status=CQ_STATUS, status_at=timezone.now())
    return cluster, queue, state


def test_the_queue_answer_shows_kueues_reserved_borrowed_and_fair_share(kueue_queue):
    _, _, state = kueue_queue
    got = kueue_usage.kueue_payload(state)
    assert got["usage"]["gpu"] == {"allocated": 6, "borrowed": 2, "admitted": 3}
    assert got["workloads"] == {"pending": 1, "reserving": 2, "admitted": 1}
    assert got["fair_share"]["weighted_share"] == 500
    assert got["text"] == ("Kueue's ClusterQueue status: 6 GPUs reserved (2 GPUs borrowed from the cohort), 6 CPU "
                           "cores reserved, 48 GiB reserved; workloads: 1 admitted, 1 pending")


def test_the_limit_check_of_a_kueue_job_reads_the_cluster_queue_and_says_so(kueue_queue, admin_user):
    cluster, queue, _ = kueue_queue
    tmpl = builders.make_template(backend="k8s-workload", pod_sets=[builders.pod_set(
        replicas=1, containers=[builders.container(gpu=3, cpu="1")])])
    job = builders.make_job(tmpl, queue, cluster, phase=GangPhase.QUEUED, user=admin_user)
    spec = {**job.resolved_spec, "backend": "kueue"}  # the family's plugin is registered by its own branch
    GangJob.objects.filter(pk=job.pk).update(resolved_spec=spec)
    reading = allocation.Allocations({queue.id}, {cluster.id}).of("kueue", queue.id, cluster.id)
    assert (reading.source, reading.allocated["gpu"]) == ("kueue", 6.0)
    (warning,) = limits.check_job_limits(queue, cluster, spec, QueueTree.load_rows(),
                                         allocation.Allocations({queue.id}, {cluster.id}))
    assert (warning["source"], warning["allocated"], warning["requested"], warning["limit"]) == ("kueue", 6, 3, 8)
    assert warning["message"] == ("queue 'team-a' in cluster 'local': Kueue's ClusterQueue status says 6 of 8 GPUs "
                                  "allocated (gpu_limit); this job's 3 GPUs wait until enough is freed")


def test_a_kueue_queue_that_has_not_reported_falls_back_to_gangwebs_count(kueue_queue):
    cluster, queue, state = kueue_queue
    QueueClusterState.objects.filter(pk=state.pk).update(status={"fairSharing": {"weightedShare": 0}})
    reading = allocation.Allocations({queue.id}, {cluster.id}).of("kueue", queue.id, cluster.id)
    assert (reading.source, reading.allocated["gpu"]) == ("gangweb", 0.0)


def test_the_queue_syncs_stored_shape_reads_the_same():
    """reconcile/kueue_desired.py `status_payload` keeps the raw lists beside its own totals."""
    stored = {"kind": "ClusterQueue", "pending_workloads": 1, "reserving_workloads": 2, "admitted_workloads": 1,
              "weighted_share": 500, "active": "True", "active_reason": "Ready",
              "flavors_reservation": CQ_STATUS["flavorsReservation"], "flavors_usage": CQ_STATUS["flavorsUsage"],
              "allocated": {"gpu": 3.0, "cpu": 3000, "memory": 25770}, "reserved": {"gpu": 6.0},
              "borrowed": {"gpu": 0.0}}
    assert kueue_status.normalized(stored) == kueue_status.cluster_queue(CQ_STATUS)
    assert kueue_status.normalized({"kind": "Cohort", "weighted_share": 0}) == {
        "pending": None, "reserving": None, "admitted": None, "weighted_share": 0}
    assert kueue_status.normalized({"kind": "Cohort", "weighted_share": None})["weighted_share"] is None


def test_the_queue_page_shows_kueues_report(kueue_queue, client, admin_user):
    client.force_login(admin_user)
    page = client.get("/queues/team-a/").content.decode()
    section = html.unescape(page.split('id="h-kueue"')[1].split("</section>")[0])
    assert ("Kueue's ClusterQueue status: 6 GPUs reserved (2 GPUs borrowed from the cohort), 6 CPU cores reserved, "
            "48 GiB reserved; workloads: 1 admitted, 1 pending. Fair share: borrowing: 0.5 of what the cohort can "
            "lend, divided by its weight (Kueue's weighted share 500).") in section
    assert '<tr data-resource="gpu"><th scope="row">gpu</th><td>6 GPUs</td><td>2 GPUs</td><td>3 GPUs</td></tr>' in \
        section
