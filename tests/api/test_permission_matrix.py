"""Who may do what over the API: every role against every endpoint and method, with the exact status code.

Read the table as: request (method, path, body) | expected status for each principal, in the order of
tests/api/conftest.py PRINCIPALS: anon admin padmin a_admin a_sub a_view b_sub t_sub t_read t_rev t_exp.
Anonymous, revoked and expired tokens are always 401; another team's job, queue, template or a cluster nobody
gave you is 404 (as one that does not exist: services/access/roles.py), and named in a body (submit, parent, owner) it
is 400 as an unknown name; what you can see but may not change is 403; tokens never manage anything.
"""
import pytest
from django.db import transaction

from scheduling.models import GangJob
from tests import builders
from tests.api.conftest import PRINCIPALS

pytestmark = pytest.mark.django_db


def submit(queue, name="new-job", template="llm", namespace="team-a"):
    return {"name": name, "namespace": namespace if queue == "a-train" else "default", "template": template,
            "queue": queue, "cluster": "local"}


def template_body(name, queue=None):
    body = {"name": name, "spec": builders.template_spec()}
    if queue:
        body["queue"] = queue
    return body


#         case                        method  path (with {a_job}/{b_job})        body
MATRIX = [
    ("list jobs",                     "get", "/api/v1/jobs/", None,
     "401 200 200 200 200 200 200 200 200 401 401"),
    ("submit to own team's queue",    "post", "/api/v1/jobs/", submit("a-train"),
     "401 201 201 201 201 403 400 201 403 401 401"),
    ("submit to other team's queue",  "post", "/api/v1/jobs/", submit("b-train"),
     "401 201 201 400 400 400 201 400 400 401 401"),
    ("bulk submit to own queue",      "post", "/api/v1/jobs/bulk/", {"jobs": [submit("a-train")]},
     "401 201 201 201 201 403 400 201 403 401 401"),
    ("submit with other team's template", "post", "/api/v1/jobs/", submit("a-train", template="b-tmpl"),
     "401 201 201 400 400 400 400 400 400 401 401"),
    ("read team-a job",               "get", "/api/v1/jobs/{a_job}/", None,
     "401 200 200 200 200 200 404 200 200 401 401"),
    ("read team-b job timeline",      "get", "/api/v1/jobs/{b_job}/timeline/", None,
     "401 200 200 404 404 404 200 404 404 401 401"),
    ("cancel team-a job",             "post", "/api/v1/jobs/{a_job}/cancel/", None,
     "401 202 202 202 202 403 404 403 403 401 401"),
    ("change team-a job priority",    "patch", "/api/v1/jobs/{a_job}/", {"priority_class_name": "high"},
     "401 200 200 200 200 403 404 200 403 401 401"),
    ("list queues",                   "get", "/api/v1/queues/", None,
     "401 200 200 200 200 200 200 200 200 401 401"),
    ("read other team's queue",       "get", "/api/v1/queues/b-train/", None,
     "401 200 200 404 404 404 200 404 404 401 401"),
    ("rename a team queue's display", "patch", "/api/v1/queues/a-train/", {"display_name": "Training"},
     "401 200 200 200 403 403 404 403 403 401 401"),
    ("raise a sub-queue's quota",     "patch", "/api/v1/queues/a-train/", {"gpu_quota": 8},
     "401 200 200 200 403 403 404 403 403 401 401"),
    ("raise own top queue's quota",   "patch", "/api/v1/queues/team-a/", {"gpu_quota": 64},
     "401 200 200 403 403 403 404 403 403 401 401"),
    ("create a sub-queue",            "post", "/api/v1/queues/", {"name": "a-new", "parent": "team-a"},
     "401 201 201 201 403 403 400 403 403 401 401"),
    ("create a top-level queue",      "post", "/api/v1/queues/", {"name": "top-new"},
     "401 201 201 403 403 403 403 403 403 401 401"),
    ("delete an empty sub-queue",     "delete", "/api/v1/queues/a-dev/", None,
     "401 204 204 204 403 403 404 404 403 401 401"),
    ("list templates",                "get", "/api/v1/templates/", None,
     "401 200 200 200 200 200 200 200 200 401 401"),
    ("create a team template",        "post", "/api/v1/templates/", template_body("a-new", "team-a"),
     "401 201 201 201 403 403 400 403 403 401 401"),
    ("create a shared template",      "post", "/api/v1/templates/", template_body("shared-new"),
     "401 201 201 403 403 403 403 403 403 401 401"),
    ("new version of shared template", "put", "/api/v1/templates/llm/", {"spec": builders.template_spec(
        overridable=[])}, "401 200 200 403 403 403 403 403 403 401 401"),
    ("new version of team template",  "put", "/api/v1/templates/a-tmpl/", {"spec": builders.template_spec(
        overridable=[])}, "401 200 200 200 403 403 404 403 403 401 401"),
    ("read other team's template",    "get", "/api/v1/templates/b-tmpl/", None,
     "401 200 200 404 404 404 200 404 404 401 401"),
    ("list clusters",                 "get", "/api/v1/clusters/", None,
     "401 200 200 200 200 200 200 200 200 401 401"),
    ("read a cluster nobody uses",    "get", "/api/v1/clusters/spare/", None,
     "401 200 200 404 404 404 404 404 404 401 401"),
    ("register a cluster",            "post", "/api/v1/clusters/", {"name": "new-cluster",
                                                                    "kubeconfig": builders.kubeconfig()},
     "401 201 201 403 403 403 403 403 403 401 401"),
    ("change a cluster",              "patch", "/api/v1/clusters/local/", {"description": "GPU farm"},
     "401 200 200 200 403 403 403 403 403 401 401"),
    ("delete a cluster",              "delete", "/api/v1/clusters/spare/", None,
     "401 204 204 404 404 404 404 404 404 401 401"),
    ("read the audit log",            "get", "/api/v1/audit/", None,
     "401 200 200 403 403 403 403 403 403 401 401"),
    ("list tokens",                   "get", "/api/v1/tokens/", None,
     "401 200 200 200 200 200 200 403 403 401 401"),
    ("create a token",                "post", "/api/v1/tokens/", {"name": "ci", "actions": ["read"]},
     "401 201 201 201 201 201 201 403 403 401 401"),
    ("read the OpenAPI schema",       "get", "/api/schema/", None,
     "401 200 200 200 200 200 200 200 200 401 401"),
]

