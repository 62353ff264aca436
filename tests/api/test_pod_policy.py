"""Pods gangweb creates meet a policy level, deny-by-default (issue 15, rows H3 and M4), through the API: templates,
submits, queues; each refusal a 400 naming the field and the control, nothing created."""
import pytest
from django.apps import apps

from scheduling.models import QueuePolicy, RuntimeTemplate
from tests import builders

pytestmark = pytest.mark.django_db


def row_counts():
    return {m._meta.label: m.objects.count() for m in apps.get_app_config("scheduling").get_models()}


def spec(container=None, **pod_spec):
    ps = builders.pod_set(containers=[builders.container(**(container or {}))])
    ps["template"]["spec"].update(pod_spec)
    return builders.template_spec(pod_sets=[ps], overridable=["podSets.*"])


def template_body(pod_spec, name="evil-tmpl", queue="team-a", **extra):
    return {"name": name, "queue": queue, "spec": pod_spec, **extra}


AT = "spec.podSets[worker].template.spec"

# H3 and M4: what a queue admin wrote into a team template. (case, template spec, field, control)
REFUSED_TEMPLATES = [
    ("another service account", spec(serviceAccountName="clusterrole-aggregation-controller"),
     f"{AT}.serviceAccountName", "serviceAccountName"),
    ("token automount forced on", spec(automountServiceAccountToken=True), f"{AT}.automountServiceAccountToken",
     "automountServiceAccountToken"),
    ("pinned to a node", spec(nodeName="control-plane"), f"{AT}.nodeName", "nodeName"),
    ("tolerates every taint", spec(tolerations=[{"operator": "Exists"}]), f"{AT}.tolerations[0]", "tolerations"),
    ("own scheduler", spec(schedulerName="default-scheduler"), f"{AT}.schedulerName", "schedulerName"),
    ("runtime class", spec(runtimeClassName="runc-privileged"), f"{AT}.runtimeClassName", "runtimeClassName"),
    ("NFS volume", spec(volumes=[{"name": "data", "nfs": {"server": "10.0.0.9", "path": "/"}}]),
     f"{AT}.volumes[data].nfs", "volumeTypes"),
    ("flexVolume", spec(volumes=[{"name": "f", "flexVolume": {"driver": "x/y"}}]), f"{AT}.volumes[f].flexVolume",
     "volumeTypes"),
    ("inline CSI", spec(volumes=[{"name": "c", "csi": {"driver": "secrets-store.csi.k8s.io"}}]),
     f"{AT}.volumes[c].csi", "volumeTypes"),
    ("AppArmor Unconfined", spec(container={"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}),
     f"{AT}.containers[main].securityContext.appArmorProfile.type", "appArmorProfile"),
    ("SELinux spc_t", spec(securityContext={"seLinuxOptions": {"type": "spc_t"}}),
     f"{AT}.securityContext.seLinuxOptions.type", "seLinuxOptions"),
    ("unsafe sysctl", spec(securityContext={"sysctls": [{"name": "kernel.core_pattern", "value": "|/x"}]}),
     f"{AT}.securityContext.sysctls[0].name", "sysctls"),
    ("privileged", spec(container={"securityContext": {"privileged": True}}),
     f"{AT}.containers[main].securityContext.privileged", "privileged"),
    ("hostPath", spec(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), f"{AT}.volumes[root].hostPath",
     "hostPathVolumes"),
]


@pytest.mark.parametrize("body,field,control", [pytest.param(*c[1:], id=c[0]) for c in REFUSED_TEMPLATES])
def test_a_queue_admins_template_that_borrows_rights_or_escapes_is_400_naming_field_and_control(
        teams, body, field, control):
    before = row_counts()
    r = teams.clients["a_admin"].post("/api/v1/templates/", template_body(body), format="json")
    assert r.status_code == 400, r.data
    assert field in r.data, r.data
    assert f"control {control}:" in r.data[field][0]
    assert row_counts() == before


def test_secret_volumes_and_value_from_are_allowed_in_the_queues_own_namespaces(teams):
    body = spec(container={"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}}]},
                volumes=[{"name": "creds", "secret": {"secretName": "creds"}}])
    assert teams.clients["a_admin"].post("/api/v1/templates/", template_body(body), format="json").status_code == 201
    r = teams.clients["a_sub"].post("/api/v1/jobs/", builders.submit_body(
        RuntimeTemplate.objects.get(name="evil-tmpl").latest, teams.a_train, teams.local, namespace="team-a"),
        format="json")
    assert r.status_code == 201, r.data


def test_h3_a_submitter_cannot_get_a_job_into_kube_system(teams):
    """The attack of H3: the namespace kube-system, however the queue was set up, is refused (400 naming it)."""
    body = spec(container={"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "x", "key": "k"}}}]},
                volumes=[{"name": "creds", "secret": {"secretName": "bootstrap-token-abcdef"}}])
    assert teams.clients["a_admin"].post("/api/v1/templates/", template_body(body), format="json").status_code == 201
    QueuePolicy.objects.filter(name__in=["team-a", "a-train"]).update(allowed_namespaces=["team-a", "kube-system"])
    before = row_counts()
    r = teams.clients["a_sub"].post("/api/v1/jobs/", {"name": "evil", "namespace": "kube-system",
                                                      "template": "evil-tmpl", "queue": "a-train", "cluster": "local"},
                                    format="json")
    assert r.status_code == 400, r.data
    assert "reserved" in r.data["namespace"][0]
    assert row_counts() == before


@pytest.mark.parametrize("who", ["a_admin", "padmin"])
def test_no_queue_may_be_given_a_kube_namespace(teams, who):
    r = teams.clients[who].patch("/api/v1/queues/a-train/", {"allowed_namespaces": ["team-a", "kube-system"]},
                                 format="json")
    assert r.status_code == 400, r.data
    assert "reserved" in r.data["allowed_namespaces[1]"][0]


def test_a_queue_with_no_namespaces_takes_no_jobs(teams):
    QueuePolicy.objects.filter(name="a-dev").update(allowed_namespaces=[])
    r = teams.clients["a_sub"].post("/api/v1/jobs/", builders.submit_body(teams.llm, teams.a_dev, teams.local),
                                    format="json")
    assert r.status_code == 400
    assert "allows no namespaces" in r.data["namespace"][0]


def test_a_namespace_the_parent_does_not_allow_is_refused(teams):
    QueuePolicy.objects.filter(name="a-dev").update(allowed_namespaces=["default", "team-b"])
    r = teams.clients["a_sub"].post("/api/v1/jobs/", builders.submit_body(teams.llm, teams.a_dev, teams.local,
                                                                          namespace="team-b"), format="json")
    assert r.status_code == 400
    assert r.data["namespace"] == ["its parent queue 'team-a' allows namespaces default, team-a, not 'team-b'"]


def test_a_queue_admin_cannot_give_a_child_a_namespace_or_account_the_parent_lacks(teams):
    r = teams.clients["a_admin"].patch("/api/v1/queues/a-dev/", {"allowed_namespaces": ["team-b"]}, format="json")
    assert r.status_code == 403
    assert "'team-b' is not among the parent queue's namespaces" in r.data["allowed_namespaces"][0]
    r = teams.clients["a_admin"].patch("/api/v1/queues/a-dev/", {"allowed_service_accounts": ["admin"]},
                                       format="json")
    assert r.status_code == 403
    assert "allowed_service_accounts" in r.data


def test_a_service_account_the_queue_chain_allows_may_be_used(teams):
    QueuePolicy.objects.filter(name__in=["team-a", "a-train"]).update(allowed_service_accounts=["trainer"])
    r = teams.clients["a_admin"].post("/api/v1/templates/", template_body(spec(serviceAccountName="trainer")),
                                      format="json")
    assert r.status_code == 201, r.data


def test_escalations_need_an_explicit_exception_even_from_a_platform_admin(teams):
    body = spec(container={"securityContext": {"privileged": True}})
    r = teams.clients["padmin"].post("/api/v1/templates/", template_body(body, "gpu-debug"), format="json")
    assert r.status_code == 400
    assert f"{AT}.containers[main].securityContext.privileged" in r.data
    r = teams.clients["padmin"].post("/api/v1/templates/", template_body(body, "gpu-debug",
                                                                         policy_exceptions=["privileged"]),
                                     format="json")
    assert r.status_code == 201, r.data
    assert r.data["policy_exceptions"] == ["privileged"]
    r = teams.clients["t_sub"].post("/api/v1/jobs/", {"name": "dbg", "namespace": "team-a", "template": "gpu-debug",
                                                      "queue": "a-train", "cluster": "local"}, format="json")
    assert r.status_code == 201, r.data
    assert r.data["resolved_spec"]["podSets"][0]["template"]["spec"]["containers"][0]["securityContext"] == {
        "privileged": True}


def test_only_platform_admins_grant_exceptions(teams):
    r = teams.clients["a_admin"].post("/api/v1/templates/", template_body(
        spec(container={"securityContext": {"privileged": True}}), policy_exceptions=["privileged"]), format="json")
    assert r.status_code == 403
    assert "platform admins" in r.data["policy_exceptions"][0]
    r = teams.clients["a_admin"].patch("/api/v1/templates/a-tmpl/", {"policy_exceptions": ["nodeName"]},
                                       format="json")
    assert r.status_code == 403
    assert RuntimeTemplate.objects.get(name="a-tmpl").policy_exceptions == []
    r = teams.clients["padmin"].patch("/api/v1/templates/a-tmpl/", {"policy_exceptions": ["nodeName", "bogus"]},
                                      format="json")
    assert r.status_code == 400
    assert "policy_exceptions[1]" in r.data


def test_withdrawing_an_exception_refuses_new_jobs_with_the_field_and_control(teams):
    body = spec(nodeName="gpu-node-1")
    assert teams.clients["padmin"].post("/api/v1/templates/", template_body(body, "pinned",
                                                                            policy_exceptions=["nodeName"]),
                                        format="json").status_code == 201
    assert teams.clients["padmin"].patch("/api/v1/templates/pinned/", {"policy_exceptions": []},
                                         format="json").status_code == 200
    r = teams.clients["t_sub"].post("/api/v1/jobs/", {"name": "p", "namespace": "team-a", "template": "pinned",
                                                      "queue": "a-train", "cluster": "local"}, format="json")
    assert r.status_code == 400
    assert "gangweb tenant control nodeName" in r.data["resolved_spec.podSets[worker].template.spec.nodeName"][0]


def test_a_restricted_queue_refuses_a_baseline_job_naming_each_field(teams):
    QueuePolicy.objects.filter(name="team-a").update(pod_security_level="restricted")
    r = teams.clients["t_sub"].post("/api/v1/jobs/", builders.submit_body(teams.llm, teams.a_train, teams.local,
                                                                          namespace="team-a"), format="json")
    assert r.status_code == 400
    at = "resolved_spec.podSets[worker].template.spec.containers[main].securityContext"
    assert {f"{at}.allowPrivilegeEscalation", f"{at}.capabilities.drop", f"{at}.runAsNonRoot",
            f"{at}.seccompProfile.type"} == set(r.data)
    assert "Pod Security restricted control runAsNonRoot" in r.data[f"{at}.runAsNonRoot"][0]


def test_a_restricted_template_is_checked_at_restricted_when_saved(teams):
    r = teams.clients["a_admin"].post("/api/v1/templates/", template_body(spec(), pod_security_level="restricted"),
                                      format="json")
    assert r.status_code == 400
    assert f"{AT}.containers[main].securityContext.runAsNonRoot" in r.data
    sc = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
          "seccompProfile": {"type": "RuntimeDefault"}}
    r = teams.clients["a_admin"].post("/api/v1/templates/", template_body(spec(container={"securityContext": sc}),
                                                                          pod_security_level="restricted"),
                                      format="json")
    assert r.status_code == 201, r.data
    assert r.data["pod_security_level"] == "restricted"


def test_a_job_moved_to_a_restricted_queue_is_checked_there(teams):
    QueuePolicy.objects.filter(name="a-dev").update(pod_security_level="restricted", allowed_namespaces=["team-a"])
    r = teams.clients["a_sub"].patch(f"/api/v1/jobs/{teams.a_job.id}/", {"queue": "a-dev"}, format="json")
    assert r.status_code == 400
    assert any(k.endswith("runAsNonRoot") for k in r.data), r.data


def test_a_submitter_cannot_see_every_gpu_of_a_node_through_an_env_override(teams):
    """NVIDIA_VISIBLE_DEVICES=all in a pod that requests no GPU gives it every GPU of its node under the NVIDIA
    toolkit's defaults, outside quota: an overridable env must not carry it (400 naming the field, nothing made)."""
    assert teams.clients["a_admin"].post("/api/v1/templates/", template_body(spec()), format="json").status_code == 201
    before = row_counts()
    body = builders.submit_body(RuntimeTemplate.objects.get(name="evil-tmpl").latest, teams.a_train, teams.local,
                                namespace="team-a",
                                overrides={"podSets": {"worker": {"env": {"NVIDIA_VISIBLE_DEVICES": "all"}}}})
    r = teams.clients["a_sub"].post("/api/v1/jobs/", body, format="json")
    assert r.status_code == 400, r.data
    [(field, [message])] = r.data.items()
    assert field == f"resolved_{AT}.containers[main].env[0]"
    assert "control deviceVisibilityEnv:" in message and "NVIDIA_VISIBLE_DEVICES" in message
    assert row_counts() == before
