"""The pure queue desired-state module (reconcile/queue_desired.py, reconcile/volcano_desired.py): one policy as a KAI
and as a Volcano Queue, computed by hand; the one flat-field diff both families use; the Volcano warnings for a quota
above its limit and for children whose deserved add up to more than the parent's."""
import pytest

from scheduling.models import QueuePolicy
from scheduling.reconcile import queue_desired as qd
from scheduling.reconcile import volcano_desired as vd


def policy(**fields) -> QueuePolicy:
    return QueuePolicy(name=fields.pop("name", "team-a"),
                       **{"gpu_limit": -1, "cpu_limit": -1, "memory_limit": -1, **fields})


# A policy a user would write: 2.5 GPUs (limit 4), 8 cores (limit 12 cores), 32 GB of memory unlimited, weight 3.
TEAM = {"gpu_quota": 2.5, "gpu_limit": 4, "cpu_quota": 8000, "cpu_limit": 12000, "memory_quota": 32000,
        "gpu_over_quota_weight": 3, "cpu_over_quota_weight": 3, "memory_over_quota_weight": 3, "priority": 150,
        "display_name": "Team A"}


def test_one_policy_as_a_kai_queue():
    assert qd.desired_spec(policy(**TEAM), "research") == {
        "priority": 150, "displayName": "Team A", "parentQueue": "research",
        "resources": {"gpu": {"quota": 2.5, "limit": 4, "overQuotaWeight": 3},
                      "cpu": {"quota": 8000, "limit": 12000, "overQuotaWeight": 3},
                      "memory": {"quota": 32000, "limit": -1, "overQuotaWeight": 3}}}


def test_the_same_policy_as_a_volcano_queue():
    queue = vd.desired(policy(**TEAM), "research")
    assert queue.spec == {
        "weight": 3, "priority": 150, "reclaimable": True, "parent": "research",
        "capability": {"nvidia.com/gpu": "4", "cpu": "12"},  # memory limit -1: no memory capability
        "deserved": {"nvidia.com/gpu": "2500m", "cpu": "8", "memory": "32000M"}}
    assert [w["code"] for w in queue.warnings] == ["volcano_fractional_gpu"]


def test_kai_flat_fields_round_trip_through_the_api_server_without_a_change():
    written = qd.flat_fields(qd.desired_spec(policy(**TEAM), "research"))
    as_read = {"displayName": "Team A", "parentQueue": "research", "priority": 150,
               "resources": {"gpu": {"quota": 2.5, "limit": 4.0, "overQuotaWeight": 3.0},
                             "cpu": {"quota": 8000.0, "limit": 12000, "overQuotaWeight": 3},
                             "memory": {"quota": 32000, "limit": -1, "overQuotaWeight": 3}}}
    assert qd.diff_fields(written, qd.flat_fields(as_read)) == []
    assert qd.spec_hash(written) == qd.spec_hash(qd.flat_fields(as_read))


@pytest.mark.parametrize("expected,found,extra,diff", [
    # Within 1e-9 is the same number; the found side's extra keys count only with extra=True.
    ({"a": 4, "b": "x"}, {"a": 4.0000000001, "b": "x", "z": 1}, False, []),
    ({"a": 4, "b": "x"}, {"a": 4.0000000001, "b": "x", "z": 1}, True,
     [{"field": "z", "expected": None, "found": 1}]),
    # Expected keys first (in order, or sorted with extra), then keys only found.
    ({"b": 1, "a": 2}, {"b": 5, "a": 6}, False,
     [{"field": "b", "expected": 1, "found": 5}, {"field": "a", "expected": 2, "found": 6}]),
    ({"b": 1, "a": 2}, {"b": 5, "a": 6, "0": 7}, True,
     [{"field": "a", "expected": 2, "found": 6}, {"field": "b", "expected": 1, "found": 5},
      {"field": "0", "expected": None, "found": 7}]),
    ({"reclaimable": True}, {"reclaimable": False}, True,
     [{"field": "reclaimable", "expected": True, "found": False}]),
    # A missing expected key reads as None.
    ({"gpu": 4}, {}, False, [{"field": "gpu", "expected": 4, "found": None}]),
])
def test_one_flat_field_diff_for_both_families(expected, found, extra, diff):
    assert qd.diff_fields(expected, found, extra=extra) == diff


