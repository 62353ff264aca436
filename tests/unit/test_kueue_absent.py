"""A Kueue job's why-pending says so when Kueue's manager is not seen acting on the cluster (its Lease not renewed:
stopped, hung): Kueue's last words on the Workload are then as of that time, and nothing is admitted until it runs
again (issue 37's hostile pass: the manager SIGSTOPped while a job waits)."""
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.backends.kueue_v1beta2 import KueueV1beta2
from scheduling.models import Cluster, GangJob
from scheduling.reconcile import names, status
from tests import builders
from tests.kube_objects import at

pytestmark = pytest.mark.django_db
LEASE = "Lease kueue-system/c1f6bfd2.kueue.x-k8s.io"
PENDING = ("couldn't assign flavors to pod set worker: insufficient quota for nvidia.com/gpu in flavor "
           "gangweb-default, previously considered podsets requests (1) + current podset request (2) > maximum "
           "capacity (2)")


def waiting_job(setup, user, seen_ago: float | None):
    template, queue, cluster = setup
    presence = {"kueue": {"scheduler": "", "read": seen_ago is not None, "by": LEASE,
                          "seen_at": (timezone.now() - timedelta(seconds=seen_ago or 0)).isoformat()}}
    Cluster.objects.filter(pk=cluster.pk).update(scheduler_presence=presence)
    job = GangJob.objects.select_related("cluster", "queue").get(
        pk=builders.make_job(template, queue, cluster, user=user).pk)
    workload = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": names.gang_name(job.name, job.uid, 0), "namespace": job.namespace,
                             "uid": "wl-uid", "creationTimestamp": at(1)},
                "spec": {"queueName": queue.name, "podSets": []},
                "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                           "message": PENDING, "lastTransitionTime": at(3)}]}}
    status.apply_observation(job, KueueV1beta2(), [workload], [], [])
    return GangJob.objects.get(pk=job.pk)


def test_kueue_not_seen_for_ten_minutes_leads_the_why_pending_of_its_waiting_job(setup, admin_user, settings):
    settings.GANGWEB_SCHEDULER_SEEN_WITHIN_SECONDS = 300
    row = waiting_job(setup, admin_user, seen_ago=600)
    why = row.why_pending
    assert [f["code"] for f in why["blocking"]][0] == "QueueManagerNotSeen"
    assert why["blocking"][0]["message"] == (
        f"Kueue's manager has not been seen acting on cluster {row.cluster.name} for 10 min (last seen by {LEASE}): "
        "what it last said below is as of then, and nothing is admitted until it runs again")
    assert why["summary"].startswith("Kueue's manager has not been seen acting on cluster")
    assert "3 GPUs requested, 2 available within the limit, 1 more needed" in why["summary"]  # Kueue's words kept
    assert row.phase_reason == "Pending"


@pytest.mark.parametrize("seen_ago", [30, None])  # None: the probe could not read it
def test_kueue_seen_lately_or_its_presence_unknown_adds_nothing(setup, admin_user, settings, seen_ago):
    settings.GANGWEB_SCHEDULER_SEEN_WITHIN_SECONDS = 300
    row = waiting_job(setup, admin_user, seen_ago)
    codes = [f["code"] for f in row.why_pending["blocking"]]
    assert "QueueManagerNotSeen" not in codes and codes == ["KueueQuotaExceeded"]
