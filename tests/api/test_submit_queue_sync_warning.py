"""Submit warns (201, `queue_not_in_sync`) when the job's queue object is not in sync in the job's cluster: the KAI
Queue for a KAI job, the Volcano Queue for a Volcano job; nothing for a backend without queue objects."""
import pytest

from scheduling.choices import SyncState
from scheduling.models import GangJob, QueueClusterState
from tests import builders

pytestmark = pytest.mark.django_db


def submit(api, template, queue, cluster, name):
    response = api.post("/api/v1/jobs/", builders.submit_body(template, queue, cluster, name=name), format="json")
    assert response.status_code == 201, response.data
    return [w for w in response.data["warnings"] if w["code"] == "queue_not_in_sync"]


@pytest.mark.parametrize("backend", ["kai", "volcano"])
def test_a_queue_whose_object_is_in_error_gets_a_warning_naming_queue_cluster_and_cause(api, backend):
    cluster = builders.make_cluster("east")
    queue = builders.make_queue("team-a", clusters=[cluster])
    template = builders.make_template(f"t-{backend}", backend=backend)
    states = QueueClusterState.objects.filter(family=backend)
    states.create(policy=queue, cluster=cluster, family=backend, state=SyncState.ERROR,
                  message="create: 403 Forbidden: denied by policy queues-need-a-label")
    [warning] = submit(api, template, queue, cluster, "first")
    assert warning["field"] == "queue"
    assert (warning["queue"], warning["cluster"], warning["state"]) == ("team-a", "east", SyncState.ERROR)
    assert "queue 'team-a' is not in sync in cluster east" in warning["message"]
    assert "403 Forbidden: denied by policy queues-need-a-label" in warning["message"]
    assert GangJob.objects.filter(name="first").exists()  # accepted: the job waits for the queue

    states.filter(policy=queue).update(state=SyncState.PENDING, message="")
    [warning] = submit(api, template, queue, cluster, "second")
    assert warning["state"] == SyncState.PENDING

    states.filter(policy=queue).update(state=SyncState.IN_SYNC)
    assert submit(api, template, queue, cluster, "third") == []


def test_only_the_object_the_jobs_scheduler_reads_counts(api):
    cluster = builders.make_cluster("east")
    queue = builders.make_queue("team-a", clusters=[cluster])
    other = builders.make_cluster("west")
    QueueClusterState.objects.create(policy=queue, cluster=cluster, state=SyncState.ERROR, message="kai broken")
    QueueClusterState.objects.create(policy=queue, cluster=other, family="volcano", state=SyncState.ERROR,
                                     message="elsewhere")
    volcano = builders.make_template("t-volcano", backend="volcano")
    plain = builders.make_template("t-plain", backend="k8s-workload")
    assert submit(api, volcano, queue, cluster, "v") == []  # its Volcano Queue is fine here; KAI's is not its own
    assert submit(api, plain, queue, cluster, "p") == []  # the default scheduler has no queue object
