"""The queue tree, per-cluster sync state and usage history in the API, and the queue-limit check at submit."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduling.choices import SyncState
from scheduling.models import GangJob, QueueClusterState, QueuePolicy, QueueUsageSample
from tests import builders

pytestmark = pytest.mark.django_db


def status(gpu=0, cpu="0", memory="0"):
    """A Queue status as KAI's queue controller writes it, already converted to KAI units by the sync."""
    from scheduling.kube.kai_units import status_amounts

    amounts = status_amounts({"nvidia.com/gpu": str(gpu), "cpu": cpu, "memory": memory})
    return {"allocated": amounts, "requested": amounts, "child_queues": []}


def three_levels(cluster):
    dept = builders.make_queue("dept", gpu_quota=8, gpu_limit=12, clusters=[cluster])
    team_a = builders.make_queue("team-a", parent=dept, gpu_quota=4, clusters=[cluster])
    builders.make_queue("team-b", parent=dept, gpu_quota=4, clusters=[cluster])
    builders.make_queue("proj", parent=team_a, gpu_quota=2, gpu_limit=4, clusters=[cluster])
    return dept


def test_tree_shows_quota_limit_allocated_and_requested_per_resource(api):
    cluster = builders.make_cluster("local")
    three_levels(cluster)
    QueueClusterState.objects.create(policy_id=QueuePolicy.objects.get(name="proj").id, cluster=cluster,
                                     state=SyncState.IN_SYNC, status=status(gpu=2, cpu="3500m", memory="8Gi"),
                                     status_at=timezone.now())
    r = api.get("/api/v1/queues/tree/")
    assert r.status_code == 200
    (dept,) = r.data["roots"]
    assert [c["name"] for c in dept["children"]] == ["team-a", "team-b"]
    proj = dept["children"][0]["children"][0]
    assert (proj["name"], proj["depth"], proj["leaf"], proj["parent"]) == ("proj", 2, True, "team-a")
    assert proj["resources"]["gpu"] | {} == {"unit": "devices", "quota": 2.0, "limit": 4.0, "over_quota_weight": 1.0,
                                             "quota_display": "2", "limit_display": "4", "allocated": 2.0,
                                             "requested": 2.0, "estimated_allocated": 0.0,
                                             "estimated_requested": 0.0}
    assert proj["resources"]["cpu"]["allocated"] == 3500
    assert proj["resources"]["memory"]["allocated"] == 8590  # 8Gi = 8,589,934,592 bytes, rounded up to MB
    assert proj["sync"][0]["state"] == SyncState.IN_SYNC
    assert dept["resources"]["gpu"]["allocated"] is None  # no status read yet
    assert [w["code"] for w in dept["children"][1]["warnings"]] == ["UnlimitedUnderFiniteParent"]


def test_tree_takes_a_fixed_number_of_queries(api):
    cluster = builders.make_cluster("local")
    three_levels(cluster)
    with CaptureQueriesContext(connection) as small:
        api.get("/api/v1/queues/tree/")
    parent = QueuePolicy.objects.get(name="team-b")
    for i in range(20):
        q = builders.make_queue(f"extra-{i}", parent=parent, clusters=[cluster])
        QueueClusterState.objects.create(policy=q, cluster=cluster, status=status(gpu=1))
    with CaptureQueriesContext(connection) as big:
        api.get("/api/v1/queues/tree/")
    print("tree queries:", len(big))
    assert len(big) == len(small) <= 6


def test_depth_0_gives_the_top_level_and_parent_gives_one_queues_children(api):
    cluster = builders.make_cluster("local")
    three_levels(cluster)
    builders.make_queue("other", clusters=[cluster])
    top = api.get("/api/v1/queues/tree/?depth=0").data["roots"]
    assert [(n["name"], n["children_count"], n["children"], n["leaf"]) for n in top] == [
        ("dept", 2, [], False), ("other", 0, [], True)]
    kids = api.get("/api/v1/queues/tree/?parent=dept&depth=0").data["roots"]
    assert [(n["name"], n["depth"], n["path"], n["children_count"]) for n in kids] == [
        ("team-a", 1, ["dept"], 1), ("team-b", 1, ["dept"], 0)]
    deep = api.get("/api/v1/queues/tree/?parent=dept&depth=1").data["roots"]
    assert [c["name"] for c in deep[0]["children"]] == ["proj"]
    assert deep[0]["children"][0]["path"] == ["dept", "team-a"]


