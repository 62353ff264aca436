"""Position in line: 7 pending jobs of mixed priority in team-a and 3 in its sibling team-b (both under research),
every job's place in its queue and across the parent, in KAI's order (priority, then submit time), and how the
places move when a job starts or is cancelled; the same jobs of a non-KAI backend in submit order; a parent queue's
line of its subtree. Real PostgreSQL, no cluster."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduling.choices import GangPhase
from scheduling.models import GangJob
from scheduling.services.jobs import lifecycle as job_service
from scheduling.services.queues import line as queue_line
from tests import builders

pytestmark = pytest.mark.django_db

# name: (queue, PriorityClass, submitted minutes after t0). Priorities: inference 125, build 100,
# build-preemptible 75, train 50, none or an unknown class 50.
JOBS = {
    "a1": ("team-a", "train", 1), "a2": ("team-a", "", 2), "a3": ("team-a", "inference", 3),
    "a4": ("team-a", "build", 4), "a5": ("team-a", "train", 5), "a6": ("team-a", "inference", 6),
    "a7": ("team-a", "my-own-class", 7),
    "b1": ("team-b", "build-preemptible", 0.5), "b2": ("team-b", "", 3.5), "b3": ("team-b", "inference", 8),
}
# Worked out by hand: team-a a3 a6 (125), a4 (100), a1 a2 a5 a7 (50, by time); team-b b3, b1, b2; across research
# a3 a6 b3 (125, by time), a4 (100), b1 (75), a1 a2 b2 a5 a7 (50, by time).
EXPECTED = {  # name: (in queue, queue total, in parent, parent total)
    "a3": (1, 7, 1, 10), "a6": (2, 7, 2, 10), "a4": (3, 7, 4, 10), "a1": (4, 7, 6, 10), "a2": (5, 7, 7, 10),
    "a5": (6, 7, 9, 10), "a7": (7, 7, 10, 10), "b3": (1, 3, 3, 10), "b1": (2, 3, 5, 10), "b2": (3, 3, 8, 10),
}


@pytest.fixture
def line(admin_user):
    cluster = builders.make_cluster("local")
    other = builders.make_cluster("other")
    research = builders.make_queue("research", clusters=[cluster, other])
    queues = {name: builders.make_queue(name, parent=research, clusters=[cluster, other])
              for name in ("team-a", "team-b")}
    elsewhere = builders.make_queue("elsewhere", clusters=[cluster])
    template = builders.make_template("base", backend="kai")
    t0 = timezone.now() - timedelta(hours=1)
    jobs = {}
    for i, (name, (queue, priority, minutes)) in enumerate(JOBS.items()):
        job = builders.make_job(template, queues[queue], cluster, name=name, user=admin_user,
                                phase=GangPhase.QUEUED if i % 2 else None)
        GangJob.objects.filter(pk=job.pk).update(priority_class_name=priority,
                                                 created_at=t0 + timedelta(minutes=minutes))
        jobs[name] = job
    # Not in line: a running job of team-a, a pending one in another cluster, one in a queue outside research.
    builders.make_job(template, queues["team-a"], cluster, name="running", user=admin_user, phase=GangPhase.RUNNING)
    builders.make_job(template, queues["team-a"], other, name="far", user=admin_user)
    builders.make_job(template, elsewhere, cluster, name="outside", user=admin_user)
    return {"jobs": jobs, "queues": queues, "admin": admin_user, "template": template, "cluster": cluster}


def positions_by_job(names):
    out = {}
    for name in names:
        job = GangJob.objects.select_related("queue__parent").get(name=name, cluster__name="local")
        p = queue_line.position(job)
        out[name] = None if p is None else (p["queue"], p["queue_total"], p["parent"], p["parent_total"])
    return out


def positions_by_line(queues):
    out = {}
    for q in queues.values():
        for row in queue_line.line(q, cluster_ids=[q.clusters.get(name="local").id]):
            out[row["name"]] = (row["queue"], row["queue_total"], row["parent"], row["parent_total"])
    return out


def test_every_pending_job_has_its_hand_computed_place_by_job_and_by_queue_list(line):
    assert positions_by_job(JOBS) == EXPECTED
    assert positions_by_line(line["queues"]) == EXPECTED
    job = GangJob.objects.select_related("queue__parent").get(name="a4")
    p = queue_line.position(job)
    assert (p["text"], p["parent_text"], p["priority"]) == ("3 of 7 in team-a", "4 of 10 in research", 100)


def test_places_move_up_when_a_job_starts_and_when_one_is_cancelled(line):
    GangJob.objects.filter(name="a6").update(phase=GangPhase.RUNNING)
    moved = positions_by_job(JOBS)
    assert moved["a6"] is None
    assert moved["a4"] == (2, 6, 3, 9) and moved["b3"] == (1, 3, 2, 9) and moved["a7"] == (6, 6, 9, 9)
    # team-a is now a3 a4 a2 a5 a7; research a3 b3 a4 b1 a2 b2 a5 a7.
    job_service.cancel(line["admin"], GangJob.objects.get(name="a1"))
    moved = positions_by_job(JOBS)
    assert moved["a1"] is None
    assert moved["a2"] == (3, 5, 5, 8) and moved["b2"] == (3, 3, 6, 8) and moved["a3"] == (1, 5, 1, 8)
    assert positions_by_line(line["queues"]) == {k: v for k, v in moved.items() if v is not None}


def test_a_top_level_queue_has_no_parent_place(line):
    outside = GangJob.objects.select_related("queue__parent").get(name="outside")
    p = queue_line.position(outside)
    assert (p["queue"], p["queue_total"], p["parent"], p["parent_total"], p["parent_text"]) == (1, 1, None, None,
                                                                                                None)


def test_the_job_api_and_the_queue_line_api_say_the_same(api, line):
    a4 = line["jobs"]["a4"]
    r = api.get(f"/api/v1/jobs/{a4.pk}/")
    assert r.status_code == 200
    assert r.data["position"]["text"] == "3 of 7 in team-a"
    assert r.data["position"]["parent_text"] == "4 of 10 in research"
    r = api.get("/api/v1/queues/team-a/line/?cluster=local")
    assert r.status_code == 200
    assert [(j["name"], j["queue"], j["parent"]) for j in r.data["jobs"]] == [
        ("a3", 1, 1), ("a6", 2, 2), ("a4", 3, 4), ("a1", 4, 6), ("a2", 5, 7), ("a5", 6, 9), ("a7", 7, 10)]
    assert r.data["jobs"][0]["text"] == "1 of 7 in team-a"
    running = GangJob.objects.get(name="running")
    assert api.get(f"/api/v1/jobs/{running.pk}/").data["position"] is None
    r = api.get("/api/v1/queues/team-a/line/?cluster=nope")
    assert r.status_code == 400 and "cluster" in r.data


def test_the_line_costs_the_same_queries_with_3_or_30_more_jobs(api, line):
    def count():
        with CaptureQueriesContext(connection) as ctx:
            assert api.get("/api/v1/queues/team-a/line/").status_code == 200
        return len(ctx.captured_queries)

    before = count()
    for i in range(30):
        builders.make_job(line["template"], line["queues"]["team-a"], line["cluster"], name=f"more-{i}",
                          user=line["admin"])
    assert count() == before


def test_a_reader_without_a_role_on_the_jobs_sees_places_but_not_names(line):
    from rest_framework.test import APIClient

    viewer = builders.make_user("vera")
    builders.grant(line["queues"]["team-b"], "viewer", user=viewer)
    client = APIClient()
    client.force_authenticate(viewer)
    assert client.get("/api/v1/queues/team-a/line/").status_code == 404
    rows = client.get("/api/v1/queues/team-b/line/?cluster=local").data["jobs"]
    assert [r["name"] for r in rows] == ["b3", "b1", "b2"]


def test_a_parent_queue_lists_the_jobs_of_its_subtree_in_the_order_the_scheduler_takes_them(api, line):
    r = api.get("/api/v1/queues/research/line/?cluster=local")
    assert r.status_code == 200
    # research's whole line, as hand-computed above: a3 a6 b3 (125, by time), a4 (100), b1 (75), then 50 by time.
    assert [(j["name"], j["queue_name"], j["queue"], j["queue_total"], j["parent"]) for j in r.data["jobs"]] == [
        ("a3", "team-a", 1, 10, None), ("a6", "team-a", 2, 10, None), ("b3", "team-b", 3, 10, None),
        ("a4", "team-a", 4, 10, None), ("b1", "team-b", 5, 10, None), ("a1", "team-a", 6, 10, None),
        ("a2", "team-a", 7, 10, None), ("b2", "team-b", 8, 10, None), ("a5", "team-a", 9, 10, None),
        ("a7", "team-a", 10, 10, None)]
    assert r.data["jobs"][2]["text"] == "3 of 10 in research"
    # Each job's place in its parent (GET /jobs/<id>/) is its place in the parent's line.
    by_job = positions_by_job(JOBS)
    assert {j["name"]: j["queue"] for j in r.data["jobs"]} == {name: p[2] for name, p in by_job.items()}


def test_a_parent_line_hides_the_names_of_jobs_in_queues_the_reader_has_no_role_on(line):
    from rest_framework.test import APIClient

    viewer = builders.make_user("vera")
    builders.grant(line["queues"]["team-b"], "viewer", user=viewer)
    client = APIClient()
    client.force_authenticate(viewer)
    rows = client.get("/api/v1/queues/research/line/?cluster=local").data["jobs"]
    assert [r["name"] for r in rows] == ["(hidden)", "(hidden)", "b3", "(hidden)", "b1", "(hidden)", "(hidden)",
                                         "b2", "(hidden)", "(hidden)"]


def test_jobs_of_a_non_kai_backend_wait_in_submit_order_without_kai_priority_values(line):
    # The same ten jobs on the Kubernetes Workload API: kube-scheduler orders by pod priority, whose values gangweb
    # does not read, so KAI's built-in values must not reorder them: submit time decides.
    GangJob.objects.filter(name__in=JOBS).update(resolved_spec={**line["template"].spec, "backend": "k8s-workload"})
    by_time = sorted(JOBS, key=lambda n: JOBS[n][2])
    in_a = [n for n in by_time if JOBS[n][0] == "team-a"]
    in_b = [n for n in by_time if JOBS[n][0] == "team-b"]
    expected = {n: ((in_a if n in in_a else in_b).index(n) + 1, len(in_a if n in in_a else in_b),
                    by_time.index(n) + 1, 10) for n in JOBS}
    assert positions_by_job(JOBS) == expected
    assert positions_by_line(line["queues"]) == expected
    a3 = queue_line.position(GangJob.objects.select_related("queue__parent").get(name="a3"))
    assert (a3["text"], a3["priority"]) == ("3 of 7 in team-a", None)


def test_kai_and_non_kai_jobs_of_one_queue_wait_in_separate_lines(line):
    # Two schedulers in one cluster: each has its own line.
    GangJob.objects.filter(name__in=["a1", "a3"]).update(resolved_spec={**line["template"].spec,
                                                                       "backend": "volcano"})
    moved = positions_by_job(["a1", "a3", "a6", "a4"])
    assert moved["a1"][:2] == (1, 2) and moved["a3"][:2] == (2, 2)  # volcano: by submit time
    assert moved["a6"][:2] == (1, 5) and moved["a4"][:2] == (2, 5)  # KAI: a6 a4 a2 a5 a7
    rows = [(r["name"], r["backend"], r["queue"]) for r in queue_line.line(line["queues"]["team-a"],
                                                                          cluster_ids=[line["cluster"].id])]
    assert rows == [("a6", "kai", 1), ("a4", "kai", 2), ("a2", "kai", 3), ("a5", "kai", 4), ("a7", "kai", 5),
                    ("a1", "volcano", 1), ("a3", "volcano", 2)]


def test_rank_of_a_job_is_the_priority_its_line_orders_it_by_in_sql_too(line):
    # KAI jobs count with KAI's values; a job of another backend with OTHER_PRIORITY (0), whatever its class.
    GangJob.objects.filter(name__in=["a1", "a3"]).update(resolved_spec={**line["template"].spec,
                                                                       "backend": "volcano"})
    rows = GangJob.objects.filter(name__in=JOBS).annotate(family=queue_line.family_expr(),
                                                          prio=queue_line.priority_expr())
    ranks = {job.name: (queue_line.rank_of(job), job.prio) for job in rows}
    assert ranks["a3"] == (0, 0) and ranks["a1"] == (0, 0)  # inference and train, but on Volcano
    assert ranks["a6"] == (125, 125) and ranks["a4"] == (100, 100) and ranks["b1"] == (75, 75)
    assert ranks["a7"] == (50, 50) and ranks["a2"] == (50, 50)  # an unknown class and none: KAI's default
    assert all(python == sql for python, sql in ranks.values())
    assert queue_line.pending(line["cluster"].id).filter(name__in=JOBS).count() == len(JOBS)
