"""`GET /api/v1/clusters/summary/` and the overview's clusters side by side: one service, the same numbers; capacity,
gangweb's use and the schedulers' report, free, waiting jobs; a stale or unreachable cluster is `unknown` and says
why; a reader sees only the clusters they may; the query count does not grow with the jobs."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.html import escape
from rest_framework.test import APIClient

from scheduling.choices import ClusterHealth, GangPhase, QueueFamily, SyncState
from scheduling.models import Cluster, QueueClusterState
from tests import builders

pytestmark = pytest.mark.django_db
GIB = 2**30
MB_PER_GIB = GIB / 10**6  # KAI counts memory in MB (10^6 bytes)


def capacity(nodes, gpus, cpu, memory_gib):
    return {"nodes": nodes, "allocatable": {"nvidia.com/gpu": gpus, "cpu": cpu, "memory": memory_gib * GIB},
            "largest": {}}


@pytest.fixture
def world(admin_user, enqueued, queue_syncs):
    """Two healthy clusters probed just now: west (4 nodes: 32 GPUs, 256 cores, 1,024 GiB) and east (2 nodes: 8 GPUs,
    64 cores, 256 GiB), KAI seen on west. Queue org > team-a (both clusters); each job asks 4 GPUs, 8 cores, 32 GiB
    (2 pods of 2 GPUs, 4 cores, 16 GiB). west: 2 Running, 1 Scheduled, 1 Queued, 1 Succeeded; east: 1 Running,
    1 Submitted, 1 Dispatched. KAI reports team-a holding 12 GPUs, 24 cores, 96 GiB on west (and its parent org the
    same, which must not count twice)."""
    now = timezone.now()
    west = builders.make_cluster("west", health=ClusterHealth.HEALTHY, server_version="v1.37.2", last_probe_at=now,
                                 capacity=capacity(4, 32, 256, 1024), available_backends=["kai-v2alpha2"],
                                 scheduler_presence={"kai": {"read": True, "scheduler": "kai-scheduler",
                                                             "seen_at": now.isoformat(), "by": "Event"}})
    east = builders.make_cluster("east", health=ClusterHealth.HEALTHY, server_version="v1.36.3", last_probe_at=now,
                                 capacity=capacity(2, 8, 64, 256))
    org = builders.make_queue("org", clusters=[west, east])
    team = builders.make_queue("team-a", parent=org, clusters=[west, east])
    template = builders.make_template("llm", pod_sets=[builders.pod_set(
        "worker", replicas=2, containers=[builders.container(gpu=2, cpu="4", memory="16Gi")])])
    for cluster, phases in ((west, [GangPhase.RUNNING, GangPhase.RUNNING, GangPhase.SCHEDULED, GangPhase.QUEUED,
                                    GangPhase.SUCCEEDED]),
                            (east, [GangPhase.RUNNING, GangPhase.SUBMITTED, GangPhase.DISPATCHED])):
        for phase in phases:
            builders.make_job(template, team, cluster, phase=phase, user=admin_user)
    held = {"allocated": {"gpu": 12, "cpu": 24000, "memory": 96 * MB_PER_GIB}}
    for policy in (org, team):
        QueueClusterState.objects.create(policy=policy, cluster=west, family=QueueFamily.KAI,
                                         state=SyncState.IN_SYNC, status=held, status_at=now)
    return {"west": west, "east": east, "team": team, "template": template, "org": org}


def by_name(answer):
    return {c["name"]: c for c in answer["clusters"]}


def test_each_cluster_says_its_capacity_use_free_and_waiting_jobs(api, world):
    r = api.get("/api/v1/clusters/summary/")
    assert r.status_code == 200, r.data
    assert r.data["units"] == {"gpu": "GPUs", "cpu": "CPU cores", "memory": "GiB"}
    west, east = by_name(r.data)["west"], by_name(r.data)["east"]
    assert [c["name"] for c in r.data["clusters"]] == ["east", "west"]

    assert west["capacity"] == {"known": True, "message": "", "nodes": 4, "last_known": None,
                                "allocatable": {"gpu": 32, "cpu": 256, "memory": 1024}}
    # 3 placed jobs (2 Running, 1 Scheduled) of 4 GPUs, 8 cores, 32 GiB each; the finished one holds nothing.
    assert west["in_use"]["jobs"] == 3 and west["in_use"]["gangweb"] == {"gpu": 12, "cpu": 24, "memory": 96}
    assert west["free"] == {"gpu": 20, "cpu": 232, "memory": 928} and west["free_is_upper_bound"] is True
    assert west["waiting"] == {"jobs": 1, "requested": {"gpu": 4, "cpu": 8, "memory": 32}}
    # KAI's report of the leaf queue only: the parent's equal figure is not added a second time.
    reported = west["in_use"]["reported"]
    assert (reported["known"], reported["amounts"], reported["by"]) == (
        True, {"gpu": 12, "cpu": 24, "memory": 96}, "KAI queue status")
    assert west["kubernetes_version"] == "v1.37.2" and west["reachability"]["state"] == "reachable"
    assert west["schedulers"]["kai"]["state"] == "seen"

    assert east["capacity"]["allocatable"] == {"gpu": 8, "cpu": 64, "memory": 256}
    assert east["in_use"]["jobs"] == 1 and east["in_use"]["gangweb"] == {"gpu": 4, "cpu": 8, "memory": 32}
    assert east["free"] == {"gpu": 4, "cpu": 56, "memory": 224}
    assert east["waiting"] == {"jobs": 2, "requested": {"gpu": 8, "cpu": 16, "memory": 64}}
    assert east["in_use"]["reported"]["known"] is False
    assert east["in_use"]["reported"]["message"].startswith("unknown: no scheduler here has reported")
    assert east["schedulers"] == {} and east["kubernetes_version"] == "v1.36.3"


def test_the_overview_shows_the_same_figures_side_by_side(client, admin_user, world, api):
    answer = by_name(api.get("/api/v1/clusters/summary/").data)
    client.force_login(admin_user)
    page = client.get("/")
    assert page.status_code == 200
    shown = {c["name"]: c for c in page.context["clusters"]}
    for name in ("west", "east"):
        assert {k: shown[name][k] for k in answer[name]} == answer[name]  # the same service's answer
    html = page.content.decode()
    west = html[html.index('id="cluster-west"'):]
    west = west[:west.index("</article>")]
    gpu = west[west.index('<tr data-resource="gpu">'):]
    gpu = gpu[:gpu.index("</tr>")]
    assert '<td class="num capacity">32</td>' in gpu
    assert '<td class="num in-use">12</td>' in gpu
    assert '<td class="num free">≤ 20</td>' in gpu and '<td class="num waiting">4</td>' in gpu
    memory = west[west.index('<tr data-resource="memory"><th scope="row">Memory, GiB</th>'):]
    assert '<td class="num capacity">1,024</td>' in memory and '<td class="num free">≤ 928</td>' in memory
    assert "3 running</a>" in west and "1 waiting</a>" in west
    assert "kai: API served · scheduler seen" in west and "Kubernetes <span class=\"mono\">v1.37.2</span>" in west
    east = html[html.index('id="cluster-east"'):]
    east = east[:east.index("</article>")]
    assert '<td class="num free">≤ 4</td>' in east and '<td class="num waiting">8</td>' in east
    assert "2 waiting</a>" in east and "Reported use unknown: no scheduler here has reported" in east
    assert ("The schedulers report 12 GPUs, 24 CPU cores and 96 GiB allocated to gangweb's queues (KAI queue "
            "status, ") in west


@pytest.mark.parametrize("case", ["stale", "unreachable", "nodes never listed"])
def test_a_cluster_gangweb_cannot_know_now_is_unknown_and_says_why(api, client, admin_user, world, case):
    west = world["west"]
    long_ago = timezone.now() - timedelta(minutes=20)
    changes = {
        "stale": {"last_probe_at": long_ago},
        "unreachable": {"health": ClusterHealth.UNREACHABLE, "health_message": "connection refused (10.0.0.9:6443)"},
        "nodes never listed": {"capacity": {}},
    }[case]
    Cluster.objects.filter(pk=west.pk).update(**changes)
    r = api.get("/api/v1/clusters/summary/")
    assert r.status_code == 200
    summary = by_name(r.data)["west"]
    expected = {
        "stale": ("stale", "unknown: last probed 20 min ago (Healthy); the probe runs every minute, so gangweb's "
                           "worker or its beat is not running",
                  "unknown: gangweb's data of it is stale; the figures are as last listed"),
        "unreachable": ("unreachable", "unreachable at the last probe, 0 s ago: connection refused (10.0.0.9:6443)",
                        "unknown: the cluster is unreachable; the figures are as last listed"),
        "nodes never listed": ("reachable", None, "unknown: gangweb's watcher has not listed this cluster's nodes yet"),
    }[case]
    state, reach_message, capacity_message = expected
    assert summary["reachability"]["state"] == state
    if reach_message:
        assert summary["reachability"]["message"].replace("1 s ago", "0 s ago") == reach_message
    assert (summary["capacity"]["known"], summary["capacity"]["allocatable"], summary["free"]) == (False, None, None)
    assert summary["capacity"]["message"] == capacity_message
    if case != "nodes never listed":
        assert summary["capacity"]["last_known"] == {"nodes": 4, "allocatable": {"gpu": 32, "cpu": 256,
                                                                                  "memory": 1024}}
        assert summary["in_use"]["reported"]["known"] is False and summary["in_use"]["reported"]["amounts"] is None
    # gangweb's own records stay known: its jobs there and what they ask.
    assert summary["in_use"]["gangweb"]["gpu"] == 12 and summary["waiting"]["jobs"] == 1

    client.force_login(admin_user)
    html = client.get("/").content.decode()
    card = html[html.index('id="cluster-west"'):]
    card = card[:card.index("</article>")]
    assert f'<span class="badge r-{state}">{state}</span>' in card
    unknown = '<span class="muted small">unknown</span></td>'
    assert f'<td class="num capacity">{unknown}' in card and f'<td class="num free">{unknown}' in card
    assert escape(f"Capacity {capacity_message}") in card


def test_before_the_first_probe_the_watchers_listing_is_shown_and_reachability_is_unknown(api, world):
    Cluster.objects.filter(pk=world["west"].pk).update(health=ClusterHealth.UNKNOWN, last_probe_at=None)
    west = by_name(api.get("/api/v1/clusters/summary/").data)["west"]
    assert west["reachability"] == {"state": "unknown", "last_probe_at": None,
                                    "message": "unknown: gangweb has not probed this cluster yet"}
    assert west["capacity"]["known"] is True and west["free"]["gpu"] == 20


def test_a_reader_sees_only_the_clusters_their_queues_take_jobs_on(world):
    user = builders.make_user("pin")
    builders.grant(builders.make_queue("pinned", clusters=[world["east"]]), "submitter", user=user)
    client = APIClient()
    client.force_authenticate(user)
    r = client.get("/api/v1/clusters/summary/")
    assert r.status_code == 200 and [c["name"] for c in r.data["clusters"]] == ["east"]
    # Cluster figures are numbers over every job there, never names (as the queue bars and the capacity page).
    assert r.data["clusters"][0]["waiting"]["jobs"] == 2
    assert APIClient().get("/api/v1/clusters/summary/").status_code in (401, 403)


def test_no_cluster_may_take_the_summarys_name(api):
    r = api.post("/api/v1/clusters/", {"name": "summary", "in_cluster": False}, format="json")
    assert r.status_code == 400 and list(r.data) == ["name"], r.data
    assert not Cluster.objects.filter(name="summary").exists()


@pytest.mark.parametrize("allocated", [{"gpu": "lots"}, {"gpu": "inf"}, {"gpu": "nan"}, {"gpu": -4}, "12", None])
def test_a_hostile_scheduler_report_is_not_counted_and_never_a_500(api, world, allocated):
    QueueClusterState.objects.filter(policy=world["team"]).update(status={"allocated": allocated})
    r = api.get("/api/v1/clusters/summary/")
    assert r.status_code == 200
    assert by_name(r.data)["west"]["in_use"]["reported"]["known"] is False


def test_hostile_capacity_figures_read_as_none_and_never_a_500(api, world):
    Cluster.objects.filter(pk=world["west"].pk).update(capacity={"nodes": "four", "allocatable": {
        "nvidia.com/gpu": "inf", "cpu": "lots", "memory": -5}})
    r = api.get("/api/v1/clusters/summary/")
    assert r.status_code == 200
    west = by_name(r.data)["west"]
    assert west["capacity"]["allocatable"] == {"gpu": 0, "cpu": 0, "memory": 0} and west["capacity"]["nodes"] is None
    assert west["free"] == {"gpu": 0, "cpu": 0, "memory": 0}


def test_the_summary_and_the_overview_cost_the_same_queries_for_8_jobs_as_for_80(api, client, admin_user, world):
    client.force_login(admin_user)

    def queries(url, c) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert c.get(url).status_code == 200
        return len(ctx.captured_queries)

    small = {"api": queries("/api/v1/clusters/summary/", api), "page": queries("/", client)}
    for i in range(72):
        builders.make_job(world["template"], world["team"], world["west" if i % 2 else "east"],
                          phase=[GangPhase.RUNNING, GangPhase.QUEUED, GangPhase.SUBMITTED][i % 3], user=admin_user)
        if i % 9 == 0:
            builders.make_cluster(f"more-{i}", capacity=capacity(1, 8, 64, 256))
    large = {"api": queries("/api/v1/clusters/summary/", api), "page": queries("/", client)}
    assert large == small, (small, large)
    # The clusters, gangweb's jobs grouped by cluster, the queue parents, the queue states with a status.
    assert small["api"] == 4, small


NOW = timezone.now()


@pytest.mark.parametrize("health, probed, message, expected", [
    (ClusterHealth.HEALTHY, NOW - timedelta(seconds=30), "", ("reachable", "probed 30 s ago")),
    (ClusterHealth.HEALTHY, NOW + timedelta(seconds=5), "", ("reachable", "probed 0 s ago")),  # a skewed clock
    (ClusterHealth.HEALTHY, NOW - timedelta(hours=3), "", (
        "stale", "unknown: last probed 3 h ago (Healthy); the probe runs every minute, so gangweb's worker or its "
                 "beat is not running")),
    (ClusterHealth.HEALTHY, None, "", ("unknown", "unknown: no probe time recorded")),
    (ClusterHealth.FORBIDDEN, NOW - timedelta(minutes=3), "Unauthorized", (
        "forbidden", "gangweb's credentials were refused at the last probe, 3 min ago: Unauthorized")),
    (ClusterHealth.UNREACHABLE, None, "connection refused", ("unreachable",
                                                             "unreachable at the last probe: connection refused")),
    (ClusterHealth.UNKNOWN, None, "", ("unknown", "unknown: gangweb has not probed this cluster yet")),
])
def test_reachability_reads_the_last_probe_and_its_age(health, probed, message, expected):
    from scheduling.services.clusters.summary import reachability

    found = reachability(Cluster(name="c", health=health, last_probe_at=probed, health_message=message), NOW)
    assert (found["state"], found["message"]) == expected