@pytest.mark.parametrize("query, field", [("depth=-1", "depth"), ("depth=deep", "depth"), ("depth=101", "depth"),
                                          ("parent=nope", "parent"), ("cluster=nope", "cluster")])
def test_bad_tree_parameters_are_a_400_naming_the_field(api, query, field):
    builders.make_queue("dept")
    r = api.get(f"/api/v1/queues/tree/?{query}")
    assert r.status_code == 400 and field in r.data, r.data


def test_the_tree_carries_gangwebs_estimate_next_to_the_scheduler_report(api, admin_user):
    template, cluster = builders.make_template("llm"), builders.make_cluster("local")
    dept = three_levels(cluster)
    proj = QueuePolicy.objects.get(name="proj")
    builders.make_job(template, proj, cluster, phase="Running", user=admin_user)
    (node,) = api.get("/api/v1/queues/tree/").data["roots"]
    assert node["id"] == dept.id
    # 2 pods of 1 CPU, counted in proj and rolled up to team-a and dept; nothing reported by a scheduler.
    assert (node["resources"]["cpu"]["estimated_allocated"], node["resources"]["cpu"]["allocated"]) == (2000, None)
    assert (node["jobs"], node["subtree_jobs"]) == (0, 1)


def test_one_queues_children_take_a_fixed_number_of_queries(api):
    cluster = builders.make_cluster("local")
    three_levels(cluster)
    with CaptureQueriesContext(connection) as small:
        assert api.get("/api/v1/queues/tree/?parent=dept&depth=0").status_code == 200
    parent = QueuePolicy.objects.get(name="dept")
    for i in range(20):
        q = builders.make_queue(f"extra-{i}", parent=parent, clusters=[cluster])
        QueueClusterState.objects.create(policy=q, cluster=cluster, status=status(gpu=1))
    with CaptureQueriesContext(connection) as big:
        r = api.get("/api/v1/queues/tree/?parent=dept&depth=0")
    assert len(r.data["roots"]) == 22
    assert len(big) == len(small) <= 6


def test_queue_list_takes_a_fixed_number_of_queries(api):
    cluster = builders.make_cluster("local")
    three_levels(cluster)
    with CaptureQueriesContext(connection) as small:
        assert api.get("/api/v1/queues/").status_code == 200
    for i in range(15):
        builders.make_queue(f"extra-{i}", clusters=[cluster])
    with CaptureQueriesContext(connection) as big:
        r = api.get("/api/v1/queues/")
    assert r.data["count"] == 19
    assert len(big) == len(small)


def test_detail_shows_sync_state_drift_and_status_per_cluster(api):
    a, b = builders.make_cluster("east"), builders.make_cluster("west")
    q = builders.make_queue("team", gpu_quota=4, clusters=[a, b])
    now = timezone.now()
    QueueClusterState.objects.create(policy=q, cluster=a, state=SyncState.IN_SYNC, status=status(gpu=1.5),
                                     status_at=now, last_synced_at=now)
    QueueClusterState.objects.create(
        policy=q, cluster=b, state=SyncState.DRIFTED, last_synced_at=now, last_drift_at=now,
        last_drift=[{"field": "resources.gpu.quota", "expected": 4, "found": 6}], message="edited in the cluster")
    r = api.get("/api/v1/queues/team/")
    assert [(s["cluster"], s["state"]) for s in r.data["sync"]] == [("east", "InSync"), ("west", "Drifted")]
    assert r.data["sync"][0]["status"]["allocated"]["gpu"] == 1.5
    assert r.data["sync"][1]["last_drift"] == [{"field": "resources.gpu.quota", "expected": 4, "found": 6}]


