"""Decayed usage where the scheduler weighs it (services/queues/usage_order.py): the fair-share sentence compares a
queue's decayed usage with its siblings' and says what it means for who goes first; the place in line orders the
KAI jobs of sibling queues least-used first on the clusters named in GANGWEB_USAGE_ORDERED_CLUSTERS, and nowhere
else."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.choices import GangPhase
from scheduling.db import clock
from scheduling.models import GangJob
from scheduling.services.queues import line as queue_line
from scheduling.services.queues import usage_order
from tests import builders
from tests.api.test_queue_decayed_usage import HOUR, WEEK, closed_form, ran
from tests.api.test_queue_line import EXPECTED, JOBS, line, positions_by_job, positions_by_line  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def siblings(admin_user):
    """research: team-a used 1 GPU for the hour that ended 1 h ago (≈ 0.99 GPU·h decayed), team-b 1 GPU for the
    half hour that just ended (≈ 0.5 GPU·h); team-c used nothing. Each has 2 GPUs of quota on an 18-GPU cluster."""
    now = clock.now()
    cluster = builders.make_cluster("local", capacity={"nodes": 2, "allocatable": {
        "nvidia.com/gpu": 18, "cpu": 64, "memory": 256 * 10**9}, "largest": {}})
    research = builders.make_queue("research", clusters=[cluster], gpu_quota=18)
    teams = {n: builders.make_queue(n, parent=research, clusters=[cluster], gpu_quota=2)
             for n in ("team-a", "team-b", "team-c")}
    template = builders.make_template("gpu", pod_sets=[builders.pod_set(containers=[builders.container(gpu=1)])])
    ran(builders.make_job(template, teams["team-a"], cluster, name="a-ran", user=admin_user), now,
        [(0, 2 * HOUR, None)], gpu=1, finished_ago=HOUR)
    ran(builders.make_job(template, teams["team-b"], cluster, name="b-ran", user=admin_user), now,
        [(0, HOUR / 2, None)], gpu=1, finished_ago=0)
    return {"now": now, "cluster": cluster, "teams": teams, "template": template, "admin": admin_user,
            "a": closed_form(1, 2 * HOUR, HOUR), "b": closed_form(1, HOUR / 2, 0)}


def gpu_text(api, queue):
    return api.get(f"/api/v1/queues/{queue}/fair-share/?cluster=local").data["clusters"][0]["resources"]["gpu"][
        "text"]


def test_the_sentence_says_gangweb_does_not_know_where_the_cluster_is_not_listed(api, siblings):
    text = gpu_text(api, "team-a")
    assert siblings["a"] == pytest.approx(0.99 * HOUR, rel=1e-2)
    assert text.endswith(" Its decayed usage is 0.99 GPU·h (half-life 7 d), the most of its siblings (team-c 0 GPU·h, "
                         "team-b 0.5 GPU·h): gangweb does not know whether this cluster's scheduler weighs it (KAI "
                         "time-based fair share, Kueue admission fair sharing: GANGWEB_USAGE_ORDERED_CLUSTERS), so "
                         "the line does not use it."), text


def test_the_sentence_says_who_goes_first_where_the_scheduler_weighs_it(api, siblings, settings):
    settings.GANGWEB_USAGE_ORDERED_CLUSTERS = ["local"]
    assert gpu_text(api, "team-a").endswith("the most of its siblings (team-c 0 GPU·h, team-b 0.5 GPU·h): its jobs "
                                            "go after team-c and team-b's when they wait.")
    assert gpu_text(api, "team-b").endswith("more than team-c, less than team-a (team-c 0 GPU·h, team-a 0.99 GPU·h): "
                                            "its jobs go after team-c's and before team-a's when they wait.")
    assert gpu_text(api, "team-c").endswith("the least of its siblings (team-b 0.5 GPU·h, team-a 0.99 GPU·h): its "
                                            "jobs go before team-b and team-a's when they wait.")
    # CPU: nobody used any, so the sentence says nothing of it.
    cpu = api.get("/api/v1/queues/team-a/fair-share/").data["clusters"][0]["resources"]["cpu"]["text"]
    assert "decayed usage" not in cpu


def test_a_reader_of_team_a_alone_is_not_told_the_siblings_names(siblings, settings):
    from rest_framework.test import APIClient

    settings.GANGWEB_USAGE_ORDERED_CLUSTERS = ["local"]
    reader = builders.make_user("ann")
    builders.grant(siblings["teams"]["team-a"], "viewer", user=reader)
    client = APIClient()
    client.force_authenticate(reader)
    text = gpu_text(client, "team-a")
    assert "team-b" not in text and "team-c" not in text
    assert "(another queue 0 GPU·h, another queue 0.5 GPU·h)" in text


@pytest.mark.parametrize(("mine", "others", "ordered", "want"), [
    (0.0, [("b", 0.0)], True, ""),  # nobody used anything: nothing to say
    (3600.0, [], True, ""),  # no sibling
    (3600.0, [("b", 3600.0)], True, " Its decayed usage is 1 GPU·h (half-life 7 d), as much as its siblings "
                                    "(b 1 GPU·h): it does not change who goes first."),
])
def test_the_sentence_in_its_edge_cases(mine, others, ordered, want):
    assert usage_order.sentence("a", "gpu", mine, others, ordered, WEEK) == want


def test_siblings_rank_least_used_first_ties_sharing_a_rank():
    zero = {"cpu": 0.0, "memory": 0.0}
    got = usage_order.ranks({1: {"gpu": 5.0, **zero}, 2: {"gpu": 0.0, **zero}, 3: {"gpu": 5.0, **zero},
                             4: {"gpu": 0.0, "cpu": 1.0, "memory": 0.0}})
    assert got == {2: 0, 4: 1, 1: 2, 3: 2}


# The line: tests/api/test_queue_line.py's ten pending KAI jobs of team-a (7) and team-b (3) under research, and
# team-a's past use: 4 GPUs for a day that ended an hour ago, on the cluster "local"; team-b used nothing.
# Across research, where the cluster's scheduler weighs decayed usage, team-b's jobs go first (in KAI's order:
# b3 125, b1 75, b2 50), then team-a's (a3 a6 125, a4 100, a1 a2 a5 a7 50 by time). In-queue places do not move.
BY_USAGE = {
    "b3": (1, 3, 1, 10), "b1": (2, 3, 2, 10), "b2": (3, 3, 3, 10),
    "a3": (1, 7, 4, 10), "a6": (2, 7, 5, 10), "a4": (3, 7, 6, 10), "a1": (4, 7, 7, 10), "a2": (5, 7, 8, 10),
    "a5": (6, 7, 9, 10), "a7": (7, 7, 10, 10),
}


@pytest.fixture
def line_with_history(line):  # noqa: F811 - the fixture of tests/api/test_queue_line.py
    now = clock.now()
    used = builders.make_job(line["template"], line["queues"]["team-a"], line["cluster"], name="used-a-day",
                             user=line["admin"])
    ran(used, now, [(0, 25 * HOUR, None)], gpu=4, finished_ago=HOUR, phase=GangPhase.SUCCEEDED)
    return line


def test_where_the_cluster_weighs_decayed_usage_the_less_used_sibling_goes_first(line_with_history, settings):
    settings.GANGWEB_USAGE_ORDERED_CLUSTERS = ["local"]
    assert positions_by_job(JOBS) == BY_USAGE
    assert positions_by_line(line_with_history["queues"]) == BY_USAGE
    # The parent's own line: its children by decayed usage too.
    research = line_with_history["queues"]["team-a"].parent
    rows = queue_line.line(research, cluster_ids=[line_with_history["cluster"].id])
    assert [r["name"] for r in rows] == ["b3", "b1", "b2", "a3", "a6", "a4", "a1", "a2", "a5", "a7"]


def test_elsewhere_the_order_is_unchanged(line_with_history, settings):
    settings.GANGWEB_USAGE_ORDERED_CLUSTERS = ["other"]  # the jobs are on "local"
    assert positions_by_job(JOBS) == EXPECTED
    assert positions_by_line(line_with_history["queues"]) == EXPECTED


def test_jobs_of_a_backend_whose_scheduler_does_not_weigh_usage_keep_their_order(line_with_history, settings):
    settings.GANGWEB_USAGE_ORDERED_CLUSTERS = ["local"]
    GangJob.objects.filter(name__in=list(JOBS)).update(resolved_spec={"backend": "volcano"})
    # Volcano: submit order across research (b1 0.5, a1 1, a2 2, a3 3, b2 3.5, a4 4, a5 5, a6 6, a7 7, b3 8).
    got = positions_by_job(JOBS)
    assert [n for n, _ in sorted(got.items(), key=lambda kv: kv[1][2])] == [
        "b1", "a1", "a2", "a3", "b2", "a4", "a5", "a6", "a7", "b3"]


def test_the_line_costs_three_more_queries_where_it_weighs_usage(line_with_history, settings):
    team_a = line_with_history["queues"]["team-a"]
    cluster_ids = [line_with_history["cluster"].id]

    def count():
        with CaptureQueriesContext(connection) as ctx:
            queue_line.line(team_a, cluster_ids=cluster_ids)
        return len(ctx.captured_queries)

    settings.GANGWEB_USAGE_ORDERED_CLUSTERS = []
    plain = count()
    settings.GANGWEB_USAGE_ORDERED_CLUSTERS = ["local"]
    # + the queue tree (not passed), the listed clusters, the siblings' jobs and their Running entries
    assert count() == plain + 4
