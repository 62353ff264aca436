"""KAI's fair-share division (scheduling.queueing.fair_share_model), hand-computed scenarios with exact numbers.

Each table row: the capacity of one resource, the queues, and per queue the fair share, and for some the borrowed
and lent amounts and the sentence. Every number was worked out by hand in the comment above its scenario."""
import math

import pytest

from scheduling.queueing.fair_share_model import QueueInput as Q
from scheduling.queueing.fair_share_model import divide, explain


def gpus(x):
    n = f"{x:g}"
    return "1 GPU" if n == "1" else f"{n} GPUs"


def shares(capacity, queues):
    return {name: s.fair_share for name, s in divide(capacity, queues).items()}


SCENARIOS = {
    # 18 GPUs; quotas 8 + 0 leave 10; weights 2 and 3 split them 4 / 6.
    "the issue's example": (18, [Q("team-a", quota=8, weight=2, requested=20, allocated=12),
                                 Q("team-b", quota=0, weight=3, requested=20)],
                            {"team-a": 12, "team-b": 6}),
    # 20 GPUs; quotas 2 each leave 14; weight 0 gets none; 1 : 3 offers 3.5 / 10.5, c needs only 8 more and takes 8;
    # the 2.5 left go to b (still asking) in a second round: b 2 + 3.5 + 2.5 = 8, c 2 + 8 = 10.
    "weights 0, 1 and 3 with a second round": (20, [Q("a", quota=2, weight=0, requested=10, allocated=6),
                                                    Q("b", quota=2, weight=1, requested=10),
                                                    Q("c", quota=2, weight=3, requested=10)],
                                               {"a": 2, "b": 8, "c": 10}),
    # Every queue still asking has weight 0: the 5 left after quotas stay undivided (no division by zero, no NaN).
    "only weight 0 asking": (10, [Q("a", quota=2, weight=0, requested=5), Q("b", quota=3, weight=0, requested=5)],
                             {"a": 2, "b": 3}),
    # Unlimited quota deserves the whole level, capped by its request: a 10; b's quota 4 plus the 2 left.
    "unlimited quota": (16, [Q("a", quota=-1, weight=1, requested=10, allocated=10),
                             Q("b", quota=4, weight=1, requested=10)],
                        {"a": 10, "b": 6}),
    # No quotas; the first round offers 10 each: limit 3 caps a at 3, b takes 10; the 7 left go to b (it asks
    # 30) in a second round: a 3, b 17.
    "limit caps the share": (20, [Q("a", limit=3, weight=1, requested=10), Q("b", weight=1, requested=30)],
                             {"a": 3, "b": 17}),
    # Fractional GPUs: 2.5 GPUs, quotas 0.5 and 0.25 leave 1.75; weights 1 : 3 give 0.4375 and 1.3125, both
    # below what they still ask (0.75 and 1.75): a 0.9375, b 1.5625.
    "fractional GPUs": (2.5, [Q("a", quota=0.5, weight=1, requested=1.25), Q("b", quota=0.25, weight=3, requested=2)],
                        {"a": 0.9375, "b": 1.5625}),
    # Two levels: 24 GPUs; dept-x asks 40 (its teams' 20 + 20), dept-y 4: quotas give x 8, y 4, the 12 left go to
    # x alone (y is satisfied): x 20. x's 20 among its teams: quotas 4 and 2 leave 14, weights 1 : 3 give 3.5 and
    # 10.5: t1 7.5, t2 12.5.
    "two levels": (24, [Q("dept-x", quota=8), Q("dept-y", quota=8),
                        Q("t1", parent="dept-x", quota=4, weight=1, requested=20),
                        Q("t2", parent="dept-x", quota=2, weight=3, requested=20),
                        Q("t3", parent="dept-y", quota=8, weight=1, requested=4)],
                   {"dept-x": 20, "dept-y": 4, "t1": 7.5, "t2": 12.5, "t3": 4}),
    # Over-subscribed parent: 10 GPUs; P (quota 4) and Q (quota 6) take their quotas, nothing is left: P 4. P's
    # children have quotas 4 + 4 = 8 > 4: KAI gives each min(quota, request) anyway, so they get 4 and 4.
    "children's quotas exceed the parent": (10, [Q("P", quota=4), Q("Q", quota=6, requested=6),
                                                 Q("c1", parent="P", quota=4, requested=6),
                                                 Q("c2", parent="P", quota=4, requested=6)],
                                            {"P": 4, "Q": 6, "c1": 4, "c2": 4}),
    # Priority first: 12 GPUs, no quotas; priority 200 takes all it asks (10) before priority 100, whatever the
    # weights: a 10, b 2.
    "higher priority is served first": (12, [Q("a", priority=200, weight=1, requested=10),
                                             Q("b", priority=100, weight=5, requested=10)],
                                        {"a": 10, "b": 2}),
    # Nothing requested: no share, whatever the quota.
    "idle queues get nothing": (8, [Q("a", quota=4), Q("b", quota=4, requested=1)], {"a": 0, "b": 1}),
}