def test_usage_history_filters_by_cluster_and_time(api):
    a, b = builders.make_cluster("east"), builders.make_cluster("west")
    q = builders.make_queue("team", clusters=[a, b])
    start = timezone.now() - timedelta(hours=1)
    for i in range(3):
        QueueUsageSample.objects.create(policy=q, cluster=a, at=start + timedelta(minutes=10 * i), allocated_gpu=i)
    QueueUsageSample.objects.create(policy=q, cluster=b, at=start, allocated_gpu=7)
    r = api.get("/api/v1/queues/team/usage/", {"cluster": "east"})
    assert [s["allocated_gpu"] for s in r.data["samples"]] == [0, 1, 2]
    since = (start + timedelta(minutes=5)).isoformat()
    r = api.get("/api/v1/queues/team/usage/", {"cluster": "east", "since": since})
    assert [s["allocated_gpu"] for s in r.data["samples"]] == [1, 2]
    assert api.get("/api/v1/queues/team/usage/", {"since": "yesterday"}).status_code == 400
    # shaped like a date-time but naming no such day or hour (Django's parser raises there: it was a 500)
    for key, value in (("since", "2026-13-45T00:00:00"), ("since", "2026-02-30T10:00:00"),
                       ("until", "2026-12-01T25:00:00")):
        r = api.get("/api/v1/queues/team/usage/", {key: value})
        assert (r.status_code, r.data) == (400, {key: [f"'{value}' is not an ISO 8601 date-time"]}), r.content


# --- submit against the queue's limits (KAI checks the queue and every ancestor) ---------------------------------

def gpu_job(setup, replicas, gpu, queue=None):
    template, leaf, cluster = setup
    tmpl = builders.make_template(pod_sets=[builders.pod_set(replicas=replicas,
                                                             containers=[builders.container(gpu=gpu)])])
    return builders.submit_body(tmpl, queue or leaf, cluster)


def test_a_job_over_its_queue_limit_is_refused_with_the_numbers(api, setup):
    _, leaf, _ = setup
    leaf.gpu_limit = 4
    leaf.save()
    r = api.post("/api/v1/jobs/", gpu_job(setup, replicas=2, gpu=4), format="json")
    assert r.status_code == 400
    assert "job requests 8 GPUs; queue 'team-a' has gpu_limit 4 GPUs" in r.data["queue"][0]
    assert GangJob.objects.count() == 0


@pytest.mark.parametrize("backend, words", [
    ("kai", "so KAI can never schedule it (OverLimit)"),
    ("volcano", "so Volcano can never schedule it (the limit is its Volcano Queue's capability)"),
    ("k8s-workload", "so it can never run in this queue (gangweb holds every job to its queue's limits: "
                     "kube-scheduler has no queues)"),
    ("coscheduling", "so it can never run in this queue (gangweb holds every job to its queue's limits: "
                     "the scheduler-plugins scheduler has no queues)"),
])
def test_the_over_limit_refusal_names_what_enforces_the_limit_for_the_jobs_backend(api, setup, backend, words):
    """Only a KAI job is refused by KAI: on the Workload API, coscheduling or Volcano the message names theirs."""
    _, leaf, cluster = setup
    leaf.gpu_limit = 4
    leaf.save()
    tmpl = builders.make_template(backend=backend, pod_sets=[builders.pod_set(replicas=2,
                                                                              containers=[builders.container(gpu=4)])])
    r = api.post("/api/v1/jobs/", builders.submit_body(tmpl, leaf, cluster), format="json")
    assert r.status_code == 400, r.data
    assert r.data["queue"] == [f"job requests 8 GPUs; queue 'team-a' has gpu_limit 4 GPUs, {words}"]
    assert GangJob.objects.count() == 0


def test_a_job_over_an_ancestor_limit_is_refused(api, setup):
    _, leaf, cluster = setup
    dept = builders.make_queue("dept", gpu_limit=6)
    leaf.parent = dept
    leaf.save()
    r = api.post("/api/v1/jobs/", gpu_job(setup, replicas=2, gpu=4), format="json")
    assert r.status_code == 400
    assert "ancestor queue 'dept' has gpu_limit 6 GPUs" in r.data["queue"][0]


def test_a_zero_limit_refuses_any_request_of_that_resource(api, setup):
    _, leaf, _ = setup
    leaf.memory_limit = 0
    leaf.save()
    r = api.post("/api/v1/jobs/", gpu_job(setup, replicas=1, gpu=1), format="json")
    assert r.status_code == 400
    assert "memory_limit 0" in r.data["queue"][0]


