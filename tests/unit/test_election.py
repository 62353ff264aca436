"""Leader election (scheduling/work/election.py): two replicas, one lease; take-over only after the holder's lease stood
still for its seconds on the candidate's own clock; fencing before anyone can take over; the beat scheduler sends
only under the lease. Two `Claims` play two processes over one database, each with its own clock."""
import time

import pytest
from celery import Celery

from scheduling.models import Lease
from scheduling.work import beat
from scheduling.work.election import Claims

pytestmark = pytest.mark.django_db


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def pair(seconds=30):
    a_clock, b_clock = Clock(), Clock()
    return Claims(seconds, clock=a_clock), a_clock, Claims(seconds, clock=b_clock), b_clock


def test_one_lease_one_holder_and_a_live_holder_keeps_it_however_long():
    a, a_clock, b, b_clock = pair()
    assert a.acquire(["watch:cluster:1"]) == ["watch:cluster:1"]
    assert b.acquire(["watch:cluster:1"]) == []
    for _ in range(20):  # 20 renewals 5 s apart: 100 s, far past the lease's 30 s
        a_clock.now += 5
        b_clock.now += 5
        assert a.renew() == set()
        assert b.acquire(["watch:cluster:1"]) == []
        assert a.valid("watch:cluster:1") and not b.valid("watch:cluster:1")
    assert Lease.objects.get(name="watch:cluster:1").holder == a.token


def test_a_silent_holder_is_replaced_after_the_lease_seconds_of_the_candidates_clock():
    a, a_clock, b, b_clock = pair(seconds=30)
    a.acquire(["beat"])
    b_clock.now = 5000.0  # clocks of two hosts need not agree
    assert b.acquire(["beat"]) == []  # first sight: the timer starts
    b_clock.now += 29.9
    assert b.acquire(["beat"]) == []
    b_clock.now += 0.2
    assert b.acquire(["beat"]) == ["beat"]
    assert b.valid("beat")
    # the old holder wakes up: its renewal finds the lease gone and it lets the work go
    a_clock.now += 10
    assert a.renew() == {"beat"}
    assert not a.valid("beat") and a.held == set()


def test_a_holder_that_cannot_renew_stops_writing_before_anyone_may_take_over():
    a, a_clock, _b, _ = pair(seconds=30)
    a.acquire(["watch:cluster:7"])
    a_clock.now += 19.9
    assert a.valid("watch:cluster:7")
    a_clock.now += 0.2  # 20.1 s without a renewal (the database away): past the renew deadline of 20 s
    assert not a.valid("watch:cluster:7")
    assert a.renew() == set()  # the database back, nobody took it: valid again
    assert a.valid("watch:cluster:7")


def test_a_released_lease_is_taken_at_once_and_a_replica_takes_at_most_its_limit():
    a, _, b, _ = pair()
    names = [f"watch:cluster:{i}" for i in range(1, 6)]
    assert a.acquire(names, limit=2) == names[:2]
    assert b.acquire(names, limit=2) == names[2:4]
    assert a.acquire(names, limit=2) == []  # full
    a.release(["watch:cluster:1"])
    assert b.acquire(names) == ["watch:cluster:1", "watch:cluster:5"]
    assert sorted(Lease.objects.filter(holder=b.token).values_list("name", flat=True)) == sorted(
        ["watch:cluster:1", "watch:cluster:3", "watch:cluster:4", "watch:cluster:5"])


def test_the_renew_deadline_must_be_shorter_than_the_lease():
    with pytest.raises(ValueError, match="below the lease"):
        Claims(30, renew_deadline=30)


def test_two_beats_one_sends_and_the_standby_takes_over_from_a_silent_one(tmp_path, monkeypatch):
    app = Celery("election-test", set_as_current=False, broker="memory://")
    app.conf.beat_schedule = {"tick": {"task": "x.tick", "schedule": 1.0}}
    sent = {"one": 0, "two": 0}
    clocks = {}

    def make(name):
        sched = beat.LeasedScheduler(app=app, schedule_filename=str(tmp_path / f"{name}-schedule"), lazy=False)
        clocks[name] = Clock()
        sched.claims.clock = clocks[name]
        monkeypatch.setattr(sched, "apply_entry", lambda entry, producer=None, n=name: sent.__setitem__(n, sent[n] + 1))
        sched.__dict__["producer"] = None  # cached_property: no broker connection in a unit test
        return sched

    one, two = make("one"), make("two")
    for _ in range(3):  # the entry is due every second of wall time; the lease clocks move 5 s a round
        for name, sched in (("one", one), ("two", two)):
            clocks[name].now += 5
            sched.tick()
        time.sleep(1.05)
    assert sent["one"] >= 2 and sent["two"] == 0, sent
    # `one` goes silent (killed): `two` takes over once the lease stood still 30 s on its clock (counted from
    # its last sight of `one`'s renewal, 5 s ago), not before
    for _ in range(5):
        clocks["two"].now += 5
        two.tick()
        assert not two.claims.valid(beat.LEASE_NAME)
    clocks["two"].now += 5
    two.tick()
    assert two.claims.valid(beat.LEASE_NAME)
    assert sent["two"] == 1  # what was due went out in the tick that took the lease
    for sched in (one, two):
        sched.close()
