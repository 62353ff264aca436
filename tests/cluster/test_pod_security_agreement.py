"""gangweb's Pod Security checks agree with the API server's PodSecurity admission, control by control.

Every case of tests/pod_specs.py (every baseline and restricted control, refused and allowed) is created as a Pod
with a server-side dry run in a namespace labelled `pod-security.kubernetes.io/enforce=<level>` on the real control
plane, and run through `podspec.pod_security.check_standard`; both must refuse or both admit, and a refusal by the
server must name the control gangweb names (its ForbiddenReason, from k8s.io/pod-security-admission/policy).
gangweb's tenant controls are its own additions: the server admits those pods, gangweb refuses them.
"""
from __future__ import annotations

import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from scheduling.podspec import pod_security as pss
from scheduling.podspec.tenant_controls import TenantRules, check_pod
from tests import pod_specs

pytestmark = pytest.mark.cluster

# The API server's ForbiddenReason for each control (the check_*.go files' CheckResult.ForbiddenReason).
FORBIDDEN_REASON = {
    "hostNamespaces": "host namespaces", "privileged": "privileged",
    "capabilities_baseline": "non-default capabilities", "hostPathVolumes": "hostPath volumes", "hostPorts": "hostPort",
    "hostProbesAndHostLifecycle": "probe or lifecycle host",
    "appArmorProfile": "AppArmor profile", "seLinuxOptions": "seLinuxOptions", "procMount": "procMount",
    "seccompProfile_baseline": "seccompProfile", "sysctls": "forbidden sysctls", "windowsHostProcess": "hostProcess",
    "allowPrivilegeEscalation": "allowPrivilegeEscalation != false",
    "capabilities_restricted": "unrestricted capabilities", "procMount_restricted": "procMount",
    "restrictedVolumes": "restricted volume types", "runAsNonRoot": "runAsNonRoot != true",
    "runAsUser": "runAsUser=0", "seccompProfile_restricted": "seccompProfile",
}


@pytest.fixture(scope="module")
def enforced_namespaces(kube_api):
    """{level: namespace} with `pod-security.kubernetes.io/enforce=<level>` (version latest), deleted afterwards."""
    core = client.CoreV1Api(kube_api)
    made = {}
    for level in pss.LEVELS:
        name = f"psa-{level}-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": name, "labels": {
            "pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/enforce-version": "latest"}}})
        made[level] = name
    yield made
    for name in made.values():
        core.delete_namespace(name)


# Cases the API server refuses as invalid (422) before PodSecurity admission sees them: the pod cannot exist, and
# gangweb refuses it too. procMount Unmasked needs hostUsers: false (1.33+ validation), where baseline allows it.
SERVER_INVALID = {"procMount Unmasked": "`hostUsers` must be false to use `Unmasked`"}


def server_verdict(kube_api, namespace: str, template: dict, invalid: str = "") -> tuple[bool, str]:
    """(admitted, the server's message) for a dry-run create of the pod `template` describes; a 422 is expected
    (and its message checked) only when `invalid` says what it must contain."""
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"psa-{uuid.uuid4().hex[:8]}", **template.get("metadata", {})},
            "spec": template["spec"]}
    try:
        client.CoreV1Api(kube_api).create_namespaced_pod(namespace, body, dry_run="All")
    except ApiException as exc:
        if invalid and exc.status == 422:
            assert invalid in (exc.body or ""), exc.body
            return False, exc.body or ""
        assert exc.status == 403, f"not a PodSecurity refusal: HTTP {exc.status} {exc.body}"
        return False, exc.body or ""
    return True, ""


@pytest.mark.parametrize("case,level,expected,template", [pytest.param(*c, id=c[0]) for c in pod_specs.CASES])
def test_gangweb_and_the_api_server_agree(kube_api, enforced_namespaces, case, level, expected, template):
    gangweb = {v.control for v in pss.check_standard(template, level)}
    admitted, message = server_verdict(kube_api, enforced_namespaces[level], template, SERVER_INVALID.get(case, ""))
    assert gangweb == pod_specs.refused(expected)
    assert admitted == (not gangweb), f"gangweb refuses {sorted(gangweb)}; the server said: {message or 'admitted'}"
    if not admitted and case not in SERVER_INVALID:
        assert f'violates PodSecurity \\"{level}:latest\\"' in message or f'violates PodSecurity "{level}:latest"' \
            in message, message
        for control in gangweb:
            assert FORBIDDEN_REASON[control] in message, (control, message)


def test_the_agreement_covers_at_least_30_specs_and_every_control_both_ways():
    assert len(pod_specs.CASES) >= 30
    refused = set().union(*(pod_specs.refused(c[2]) for c in pod_specs.CASES))
    assert refused == {c.id for c in pss.CONTROLS.values() if c.level != pss.TENANT}
    allowed_levels = {c[1] for c in pod_specs.CASES if c[2] is None}
    assert allowed_levels == set(pss.LEVELS)


TENANT_ONLY = [
    ("another service account", {"serviceAccountName": "intruder"}, "serviceAccountName"),
    ("token automount forced on", {"automountServiceAccountToken": True}, "automountServiceAccountToken"),
    ("pinned to a node", {"nodeName": "kwok-node-0"}, "nodeName"),
    ("own scheduler", {"schedulerName": "default-scheduler"}, "schedulerName"),
    ("tolerates every taint", {"tolerations": [{"operator": "Exists"}]}, "tolerations"),
    ("NFS volume", {"volumes": [{"name": "d", "nfs": {"server": "10.0.0.9", "path": "/"}}]}, "volumeTypes"),
]


@pytest.mark.parametrize("spec,control", [pytest.param(*c[1:], id=c[0]) for c in TENANT_ONLY])
def test_tenant_controls_go_beyond_the_standard(kube_api, enforced_namespaces, spec, control):
    namespace = enforced_namespaces["baseline"]
    core = client.CoreV1Api(kube_api)
    try:
        core.create_namespaced_service_account(namespace, {"metadata": {"name": "intruder"}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    template = pod_specs.pod(spec=spec)
    assert server_verdict(kube_api, namespace, template) == (True, "")
    assert [v.control for v in check_pod(template, "baseline", TenantRules())] == [control]
