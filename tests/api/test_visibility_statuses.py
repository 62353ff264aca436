"""One answer, over the API and on the pages, for a queue (or a job, template or cluster of a queue) the user
cannot see or may not use:

- an object you cannot see is 404, the same as one that does not exist (its existence is not disclosed; GitHub
  does the same for private repositories);
- one you can see but may not act on is 403, naming the field and the role the action needs;
- a queue (template, parent) you cannot see named in a request body is 400 naming the field, with the message of
  an unknown name, so a body cannot probe for names either.

Two principals, read left to right in each row: `stranger` (no grant on queue `q`: submitter on `elsewhere` only)
and `viewer` (viewer on `q`, submitter on `elsewhere`). Queue `q` (under `dept`) holds job `j` and template
`q-tmpl`; `elsewhere` holds each principal's own job.

    dept ── q (leaf: job j, template q-tmpl, a viewer grant for `viewer`)
    elsewhere (leaf: the principals' own jobs; both are submitters)
    cluster local (both leaves target it)
"""
import pytest
from django.db import transaction
from rest_framework.test import APIClient

from scheduling.models import GangJob
from scheduling.services.jobs import lifecycle as job_service
from scheduling.services.templates import versions as template_versions
from tests import builders

pytestmark = pytest.mark.django_db

PRINCIPALS = ("stranger", "viewer")


def body(queue="q", name="new-job", template="llm", **extra):
    return {"name": name, "template": template, "queue": queue, "cluster": "local", **extra}


@pytest.fixture
def world(db, admin_user, enqueued, queue_syncs):
    local = builders.make_cluster("local")
    dept = builders.make_queue("dept")
    q = builders.make_queue("q", parent=dept, clusters=[local])
    elsewhere = builders.make_queue("elsewhere", clusters=[local])
    llm = builders.make_template("llm")
    template_versions.create_template(None, "q-tmpl", "", builders.template_spec(), queue=q)
    users = {name: builders.make_user(name) for name in PRINCIPALS}
    for user in users.values():
        builders.grant(elsewhere, "submitter", user=user)
    builders.grant(q, "viewer", user=users["viewer"])
    j, _ = job_service.submit(admin_user, builders.submit_body(llm, q, local, name="j"))
    own = {name: job_service.submit(user, builders.submit_body(llm, elsewhere, local, name=f"own-{name}"))[0]
           for name, user in users.items()}
    api, pages = {}, {}
    for name, user in users.items():
        api[name] = APIClient()
        api[name].force_authenticate(user)
        pages[name] = APIClient()  # the dashboard's session login, through the same test client class
        pages[name].force_login(user)
    return {"j": j, "own": own, "api": api, "pages": pages}


#   case                               kind    method  path ({j}: job j; {own}: the principal's own job)   body
#   expected: "stranger viewer", each "status" or "status:field" (the field the answer must name)
ROWS = [
    # --- API: jobs in q ---------------------------------------------------------------------------------------
    ("read job",                       "api", "get", "/api/v1/jobs/{j}/", None, "404 200"),
    ("job timeline",                   "api", "get", "/api/v1/jobs/{j}/timeline/", None, "404 200"),
    ("job events",                     "api", "get", "/api/v1/jobs/{j}/events/", None, "404 502"),
    ("cancel job",                     "api", "post", "/api/v1/jobs/{j}/cancel/", None, "404 403:job"),
    ("change job priority",            "api", "patch", "/api/v1/jobs/{j}/", {"priority_class_name": "hi"},
     "404 403:job"),
    ("resubmit job",                   "api", "post", "/api/v1/jobs/{j}/resubmit/", None, "404 403:queue"),
    ("list jobs of q",                 "api", "get", "/api/v1/jobs/?queue=q", None, "200 200"),
    ("submit to q",                    "api", "post", "/api/v1/jobs/", body(), "400:queue 403:queue"),
    ("bulk submit to q",               "api", "post", "/api/v1/jobs/bulk/", {"jobs": [body()]},
     "400:jobs[0].queue 403:jobs[0].queue"),
    ("submit with q's template",       "api", "post", "/api/v1/jobs/", body("elsewhere", template="q-tmpl"),
     "400:template 201"),
    ("move own job into q",            "api", "patch", "/api/v1/jobs/{own}/", {"queue": "q"},
     "400:queue 403:queue"),
    # --- API: queues --------------------------------------------------------------------------------------------
    ("read queue",                     "api", "get", "/api/v1/queues/q/", None, "404 200"),
    ("queue usage",                    "api", "get", "/api/v1/queues/q/usage/", None, "404 200"),
    ("change queue",                   "api", "patch", "/api/v1/queues/q/", {"display_name": "Q"}, "404 403:queue"),
    ("delete queue",                   "api", "delete", "/api/v1/queues/q/", None, "404 403:queue"),
    ("list queues under dept",         "api", "get", "/api/v1/queues/?parent=dept", None, "200 200"),
    ("queue tree below q",             "api", "get", "/api/v1/queues/tree/?parent=q", None, "400:parent 200"),
    ("create a queue under dept",      "api", "post", "/api/v1/queues/", {"name": "q-child", "parent": "dept"},
     "400:parent 403:parent"),
    # --- API: templates -----------------------------------------------------------------------------------------
    ("read q's template",              "api", "get", "/api/v1/templates/q-tmpl/", None, "404 200"),
    ("q's template versions",          "api", "get", "/api/v1/templates/q-tmpl/versions/", None, "404 200"),
    ("new version of q's template",    "api", "put", "/api/v1/templates/q-tmpl/",
     {"spec": builders.template_spec(overridable=[])}, "404 403:template"),
    ("create a template for q",        "api", "post", "/api/v1/templates/",
     {"name": "q-new", "spec": builders.template_spec(), "queue": "q"}, "400:queue 403:queue"),
    # --- pages --------------------------------------------------------------------------------------------------
    ("job page",                       "page", "get", "/jobs/{j}/", None, "404 200"),
    ("job live part",                  "page", "get", "/jobs/{j}/live/", None, "404 200"),
    ("job events page",                "page", "get", "/jobs/{j}/events/", None, "404 200"),
    ("job objects part",               "page", "get", "/jobs/{j}/objects/", None, "404 200"),
    ("cancel on the job page",         "page", "post", "/jobs/{j}/cancel/", {}, "404 302"),
    ("queue page",                     "page", "get", "/queues/q/", None, "404 200"),
    ("expand queue in the tree",       "page", "get", "/queues/q/children/", None, "404 200"),
    ("template page",                  "page", "get", "/templates/q-tmpl/", None, "404 200"),
    ("template edit page",             "page", "get", "/templates/q-tmpl/edit/", None, "404 403"),
]


