"""The why-pending sentence of a reconcile error names what happened: a name held by someone else's object is not
an unreachable cluster (issue 37's hostile pass: a Workload made under the job's name before gangweb)."""
import pytest

from scheduling.models import GangJob
from scheduling.reconcile import status
from tests import builders

pytestmark = pytest.mark.django_db
TAKEN = ("Workload ml/train-abcd1234 already exists and belongs to something other than gangweb: gangweb did not "
         "make it (uid 1234), so it is not adopted, counted or deleted.")


@pytest.mark.parametrize("reason, message, http, summary", [
    ("NameConflict", TAKEN, None, TAKEN),
    ("ClusterUnreachable", "connection refused", None, "gangweb cannot reach cluster {cluster}: connection refused"),
    ("Forbidden", "no", 403, "Cluster {cluster} refused the job's objects (HTTP 403, Forbidden): no"),
])
def test_an_error_is_said_for_what_it_is(setup, admin_user, reason, message, http, summary):
    template, queue, cluster = setup
    job = GangJob.objects.select_related("cluster", "queue").get(
        pk=builders.make_job(template, queue, cluster, user=admin_user).pk)
    status.record_error(job, reason, message, http)
    why = GangJob.objects.get(pk=job.pk).why_pending
    assert why["reason"] == reason
    assert why["summary"] == f"{summary.format(cluster=cluster.name).rstrip('.')}. Queue: {queue.name}."
