"""A queue policy as a Volcano Queue (reconcile/volcano_desired.py): the mapped values, and the warnings for what
Volcano cannot express."""
import pytest

from scheduling.models import QueuePolicy
from scheduling.reconcile import volcano_desired as vd


def policy(**fields) -> QueuePolicy:
    return QueuePolicy(name=fields.pop("name", "team-a"), **fields)


def codes(result) -> list[str]:
    return [w["code"] for w in result.warnings]


def test_limits_become_capability_quotas_deserved_and_unlimited_is_left_out():
    result = vd.desired(policy(gpu_quota=4, gpu_limit=8, cpu_quota=16000, cpu_limit=-1, memory_quota=64000,
                               memory_limit=128000, priority=200, gpu_over_quota_weight=2,
                               cpu_over_quota_weight=2, memory_over_quota_weight=2), parent_name="dept")
    assert result.spec == {
        "weight": 2, "priority": 200, "reclaimable": True, "parent": "dept",
        "capability": {"nvidia.com/gpu": "8", "memory": "128000M"},  # cpu limit -1: no cpu capability
        "deserved": {"nvidia.com/gpu": "4", "cpu": "16", "memory": "64000M"},
    }
    assert "guarantee" not in result.spec  # gangweb's policies have no guarantee
    assert result.warnings == []


def test_a_top_level_queue_has_no_parent_and_fractions_are_milli_quantities():
    result = vd.desired(policy(gpu_quota=0.5, gpu_limit=1.5, cpu_quota=1500))
    assert "parent" not in result.spec
    assert result.spec["deserved"] == {"nvidia.com/gpu": "500m", "cpu": "1500m", "memory": "0M"}
    assert result.spec["capability"] == {"nvidia.com/gpu": "1500m"}
    assert codes(result) == ["volcano_fractional_gpu"]


@pytest.mark.parametrize("gpu_weight, weight, code", [
    (1, 1, None),
    (3, 3, None),
    (0, 1, "volcano_weight_zero"),          # the CRD rejects 0: the smallest share Volcano has, with a warning
    (0.4, 1, "volcano_weight_rounded"),     # rounds to 0, still at least 1
    (2.5, 3, "volcano_weight_rounded"),     # half up
    (65535, 65535, None),
    (100000, 65535, "volcano_weight_capped"),
])
def test_over_quota_weight_maps_into_volcanos_1_to_65535(gpu_weight, weight, code):
    result = vd.desired(policy(gpu_over_quota_weight=gpu_weight, cpu_over_quota_weight=gpu_weight,
                               memory_over_quota_weight=gpu_weight))
    assert result.spec["weight"] == weight
    assert codes(result) == ([code] if code else [])


def test_weights_that_differ_per_resource_use_the_gpus_and_say_so():
    result = vd.desired(policy(gpu_over_quota_weight=3, cpu_over_quota_weight=1, memory_over_quota_weight=3))
    assert result.spec["weight"] == 3
    assert codes(result) == ["volcano_one_weight"]
    assert result.warnings[0]["field"] == "cpu_over_quota_weight"
    assert "cpu over-quota weight (1)" in result.warnings[0]["message"]


def test_kai_only_settings_and_an_unlimited_quota_are_warnings():
    result = vd.desired(policy(gpu_quota=-1, preempt_min_runtime="10m", reclaim_min_runtime="30m"))
    assert "nvidia.com/gpu" not in result.spec["deserved"]
    assert sorted(codes(result)) == ["volcano_unlimited_quota", "volcano_unsupported", "volcano_unsupported"]
    assert {w["field"] for w in result.warnings} == {"gpu_quota", "preempt_min_runtime", "reclaim_min_runtime"}


def test_flat_fields_compare_quantities_by_amount_and_fill_volcanos_defaults():
    written = vd.desired(policy(gpu_quota=4, memory_quota=64000)).spec
    as_read = {**written, "deserved": {"nvidia.com/gpu": 4, "cpu": "0", "memory": "64G"}}
    assert vd.diff(vd.flat_fields(written), vd.flat_fields(as_read)) == []
    assert vd.flat_fields({}) == {"weight": 1, "priority": 0, "parent": "", "reclaimable": True}


def test_a_hand_edit_and_a_hand_added_resource_are_both_drift():
    want = vd.flat_fields(vd.desired(policy(gpu_quota=4)).spec)
    edited = vd.desired(policy(gpu_quota=4)).spec
    edited = {**edited, "weight": 9, "deserved": {**edited["deserved"], "nvidia.com/gpu": "6"},
              "guarantee": {"resource": {"cpu": "2"}}}
    assert vd.diff(want, vd.flat_fields(edited)) == [
        {"field": "deserved.nvidia.com/gpu", "expected": 4.0, "found": 6.0},
        {"field": "weight", "expected": 1, "found": 9},
        {"field": "guarantee.cpu", "expected": None, "found": 2000},
    ]


def test_merged_spec_keeps_what_gangweb_does_not_own_and_drops_owned_keys_it_no_longer_sets():
    merged = vd.merged_spec({"affinity": {"nodeGroupAffinity": {}}, "guarantee": {"resource": {"cpu": "1"}},
                             "parent": "old", "weight": 5}, {"weight": 2, "capability": {}})
    assert merged == {"affinity": {"nodeGroupAffinity": {}}, "weight": 2, "capability": {}}


def test_a_foreign_queue_imports_with_kai_units_and_absent_capability_as_unlimited():
    fields = vd.import_fields({"weight": 4, "priority": 7, "deserved": {"nvidia.com/gpu": "2", "cpu": "500m",
                                                                      "memory": "1Gi"},
                               "capability": {"cpu": "8"}})
    assert fields == {"priority": 7, "gpu_quota": 2.0, "gpu_limit": -1.0, "cpu_quota": 500, "cpu_limit": 8000,
                      "memory_quota": 1074, "memory_limit": -1, "gpu_over_quota_weight": 4.0,
                      "cpu_over_quota_weight": 4.0, "memory_over_quota_weight": 4.0}


def test_status_keeps_volcanos_counters_and_allocated_in_kai_units():
    assert vd.status_payload({"status": {"state": "Open", "allocated": {"nvidia.com/gpu": "2", "cpu": "4",
                                                                         "memory": "8G"},
                                         "pending": 1, "running": 2, "inqueue": 0}}) == {
        "state": "Open", "allocated": {"gpu": 2.0, "cpu": 4000, "memory": 8000}, "pending": 1, "running": 2,
        "inqueue": 0}
    assert vd.status_payload({}) == {"state": "", "allocated": {}}


def test_a_parent_of_root_set_by_volcano_is_the_same_as_none():
    want = vd.flat_fields(vd.desired(policy()).spec)
    assert vd.diff(want, vd.flat_fields({**vd.desired(policy()).spec, "parent": "root"})) == []
