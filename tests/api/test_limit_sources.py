"""The submit-time limit check reads the allocation the job's own scheduler reports (KAI or Volcano Queue status),
else gangweb's count of its running jobs, and says which it used; the amounts are in one unit per resource (GPUs,
CPU cores, GiB) in the API's fields, its sentence and the page (docs/queues.md "Job submit against queue limits")."""
import re

import pytest

from scheduling.choices import GangPhase, SyncState
from scheduling.models import QueueClusterState
from tests import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster():
    return builders.make_cluster("local")


def template(backend, gpu=0, cpu="1"):
    return builders.make_template(backend=backend, pod_sets=[builders.pod_set(
        replicas=1, containers=[builders.container(gpu=gpu or None, cpu=cpu)])])


def over_limit(response) -> list[dict]:
    assert response.status_code == 201, response.data
    return [w for w in response.data["warnings"] if w["code"] == "OverQueueLimit"]


def test_a_workload_api_queue_warns_from_gangwebs_count_of_its_running_jobs(api, admin_user, cluster):
    """kube-scheduler reports nothing per queue; KAI's status (of KAI jobs only) must not stand in for it."""
    queue = builders.make_queue("team-a", clusters=[cluster], gpu_limit=8)
    QueueClusterState.objects.create(policy=queue, cluster=cluster, state=SyncState.IN_SYNC,
                                     status={"allocated": {"gpu": 0, "cpu": 0, "memory": 0}})
    builders.make_job(template("k8s-workload", gpu=4), queue, cluster, phase=GangPhase.RUNNING, user=admin_user)
    builders.make_job(template("k8s-workload", gpu=2), queue, cluster, phase=GangPhase.QUEUED, user=admin_user)
    r = api.post("/api/v1/jobs/", builders.submit_body(template("k8s-workload", gpu=6), queue, cluster),
                 format="json")
    (warning,) = over_limit(r)
    assert {k: warning[k] for k in ("queue", "cluster", "resource", "unit", "limit", "allocated", "requested",
                                    "source")} == {
        "queue": "team-a", "cluster": "local", "resource": "gpu", "unit": "GPUs", "limit": 8, "allocated": 4,
        "requested": 6, "source": "gangweb"}
    assert warning["message"] == ("queue 'team-a' in cluster 'local': gangweb's count of its running jobs says 4 of "
                                  "8 GPUs allocated (gpu_limit); this job's 6 GPUs wait until enough is freed")


def test_an_ancestors_limit_counts_the_running_jobs_of_every_queue_below_it(api, admin_user, cluster):
    dept = builders.make_queue("dept", gpu_limit=8)
    mine = builders.make_queue("team-a", parent=dept, clusters=[cluster])
    sibling = builders.make_queue("team-b", parent=dept, clusters=[cluster])
    builders.make_job(template("coscheduling", gpu=5), sibling, cluster, phase=GangPhase.RUNNING, user=admin_user)
    other = builders.make_cluster("far")
    builders.make_job(template("coscheduling", gpu=3), builders.make_queue("team-c", parent=dept, clusters=[other]),
                      other, phase=GangPhase.RUNNING, user=admin_user)  # another cluster's jobs hold nothing here
    (warning,) = over_limit(api.post("/api/v1/jobs/", builders.submit_body(
        template("coscheduling", gpu=4), mine, cluster), format="json"))
    assert (warning["queue"], warning["allocated"], warning["requested"], warning["source"]) == ("dept", 5, 4,
                                                                                                  "gangweb")
    assert warning["message"].startswith("ancestor queue 'dept' in cluster 'local': gangweb's count of its running "
                                         "jobs says 5 of 8 GPUs allocated")


def test_a_volcano_queue_warns_from_volcanos_own_status(api, admin_user, cluster):
    queue = builders.make_queue("team-a", clusters=[cluster], gpu_limit=8)
    QueueClusterState.objects.create(policy=queue, cluster=cluster, family="volcano", state=SyncState.IN_SYNC,
                                     status={"state": "Open", "allocated": {"gpu": 4, "cpu": 8000, "memory": 0}})
    (warning,) = over_limit(api.post("/api/v1/jobs/", builders.submit_body(template("volcano", gpu=6), queue,
                                                                           cluster), format="json"))
    assert (warning["allocated"], warning["limit"], warning["source"]) == (4, 8, "volcano")
    assert "Volcano's Queue status says 4 of 8 GPUs allocated (gpu_limit)" in warning["message"]


@pytest.mark.parametrize("status", [{}, {"state": "Open", "allocated": {}},
                                    {"allocated": {"gpu": "4"}}, {"allocated": {"gpu": -3}},
                                    {"allocated": "lots"}])
def test_a_volcano_queue_that_reports_nothing_usable_falls_back_to_gangwebs_count(api, admin_user, cluster, status):
    queue = builders.make_queue("team-a", clusters=[cluster], gpu_limit=8)
    QueueClusterState.objects.create(policy=queue, cluster=cluster, family="volcano", state=SyncState.IN_SYNC,
                                     status=status)
    builders.make_job(template("volcano", gpu=3), queue, cluster, phase=GangPhase.SCHEDULED, user=admin_user)
    (warning,) = over_limit(api.post("/api/v1/jobs/", builders.submit_body(template("volcano", gpu=6), queue,
                                                                           cluster), format="json"))
    assert (warning["allocated"], warning["source"]) == (3, "gangweb")


def test_cpu_reads_in_cores_in_the_fields_the_sentence_and_the_page(api, admin_user, client, cluster):
    """The queue's cpu_limit is stored in KAI millicores (8000); the warning says 8 CPU cores everywhere."""
    queue = builders.make_queue("team-a", clusters=[cluster], cpu_limit=8000)
    builders.make_job(template("k8s-workload", cpu="4"), queue, cluster, phase=GangPhase.RUNNING, user=admin_user)
    body = builders.submit_body(template("k8s-workload", cpu="6"), queue, cluster)
    (warning,) = over_limit(api.post("/api/v1/jobs/", body, format="json"))
    assert (warning["unit"], warning["limit"], warning["allocated"], warning["requested"]) == ("CPU cores", 8, 4, 6)
    assert "says 4 of 8 CPU cores allocated (cpu_limit); this job's 6 CPU cores wait" in warning["message"]

    client.force_login(admin_user)
    page = client.post("/submit/", {"template": body["template"], "name": "from-page", "namespace": "default",
                                "queue": "team-a", "cluster": "local"}, follow=True)
    assert page.status_code == 200
    shown = [str(m) for m in page.context["messages"] if "cpu_limit" in str(m)]
    assert shown == [warning["message"]]
    numbers = re.search(r"says (\d+) of (\d+) CPU cores allocated.*job's (\d+) CPU cores", shown[0]).groups()
    assert tuple(map(int, numbers)) == (warning["allocated"], warning["limit"], warning["requested"])
