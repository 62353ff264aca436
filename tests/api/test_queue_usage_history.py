"""A queue's allocation and decayed usage over 24 h / 7 d / 30 d in buckets (services/queues/usage_history.py),
from a synthetic history: 1 GPU for 1 h ending 2 h ago, and the values the buckets must hold; the API endpoint
gives the same series."""
import math
from datetime import timedelta

import pytest

from scheduling.choices import GangPhase
from scheduling.db import clock
from scheduling.queueing.tree import QueueTree
from scheduling.services.queues import usage_history
from scheduling.services.queues.decayed_usage import decayed_usage
from tests import builders
from tests.api.test_queue_decayed_usage import HOUR, WEEK, closed_form, ran

pytestmark = pytest.mark.django_db
DAY = 24 * HOUR


@pytest.fixture
def one_gpu_hour(admin_user):
    """team-a (under research): 1 GPU from 3 h to 2 h ago; team-b: 4 GPUs and 16 cores still running since 40 days
    ago (before every window); a job of team-a that never ran."""
    now = clock.now()
    cluster = builders.make_cluster("local")
    research = builders.make_queue("research", clusters=[cluster])
    team_a = builders.make_queue("team-a", parent=research, clusters=[cluster])
    team_b = builders.make_queue("team-b", parent=research, clusters=[cluster])
    template = builders.make_template("gpu", pod_sets=[builders.pod_set(containers=[builders.container(gpu=1)])])
    ran(builders.make_job(template, team_a, cluster, name="hour", user=admin_user), now, [(0, 3 * HOUR, None)],
        gpu=1, finished_ago=2 * HOUR)
    ran(builders.make_job(template, team_b, cluster, name="long", user=admin_user), now, [(0, 40 * DAY, None)],
        gpu=4, millicores=16000, phase=GangPhase.RUNNING)
    builders.make_job(template, team_a, cluster, name="never-ran", user=admin_user)
    return {"now": now, "research": research, "team_a": team_a, "team_b": team_b}


def history(policy, window, now):
    return usage_history.usage_history(policy.id, QueueTree.load_rows(), window, now=now)


@pytest.mark.parametrize(("window", "buckets", "bucket_seconds", "busy"), [
    # 24 h in 15-minute buckets: the hour 3 h to 2 h ago is buckets 84..87 (of 0..95), each fully held.
    ("24h", 96, 900, {84: 1.0, 85: 1.0, 86: 1.0, 87: 1.0}),
    # 7 d in hours: it is bucket 165 of 0..167.
    ("7d", 168, 3600, {165: 1.0}),
    # 30 d in 6 hours: it lies within the last bucket, held a sixth of it.
    ("30d", 120, 6 * 3600, {119: 1 / 6}),
])
def test_one_gpu_for_one_hour_fills_the_buckets_it_overlaps(one_gpu_hour, window, buckets, bucket_seconds, busy):
    now = one_gpu_hour["now"]
    got = history(one_gpu_hour["team_a"], window, now)
    assert got["bucket_seconds"] == bucket_seconds and len(got["buckets"]) == buckets
    assert got["start"] == now - timedelta(seconds=buckets * bucket_seconds) and got["end"] == now
    allocated = {k: b["allocated"]["gpu"] for k, b in enumerate(got["buckets"]) if b["allocated"]["gpu"]}
    assert allocated == pytest.approx(busy)
    assert sum(b["used"]["gpu"] for b in got["buckets"]) == pytest.approx(3600.0)  # 1 GPU·h, undecayed
    assert all(b["used"]["cpu"] == 0 and b["used"]["memory"] == 0 for b in got["buckets"])


