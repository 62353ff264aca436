"""Repairs that do not hold (hostile pass F5, scheduling/reconcile/jobs/repairs.py): when gangweb backs off, by how
much, what it says, and that the watch queues no pass for a partial gang while a repair is held back."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from scheduling.reconcile import watching
from scheduling.reconcile.jobs import repairs

T0 = datetime(2026, 12, 6, 10, 0, 0, tzinfo=UTC)
WHAT = ("PodGroup team/train-1a2b3c4d schedulingPolicy.gang.minCount", "3")


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.GANGWEB_REPAIR_LIMIT = 3
    settings.GANGWEB_REPAIR_BACKOFF_SECONDS = 1
    settings.GANGWEB_RESYNC_SECONDS = 30


@pytest.mark.parametrize(("count", "delay"), [(0, 0), (2, 0), (3, 1), (4, 2), (5, 4), (7, 16), (8, 30), (40, 30)])
def test_the_wait_doubles_from_one_second_after_three_repairs_that_did_not_hold_up_to_the_resync_period(count,
                                                                                                       delay):
    assert repairs.delay_for(count) == delay


def test_the_same_drift_repaired_again_and_again_is_held_back_and_said_so():
    job = SimpleNamespace(repairs={})
    for second, count in ((0, 0), (1, 1), (2, 2)):
        assert repairs.repaired(job, [WHAT], T0 + timedelta(seconds=second))["hold_until"] is None
        assert job.repairs["count"] == count
    state = repairs.repaired(job, [WHAT], T0 + timedelta(seconds=3))
    assert (state["count"], state["delay"]) == (3, 1)
    assert repairs.held(job, WHAT[0], T0 + timedelta(seconds=3.5)) == 0.5
    assert repairs.held(job, WHAT[0], T0 + timedelta(seconds=4)) is None  # over
    assert repairs.held(job, "Workload team/x spec", T0 + timedelta(seconds=3.5)) is None  # another drift
    assert repairs.message(job, T0 + timedelta(seconds=3)) == (
        "PodGroup team/train-1a2b3c4d schedulingPolicy.gang.minCount set to 3 was changed back 3 times in 3 s by "
        "something in the cluster (an admission policy or another controller); gangweb sets it again in 1 s, then "
        "backs off up to every 30 s")


def test_a_drift_not_seen_again_within_the_window_starts_the_count_again():
    job = SimpleNamespace(repairs={})
    for second in range(5):
        repairs.repaired(job, [WHAT], T0 + timedelta(seconds=second))
    assert job.repairs["count"] == 4 and job.repairs["delay"] == 2
    later = T0 + timedelta(seconds=4 + repairs.REPAIR_WINDOW_SECONDS + 2 + 1)
    assert repairs.repaired(job, [WHAT], later)["count"] == 0 and job.repairs["hold_until"] is None


def test_two_objects_repaired_together_are_one_repair_and_in_sync_ends_the_hold_but_not_the_count():
    job = SimpleNamespace(repairs={})
    both = [WHAT, ("Workload team/train-1a2b3c4d podGroupTemplates", '[{"name":"worker"}]')]
    for second in range(4):
        repairs.repaired(job, both, T0 + timedelta(seconds=second))
    assert job.repairs["count"] == 3
    assert repairs.held(job, repairs.what_of(both), T0 + timedelta(seconds=3)) == 1
    repairs.held_off(job)
    assert job.repairs["hold_until"] is None and job.repairs["count"] == 3
    assert repairs.repaired(job, both, T0 + timedelta(seconds=5))["delay"] == 2


def test_wanted_values_names_what_gangweb_sets():
    want = {"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}, "queue": "q", "minResources": {"cpu": "2"}}}
    assert repairs.wanted_values(want, ["schedulingPolicy.gang.minCount"]) == "3"
    assert repairs.wanted_values(want, ["queue", "minResources"]) == 'minResources={"cpu":"2"}, queue=q'


@pytest.mark.django_db  # the database clock (scheduling/db/clock.py) is read on PostgreSQL
@pytest.mark.parametrize(("hold", "deleted", "queued"), [
    (True, False, 0),  # a partial gang whose repair is held back: its pass is queued already, at the hold's end
    (True, True, 1),  # an object deleted or edited: a pass at once, hold or not
    (False, False, 1),  # a partial gang: a pass at once
])
def test_the_watch_queues_no_pass_for_a_partial_gang_while_a_repair_is_held_back(monkeypatch, hold, deleted,
                                                                                  queued):
    until = (datetime.now(UTC) + timedelta(seconds=60)).isoformat() if hold else None
    job = SimpleNamespace(pk=7, phase="Queued", phase_reason="PartialGang", cleaned_up_at=None,
                          desired_state="Run", repairs={"hold_until": until}, owner_uids=None)
    sent = []
    monkeypatch.setattr(watching, "with_database", lambda fn: job)
    monkeypatch.setattr(watching.enqueue, "send", lambda *a, **k: sent.append(a))
    watching.observe_job("uid", None, deleted)
    assert len(sent) == queued

