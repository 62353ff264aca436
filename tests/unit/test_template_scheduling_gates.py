"""`schedulingGates` in a template's pod spec: the API server refuses an empty, malformed or repeated gate name on
every pod (core/v1 validateSchedulingGates), so a template carrying one would fail every job it makes; it is a
ValidationError naming the gate (a 400 through the API). A valid foreign gate is accepted: why-pending names it."""
import pytest
from django.core.exceptions import ValidationError

from scheduling.services.templates import specs as template_service
from tests import builders

AT = "spec.podSets[0].template.spec.schedulingGates"


def validate(gates):
    ps = builders.pod_set("worker", replicas=2)
    ps["template"]["spec"]["schedulingGates"] = gates
    return template_service.validate_template_spec(builders.template_spec(pod_sets=[ps]))


@pytest.mark.parametrize("gates, field, words", [
    ([{"name": ""}], f"{AT}[0].name", "is not a qualified name"),
    ([{"name": "example.com/hold"}, {"name": "example.com/hold"}], f"{AT}[1].name", "duplicate scheduling gate"),
    ([{"name": "-bad-"}], f"{AT}[0].name", "is not a qualified name"),
    ([{"name": "UPPER_case.example.com/x"}], f"{AT}[0].name", "is not a qualified name"),
    ([{}], f"{AT}[0].name", "is not a qualified name"),
    (["hold"], f"{AT}[0]", "must be an object"),
    ({"name": "hold"}, AT, "must be a list"),
])
def test_a_gate_the_api_server_would_refuse_is_refused_naming_it(gates, field, words):
    with pytest.raises(ValidationError) as refused:
        validate(gates)
    [(got, [message])] = refused.value.message_dict.items()
    assert got == field and words in message, refused.value.message_dict


def test_valid_gates_are_accepted():
    validate([{"name": "example.com/hold"}, {"name": "hold"}])
    validate([])