def _call(client, kind, method, url, data):
    if kind == "api":
        return getattr(client, method)(url, data, format="json") if data is not None else getattr(client, method)(url)
    return getattr(client, method)(url, data) if data is not None else getattr(client, method)(url)


@pytest.mark.parametrize("kind,method,path,data,expected", [pytest.param(*r[1:], id=r[0]) for r in ROWS])
def test_each_endpoint_answers_a_queue_you_cannot_see_or_use_the_same_way(world, kind, method, path, data,
                                                                          expected):
    got = []
    for principal in PRINCIPALS:
        url = path.format(j=world["j"].pk, own=world["own"][principal].pk)
        client = world["api" if kind == "api" else "pages"][principal]
        with transaction.atomic():  # each principal sees the same state
            response = _call(client, kind, method, url, data)
            transaction.set_rollback(True)
        answer = str(response.status_code)
        if ":" in expected.split()[len(got)]:
            field = expected.split()[len(got)].split(":", 1)[1]
            names = list(response.data) if hasattr(response, "data") and isinstance(response.data, dict) else []
            answer += f":{field}" if field in names else f":{names}"
        got.append(answer)
    assert " ".join(got) == expected


def test_a_queue_you_cannot_see_reads_like_one_that_does_not_exist(world):
    client = world["api"]["stranger"]
    hidden_queue, missing_queue = client.get("/api/v1/queues/q/"), client.get("/api/v1/queues/no-such-queue/")
    assert (hidden_queue.status_code, missing_queue.status_code) == (404, 404)
    assert hidden_queue.json() == {"detail": "no queue 'q' that you can see"}
    assert missing_queue.json() == {"detail": "no queue 'no-such-queue' that you can see"}
    hidden_job = client.get(f"/api/v1/jobs/{world['j'].pk}/")
    missing_job = client.get(f"/api/v1/jobs/{world['j'].pk + 1000}/")
    assert hidden_job.json() == {"detail": f"no job '{world['j'].pk}' that you can see"}
    assert missing_job.json() == {"detail": f"no job '{world['j'].pk + 1000}' that you can see"}
    hidden = client.post("/api/v1/jobs/", body("q"), format="json")
    missing = client.post("/api/v1/jobs/", body("no-such-queue"), format="json")
    assert (hidden.status_code, missing.status_code) == (400, 400)
    assert hidden.data["queue"] == [m.replace("no-such-queue", "q") for m in missing.data["queue"]]
    assert GangJob.objects.count() == 3  # j and the two own jobs: nothing created


@pytest.mark.parametrize("parent", [None, "elsewhere", "dept"])
def test_creating_a_queue_named_as_one_you_cannot_see_answers_as_for_a_free_name(world, parent):
    """Queue names are global, but only who may create a queue there learns that a name is taken."""
    client = world["api"]["stranger"]
    answers = []
    for name in ("q", "no-such-queue"):
        data = {"name": name, **({"parent": parent} if parent else {})}
        r = client.post("/api/v1/queues/", data, format="json")
        answers.append((r.status_code, str(r.data).replace(f"'{name}'", "'<name>'")))
    assert answers[0] == answers[1]
    assert answers[0][0] in (400, 403)
    assert GangJob.objects.count() == 3


def test_a_403_names_the_role_the_action_needs(world):
    r = world["api"]["viewer"].post("/api/v1/jobs/", body("q"), format="json")
    assert r.status_code == 403
    assert "submitter" in r.data["queue"][0] and "viewer" in r.data["queue"][0]


def test_the_submit_form_gives_the_apis_messages_under_the_queue_input(world):
    stranger = world["pages"]["stranger"].post("/submit/", {"template": "llm", **body("q"), "namespace": "default"})
    viewer = world["pages"]["viewer"].post("/submit/", {"template": "llm", **body("q"), "namespace": "default"})
    assert (stranger.status_code, viewer.status_code) == (200, 200)  # the form again, with the error under `queue`
    api_stranger = world["api"]["stranger"].post("/api/v1/jobs/", body("q"), format="json").data["queue"][0]
    api_viewer = world["api"]["viewer"].post("/api/v1/jobs/", body("q"), format="json").data["queue"][0]
    assert stranger.context["form"].errors["queue"] == [api_stranger]
    assert viewer.context["form"].errors["queue"] == [api_viewer]
    assert GangJob.objects.count() == 3