def call(client, method, url, body):
    return getattr(client, method)(url, body, format="json") if body is not None else getattr(client, method)(url)


@pytest.mark.parametrize("method,path,body,codes", [pytest.param(*row[1:], id=row[0]) for row in MATRIX])
def test_status_codes(teams, method, path, body, codes):
    """Each principal's request runs in a savepoint rolled back afterwards, so every one sees the same state."""
    url = path.format(a_job=teams.a_job.pk, b_job=teams.b_job.pk)
    got = {}
    for principal in PRINCIPALS:
        with transaction.atomic():
            response = call(teams.clients[principal], method, url, body)
            transaction.set_rollback(True)
        got[principal] = response.status_code
        if response.status_code == 401:
            assert response["WWW-Authenticate"].startswith("Bearer"), principal
    expected = dict(zip(PRINCIPALS, map(int, codes.split()), strict=True))
    assert got == expected


@pytest.mark.parametrize("principal", PRINCIPALS[1:7] + ["t_sub", "t_read"])
def test_no_job_of_another_team_appears_in_any_list(teams, principal):
    own = {"admin": {"a-train", "b-train"}, "padmin": {"a-train", "b-train"}, "b_sub": {"b-train"}}.get(
        principal, {"a-train"})
    client = teams.clients[principal]
    seen = set()
    for query in ["", "?queue=b-train", "?queue=a-train", "?cluster=local", "?q=job", "?submitter=b_sub",
                  "?ordering=-created_at", "?search=b-job", "?limit=1000"]:
        r = client.get(f"/api/v1/jobs/{query}")
        assert r.status_code == 200
        seen |= {j["queue"] for j in r.data["results"]}
    assert seen == own
    bulk = client.post("/api/v1/jobs/bulk/", {"jobs": [submit("a-train", name="mine")]}, format="json")
    if bulk.status_code == 201:
        assert {j["queue"] for j in bulk.data["jobs"]} == {"a-train"}


