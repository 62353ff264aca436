"""An observation that had to leave out objects the job's row does not record yet (a pass in flight) asks the watcher
to look again: the job is observed again without any new event, until an observation no longer asks, at most
LOOK_AGAIN_TRIES times in a row. Events are fed to the cache directly; no API server is involved."""
from __future__ import annotations

import threading
import uuid

import pytest

from scheduling.reconcile import watch_dispatch
from scheduling.reconcile.cluster_watcher import JOB, ClusterWatcher

from .test_watch_dispatch import listed
from .test_watch_memory import labelled


def a_watcher(answers: list[bool]) -> tuple[ClusterWatcher, list[str], threading.Event]:
    """A watcher whose on_change answers `answers` in turn (then False), recording the job UIDs it was called with;
    the event is set once every answer was given."""
    seen: list[str] = []
    done = threading.Event()

    def on_change(job_uid, objects, deleted):
        seen.append(job_uid)
        if len(seen) >= len(answers):
            done.set()
        return answers[len(seen) - 1] if len(seen) <= len(answers) else False

    # Every kind listed (empty) first, as a watcher's start does: the dispatcher observes only then.
    return listed(ClusterWatcher("test", api=None, kinds=[], instance="test", on_change=on_change)), seen, done


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(watch_dispatch, "LOOK_AGAIN_SECONDS", 0.01)


def test_a_job_whose_observation_asks_again_is_observed_again_without_an_event_until_it_no_longer_asks(quick):
    w, seen, done = a_watcher([True, True, False])
    job = str(uuid.uuid4())
    w.apply_event(JOB, "ADDED", labelled(JOB, "j-w", job))
    w.start_dispatch()
    try:
        assert done.wait(10), f"observed {len(seen)} times"
        assert w._later == {}
    finally:
        w.stop()
    assert seen == [job, job, job]  # one event, three observations: the last answered False


def test_looking_again_stops_after_the_tries_in_a_row_and_the_next_event_observes_once_more(quick, monkeypatch):
    monkeypatch.setattr(watch_dispatch, "LOOK_AGAIN_TRIES", 2)
    w, seen, done = a_watcher([True] * 4)
    job = str(uuid.uuid4())
    w.apply_event(JOB, "ADDED", labelled(JOB, "j-w", job))
    w.start_dispatch()
    try:
        # the event's observation and 2 tries again; then it is left alone although it still asks
        watches_wait(lambda: len(seen) == 3 and w._later.get(job) == (None, 3))
        w.apply_event(JOB, "MODIFIED", labelled(JOB, "j-w", job))
        assert done.wait(10), f"observed {len(seen)} times"
    finally:
        w.stop()
    assert seen == [job] * 4


def test_a_forgotten_job_is_not_looked_at_again(quick):
    w, seen, done = a_watcher([True] * 50)
    job = str(uuid.uuid4())
    w.apply_event(JOB, "ADDED", labelled(JOB, "j-w", job))
    w.start_dispatch()
    try:
        watches_wait(lambda: len(seen) >= 2)
        w.forget([job])
        count = len(seen)
        assert w._later.get(job) is None
        watches_wait(lambda: w._later == {} and len(seen) <= count + 1)
    finally:
        w.stop()


def watches_wait(predicate, timeout: float = 10) -> None:
    """Poll `predicate` (a condition on the watcher's state) until true; AssertionError after `timeout` s."""
    event = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        event.wait(0.01)
    raise AssertionError("condition not reached")