def test_a_job_that_fits_the_limit_but_not_next_to_allocated_work_is_accepted_with_a_warning(api, setup):
    _, leaf, cluster = setup
    leaf.gpu_limit = 8
    leaf.save()
    QueueClusterState.objects.create(policy=leaf, cluster=cluster, status=status(gpu=6))
    tmpl = builders.make_template(backend="kai", pod_sets=[builders.pod_set(replicas=1,
                                                                            containers=[builders.container(gpu=4)])])
    r = api.post("/api/v1/jobs/", builders.submit_body(tmpl, leaf, cluster), format="json")
    assert r.status_code == 201, r.data
    (warning,) = [w for w in r.data["warnings"] if w["code"] == "OverQueueLimit"]  # and its Queue is not in sync
    assert (warning["queue"], warning["resource"], warning["limit"], warning["allocated"], warning["requested"],
            warning["source"]) == ("team-a", "gpu", 8, 6, 4, "kai")
    assert "KAI's Queue status says 6 of 8 GPUs allocated (gpu_limit)" in warning["message"]


def test_a_job_within_limits_has_no_warnings(api, setup):
    r = api.post("/api/v1/jobs/", gpu_job(setup, replicas=2, gpu=1), format="json")
    assert r.status_code == 201
    assert r.data["warnings"] == []


def test_moving_a_job_to_a_queue_whose_limit_it_exceeds_is_refused(api, setup):
    r = api.post("/api/v1/jobs/", gpu_job(setup, replicas=2, gpu=2), format="json")
    small = builders.make_queue("small", gpu_limit=2)
    r = api.patch(f"/api/v1/jobs/{r.data['id']}/", {"queue": small.name}, format="json")
    assert r.status_code == 400
    assert "job requests 4 GPUs; queue 'small' has gpu_limit 2 GPUs" in r.data["queue"][0]
    assert GangJob.objects.get().queue.name == "team-a"


def test_the_whole_tree_at_1000_queues_reads_the_jobs_once_for_usage_and_counts(api, admin_user):
    template, cluster = builders.make_template("llm"), builders.make_cluster("local")
    three_levels(cluster)
    proj = QueuePolicy.objects.get(name="proj")
    builders.make_job(template, proj, cluster, phase="Running", user=admin_user)
    builders.make_job(template, proj, cluster, phase="Queued", user=admin_user)
    builders.make_job(template, proj, cluster, phase="Succeeded", user=admin_user)
    with CaptureQueriesContext(connection) as small:
        assert api.get("/api/v1/queues/tree/").status_code == 200
    team_b = QueuePolicy.objects.get(name="team-b")
    QueuePolicy.objects.bulk_create([QueuePolicy(name=f"bulk-{i:03d}", parent=team_b, allowed_namespaces=["default"])
                                     for i in range(996)])
    builders.make_job(template, QueuePolicy.objects.get(name="bulk-500"), cluster, phase="Running", user=admin_user)
    with CaptureQueriesContext(connection) as big:
        r = api.get("/api/v1/queues/tree/")
    (dept,) = r.data["roots"]
    team_a, team_b = dept["children"]
    assert len(team_b["children"]) == 996 and QueuePolicy.objects.count() == 1000
    # One statement reads the jobs, for the usage estimate and the counts alike (were two scans of the same rows).
    assert sum('FROM "scheduling_gangjob"' in q["sql"] for q in big.captured_queries) == 1
    assert len(big) == len(small) <= 6
    assert dept["counts"] == {"pending": 1, "running": 2, "finished_24h": 1}
    assert team_a["children"][0]["counts"] == {"pending": 1, "running": 1, "finished_24h": 1}
    assert team_b["children"][500]["counts"] == {"pending": 0, "running": 1, "finished_24h": 0}
    assert team_b["children"][499]["counts"] == {"pending": 0, "running": 0, "finished_24h": 0}
    # The estimate from the same statement: 2 pods of 1 CPU a job; the Queued one is requested, not allocated.
    assert (dept["resources"]["cpu"]["estimated_allocated"], dept["resources"]["cpu"]["estimated_requested"]) == (
        4000, 6000)
    assert (dept["jobs"], dept["subtree_jobs"], team_a["children"][0]["jobs"]) == (0, 3, 2)