def test_volcano_diff_is_the_shared_diff_with_found_only_keys():
    want = vd.flat_fields(vd.desired(policy(gpu_quota=4)).spec)
    hand = {**vd.desired(policy(gpu_quota=4)).spec, "guarantee": {"resource": {"cpu": "2"}}}
    assert vd.diff(want, vd.flat_fields(hand)) == [{"field": "guarantee.cpu", "expected": None, "found": 2000}]


def test_a_quota_above_its_limit_is_sent_as_the_limit_with_a_warning():
    queue = vd.desired(policy(gpu_quota=6, gpu_limit=4, cpu_quota=20000, cpu_limit=16000, memory_quota=1000))
    assert queue.spec["deserved"] == {"nvidia.com/gpu": "4", "cpu": "16", "memory": "1000M"}
    assert queue.spec["capability"] == {"nvidia.com/gpu": "4", "cpu": "16"}
    over = [w for w in queue.warnings if w["code"] == "volcano_deserved_over_capability"]
    assert [w["field"] for w in over] == ["gpu_quota", "cpu_quota"]
    assert over[0]["message"].startswith("gpu quota 6 is above the gpu limit 4;")
    assert over[1]["message"].startswith("cpu quota 20 is above the cpu limit 16;")
    # KAI keeps the policy's numbers: its own warning (QuotaOverLimit) says the same.
    assert qd.desired_spec(policy(gpu_quota=6, gpu_limit=4))["resources"]["gpu"] == {
        "quota": 6, "limit": 4, "overQuotaWeight": 1}


def test_a_quota_equal_to_its_limit_or_under_an_unlimited_one_is_not_lowered():
    assert vd.deserved_amounts(policy(gpu_quota=4, gpu_limit=4, cpu_quota=8000, memory_quota=-1)) == {
        "gpu": 4, "cpu": 8000}
    assert [w["code"] for w in vd.desired(policy(gpu_quota=4, gpu_limit=4)).warnings] == []


def test_children_whose_deserved_add_up_above_the_parents_warn_on_the_parent():
    dept = policy(name="dept", gpu_quota=8, cpu_quota=32000, memory_quota=-1)
    kids = [policy(name="team-b", gpu_quota=4, cpu_quota=16000, memory_quota=64000),
            policy(name="team-a", gpu_quota=4.5, gpu_limit=6, cpu_quota=16000)]
    [warning] = vd.children_warnings(dept, kids)
    assert (warning["code"], warning["field"]) == ("volcano_children_over_parent", "gpu_quota")
    assert warning["message"].startswith(
        "the `deserved` nvidia.com/gpu of the child queues (team-a, team-b) add up to 8500m, more than this "
        "queue's 8;")
    # cpu 16 + 16 = 32 cores fits exactly; memory is unlimited on the parent (already volcano_unlimited_quota).


def test_the_children_sum_counts_what_is_sent_lowered_quotas_included():
    dept = policy(name="dept", gpu_quota=8)
    kids = [policy(name="a", gpu_quota=6, gpu_limit=4), policy(name="b", gpu_quota=4)]  # a sends 4: 4 + 4 = 8
    assert vd.children_warnings(dept, kids) == []
    assert vd.children_warnings(dept, []) == []
    # GPU fractions that add up to the parent's on paper do not warn on float rounding.
    assert vd.children_warnings(policy(name="p", gpu_quota=0.3),
                                [policy(name="x", gpu_quota=0.1), policy(name="y", gpu_quota=0.2)]) == []
