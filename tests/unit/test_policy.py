"""Pod-spec policy as pure functions: the Pod Security Standards controls (each after its upstream check), gangweb's
tenant controls, exceptions, levels and where a refusal is named."""
import pytest
from django.core.exceptions import ValidationError

from scheduling.models import QueuePolicy, RuntimeTemplate
from scheduling.podspec import pod_security as pss
from scheduling.podspec import rules as pod_rules
from scheduling.podspec.tenant_controls import TenantRules, check_pod, check_tenant
from tests import builders, pod_specs

NO_RULES = TenantRules()


@pytest.mark.parametrize("level,expected,template", [pytest.param(*c[1:], id=c[0]) for c in pod_specs.CASES])
def test_each_control_refuses_its_setting_and_allows_the_safe_one(level, expected, template):
    assert {v.control for v in pss.check_standard(template, level)} == pod_specs.refused(expected)


def test_every_baseline_and_restricted_control_has_a_refused_and_an_allowed_case():
    refused = set().union(*(pod_specs.refused(c[2]) for c in pod_specs.CASES))
    standard = {c.id for c in pss.CONTROLS.values() if c.level != pss.TENANT}
    assert standard - refused == set()
    assert sum(1 for c in pod_specs.CASES if c[2] is None and c[1] == "baseline") >= 12


def test_every_control_cites_its_upstream_check():
    for control in pss.CONTROLS.values():
        if control.level != pss.TENANT:
            assert control.source.startswith("k8s.io/pod-security-admission/policy/check_"), control


def test_restricted_replaces_the_baseline_checks_it_overrides():
    assert "capabilities_baseline" not in pss.controls_at("restricted")
    assert "hostPathVolumes" not in pss.controls_at("restricted")
    assert set(pss.controls_at("baseline")) < set(pss.controls_at("restricted")) | set(pss.OVERRIDES.values())


def test_refusals_name_the_field_by_container_and_volume_name():
    template = pod_specs.pod(sc={"privileged": True}, spec={"volumes": [{"name": "dev", "hostPath": {"path": "/"}}]})
    assert [(v.control, v.field) for v in pss.check_standard(template, "baseline")] == [
        ("privileged", "spec.containers[main].securityContext.privileged"),
        ("hostPathVolumes", "spec.volumes[dev].hostPath"),
    ]


def test_the_seccomp_annotation_is_refused_even_though_only_old_versions_check_it():
    template = pod_specs.pod(annotations={"seccomp.security.alpha.kubernetes.io/pod": "unconfined"})
    assert [v.field for v in pss.check_standard(template, "baseline")] == [
        "metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]"]


