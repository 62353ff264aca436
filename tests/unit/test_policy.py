"""Pod-spec policy as a pure function: which settings count as escalations, and where they are named."""
import pytest
from django.core.exceptions import ValidationError

from scheduling.services import policy
from tests import builders


def spec_with(container=None, **pod):
    ps = builders.pod_set(containers=[builders.container(**(container or {}))])
    ps["template"]["spec"].update(pod)
    return builders.template_spec(pod_sets=[ps])


AT = "podSets[worker].template.spec"


@pytest.mark.parametrize("spec,path", [
    (spec_with(hostNetwork=True), f"{AT}.hostNetwork"),
    (spec_with(hostPID=True), f"{AT}.hostPID"),
    (spec_with(hostIPC=True), f"{AT}.hostIPC"),
    (spec_with(volumes=[{"name": "dev", "hostPath": {"path": "/dev"}}]), f"{AT}.volumes[dev].hostPath"),
    (spec_with({"securityContext": {"privileged": True}}), f"{AT}.containers[main].securityContext.privileged"),
    (spec_with({"securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}),
     f"{AT}.containers[main].securityContext.capabilities.add[NET_ADMIN]"),
    (spec_with({"securityContext": {"procMount": "Unmasked"}}), f"{AT}.containers[main].securityContext.procMount"),
    (spec_with({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
     f"{AT}.containers[main].securityContext.seccompProfile"),
    (spec_with(securityContext={"windowsOptions": {"hostProcess": True}}),
     f"{AT}.securityContext.windowsOptions.hostProcess"),
    (spec_with({"ports": [{"containerPort": 80, "hostPort": 8080}]}), f"{AT}.containers[main].ports[0].hostPort"),
    (spec_with(priorityClassName="system-node-critical"), f"{AT}.priorityClassName"),
])
def test_escalations_are_named_by_path(spec, path):
    assert list(policy.escalations(spec)) == [path]


@pytest.mark.parametrize("spec", [
    spec_with(),
    spec_with(hostNetwork=False, volumes=[{"name": "scratch", "emptyDir": {}}]),
    spec_with({"securityContext": {"privileged": False, "capabilities": {"drop": ["ALL"]}}}),
    spec_with({"ports": [{"containerPort": 80, "hostPort": 0}]}),
    {"podSets": "not a list"}, {"podSets": [{"template": {"spec": {"volumes": "x", "containers": [1]}}}]}, None,
])
def test_safe_or_malformed_specs_have_no_escalations(spec):
    assert policy.escalations(spec) == {}


def test_a_job_may_keep_but_not_add_escalations():
    template = spec_with({"securityContext": {"privileged": True}})
    policy.check_job_spec(template, template)
    with pytest.raises(ValidationError) as err:
        policy.check_job_spec(spec_with({"securityContext": {"privileged": True}}, hostNetwork=True), template)
    assert list(err.value.message_dict) == [f"resolved_spec.{AT}.hostNetwork"]
