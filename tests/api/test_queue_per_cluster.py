"""A queue's use per cluster, in its REST detail (`per_cluster`) and on its page: one row per cluster it takes jobs
on, with in use / quota / limit per resource, the scheduler's report, and its running and waiting jobs; a reader
sees only the clusters they may; the query count does not grow with the jobs."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from scheduling.choices import GangPhase, QueueFamily, SyncState
from scheduling.models import QueueClusterState
from scheduling.services.queues.per_cluster import EVERY_CLUSTER, targeted
from scheduling.services.queues.policies import QueueTree
from tests import builders

pytestmark = pytest.mark.django_db
GIB_IN_MB = 2**30 / 10**6


@pytest.fixture
def world(admin_user, enqueued, queue_syncs):
    """Clusters west and east. org (quota 16 GPUs, limit 24) > vision (west, quota 8 GPUs, 64 cores, limit 12 GPUs)
    and nlp (east); each job asks 4 GPUs, 8 cores, 32 GiB. vision on west: 2 Running, 1 Queued; nlp on east:
    1 Scheduled, 2 Submitted. KAI reports vision holding 8 GPUs on west."""
    west, east = builders.make_cluster("west"), builders.make_cluster("east")
    org = builders.make_queue("org", gpu_quota=16, gpu_limit=24)
    vision = builders.make_queue("vision", parent=org, clusters=[west], gpu_quota=8, gpu_limit=12,
                                 cpu_quota=64000)
    nlp = builders.make_queue("nlp", parent=org, clusters=[east], gpu_quota=8)
    template = builders.make_template("llm", pod_sets=[builders.pod_set(
        "worker", replicas=2, containers=[builders.container(gpu=2, cpu="4", memory="16Gi")])])
    for queue, cluster, phases in ((vision, west, [GangPhase.RUNNING, GangPhase.RUNNING, GangPhase.QUEUED]),
                                   (nlp, east, [GangPhase.SCHEDULED, GangPhase.SUBMITTED, GangPhase.SUBMITTED])):
        for phase in phases:
            builders.make_job(template, queue, cluster, phase=phase, user=admin_user)
    QueueClusterState.objects.create(
        policy=vision, cluster=west, family=QueueFamily.KAI, state=SyncState.IN_SYNC, status_at=timezone.now(),
        status={"allocated": {"gpu": 8, "cpu": 16000, "memory": 64 * GIB_IN_MB}})
    return {"west": west, "east": east, "org": org, "vision": vision, "nlp": nlp, "template": template}


def test_a_leaf_queue_has_a_row_for_its_cluster_with_use_quota_limit_and_jobs(api, world):
    r = api.get("/api/v1/queues/vision/")
    assert r.status_code == 200, r.data
    (row,) = r.data["per_cluster"]
    assert (row["cluster"], row["targeted"], row["jobs"]) == ("west", True, {"running": 2, "waiting": 1})
    # Queue units: GPU devices, CPU millicores, memory MB (as the queue's quota and limit).
    assert row["resources"]["gpu"] == {"quota": 8, "limit": 12, "in_use": 8, "reported": 8, "waiting": 4}
    assert row["resources"]["cpu"] == {"quota": 64000, "limit": -1, "in_use": 16000, "reported": 16000,
                                       "waiting": 8000}
    assert row["resources"]["memory"]["in_use"] == pytest.approx(64 * GIB_IN_MB)


def test_a_parent_queue_has_a_row_per_cluster_its_children_take_jobs_on(api, world):
    rows = {row["cluster"]: row for row in api.get("/api/v1/queues/org/").data["per_cluster"]}
    assert list(rows) == ["east", "west"]
    assert rows["east"]["jobs"] == {"running": 1, "waiting": 2}
    assert rows["east"]["resources"]["gpu"] == {"quota": 16, "limit": 24, "in_use": 4, "reported": None,
                                                "waiting": 8}
    assert rows["west"]["resources"]["gpu"]["in_use"] == 8 and rows["west"]["jobs"]["waiting"] == 1


def test_a_cluster_no_longer_targeted_keeps_its_row_while_the_queue_has_jobs_there(api, world):
    world["vision"].clusters.set([world["east"]])
    rows = {row["cluster"]: row for row in api.get("/api/v1/queues/vision/").data["per_cluster"]}
    assert (rows["west"]["targeted"], rows["west"]["jobs"]["running"]) == (False, 2)
    assert (rows["east"]["targeted"], rows["east"]["jobs"]) == (True, {"running": 0, "waiting": 0})


def test_a_leaf_naming_no_cluster_takes_jobs_everywhere():
    builders.make_cluster("a")
    org = builders.make_queue("o", clusters=[])
    leaf = builders.make_queue("l", parent=org)
    tree = QueueTree.load_rows()
    assert targeted(org, tree, {}) is EVERY_CLUSTER and targeted(leaf, tree, {}) is EVERY_CLUSTER
    assert targeted(org, tree, {leaf.id: {7}}) == {7}


def test_the_queue_page_shows_the_same_rows(client, admin_user, world, api):
    client.force_login(admin_user)
    page = client.get("/queues/org/")
    assert page.status_code == 200
    assert page.context["per_cluster"] == api.get("/api/v1/queues/org/").data["per_cluster"]
    html = page.content.decode()
    west = html[html.index('<tr data-cluster="west">'):]
    west = west[:west.index("</tr>")]
    assert '<td class="num jobs-running">2</td><td class="num jobs-waiting">1</td>' in west
    assert ('<td data-resource="gpu"><span class="in-use">8 GPUs</span> <span class="small muted">of quota 16 GPUs · '
            'limit 24 GPUs</span>') in west
    assert "waiting 4 GPUs" in west and '<span class="in-use">16 CPU cores</span>' in west
    leaf = client.get("/queues/vision/").content.decode()
    assert "reported 8 GPUs · waiting 4 GPUs" in leaf


def test_a_reader_sees_only_the_clusters_they_may(world):
    user = builders.make_user("vic")
    builders.grant(world["vision"], "viewer", user=user)
    client = APIClient()
    client.force_authenticate(user)
    # org is visible to them (an ancestor of their queue), but east is only nlp's cluster: not theirs to see.
    rows = client.get("/api/v1/queues/org/").data["per_cluster"]
    assert [row["cluster"] for row in rows] == ["west"]


def test_the_detail_and_the_page_cost_the_same_queries_for_6_jobs_as_for_60(api, client, admin_user, world):
    client.force_login(admin_user)

    def queries(url, c) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert c.get(url).status_code == 200
        return len(ctx.captured_queries)

    urls = {"api": ("/api/v1/queues/org/", api), "page": ("/queues/org/", client)}
    small = {k: queries(*v) for k, v in urls.items()}
    for i in range(54):
        builders.make_job(world["template"], world["vision" if i % 2 else "nlp"], world["west" if i % 2 else "east"],
                          phase=[GangPhase.RUNNING, GangPhase.QUEUED][i % 2], user=admin_user)
        if i % 9 == 0:
            builders.make_cluster(f"more-{i}")
    assert {k: queries(*v) for k, v in urls.items()} == small