def test_the_decayed_usage_at_known_points_matches_the_closed_form(one_gpu_hour):
    now = one_gpu_hour["now"]
    buckets = history(one_gpu_hour["team_a"], "24h", now)["buckets"]
    assert buckets[83]["decayed"]["gpu"] == 0.0  # ends 3 h ago: before the job ran
    # The end of the hour it ran (2 h ago): 1 GPU for the hour that just ended, a week's half-life: ≈ 3,592.58.
    assert buckets[87]["end"] == now - timedelta(hours=2)
    assert buckets[87]["decayed"]["gpu"] == pytest.approx(WEEK / math.log(2) * (1 - 0.5 ** (HOUR / WEEK)), rel=1e-9)
    assert buckets[87]["decayed"]["gpu"] == pytest.approx(3592.58, rel=1e-3)
    # Now: the same hour, 2 h older; equal to decayed_usage's answer.
    assert buckets[-1]["decayed"]["gpu"] == pytest.approx(closed_form(1, 3 * HOUR, 2 * HOUR), rel=1e-9)
    total = decayed_usage([one_gpu_hour["team_a"].id], QueueTree.load_rows(), now=now)
    assert buckets[-1]["decayed"]["gpu"] == pytest.approx(total[one_gpu_hour["team_a"].id]["gpu"], rel=1e-9)


def test_a_job_running_since_before_the_window_starts_at_its_decayed_level(one_gpu_hour):
    """team-b's 4 GPUs and 16 cores since 40 days ago: every bucket of 30 d is fully held, and the decayed usage at
    each bucket's end is the closed form from 40 days before now to that end."""
    now = one_gpu_hour["now"]
    got = history(one_gpu_hour["team_b"], "30d", now)["buckets"]
    assert {b["allocated"]["gpu"] for b in got} == {4.0} and {b["allocated"]["cpu"] for b in got} == {16.0}
    assert sum(b["used"]["gpu"] for b in got) == pytest.approx(4 * 30 * DAY)
    for k in (0, 59, 119):
        end_ago = (now - got[k]["end"]).total_seconds()
        want = 4 * WEEK / math.log(2) * (1 - 0.5 ** ((40 * DAY - end_ago) / WEEK))
        assert got[k]["decayed"]["gpu"] == pytest.approx(want, rel=1e-9), k
        assert got[k]["decayed"]["cpu"] == pytest.approx(want * 4, rel=1e-9), k


def test_a_parent_adds_its_children(one_gpu_hour):
    now = one_gpu_hour["now"]
    parent = history(one_gpu_hour["research"], "7d", now)["buckets"]
    a = history(one_gpu_hour["team_a"], "7d", now)["buckets"]
    b = history(one_gpu_hour["team_b"], "7d", now)["buckets"]
    assert parent[165]["allocated"]["gpu"] == pytest.approx(5.0)
    for k in (0, 165, 167):
        assert parent[k]["decayed"]["gpu"] == pytest.approx(a[k]["decayed"]["gpu"] + b[k]["decayed"]["gpu"])


def test_the_series_is_two_queries_whatever_the_window(one_gpu_hour, django_assert_num_queries):
    tree = QueueTree.load_rows()
    for window in usage_history.WINDOWS:
        with django_assert_num_queries(2):  # the jobs, then their Running and re-queue entries
            usage_history.usage_history(one_gpu_hour["research"].id, tree, window, now=one_gpu_hour["now"])


def test_the_api_gives_the_same_series_in_devices_cores_and_bytes(api, one_gpu_hour):
    r = api.get("/api/v1/queues/team-a/usage-history/?window=24h")
    assert r.status_code == 200, r.data
    body = r.data
    assert body["window"] == "24h" and body["bucket_seconds"] == 900 and len(body["buckets"]) == 96
    assert body["units"]["allocated"] == {"gpu": "devices", "cpu": "cores", "memory": "bytes"}
    # The API's "now" is a moment after the fixture's: the buckets may have moved by that moment.
    assert [b["allocated"]["gpu"] for b in body["buckets"][84:87]] == [1, 1, 1]
    assert sum(b["used"]["gpu"] for b in body["buckets"]) == pytest.approx(3600)
    assert body["buckets"][87]["decayed"]["gpu"] == pytest.approx(3592.58, rel=1e-3)
    long = api.get("/api/v1/queues/team-b/usage-history/?window=30d").data
    assert long["buckets"][0]["allocated"] == {"gpu": 4, "cpu": 16, "memory": 0}


@pytest.mark.parametrize(("query", "field"), [("window=1y", "window"), ("cluster=nowhere", "cluster")])
def test_the_api_names_the_field_it_cannot_read(api, one_gpu_hour, query, field):
    r = api.get(f"/api/v1/queues/team-a/usage-history/?{query}")
    assert r.status_code == 400 and field in r.data, r.data
