"""Durations of a re-queued job: the wait and the run of its latest attempt, the time to get going of its first."""
from types import SimpleNamespace

from scheduling.choices import GangPhase as P
from scheduling.observe import timeline
from tests.kube_objects import t

NOW = t(200)


def entry(phase, at, attempt=0):
    return SimpleNamespace(phase=phase, at=t(at), attempt=attempt, id=None)


REQUEUED = [entry(P.SUBMITTED, 0), entry(P.DISPATCHED, 1), entry(P.QUEUED, 2), entry(P.SCHEDULED, 5),
            entry(P.RUNNING, 6), entry(P.QUEUED, 50, 1), entry(P.SCHEDULED, 80, 1), entry(P.RUNNING, 90, 1)]


def test_a_requeued_job_reads_its_latest_attempt_for_time_in_queue_and_run_time():
    spans = timeline.spans(REQUEUED, NOW)
    assert spans["time_in_queue"] == {"duration_s": 30.0, "ongoing": False, "inferred": False}
    assert spans["run_time"] == {"duration_s": 110.0, "ongoing": True, "inferred": False}
    assert spans["time_to_schedule"] == {"duration_s": 5.0, "ongoing": False, "inferred": False}
    assert spans["time_to_running"] == {"duration_s": 6.0, "ongoing": False, "inferred": False}
    assert timeline.requeues(REQUEUED) == 1


def test_while_the_second_attempt_waits_its_time_in_queue_counts_and_there_is_no_run_time():
    waiting = REQUEUED[:6]
    spans = timeline.spans(waiting, NOW)
    assert spans["time_in_queue"] == {"duration_s": 150.0, "ongoing": True, "inferred": False}
    assert spans["run_time"] is None
    assert timeline.durations(waiting)["time_in_queue"] is None


def test_entries_are_ordered_by_attempt_then_time_and_each_lasts_until_the_next():
    shuffled = list(reversed(REQUEUED))
    items = timeline.annotate(shuffled, NOW)
    assert [(e.phase, e.attempt) for e in items] == [(e.phase, e.attempt) for e in REQUEUED]
    assert items[4].duration_s == 44.0  # Running of the first attempt until the re-queue
    assert (items[-1].duration_s, items[-1].ongoing) == (110.0, True)


def test_current_attempt_gives_the_latest_attempts_entries():
    rows = [(e.phase, e.at, e.attempt) for e in REQUEUED[:6]]
    assert timeline.current_attempt(rows) == (1, {P.QUEUED: t(50)})
    assert timeline.current_attempt([]) == (0, {})
