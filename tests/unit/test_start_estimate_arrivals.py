"""Jobs submitted while a job waits (scheduling.queueing.arrivals) and how the estimate uses them (issue 35 item 4).

Amounts are GPUs, times seconds (MIN = 60, HOUR = 3600). Histories of identical run times make the replays exact
where a scenario needs exact numbers."""
import math
import random
import statistics

import pytest

from scheduling.queueing import arrivals as a
from scheduling.queueing import estimate as e
from scheduling.queueing.allocation import Job, QueueSpec
from scheduling.queueing.estimate import RunTimes

MIN, HOUR = 60.0, 3600.0
QUEUES = [QueueSpec("team-a"), QueueSpec("team-b")]


def gpus(n):
    return {"gpu": n, "cpu": 0, "memory": 0}


def came(n, gpu=2, queue="team-a", priority=100, template="t", every=None):
    """`n` submissions spread evenly over the last hour (the newest `every` seconds ago, then 2x, ...)."""
    every = every or HOUR / n
    return [a.Arrival(ago=every * (k + 0.5), queue=queue, priority=priority, asks=gpus(gpu), template=template)
            for k in range(n)]


def test_six_two_gpu_jobs_an_hour_of_one_hour_bring_twelve_gpu_hours_over_a_one_hour_wait():
    assert a.expected_work(6 / HOUR, HOUR, 2, HOUR) == pytest.approx(12 * HOUR)
    assert e.arrival_work("gpu", a.expected_work(6 / HOUR, HOUR, 2, HOUR)) == "12 GPU·h"
    # An expectation reads to two significant digits: a wait a few seconds short of 40 min still brings "~16".
    assert e.arrival_work("gpu", a.expected_work(6 / HOUR, 40 * 60 - 3, 4, HOUR)) == "16 GPU·h"
    assert a.expected_work(6 / HOUR, 30 * MIN, 2, HOUR) == pytest.approx(6 * HOUR)  # half the wait, half the work


@pytest.mark.parametrize(("priority", "queue", "expected_gpu_hours"), [
    (100, "team-a", 12.0),  # higher priority in the job's queue: all 6 go first
    (50, "team-a", 0.0),  # equal priority: they line up behind it
    (100, "team-b", 0.0),  # another queue that is not served first
])
def test_expected_ahead_counts_only_the_arrivals_that_go_first(priority, queue, expected_gpu_hours):
    model = a.ArrivalModel(came(6, priority=priority, queue=queue))
    got = model.expected_ahead(HOUR, "gpu", lambda x: x.queue == "team-a" and x.priority > 50, lambda x: HOUR)
    assert got == pytest.approx(expected_gpu_hours * HOUR)


def test_submissions_older_than_the_window_are_not_counted():
    model = a.ArrivalModel([*came(6), a.Arrival(ago=2 * HOUR, queue="team-a", priority=100, asks=gpus(2))])
    assert len(model.by_queue["team-a"]) == 6
    assert model.rate("team-a") == pytest.approx(6.5 / HOUR)  # Jeffreys' posterior mean: (n + 1/2) / window
    assert model.rate("team-b") == 0.0  # nothing seen: nothing to draw


def test_arrival_counts_hold_the_rates_uncertainty_not_only_the_poisson_scatter():
    # 6 seen in an hour, replays over the next hour: a count drawn per replay is negative binomial (Gamma-Poisson),
    # mean 6.5 and variance 6.5 + 6.5^2 / 6.5 = 13, twice a Poisson's of the same mean; its p90 is 11 (a Poisson's
    # of mean 6.5 is 10).
    model = a.ArrivalModel(came(6), horizon=HOUR)
    rng = random.Random(7)
    counts = [len(model.draw(rng)) for _ in range(20000)]
    assert statistics.fmean(counts) == pytest.approx(6.5, abs=0.1)
    assert statistics.pvariance(counts) == pytest.approx(13.0, rel=0.06)
    assert e.quantile(counts, 0.9) == 11


def test_drawn_arrivals_are_copies_of_recent_ones_queued_after_everything_pending():
    model = a.ArrivalModel(came(3, gpu=4, priority=75), horizon=HOUR)
    got = model.draw(random.Random(1), origin=1_700_000_000.0)
    assert got, "at least one arrival in this draw"
    assert [t for t, _ in got] == sorted(t for t, _ in got) and all(0 < t <= HOUR for t, _ in got)
    for t, job in got:
        assert (job.queue, job.priority, job.asks, job.template, job.name) == (
            "team-a", 75, gpus(4), "t", a.ARRIVAL_NAME)
        assert job.queued_at == 1_700_000_000.0 + t and job.id < 0


