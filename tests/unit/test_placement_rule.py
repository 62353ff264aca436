"""The placement rule (scheduling/placement/rule.py) on real numbers: fits now, else the earliest start, ties by the
queue's use there, then spread, then name; unknown clusters never chosen while another is known."""
from decimal import Decimal

import pytest

from scheduling.placement import rule
from scheduling.placement.rule import Amounts, Candidate, QueueThere, Where

GIB = 2**30


def gpus(n, cpu_cores=None, memory_gib=None) -> Amounts:
    """n GPUs with 8 cores and 32 GiB per GPU unless said otherwise (millicores, bytes)."""
    cores = cpu_cores if cpu_cores is not None else 8 * n
    gib = memory_gib if memory_gib is not None else 32 * n
    return Amounts(Decimal(n), cores * 1000, gib * GIB)


def where(name, size, held=0, waiting=0, unknown="", cid=None) -> Where:
    return Where(cid or hash(name) % 1000, name, gpus(size) if size is not None else None, gpus(held), gpus(waiting),
                 unknown)


def cand(w, asks=0, waiting_jobs=0) -> Candidate:
    return Candidate(w, QueueThere(gpus(asks), waiting_jobs))


def test_the_cluster_where_it_fits_now_is_chosen_and_the_sentence_gives_both_numbers():
    c1 = cand(where("c1", 8, held=6))  # 2 GPUs free
    c2 = cand(where("c2", 16, held=8))  # 8 GPUs free
    decision = rule.choose(gpus(4), [c1, c2])
    assert (decision.cluster, decision.rule) == ("c2", "fits")
    assert decision.text == "placed on c2: 8 GPUs free; c1 has 2 GPUs free"
    assert [c["fits"] for c in decision.clusters] == [False, True]
    assert decision.clusters[1]["free"] == {"gpu": 8.0, "cpu": 64.0, "memory": 256.0}


def test_waiting_jobs_of_gangweb_count_as_taken():
    # c1 has 8 free by its running jobs, but gangweb's 6 waiting GPUs will take them: c2's 4 free win.
    c1 = cand(where("c1", 8, waiting=6))
    c2 = cand(where("c2", 8, held=4))
    assert rule.choose(gpus(4), [c1, c2]).cluster == "c2"


@pytest.mark.parametrize(("c1", "c2", "expected", "why"), [
    # both full: the least waiting work for its size (c1: (16+4-16)/16 = 0.25; c2: (8+4-8)/8 = 0.5)
    (dict(size=16, held=16), dict(size=8, held=8), "c1", "earliest"),
    (dict(size=16, held=16, waiting=8), dict(size=8, held=8), "c2", "earliest"),  # 0.75 vs 0.5
])
def test_when_none_fits_the_earliest_start_wins(c1, c2, expected, why):
    decision = rule.choose(gpus(4), [cand(where("c1", **c1)), cand(where("c2", **c2))])
    assert (decision.cluster, decision.rule) == (expected, why)
    assert "fits nowhere now" in decision.text


def test_ties_go_to_the_cluster_the_queue_uses_least_then_fewest_waiting_then_name():
    a, b = where("a", 16), where("b", 16)
    assert rule.choose(gpus(1), [cand(a, asks=4), cand(b, asks=2)]).cluster == "b"
    assert rule.choose(gpus(1), [cand(a, waiting_jobs=1), cand(b, waiting_jobs=3)]).cluster == "a"
    assert rule.choose(gpus(1), [cand(where("b", 16)), cand(where("a", 16))]).cluster == "a"


def test_an_unknown_cluster_is_never_chosen_while_another_is_known():
    big_but_frozen = cand(where("c1", 64, unknown="unreachable since 12:00:00 UTC"))
    small = cand(where("c2", 8, held=8))  # full: it still wins over the unknown one
    decision = rule.choose(gpus(2), [big_but_frozen, small])
    assert decision.cluster == "c2"
    assert "c1 not considered: unreachable since 12:00:00 UTC" in decision.text
    assert decision.clusters[0] == {"cluster": "c1", "known": False, "why": "unreachable since 12:00:00 UTC",
                                    "fits": False, "free": None, "wait_share": None, "queue_share": None,
                                    "queue_waiting": 0}


def test_none_known_and_never_fits_are_refusals_that_say_why():
    with pytest.raises(rule.Unplaceable) as none_known:
        rule.choose(gpus(1), [cand(where("c1", 8, unknown="never probed"))])
    assert none_known.value.code == rule.NONE_KNOWN
    assert "c1: never probed" in none_known.value.message
    with pytest.raises(rule.Unplaceable) as too_big:
        rule.choose(gpus(16), [cand(where("c1", 8)), cand(where("c2", 4))])
    assert too_big.value.code == rule.NEVER_FITS
    assert "c1 has 8 GPUs of the 16 GPUs it asks" in too_big.value.message


def test_cpu_only_jobs_are_placed_and_described_in_cpu_cores():
    c1 = Where(1, "c1", Amounts(Decimal(0), 4000, 16 * GIB), Amounts(Decimal(0), 3500, 0))
    c2 = Where(2, "c2", Amounts(Decimal(0), 2000, 16 * GIB))
    decision = rule.choose(Amounts(Decimal(0), 1000, GIB), [cand(c1), cand(c2)])
    assert decision.text == "placed on c2: 2 CPU cores free; c1 has 0.5 CPU cores free"


def test_a_bulk_fills_the_cluster_that_fits_then_shares_by_size_and_never_overfills_one_with_room_elsewhere():
    big, small = where("big", 24, cid=1), where("small", 8, cid=2)
    queue_big, queue_small = QueueThere(), QueueThere()
    placed = {"big": 0, "small": 0}
    over_while_room = 0
    for _ in range(64):
        candidates = [Candidate(big, queue_big), Candidate(small, queue_small)]
        decision = rule.choose(gpus(1), candidates)
        chosen = next(c for c in candidates if c.where.name == decision.cluster)
        other = next(c for c in candidates if c is not chosen)
        if not chosen.where.fits(gpus(1)) and other.where.fits(gpus(1)):
            over_while_room += 1
        rule.take(chosen, gpus(1))
        placed[decision.cluster] += 1
    assert over_while_room == 0
    assert placed == {"big": 48, "small": 16}  # 24 + 8 fit at once, the next 32 wait 3:1 like the sizes
