"""Pure parts of clean ends: ownerReference verdicts, LimitRange defaults, retention times, `retentionSeconds`."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.core.exceptions import ValidationError

from scheduling.kube import limit_ranges, resources
from scheduling.reconcile import owner_refs, retention
from scheduling.services.templates.specs import validate_template_spec
from tests import builders

ROOT = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pg", "uid": "u-1"}}
REF = owner_refs.reference(ROOT)


def with_refs(refs) -> dict:
    return {"metadata": {"name": "x", "ownerReferences": refs}}


@pytest.mark.parametrize("refs, verdict", [
    ([dict(REF)], owner_refs.IN_SYNC),
    ([{**REF, "blockOwnerDeletion": None}], owner_refs.IN_SYNC),  # only identity fields count
    (None, owner_refs.PATCH),  # removed by hand, or written by a gangweb before ownerReferences
    ([], owner_refs.PATCH),
    ([dict(REF), {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u-9"}], owner_refs.PATCH),
    ([{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u-9"}], owner_refs.PATCH),
    ([{**REF, "uid": "u-old"}], owner_refs.STALE),  # the root was deleted (and maybe made again)
    ([{**REF, "name": "pg-g1", "uid": "u-old"}], owner_refs.STALE),  # a root of an earlier generation
    ([{**REF, "apiVersion": "scheduling.run.ai/v2alpha1", "uid": "u-old"}], owner_refs.PATCH),  # API moved on
    (["not-a-map"], owner_refs.PATCH),
    ("not-a-list", owner_refs.PATCH),
])
def test_an_objects_owner_references_are_judged_against_the_root(refs, verdict):
    assert owner_refs.verdict(with_refs(refs), REF) == verdict


def test_the_root_reference_names_it_by_uid_and_never_blocks_its_deletion():
    assert REF == {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "name": "pg", "uid": "u-1",
                   "blockOwnerDeletion": False}
    assert owner_refs.patch_body(REF) == {"metadata": {"ownerReferences": [REF]}}


LR_A = {"metadata": {"name": "a"}, "spec": {"limits": [
    {"type": "Container", "default": {"cpu": "1", "memory": "512Mi"}, "defaultRequest": {"cpu": "500m",
                                                                                       "memory": "256Mi"}},
    {"type": "Pod", "max": {"cpu": "64"}}]}}
LR_B = {"metadata": {"name": "b"}, "spec": {"limits": [
    {"type": "Container", "defaultRequest": {"cpu": "2", "nvidia.com/gpu": "1"}, "default": {"nvidia.com/gpu": "1"}}]}}


def test_limitranges_merge_in_name_order_and_the_first_to_set_a_resource_wins():
    assert limit_ranges.from_items([LR_B, LR_A]) == {
        "limits": {"cpu": "1", "memory": "512Mi", "nvidia.com/gpu": "1"},
        "requests": {"cpu": "500m", "memory": "256Mi", "nvidia.com/gpu": "1"}}


@pytest.mark.parametrize("items", [
    [{"spec": {"limits": "x"}}],
    [{"spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": 5}}]}}],
    [{"spec": {"limits": [{"type": "Container", "defaultRequest": ["cpu"]}]}}],
])
def test_a_malformed_limitrange_adds_nothing(items):
    assert limit_ranges.from_items(items) == {"limits": {}, "requests": {}}


@pytest.mark.parametrize("container, per_pod", [
    ({}, {"cpu": Decimal("0.5"), "memory": 256 * 2**20}),  # nothing set: defaultRequest
    ({"requests": {"cpu": "3"}}, {"cpu": 3, "memory": 256 * 2**20}),  # a request set is kept
    ({"limits": {"cpu": "2"}}, {"cpu": 2, "memory": 256 * 2**20}),  # a limit alone is the request
    ({"requests": {"memory": "1Gi"}}, {"cpu": Decimal("0.5"), "memory": 2**30}),
])
def test_a_container_without_requests_is_counted_with_the_namespace_defaults(container, per_pod):
    defaults = limit_ranges.from_items([LR_A])
    pod_set = builders.pod_set("w", replicas=1, containers=[{"name": "m", "image": "i", "resources": container}])
    counted = resources.gang_requests(limit_ranges.with_defaults([pod_set], defaults))
    assert counted == per_pod
    assert pod_set["template"]["spec"]["containers"][0]["resources"] == container  # the template is not touched


def test_init_containers_get_the_defaults_too_and_no_limitrange_changes_nothing():
    pod_set = builders.pod_set("w", replicas=2, containers=[{"name": "m", "image": "i"}])
    pod_set["template"]["spec"]["initContainers"] = [{"name": "init", "image": "i"}]
    assert limit_ranges.with_defaults([pod_set], {"limits": {}, "requests": {}}) == [pod_set]
    counted = resources.gang_requests(limit_ranges.with_defaults([pod_set], limit_ranges.from_items([LR_A])))
    assert counted["cpu"] == 1  # max(init 500m, main 500m) × 2 pods
    assert resources.gang_requests([pod_set]).get("cpu", 0) == 0  # what was counted before


@pytest.mark.parametrize("spec, seconds", [({}, 3600), ({"retentionSeconds": 0}, 0), ({"retentionSeconds": 90}, 90),
                                           ({"retentionSeconds": True}, 3600), ({"retentionSeconds": -1}, 3600)])
def test_the_retention_is_the_templates_else_the_setting(settings, spec, seconds):
    settings.GANGWEB_FINISHED_RETENTION_SECONDS = 3600
    assert retention.retention_seconds(spec) == seconds
    finished = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    job = SimpleNamespace(finished_at=finished, resolved_spec=spec, remove_after=None)
    job.remove_after = retention.remove_after(job)
    assert job.remove_after == finished + timedelta(seconds=seconds)
    assert retention.due(job, finished + timedelta(seconds=seconds)) and \
        not retention.due(job, finished + timedelta(seconds=seconds) - timedelta(microseconds=1))


@pytest.mark.parametrize("value, message", [(-1, "must be at least 0"), (31 * 86400, "must be at most 2592000"),
                                            ("1h", "must be an integer"), (1.5, "must be an integer")])
def test_a_template_retention_outside_0_to_30_days_is_a_400_naming_the_field(value, message):
    with pytest.raises(ValidationError) as err:
        validate_template_spec(builders.template_spec(retentionSeconds=value))
    assert message in err.value.message_dict["spec.retentionSeconds"][0]


def test_a_template_retention_is_kept_in_the_spec():
    assert validate_template_spec(builders.template_spec(retentionSeconds=600))["retentionSeconds"] == 600
