"""A queue's decayed usage (services/queues/decayed_usage.py): each second a job held its requests weighs
0.5^(age / half-life), integrated exactly from the jobs' Running timeline entries; GET /api/v1/queues/<name>/
and the queue page show it."""
import math
import re
from datetime import timedelta

import pytest

from scheduling.choices import GangPhase
from scheduling.db import clock
from scheduling.models import GangJob, PhaseTransition
from scheduling.queueing.tree import QueueTree
from scheduling.services.queues.decayed_usage import decayed_usage
from tests import builders

pytestmark = pytest.mark.django_db

WEEK = 7 * 24 * 3600.0
HOUR = 3600.0


def closed_form(rate, ago_start, ago_end, half_life=WEEK):
    """∫ rate·0.5^(age/half_life) over ages [ago_end, ago_start] (seconds before now), by the half-life formula."""
    return rate * half_life / math.log(2) * (0.5 ** (ago_end / half_life) - 0.5 ** (ago_start / half_life))


def ran(job, now, runs, *, gpu=0.0, millicores=0, memory=0, finished_ago=None, phase=None):
    """Give `job` these requests and timeline: `runs` = [(attempt, started s ago, re-queued s ago or None)]."""
    PhaseTransition.objects.filter(job=job).delete()
    for attempt, started, requeued in runs:
        PhaseTransition.objects.create(job=job, phase=GangPhase.RUNNING, attempt=attempt,
                                       at=now - timedelta(seconds=started))
        if requeued is not None:
            PhaseTransition.objects.create(job=job, phase=GangPhase.QUEUED, attempt=attempt + 1,
                                           at=now - timedelta(seconds=requeued))
    finished = now - timedelta(seconds=finished_ago) if finished_ago is not None else None
    GangJob.objects.filter(pk=job.pk).update(
        requested_gpu=gpu, requested_cpu_millicores=millicores, requested_memory_bytes=memory, finished_at=finished,
        phase=phase or (GangPhase.SUCCEEDED if finished else GangPhase.RUNNING))


@pytest.fixture
def history(admin_user):
    """research (parent) with team-a and team-b, and the jobs below, timed against `now`."""
    now = clock.now()
    cluster = builders.make_cluster("local")
    research = builders.make_queue("research", clusters=[cluster])
    team_a = builders.make_queue("team-a", parent=research, clusters=[cluster])
    team_b = builders.make_queue("team-b", parent=research, clusters=[cluster])
    template = builders.make_template("gpu", pod_sets=[builders.pod_set(containers=[builders.container(gpu=1)])])

    def job(queue, name):
        return builders.make_job(template, queue, cluster, name=name, user=admin_user)

    # team-a: 1 GPU for the hour that just ended; 2 GPUs, 8 cores, 64 GB still running since 2 h ago; 4 GPUs for a
    # day ending 3 weeks ago; 8 GPUs for a day 40 weeks ago (beyond the horizon: it weighs < 2^-39 anyway).
    ran(job(team_a, "hour"), now, [(0, HOUR, None)], gpu=1, finished_ago=0)
    ran(job(team_a, "running"), now, [(0, 2 * HOUR, None)], gpu=2, millicores=8000, memory=64 * 10**9)
    ran(job(team_a, "weeks-ago"), now, [(0, 3 * WEEK + 24 * HOUR, None)], gpu=4, finished_ago=3 * WEEK)
    ran(job(team_a, "long-ago"), now, [(0, 40 * WEEK + 24 * HOUR, None)], gpu=8, finished_ago=40 * WEEK)
    # team-b: 3 GPUs from 10 h to 6 h ago, re-queued, running again from 1 h ago; a job that never ran.
    ran(job(team_b, "requeued"), now, [(0, 10 * HOUR, 6 * HOUR), (1, HOUR, None)], gpu=3, millicores=500)
    job(team_b, "never-ran")
    expected_a = {
        "gpu": closed_form(1, HOUR, 0) + closed_form(2, 2 * HOUR, 0) + closed_form(4, 3 * WEEK + 24 * HOUR, 3 * WEEK),
        "cpu": closed_form(8, 2 * HOUR, 0),
        "memory": closed_form(64 * 10**9, 2 * HOUR, 0),
    }
    expected_b = {"gpu": closed_form(3, 10 * HOUR, 6 * HOUR) + closed_form(3, HOUR, 0),
                  "cpu": closed_form(0.5, 10 * HOUR, 6 * HOUR) + closed_form(0.5, HOUR, 0), "memory": 0.0}
    return {"now": now, "research": research, "team_a": team_a, "team_b": team_b,
            "expected": {"team-a": expected_a, "team-b": expected_b,
                         "research": {r: expected_a[r] + expected_b[r] for r in expected_a}}}