def _waiting_on_one_end(arrived):
    """8 GPUs, all held by run-1 (its like ran exactly 60 min, it has run 0): the 4-GPU job of priority 50
    queued at 1.7e9 s starts at 60 min unless something goes first."""
    history = RunTimes(("t", q, 60 * MIN) for q in ("team-a", "team-b") for _ in range(5))
    running = [Job(id=1, queue="team-a", asks=gpus(8), template="t", name="run-1")]
    target = Job(id=10, queue="team-a", asks=gpus(4), template="t", name="waiting", priority=50,
                 queued_at=1_700_000_000.0)
    return e.estimate(10, gpus(8), QUEUES, running, [target], history, arrivals=a.ArrivalModel(arrived))


def test_arrivals_of_equal_priority_in_its_queue_line_up_behind_it():
    est = _waiting_on_one_end(came(6, gpu=8, priority=50))
    assert (est.p50, est.p90, est.arrivals_ahead) == (60 * MIN, 60 * MIN, 0.0)
    assert "expected from jobs submitted meanwhile" not in e.evidence(est, "team-a")


def test_higher_priority_arrivals_go_first_and_the_words_say_how_much():
    # 8-GPU jobs of priority 100 arriving at ~6.5/h (for an hour) each take the whole cluster for 60 min when it
    # frees: the job starts after every one that came before run-1's end, a whole number of hours from now.
    est = _waiting_on_one_end(came(6, gpu=8, priority=100))
    assert est.p50 >= 120 * MIN and est.p90 > est.p50
    assert all(start % HOUR == 0 for start in est.starts) and est.p90 >= e.quantile(est.starts, 0.9)
    # The words: 6 arrivals in the last hour of 8 GPUs for 60 min over the p50's wait, capped at the horizon (1 h).
    assert est.arrivals_ahead == pytest.approx(a.expected_work(6 / HOUR, HOUR, 8, HOUR)) == 48 * HOUR
    assert ("1 job ahead" not in e.evidence(est, "team-a")
            and "first in line in team-a, plus ~48 GPU·h expected from jobs submitted meanwhile that go first "
                "(higher priority in team-a, or queues further below their fair share) at the last hour's rate"
            in e.evidence(est, "team-a"))


def test_arrivals_whose_run_times_are_unknown_are_not_drawn():
    # A template and queue with no finished run: nothing to end them with, so they are left out, not an "unknown".
    est = _waiting_on_one_end(came(6, gpu=8, priority=100, template="never-ran", queue="team-c"))
    assert (est.status, est.p50, est.p90, est.arrivals_ahead) == (e.ESTIMATED, 60 * MIN, 60 * MIN, 0.0)


def test_window_words():
    assert [a.window_words(w) for w in (3600, 7200, 1800)] == [
        "the last hour's", "the last 2 hours'", "the last 30 minutes'"]


def test_p90_is_the_replays_quantile_at_the_calibrated_level():
    # Run times 20-110 min: the replays' starts spread; p50 is their nearest-rank median and p90 their `upper_bound`
    # (the quantile at P90_LEVEL, or the log-normal bound at P90_Z when larger); a level of 0.5 and no z make p90
    # the p50.
    history = RunTimes(("t", "team-a", m * MIN) for m in range(20, 120, 10))
    running = [Job(id=1, queue="team-a", asks=gpus(8), template="t", name="run-1")]
    target = [Job(id=10, queue="team-a", asks=gpus(4), template="t", name="waiting")]
    est = e.estimate(10, gpus(8), QUEUES, running, target, history)
    assert len(est.starts) == est.samples == e.SAMPLES and list(est.starts) == sorted(est.starts)
    assert (est.p50, est.p90) == (e.quantile(est.starts, 0.5), e.upper_bound(est.starts))
    assert est.p90 >= e.quantile(est.starts, e.P90_LEVEL)
    assert est.p90 >= est.p50 and set(est.starts) <= {m * MIN for m in range(20, 120, 10)}
    half = e.estimate(10, gpus(8), QUEUES, running, target, history, p90_level=0.5, p90_z=None)
    assert half.p90 == half.p50 == est.p50


def test_the_p90_bound_is_log_normal_with_the_replays_own_spread():
    starts = [600.0, 1200.0, 2400.0]  # log mean ln 1200, log sd ln 2 x sqrt(2/3) = 0.566
    assert e.upper_bound(starts, 0.9, 2.0) == pytest.approx(1200 * math.exp(2 * math.log(2) * math.sqrt(2 / 3)))
    assert e.upper_bound(starts, 0.9, 2.0) / MIN == pytest.approx(62.04, abs=0.01)
    assert e.upper_bound(starts, 0.9, 1.0) == 2400.0  # the replays' own 0.9 quantile is larger
    assert e.upper_bound(starts, 0.9, None) == 2400.0
    assert e.upper_bound([0.0, 30.0, 60.0], 0.9, 3.0) == 60.0  # starts under a minute count as one: no spread