@pytest.mark.parametrize("capacity, queues, expected", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_the_division_gives_exactly_the_hand_computed_shares(capacity, queues, expected):
    got = shares(capacity, queues)
    assert got == expected
    assert all(math.isfinite(v) for v in got.values())


def test_the_issue_sentence_reads_as_written():
    result = divide(18, SCENARIOS["the issue's example"][1])
    a, b = result["team-a"], result["team-b"]
    assert (a.deserved, a.over_quota, a.surplus, a.weight_total, a.borrowed, a.lent) == (8, 4, 10, 5, 4, 0)
    assert explain(a, gpus, "GPUs") == ("team-a holds 12 GPUs: its 8 of quota plus 4 of the 10 idle GPUs, by "
                                        "weight 2 of 5; it gives back 4 if team-b asks.")
    assert explain(b, gpus, "GPUs") == ("team-b holds 0 GPUs, within its 0 of quota; it asks for 20 and its fair "
                                        "share is 6.")


def test_weight_zero_borrower_is_told_it_has_no_share_of_the_surplus():
    result = divide(20, SCENARIOS["weights 0, 1 and 3 with a second round"][1])
    a, b = result["a"], result["b"]
    assert (a.weight_total, b.weight_total, a.over_quota, b.over_quota) == (0, 4, 0, 6)
    assert explain(a, gpus, "GPUs") == ("a holds 6 GPUs: its 2 of quota plus 4 of the 14 idle GPUs, though by "
                                        "weight 0 it has no share of them (its fair share is 2); it gives back 4 if "
                                        "b or c ask.")


def test_unlimited_quota_borrows_nothing_and_says_so():
    a = divide(16, SCENARIOS["unlimited quota"][1])["a"]
    assert (a.fair_share, a.borrowed) == (10, 0)
    assert explain(a, gpus, "GPUs") == "a holds 10 GPUs, all within its unlimited quota; its fair share is 10 GPUs."


def test_unlimited_quota_asking_more_than_the_cluster_oversubscribes_its_level():
    result = divide(16, [Q("a", quota=-1, requested=30), Q("b", quota=4, requested=10)])
    assert (result["a"].fair_share, result["b"].fair_share) == (16, 4)
    assert result["a"].oversubscribed and result["b"].oversubscribed


def test_oversubscribed_children_are_marked_and_the_parent_is_not():
    result = divide(10, SCENARIOS["children's quotas exceed the parent"][1])
    assert result["c1"].oversubscribed and result["c2"].oversubscribed
    assert not result["P"].oversubscribed
    assert result["c1"].pool == 4 and result["P"].pool == 10


def test_borrower_above_its_share_and_the_lender_of_idle_quota():
    # 18 GPUs; quotas 8 + 6 leave 4; weights 2 : 3 give a 1.6, b 2.4: fair a 9.6, b 8.4. a holds 14 (borrows 6),
    # b holds 2 of its 6. Room outside the quotas: 18 - 14 = 4; a borrows 6, so 2 run on b's idle quota: b lends 2.
    result = divide(18, [Q("a", quota=8, weight=2, requested=20, allocated=14),
                         Q("b", quota=6, weight=3, requested=20, allocated=2)])
    a, b = result["a"], result["b"]
    assert (a.fair_share, b.fair_share, a.borrowed, a.lent, b.borrowed, b.lent) == (9.6, 8.4, 6, 0, 0, 2)
    assert explain(a, gpus, "GPUs") == ("a holds 14 GPUs: its 8 of quota plus 6 borrowed, more than the 4 GPUs "
                                        "left idle after quotas, 4.4 more than the 1.6 idle GPUs its weight 2 of 5 "
                                        "gives it (its fair share is 9.6); "
                                        "it gives back 6 if b asks.")
    assert explain(b, gpus, "GPUs") == ("b holds 2 GPUs, within its 6 of quota; it asks for 20 and its fair share "
                                        "is 8.4; it lends 2 of its idle quota to a, and gets it back when it asks.")


def test_the_sentence_names_the_fair_share_not_the_idle_slice_as_its_share():
    # 16 GPUs; quotas 4 + 4 leave 8, weights 1 : 1 give 4 each: fair shares 8 and 8. The sentence once said "its
    # share of 4" next to a fair share of 8 (a new user's pass): 4 is the slice of the idle GPUs, 8 the fair share.
    result = divide(16, [Q("a", quota=4, requested=16, allocated=12), Q("b", quota=4, requested=8, allocated=4)])
    a = result["a"]
    assert (a.fair_share, a.over_quota, a.borrowed) == (8, 4, 8)
    assert explain(a, gpus, "GPUs") == ("a holds 12 GPUs: its 4 of quota plus 8 of the 8 idle GPUs, 4 more than "
                                        "the 4 idle GPUs its weight 1 of 2 gives it (its fair share is 8); it "
                                        "gives back 8 if b asks.")
    below = divide(16, [Q("a", quota=4, requested=16, allocated=6), Q("b", quota=4, requested=8, allocated=4)])
    assert explain(below["a"], gpus, "GPUs") == ("a holds 6 GPUs: its 4 of quota plus 2 of the 8 idle GPUs (its "
                                                 "weight 1 of 2 gives it 4 idle GPUs; its fair share is 8); it "
                                                 "gives back 2 if b asks.")


def test_a_parent_counts_its_childrens_requests_and_allocations():
    result = divide(24, [Q("d"), Q("t1", parent="d", requested=3, allocated=1), Q("t2", parent="d", requested=2.5,
                                                                                allocated=2.5)])
    assert (result["d"].requested, result["d"].allocated) == (5.5, 3.5)


def test_a_missing_parent_or_a_cycle_makes_a_top_level_queue_instead_of_looping():
    result = divide(4, [Q("x", parent="gone", requested=1), Q("p", parent="q", requested=1),
                        Q("q", parent="p", requested=1)])
    assert result["x"].parent is None and result["x"].fair_share == 1
    assert {result["p"].fair_share, result["q"].fair_share} <= {0, 1, 2}


def test_zero_capacity_and_negative_inputs_stay_finite():
    result = divide(0, [Q("a", quota=3, weight=-2, requested=5), Q("b", quota=0, weight=0, requested=-1)])
    assert result["a"].fair_share == 3  # KAI gives the deserved quota even when nothing is left: oversubscribed
    assert result["a"].oversubscribed and result["b"].fair_share == 0