@pytest.mark.parametrize("queue", ["team-a", "team-b", "research"])
def test_decayed_usage_matches_the_closed_form_within_a_thousandth(history, queue):
    policy = {"team-a": history["team_a"], "team-b": history["team_b"], "research": history["research"]}[queue]
    got = decayed_usage([policy.id], QueueTree.load_rows(), now=history["now"])[policy.id]
    assert got["half_life_seconds"] == WEEK
    for resource, want in history["expected"][queue].items():
        assert got[resource] == pytest.approx(want, rel=1e-3, abs=1e-6), resource


def test_one_gpu_for_the_last_hour_with_a_week_half_life_is_3593_gpu_seconds(history):
    hour_only = builders.make_queue("hour-only")
    job = GangJob.objects.get(name="hour")
    GangJob.objects.filter(pk=job.pk).update(queue=hour_only)
    got = decayed_usage([hour_only.id], QueueTree.load_rows(), now=history["now"])[hour_only.id]
    assert got["gpu"] == pytest.approx(3592.58, rel=1e-3)
    assert got["cpu"] == 0.0


def test_a_shorter_half_life_forgets_faster(history):
    team_a = history["team_a"]
    got = decayed_usage([team_a.id], QueueTree.load_rows(), now=history["now"], half_life=HOUR)[team_a.id]
    want = closed_form(1, HOUR, 0, HOUR) + closed_form(2, 2 * HOUR, 0, HOUR)  # the 3-week-old day weighs ~0
    assert got["gpu"] == pytest.approx(want, rel=1e-3)
    assert got["half_life_seconds"] == HOUR


def test_decayed_usage_is_two_queries_whatever_the_queues(history, django_assert_num_queries):
    tree = QueueTree.load_rows()
    with django_assert_num_queries(2):  # the jobs, then their Running and re-queue entries
        decayed_usage([history["research"].id, history["team_a"].id], tree, now=history["now"])


def test_the_queue_api_answers_decayed_usage(api, history):
    r = api.get("/api/v1/queues/research/")
    assert r.status_code == 200
    got = r.data["decayed_usage"]
    assert set(got) == {"gpu", "cpu", "memory", "half_life_seconds"}
    assert got["half_life_seconds"] == WEEK
    # The API's "now" is a moment later than the fixture's: the still-running jobs add a few device-milliseconds.
    for resource, want in history["expected"]["research"].items():
        assert got[resource] == pytest.approx(want, rel=1e-3), resource


def test_the_half_life_is_a_setting(api, history, settings):
    settings.GANGWEB_USAGE_HALF_LIFE_SECONDS = HOUR
    got = api.get("/api/v1/queues/team-b/").data["decayed_usage"]
    assert got["half_life_seconds"] == HOUR
    assert got["gpu"] == pytest.approx(closed_form(3, 10 * HOUR, 6 * HOUR, HOUR) + closed_form(3, HOUR, 0, HOUR),
                                       rel=1e-3)


def test_the_queue_page_shows_gpu_hours_over_the_half_life(client, admin_user, history):
    client.force_login(admin_user)
    page = client.get("/queues/research/").content.decode()
    gpu_hours = history["expected"]["research"]["gpu"] / 3600
    # The page's "now" is later than the fixture's, by seconds under load: its still-running jobs (5 GPUs) add
    # ~0.0014 GPU·h a second, enough to move the second decimal, so the shown figure is compared, not the text.
    shown = [float(v.replace(",", "")) for v in re.findall(r"([\d,]+\.\d\d) GPU·h", page)]
    assert any(v == pytest.approx(gpu_hours, rel=1e-3) for v in shown), (gpu_hours, shown)
    assert "over a 7-day half-life" in page


def test_the_timeline_entries_are_read_in_chunks_of_job_ids_with_the_same_sums(history, monkeypatch,
                                                                               django_assert_num_queries):
    """A queue with more jobs in the horizon than a statement takes parameters: the entries are read ENTRY_CHUNK
    job ids at a time (here 2), one statement per chunk, and the sums do not change."""
    from scheduling.services.queues import decayed_usage as module

    research = history["research"]
    in_horizon = GangJob.objects.exclude(name="long-ago").count()  # every job of the history is below research
    assert in_horizon >= 5
    tree = QueueTree.load_rows()
    monkeypatch.setattr(module, "ENTRY_CHUNK", 2)
    with django_assert_num_queries(1 + math.ceil(in_horizon / 2)):  # the jobs, then their entries 2 ids at a time
        got = decayed_usage([research.id], tree, now=history["now"])[research.id]
    for resource, want in history["expected"]["research"].items():
        assert got[resource] == pytest.approx(want, rel=1e-3, abs=1e-6), resource
