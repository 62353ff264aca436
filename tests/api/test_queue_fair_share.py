"""GET /api/v1/queues/<name>/fair-share/: the model fed with gangweb's own data (cluster capacity, active jobs'
requests, queue policies), per cluster, in a fixed number of queries."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.choices import GangPhase
from tests import builders

pytestmark = pytest.mark.django_db

GPU_JOB = {"podSets": {"worker": {"resources": {"nvidia.com/gpu": "1"}}}}  # 2 replicas: 2 GPUs a job


@pytest.fixture
def teams(admin_user):
    # 18 GPUs, 64 cores, 256 GB of memory.
    cluster = builders.make_cluster("local", capacity={"nodes": 2, "allocatable": {
        "nvidia.com/gpu": 18, "cpu": 64, "memory": 256 * 10**9}, "largest": {}})
    builders.make_cluster("dark")  # capacity never seen
    research = builders.make_queue("research", clusters=[cluster], gpu_quota=18)
    team_a = builders.make_queue("team-a", parent=research, clusters=[cluster], gpu_quota=8,
                                 gpu_over_quota_weight=2)
    team_b = builders.make_queue("team-b", parent=research, clusters=[cluster], gpu_quota=0,
                                 gpu_over_quota_weight=3)
    template = builders.make_template("gpu", pod_sets=[builders.pod_set(containers=[builders.container(gpu=1)])])
    # team-a: 6 running jobs (12 GPUs) and 4 pending (8 GPUs): requests 20, holds 12. team-b: 10 pending (20 GPUs).
    for i in range(6):
        builders.make_job(template, team_a, cluster, name=f"a-run-{i}", user=admin_user, phase=GangPhase.RUNNING)
    for i in range(4):
        builders.make_job(template, team_a, cluster, name=f"a-wait-{i}", user=admin_user, phase=GangPhase.QUEUED)
    for i in range(10):
        builders.make_job(template, team_b, cluster, name=f"b-wait-{i}", user=admin_user)
    return {"cluster": cluster, "team_a": team_a, "team_b": team_b, "template": template, "admin": admin_user}


def test_team_a_is_told_its_share_and_what_it_gives_back(api, teams):
    r = api.get("/api/v1/queues/team-a/fair-share/?cluster=local")
    assert r.status_code == 200
    (local,) = r.data["clusters"]
    gpu = local["resources"]["gpu"]
    # research gets all 18 (quota 18, asks 40); its children: quotas 8 + 0 leave 10, weights 2 : 3 give 4 and 6.
    assert (gpu["quota"], gpu["fair_share"], gpu["allocated"], gpu["requested"]) == (8, 12, 12, 20)
    assert (gpu["borrowed"], gpu["lent"], gpu["idle_after_quotas"], gpu["weight_total"]) == (4, 0, 10, 5)
    assert gpu["text"] == ("team-a holds 12 GPUs: its 8 of quota plus 4 of the 10 idle GPUs, by weight 2 of 5; "
                           "it gives back 4 if team-b asks.")
    assert local["capacity"] == {"gpu": 18, "cpu": 64000, "memory": 256000}
    b = api.get("/api/v1/queues/team-b/fair-share/").data["clusters"]
    assert [c["cluster"] for c in b] == ["local"]  # team-b targets only local
    assert b[0]["resources"]["gpu"]["fair_share"] == 6


def test_a_queue_in_every_cluster_has_no_numbers_where_the_capacity_is_unknown(api, teams):
    builders.make_queue("anywhere")
    r = api.get("/api/v1/queues/anywhere/fair-share/")
    assert [(c["cluster"], c["resources"] is None) for c in r.data["clusters"]] == [("dark", True), ("local", False)]
    assert api.get("/api/v1/queues/anywhere/fair-share/?cluster=nope").status_code == 400


def test_the_fair_share_costs_the_same_queries_with_more_queues_and_jobs(api, teams):
    def count():
        with CaptureQueriesContext(connection) as ctx:
            assert api.get("/api/v1/queues/team-a/fair-share/").status_code == 200
        return len(ctx.captured_queries)

    before = count()
    research = teams["team_a"].parent
    for i in range(20):
        q = builders.make_queue(f"extra-{i}", parent=research, clusters=[teams["cluster"]], gpu_quota=1)
        builders.make_job(teams["template"], q, teams["cluster"], name=f"x-{i}", user=teams["admin"])
    assert count() == before


def test_a_reader_of_team_a_alone_is_not_told_the_siblings_name(teams):
    from rest_framework.test import APIClient

    reader = builders.make_user("ann")
    builders.grant(teams["team_a"], "viewer", user=reader)
    client = APIClient()
    client.force_authenticate(reader)
    gpu = client.get("/api/v1/queues/team-a/fair-share/").data["clusters"][0]["resources"]["gpu"]
    assert gpu["fair_share"] == 12
    assert gpu["text"].endswith("it gives back 4 if another queue asks.")
    assert client.get("/api/v1/queues/team-b/fair-share/").status_code == 404
