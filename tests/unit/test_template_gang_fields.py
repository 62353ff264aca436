"""Template `gang` fields that depend on the backend: KAI's minimum >= 1 (v0.15-v0.17 CRDs reject 0), KAI v0.17's
`preemptionDelay` / `stalenessGracePeriod` (Go durations), Kubernetes v1beta1's `disruptionMode`. Bad values are a
ValidationError naming the field (a 400 through the API); good ones reach the gang objects."""
import pytest
from django.core.exceptions import ValidationError

from scheduling.backends.kai_v2alpha2 import KaiV2alpha2
from scheduling.services.templates import specs as template_service
from tests import builders
from tests.unit.test_backends import spec


def validate(backend="kai", **gang):
    body = builders.template_spec(backend=backend, pod_sets=[builders.pod_set("worker", replicas=2)])
    body["gang"].update(gang)
    return template_service.validate_template_spec(body)


@pytest.mark.parametrize("backend, gang, field, words", [
    ("kai", {"minMember": 0}, "spec.gang.minMember", ""),
    ("kai", {"preemptionDelay": "soon"}, "spec.gang.preemptionDelay", "is not a duration"),
    ("kai", {"preemptionDelay": "-5m"}, "spec.gang.preemptionDelay", "must not be negative"),
    ("kai", {"preemptionDelay": 300}, "spec.gang.preemptionDelay", "is not a duration"),
    ("kai", {"stalenessGracePeriod": "5 minutes"}, "spec.gang.stalenessGracePeriod", "is not a duration"),
    ("volcano", {"preemptionDelay": "5m"}, "spec.gang.preemptionDelay", "only the kai backend"),
    ("k8s-workload", {"disruptionMode": "pod"}, "spec.gang.disruptionMode", "must be 'single'"),
])
def test_bad_gang_fields_are_refused_naming_the_field(backend, gang, field, words):
    with pytest.raises(ValidationError) as refused:
        validate(backend, **gang)
    assert field in refused.value.message_dict
    assert words in " ".join(refused.value.message_dict[field])


def test_a_gang_whose_every_pod_set_is_optional_is_refused_for_kai():
    # A pod set's minimum of 0 is an optional set (KAI subGroups[].minMember >= 0; tests/api/test_pod_set_minimums.py),
    # but a gang of only optional sets would require no pod at all (KAI's top-level minMember must be >= 1).
    body = builders.template_spec(backend="kai", pod_sets=[builders.pod_set("worker", replicas=2, minMember=0)])
    with pytest.raises(ValidationError) as refused:
        template_service.validate_template_spec(body)
    assert "every pod set has minMember 0" in refused.value.message_dict["spec.podSets"][0]


def test_kai_durations_reach_the_podgroup_and_a_cleared_one_is_removed():
    checked = validate(preemptionDelay="5m", stalenessGracePeriod="-1s")
    assert (checked["gang"]["preemptionDelay"], checked["gang"]["stalenessGracePeriod"]) == ("5m", "-1s")
    backend = KaiV2alpha2()
    [pg] = backend.build_gang_objects(spec(durations={"preemptionDelay": "5m", "stalenessGracePeriod": "-1s"}))
    assert (pg["spec"]["preemptionDelay"], pg["spec"]["stalenessGracePeriod"]) == ("5m", "-1s")
    assert pg["spec"]["minMember"] >= 1
    [without] = backend.build_gang_objects(spec())
    drift = backend.diff(without, {**pg, "metadata": {**pg["metadata"], "uid": "u"}})
    assert not drift.replace and drift.patch == {"spec": {"preemptionDelay": None, "stalenessGracePeriod": None}}


def test_disruption_mode_is_accepted_for_k8s_workload():
    assert validate("k8s-workload", disruptionMode="all")["gang"]["disruptionMode"] == "all"
