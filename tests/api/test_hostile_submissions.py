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


def _deep(levels):
    value = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


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
    ("a list as the container name", job(overrides=worker(container=["x"])), 400,
     "overrides.podSets.worker.container"),  # was a 500 (unhashable)
    ("an object as the container name", job(overrides=worker(container={"a": 1})), 400,
     "overrides.podSets.worker.container"),
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
    # Validators match whole strings (issue 15, L4): `re.match` with `$` let a trailing newline through.
    ("trailing newline in the name", job(name="evil\n"), 400, "name"),
    ("trailing newline in the namespace", job(namespace="team-a\n"), 400, "namespace"),
    ("trailing newline in the template", job(template="open\n"), 400, "template"),
    ("trailing newline in the queue", job(queue="a-train\n"), 400, "queue"),
    ("trailing newline in the priority class", job(priority_class_name="high\n"), 400, "priority_class_name"),
    ("trailing newline in the image", job(overrides=worker(image="registry.example/train:1\n")), 400,
     "overrides.podSets.worker.image"),
    ("trailing newline in a nodeSelector key", job(overrides=worker(nodeSelector={"zone\n": "a"})), 400,
     "overrides.podSets.worker.nodeSelector.zone\n"),
    ("trailing newline in a nodeSelector value", job(overrides=worker(nodeSelector={"zone": "a\n"})), 400,
     "overrides.podSets.worker.nodeSelector.zone"),
    ("trailing newline in an env name", job(overrides=worker(env={"A\n": "x"})), 400,
     "overrides.podSets.worker.env.A\n"),
    # Totals the database column cannot hold were a 500 OverflowError (issue 15).
    ("gang CPU over the database column", job(overrides=worker(replicas=3, resources={"cpu": "9000000000000000"})),
     400, "overrides.podSets.worker.resources.cpu"),
    ("gang memory over the database column", job(overrides=worker(replicas=1200, resources={"memory": "8Pi"})),
     400, "overrides.podSets.worker.resources.memory"),
    ("overrides nested 40 deep", job(overrides=worker(env={"A": _deep(40)})), 400, "overrides"),
    # Names the submitter cannot see answer as unknown names (services/access/roles.py): 400, not 403.
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
    # kai: a k8s-workload template is refused for its PodGroup first (tests/api/test_system_priority_gangs.py)
    ("system priority class", builders.template_spec(backend="kai", priorityClassName="system-cluster-critical"),
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


@pytest.mark.parametrize("overrides", [
    pytest.param(worker(env={"A": "\ud800"}), id="in a string"),
    pytest.param({"podSets": {"\udc80": {}}}, id="in a key"),
])
def test_a_lone_surrogate_is_400_and_creates_nothing(teams, overrides):
    """Stored in a JSON field, a lone surrogate made every later read of the job (the team's whole list) a 500."""
    before = row_counts()
    raw = json.dumps(job(overrides=overrides))  # ASCII-escaped: "\ud800", as a client would send it
    r = teams.clients["t_sub"].post("/api/v1/jobs/", raw, content_type="application/json")
    assert r.status_code == 400 and "unpaired surrogates" in str(r.data), r.content[:300]
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


def test_a_bulk_whose_gang_totals_overflow_the_database_column_is_400_naming_the_item(teams, open_template):
    before = row_counts()
    ok = job(name="fine")
    huge = job(name="huge", overrides=worker(replicas=3, resources={"cpu": "9000000000000000"}))
    r = teams.clients["t_sub"].post("/api/v1/jobs/bulk/", {"jobs": [ok, huge]}, format="json")
    assert r.status_code == 400, r.data
    assert "jobs[1].overrides.podSets.worker.resources.cpu" in r.data
    assert row_counts() == before


# --- spec limits (issue 15, H5/L2): YAML is data; every spec has a depth and a size cap ------------------------

BOMB = "\n".join(["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]",
                  *[f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]])


def _deep_yaml(levels):
    return "spec:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(levels)) + "  " * (levels + 1) + "v: 1\n"


FORM_SPECS = [
    ("YAML alias bomb (575 bytes, 70 MB expanded)", BOMB, "are not allowed"),
    ("one anchor and alias", "backend: &b kai\nother: *b\n", "are not allowed"),
    ("an alias alone", "backend: kai\nother: *b\n", "are not allowed"),
    ("YAML nested 300 deep (block)", _deep_yaml(300), "levels deep"),
    ("YAML nested 300 deep (flow)", "spec: " + "[" * 300 + "]" * 300, "levels deep"),
    ("JSON nested 2,000 deep", '{"spec": ' + "[" * 2000 + "]" * 2000 + "}", "levels deep"),
    ("a spec over the size cap", "backend: kai\npad: " + "x" * 300_000, "characters"),
]


@pytest.mark.parametrize("path", ["/templates/new/", "/templates/preview/"])
@pytest.mark.parametrize("text,words", [pytest.param(*c[1:], id=c[0]) for c in FORM_SPECS])
def test_hostile_yaml_in_the_template_form_is_refused_naming_the_limit(teams, client, path, text, words):
    client.force_login(teams.a_admin)
    before = row_counts()
    r = client.post(path, {"name": "bomb", "queue": "team-a", "description": "", "spec": text})
    assert r.status_code == 200
    page = r.content.decode()
    assert words in page, page[-2000:]
    assert row_counts() == before


@pytest.mark.parametrize("spec,words", [
    pytest.param(builders.template_spec(topologyConstraint=_deep(40)), "levels deep", id="spec nested 40 deep"),
    pytest.param(builders.template_spec(pod_sets=[builders.pod_set(containers=[builders.container(
        args=["x" * 60_000] * 5)])]), "characters as JSON", id="spec of 300,000 characters"),
])
@pytest.mark.parametrize("how", ["create", "new version"])
def test_a_template_spec_over_the_limits_is_400_over_the_api_and_stores_nothing(teams, spec, words, how):
    before = row_counts()
    client = teams.clients["a_admin"]
    if how == "create":
        r = client.post("/api/v1/templates/", template(spec), format="json")
    else:
        r = client.put("/api/v1/templates/a-tmpl/", {"spec": spec}, format="json")
    assert r.status_code == 400, r.data
    assert words in r.data["spec"][0]
    assert row_counts() == before


@pytest.mark.parametrize("case,spec", [
    ("2 MB", dict(builders.template_spec(), pad=["lol" * 10] * 70_000)),
    ("300 deep", dict(builders.template_spec(), pad=_deep(300))),
])
def test_a_template_stored_over_the_limits_before_them_does_not_break_its_page_the_lists_or_submit(
        teams, client, case, spec):
    from scheduling.models import RuntimeTemplateVersion

    old = teams.a_tmpl
    RuntimeTemplateVersion.objects.create(template=old.template, version=2, spec=spec)  # as written before the fix
    client.force_login(teams.a_admin)
    page = client.get("/templates/a-tmpl/")
    assert page.status_code == 200
    assert "it was stored before that limit existed" in page.content.decode()
    listing = client.get("/templates/")
    assert listing.status_code == 200 and "spec over the size or depth limit" in listing.content.decode()
    assert client.get("/templates/a-tmpl/edit/").status_code == 200
    api = teams.clients["a_admin"].get("/api/v1/templates/")
    row = next(t for t in api.data["results"] if t["name"] == "a-tmpl")
    assert (row["latest_version"], row["latest_spec"]) == (2, None)
    assert "stored before" in row["latest_spec_error"]
    versions = teams.clients["a_admin"].get("/api/v1/templates/a-tmpl/versions/").data
    assert [(v["version"], v["spec"] is None) for v in versions] == [(2, True), (1, False)]
    before = row_counts()
    r = teams.clients["a_sub"].post("/api/v1/jobs/", job(template="a-tmpl"), format="json")
    assert r.status_code == 400, r.data
    assert "template_version" in r.data
    assert row_counts() == before


# --- JSON only (issue 15, L3) -----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/jobs/bulk/", "/api/v1/templates/", "/api/v1/queues/",
                                  "/api/v1/tokens/"])
@pytest.mark.parametrize("fmt", ["multipart", "form"])
def test_multipart_and_form_bodies_are_415_and_nothing_reaches_the_disk(teams, settings, tmp_path, path, fmt):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test.client import encode_multipart

    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    before = row_counts()
    client = teams.clients["a_admin"]
    if fmt == "multipart":
        body = encode_multipart("BoUnDaRy", {"name": "x", "file": SimpleUploadedFile("big.bin", b"\0" * (3 << 20))})
        r = client.generic("POST", path, body, content_type="multipart/form-data; boundary=BoUnDaRy")
    else:
        r = client.generic("POST", path, "name=x&spec=y", content_type="application/x-www-form-urlencoded")
    assert r.status_code == 415, r.content[:300]
    assert list(tmp_path.iterdir()) == []
    assert row_counts() == before