@pytest.mark.parametrize("changes,control,field", [
    ({"serviceAccountName": "clusterrole-aggregation-controller"}, "serviceAccountName", "spec.serviceAccountName"),
    ({"serviceAccount": "admin"}, "serviceAccountName", "spec.serviceAccount"),
    ({"automountServiceAccountToken": True}, "automountServiceAccountToken", "spec.automountServiceAccountToken"),
    ({"volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]},
     "automountServiceAccountToken", "spec.volumes[t].projected.sources[0].serviceAccountToken"),
    ({"nodeName": "control-plane"}, "nodeName", "spec.nodeName"),
    ({"schedulerName": "default-scheduler"}, "schedulerName", "spec.schedulerName"),
    ({"tolerations": [{"operator": "Exists"}]}, "tolerations", "spec.tolerations[0]"),
    ({"tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]},
     "tolerations", "spec.tolerations[0].key"),
    ({"runtimeClassName": "privileged-runc"}, "runtimeClassName", "spec.runtimeClassName"),
    ({"volumes": [{"name": "data", "nfs": {"server": "10.0.0.2", "path": "/"}}]}, "volumeTypes",
     "spec.volumes[data].nfs"),
    ({"volumes": [{"name": "f", "flexVolume": {"driver": "x/y"}}]}, "volumeTypes", "spec.volumes[f].flexVolume"),
    ({"volumes": [{"name": "c", "csi": {"driver": "secrets-store.csi.k8s.io"}}]}, "volumeTypes", "spec.volumes[c].csi"),
    ({"priorityClassName": "system-node-critical"}, "priorityClassName", "spec.priorityClassName"),
    ({"containers": [{"name": "main", "image": "x", "env": [{"name": "A", "value": "1"},
                                                           {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]},
     "deviceVisibilityEnv", "spec.containers[main].env[1]"),
    ({"initContainers": [{"name": "warm", "image": "x", "env": [{"name": "HABANA_VISIBLE_DEVICES", "value": "0"}]}]},
     "deviceVisibilityEnv", "spec.initContainers[warm].env[0]"),
    ({"containers": [{"name": "main", "image": "x", "env": [
        {"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"configMapKeyRef": {"name": "gpus", "key": "all"}}}]}]},
     "deviceVisibilityEnv", "spec.containers[main].env[0]"),
])
def test_tenant_controls_refuse_borrowed_rights_and_placement(changes, control, field):
    assert [(v.control, v.field) for v in check_tenant(pod_specs.pod(spec=changes), NO_RULES)] == [(control, field)]


@pytest.mark.parametrize("changes", [
    {"serviceAccountName": "default"}, {"serviceAccountName": "trainer"}, {"automountServiceAccountToken": False},
    {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    {"containers": [{"name": "main", "image": "x", "env": [
        {"name": "CUDA_VISIBLE_DEVICES", "value": "0"}, {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute"}]}]},
    {"containers": [{"name": "main", "image": "x", "env": [  # values that expose no device
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"},
        {"name": "AMD_VISIBLE_DEVICES", "value": ""}]}]},
    {"volumes": [{"name": "s", "secret": {"secretName": "hf-token"}}, {"name": "e", "emptyDir": {}},
                 {"name": "p", "projected": {"sources": [{"configMap": {"name": "c"}}]}}]},
])
def test_tenant_controls_allow_what_the_queue_grants_and_ordinary_settings(changes):
    rules = TenantRules(service_accounts=frozenset({"trainer"}))
    assert check_tenant(pod_specs.pod(spec=changes), rules) == []


def test_exceptions_waive_exactly_the_named_controls():
    template = pod_specs.pod(sc={"privileged": True}, spec={"nodeName": "n1", "hostNetwork": True})
    assert {v.control for v in check_pod(template, "baseline", NO_RULES, ["privileged", "nodeName"])} == {
        "hostNamespaces"}


@pytest.mark.parametrize("template", [None, "x", {"spec": "x"}, {"spec": {"containers": [1, None, "x"],
                                                                          "volumes": "x", "securityContext": []}},
                                      pod_specs.pod(sc={"capabilities": {"add": [{"x": 1}]},
                                                        "seLinuxOptions": {"type": ["x"]}},
                                                    pod_sc={"sysctls": [{"name": {"a": 1}}]},
                                                    spec={"serviceAccountName": ["x"], "volumes": [{"name": "v"}]})])
def test_malformed_templates_never_raise(template):
    check_pod(template, "restricted", NO_RULES)


def spec_with(**pod):
    ps = builders.pod_set(containers=[builders.container()])
    ps["template"]["spec"].update(pod)
    return builders.template_spec(pod_sets=[ps])


def test_a_refusal_names_the_pod_set_field_and_the_control():
    with pytest.raises(ValidationError) as err:
        pod_rules.check_template_spec(spec_with(hostNetwork=True))
    [(field, [message])] = err.value.message_dict.items()
    assert field == "spec.podSets[worker].template.spec.hostNetwork"
    assert message.startswith("Pod Security baseline control hostNamespaces: ")
    assert "policy_exceptions" in message


def test_the_strictest_of_template_queue_and_ancestors_applies():
    parent = QueuePolicy(name="org", pod_security_level="restricted")
    child = QueuePolicy(name="team", pod_security_level="baseline", parent=parent)
    assert pod_rules.level_of(RuntimeTemplate(pod_security_level=""), [child]) == "baseline"
    assert pod_rules.level_of(RuntimeTemplate(pod_security_level=""), [child, parent]) == "restricted"
    assert pod_rules.level_of(RuntimeTemplate(pod_security_level="restricted"), [child]) == "restricted"


def test_service_accounts_are_those_every_queue_of_the_chain_allows():
    parent = QueuePolicy(name="org", allowed_service_accounts=["trainer", "eval"])
    child = QueuePolicy(name="team", allowed_service_accounts=["trainer", "admin"], parent=parent)
    assert pod_rules.tenant_rules([child, parent]).service_accounts == {"trainer"}
    assert pod_rules.tenant_rules([]).service_accounts == frozenset()


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "kube-node-lease", "kube-anything"])
def test_kube_namespaces_are_refused_whatever_the_queue_allows(namespace):
    queue = QueuePolicy(name="q", allowed_namespaces=[namespace])
    with pytest.raises(ValidationError) as err:
        pod_rules.check_namespace(queue, namespace, [queue])
    assert "reserved" in err.value.message_dict["namespace"][0]


def test_gangweb_s_own_and_configured_namespaces_are_reserved(settings):
    settings.GANGWEB_NAMESPACE = "gangweb"
    settings.GANGWEB_RESERVED_NAMESPACES = ["kai-scheduler"]
    assert pod_rules.is_reserved_namespace("gangweb") and pod_rules.is_reserved_namespace("kai-scheduler")
    assert not pod_rules.is_reserved_namespace("team-a")


@pytest.mark.parametrize("namespace", ["kai-scheduler", "kueue-system", "volcano-system", "scheduler-plugins"])
def test_the_schedulers_own_namespaces_are_reserved_without_configuration(settings, namespace):
    settings.GANGWEB_NAMESPACE, settings.GANGWEB_RESERVED_NAMESPACES = "", []
    assert pod_rules.is_reserved_namespace(namespace)


def test_an_empty_list_allows_no_namespace_and_ancestors_bound_the_queue():
    parent = QueuePolicy(name="org", allowed_namespaces=["team-a"])
    child = QueuePolicy(name="team", allowed_namespaces=["team-a", "team-b"], parent=parent)
    pod_rules.check_namespace(child, "team-a", [child, parent])
    with pytest.raises(ValidationError, match="its parent queue 'org' allows namespaces team-a, not 'team-b'"):
        pod_rules.check_namespace(child, "team-b", [child, parent])
    with pytest.raises(ValidationError, match="allows no namespaces"):
        pod_rules.check_namespace(QueuePolicy(name="new"), "default", [QueuePolicy(name="new")])
