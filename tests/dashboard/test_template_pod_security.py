"""The template form and page for the pod-spec policy: refusals on the spec field naming the control, exceptions
granted by platform admins only and listed on the template page."""
import pytest

from scheduling.models import QueuePolicy, RuntimeTemplate
from tests import builders

pytestmark = pytest.mark.django_db

PRIVILEGED = ("backend: k8s-workload\npodSets:\n- name: w\n  replicas: 1\n  template:\n    spec:\n      containers:\n"
              "      - {name: m, image: 'registry.example/x:1', securityContext: {privileged: true}}\n")


def test_a_refused_setting_is_shown_on_the_spec_field_with_its_control(ui):
    response = ui.post("/templates/new/", {"name": "dbg", "spec": PRIVILEGED})
    [message] = response.context["form"].errors["spec"]
    assert message.startswith("podSets[w].template.spec.containers[m].securityContext.privileged: Pod Security "
                              "baseline control privileged: must not be true")
    assert not RuntimeTemplate.objects.filter(name="dbg").exists()


def test_a_platform_admin_grants_an_exception_and_the_template_page_lists_it(ui):
    response = ui.post("/templates/new/", {"name": "dbg", "spec": PRIVILEGED, "policy_exceptions": ["privileged"]})
    assert response.status_code == 302, response.context["form"].errors
    assert RuntimeTemplate.objects.get(name="dbg").policy_exceptions == ["privileged"]
    html = ui.get("/templates/dbg/").content.decode()
    assert "Exceptions granted by a platform admin" in html
    assert "<code>privileged</code>" in html and "check_privileged.go" in html
    assert "Level: <strong>baseline</strong>" in html


def test_a_queue_admin_sees_the_exceptions_but_cannot_change_them(client):
    team = builders.make_queue("team", allowed_namespaces=["team"], pod_security_level="restricted")
    admin = builders.make_user("qa")
    builders.grant(team, "admin", user=admin)
    version = builders.make_template("t-owned")
    RuntimeTemplate.objects.filter(pk=version.template_id).update(queue=team, policy_exceptions=["nodeName"])
    client.force_login(admin)
    page = client.get("/templates/t-owned/edit/")
    assert page.context["form"].fields["policy_exceptions"].disabled
    html = client.get("/templates/t-owned/").content.decode()
    assert "Level: <strong>restricted</strong>" in html and "of queue &#x27;team&#x27;" in html
    assert "<code>nodeName</code>" in html
    assert QueuePolicy.objects.get(name="team").pod_security_level == "restricted"


QUEUE = {"name": "team-x", "priority": "100", "gpu_quota": "0", "gpu_limit": "-1", "gpu_over_quota_weight": "1",
         "cpu_quota": "0", "cpu_limit": "-1", "cpu_over_quota_weight": "1", "memory_quota": "0", "memory_limit": "-1",
         "memory_over_quota_weight": "1"}


def test_the_queue_form_sets_namespaces_accounts_and_level_and_refuses_kube_namespaces(ui):
    response = ui.post("/queues/new/", {**QUEUE, "allowed_namespaces": "team-x, kube-system"})
    assert response.context["form"].errors == {"allowed_namespaces": [
        "[1]: 'kube-system' is reserved for the cluster's or gangweb's own components; no queue may run jobs there"]}
    ui.post("/queues/new/", {**QUEUE, "allowed_namespaces": "team-x, team-x-eval",
                             "allowed_service_accounts": "trainer", "pod_security_level": "restricted"})
    queue = QueuePolicy.objects.get(name="team-x")
    assert (queue.allowed_namespaces, queue.allowed_service_accounts, queue.pod_security_level) == (
        ["team-x", "team-x-eval"], ["trainer"], "restricted")
