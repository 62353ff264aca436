"""Pure parts of the queue sync: the desired Queue spec, field-by-field comparison and the update body."""
import pytest

from scheduling.constants import ANNOTATION_SPEC_HASH, LABEL_MANAGED_BY
from scheduling.kube.kai_units import display, status_amounts
from scheduling.models import QueuePolicy
from scheduling.reconcile import queues as sync


def policy(**fields):
    return QueuePolicy(name="team", **{"gpu_limit": -1, "cpu_limit": -1, "memory_limit": -1, **fields})


def test_desired_spec_sends_every_limit_explicitly_in_kai_units():
    spec = sync.desired_spec(policy(gpu_quota=0.5, cpu_quota=4000, memory_quota=68720, cpu_limit=8000,
                                    preempt_min_runtime="10m"), parent_name="dept")
    assert spec == {
        "priority": 100, "parentQueue": "dept", "preemptMinRuntime": "10m",
        "resources": {"gpu": {"quota": 0.5, "limit": -1, "overQuotaWeight": 1},
                      "cpu": {"quota": 4000, "limit": 8000, "overQuotaWeight": 1},
                      "memory": {"quota": 68720, "limit": -1, "overQuotaWeight": 1}}}


def test_flat_fields_fill_kai_defaults_so_a_missing_limit_reads_as_zero():
    flat = sync.flat_fields({"resources": {"gpu": {"quota": 4.0}}})
    assert flat["resources.gpu.quota"] == 4 and flat["resources.gpu.limit"] == 0
    assert flat["priority"] == 100 and flat["parentQueue"] == ""


def test_diff_names_each_changed_field_with_expected_and_found():
    want = sync.flat_fields(sync.desired_spec(policy(gpu_quota=4)))
    found = dict(want, **{"resources.gpu.quota": 6, "priority": 100})
    assert sync.diff_fields(want, found) == [{"field": "resources.gpu.quota", "expected": 4, "found": 6}]
    assert sync.diff_fields(want, dict(want, **{"resources.gpu.quota": 4.0000000001})) == []


def test_update_body_keeps_unknown_fields_and_resource_version_and_drops_removed_optional_fields():
    existing = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                "metadata": {"name": "team", "resourceVersion": "42", "labels": {"other": "x"}},
                "spec": {"displayName": "by hand", "futureField": True,
                         "resources": {"gpu": {"quota": 6, "extra": 1}}},
                "status": {"allocated": {"cpu": "1"}}}
    body = sync._body_for(sync.desired_spec(policy(gpu_quota=4)), existing, "team")
    assert body["metadata"]["resourceVersion"] == "42"
    assert body["metadata"]["labels"]["other"] == "x" and body["metadata"]["labels"][LABEL_MANAGED_BY] == "gangweb"
    assert ANNOTATION_SPEC_HASH in body["metadata"]["annotations"]
    assert "displayName" not in body["spec"] and body["spec"]["futureField"] is True
    assert body["spec"]["resources"]["gpu"] == {"quota": 4, "limit": -1, "overQuotaWeight": 1, "extra": 1}
    assert "status" not in body


@pytest.mark.parametrize("raw,expected", [
    ({"nvidia.com/gpu": "2", "cpu": "3500m", "memory": "8Gi"}, {"gpu": 2.0, "cpu": 3500, "memory": 8590}),
    ({"nvidia.com/gpu": "500m"}, {"gpu": 0.5, "cpu": 0, "memory": 0}),
    (None, {}),  # not reported (no KAI scheduler): nothing, not zeros
    ({}, {"gpu": 0.0, "cpu": 0, "memory": 0}),  # reported empty: zeros
    ({"cpu": "garbage"}, {"gpu": 0.0, "cpu": 0, "memory": 0}),
])
def test_status_quantities_become_kai_units(raw, expected):
    assert status_amounts(raw) == expected


@pytest.mark.parametrize("resource,amount,shown", [
    ("memory", 8000, "8G"), ("memory", 1073741824 // 10**6, "1073M"), ("memory", 0, "0"),
    ("cpu", 250, "250m"), ("cpu", 0, "0"), ("gpu", 0.25, "0.25"), ("gpu", 2.0, "2"), ("gpu", -1, "unlimited"),
])
def test_display_strings(resource, amount, shown):
    assert display(resource, amount) == shown


@pytest.mark.parametrize("resource,amount", [
    ("gpu", 0.5), ("gpu", 4.0), ("gpu", 0.125), ("cpu", 4000), ("cpu", 1500), ("cpu", 1), ("memory", 68720),
    ("memory", 8000), ("memory", 1), ("memory", 0), ("memory", 1024 * 1024 * 1024 // 1000), ("cpu", -1),
])
def test_display_strings_convert_back_to_the_same_amount(resource, amount):
    """Forms show `display` strings and send them back as typed: the round trip must be exact."""
    from scheduling.kube.kai_units import to_kai

    assert to_kai(resource, display(resource, amount), "field") == amount


def test_a_queue_without_status_counts_as_not_reported_so_the_estimate_is_used():
    from scheduling.models import QueueClusterState
    from scheduling.services.queues.payloads import _usage_sum

    unreported = sync.status_payload({"spec": {}})  # a Queue CR no scheduler has written status to
    assert unreported["allocated"] == {} and unreported["requested"] == {}
    assert _usage_sum([QueueClusterState(status=unreported)], "allocated") is None
    reported = sync.status_payload({"status": {"allocated": {"nvidia.com/gpu": "6"}}})
    assert _usage_sum([QueueClusterState(status=reported)], "allocated") == {"gpu": 6.0, "cpu": 0, "memory": 0}