def test_a_token_scoped_to_one_queue_cannot_submit_to_its_owners_other_queue(teams):
    r = teams.clients["t_sub"].post("/api/v1/jobs/", submit("a-dev", namespace="default"), format="json")
    assert r.status_code == 400  # outside its scope the token cannot see the queue: an unknown name
    assert r.data["queue"] == ["no queue named 'a-dev'"]
    assert teams.clients["a_sub"].post("/api/v1/jobs/", submit("a-dev"), format="json").status_code == 201


def test_a_submitter_cancels_own_jobs_but_not_a_teammates(teams):
    mate = builders.make_user("a_mate", groups=["team-a"])
    from scheduling.services.jobs import lifecycle as job_service

    job, _ = job_service.submit(mate, submit("a-train", name="mates-job"))
    r = teams.clients["a_sub"].post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert r.status_code == 403
    assert GangJob.objects.get(pk=job.pk).desired_state == "Run"
    assert teams.clients["a_admin"].post(f"/api/v1/jobs/{job.pk}/cancel/").status_code == 202


def test_a_queue_admin_cannot_move_a_queue_under_another_team(teams):
    r = teams.clients["a_admin"].patch("/api/v1/queues/a-dev/", {"parent": "team-b"}, format="json")
    assert r.status_code == 400  # team-b is invisible to team-a's admin: an unknown parent
    assert r.data["parent"] == ["no queue named 'team-b'"]
    teams.a_dev.refresh_from_db()
    assert teams.a_dev.parent_id == teams.team_a.pk


@pytest.mark.parametrize("body,field,code", [
    ({"name": "a-x", "parent": "team-a", "clusters": ["spare"]}, "clusters", 403),
    ({"name": "a-x", "parent": "a-dev", "clusters": []}, "clusters", 403),  # empty would mean every cluster
    # kube-* is refused for everyone (podspec/rules.py), before any permission check: 400
    ({"name": "a-x", "parent": "a-dev", "clusters": ["local"], "allowed_namespaces": ["kube-system"]},
     "allowed_namespaces[0]", 400),
    ({"name": "a-x", "parent": "a-dev", "clusters": ["local"], "allowed_namespaces": ["team-b"]},
     "allowed_namespaces", 403),  # (an empty list allows no namespace, so it no longer widens anything)
])
def test_a_queue_admin_cannot_widen_a_child_queue_beyond_the_parent(teams, body, field, code):
    teams.a_dev.allowed_namespaces = ["team-a"]
    teams.a_dev.save()
    r = teams.clients["a_admin"].post("/api/v1/queues/", body, format="json")
    assert r.status_code == code, r.data
    assert field in r.data
    ok = teams.clients["a_admin"].post("/api/v1/queues/", {"name": "a-ok", "parent": "a-dev", "clusters": ["local"],
                                                           "allowed_namespaces": ["team-a"]}, format="json")
    assert ok.status_code == 201, ok.data
    widen = teams.clients["a_admin"].patch("/api/v1/queues/a-ok/", {"allowed_namespaces": ["default"]}, format="json")
    assert widen.status_code == 403


def names(nodes):
    return [(n["name"], names(n["children"])) for n in nodes]


@pytest.mark.parametrize("principal,tree", [
    ("admin", [("team-a", [("a-dev", []), ("a-train", [])]), ("team-b", [("b-train", [])])]),
    ("a_view", [("team-a", [("a-dev", []), ("a-train", [])])]),
    ("b_sub", [("team-b", [("b-train", [])])]),
    ("t_sub", [("team-a", [("a-train", [])])]),  # scoped to a-train: its parent stays visible as its path
])
def test_the_queue_tree_shows_only_visible_queues(teams, principal, tree):
    r = teams.clients[principal].get("/api/v1/queues/tree/")
    assert r.status_code == 200
    assert names(r.data["roots"]) == tree
