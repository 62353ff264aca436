"""Queue admins stay inside the part of the tree they were given (issue 15: H2, L5, L8).

The `teams` fixture (tests/api/conftest.py): a_admin is admin of team-a (children a-train, a-dev); team-b and
b-train belong to another team.
"""
import pytest

from scheduling.models import AuditEvent, GangJob, QueuePolicy
from tests import builders

pytestmark = pytest.mark.django_db

ESCAPE = {"parent": None, "gpu_quota": 1000, "gpu_limit": -1}


def stored(queue):
    row = QueuePolicy.objects.get(pk=queue.pk)
    return row.parent_id, row.gpu_quota, row.gpu_limit


def test_a_queue_admin_cannot_move_a_child_queue_to_the_top_level_to_escape_its_parents_limit(teams):
    teams.team_a.gpu_limit = 8
    teams.team_a.save()
    before = stored(teams.a_train)
    r = teams.clients["a_admin"].patch("/api/v1/queues/a-train/", ESCAPE, format="json")
    assert r.status_code == 403, r.data
    assert r.data == {"parent": ["moving queue 'a-train' to the top level needs a platform admin"]}
    assert stored(teams.a_train) == before
    assert not AuditEvent.objects.filter(action="queue.update").exists()
    # The 800-GPU job of the report stays refused: team-a's limit of 8 still caps a-train.
    body = builders.submit_body(teams.llm, teams.a_train, teams.local, name="big", namespace="team-a",
                                overrides={"podSets": {"worker": {"replicas": 100}}})
    body["overrides"]["podSets"]["worker"]["resources"] = {"nvidia.com/gpu": "8"}
    r = teams.clients["a_sub"].post("/api/v1/jobs/", body, format="json")
    assert r.status_code == 400, r.data
    assert "gpu_limit 8 GPUs" in r.data["queue"][0]


def test_a_platform_admin_may_move_a_queue_to_the_top_level(teams):
    r = teams.clients["padmin"].patch("/api/v1/queues/a-dev/", {"parent": None}, format="json")
    assert r.status_code == 200, r.data
    assert r.data["parent"] is None


def test_a_move_under_another_parent_checks_the_queues_scope_against_the_new_parent(teams):
    # a-dev takes every namespace; a-train (the new parent for it here) only team-a, so a-dev does not fit there.
    a_train = teams.a_train
    GangJob.objects.filter(queue=a_train).update(phase="Succeeded")
    r = teams.clients["a_admin"].patch("/api/v1/queues/a-dev/", {"parent": "a-train"}, format="json")
    assert r.status_code == 403, r.data
    assert "allowed_namespaces" in r.data
    assert QueuePolicy.objects.get(pk=teams.a_dev.pk).parent_id == teams.team_a.pk
    # In the same request, narrowed to the new parent's namespaces, it fits.
    r = teams.clients["a_admin"].patch("/api/v1/queues/a-dev/", {"parent": "a-train",
                                                                 "allowed_namespaces": ["team-a"]}, format="json")
    assert r.status_code == 200, r.data
    assert r.data["parent"] == "a-train"


def test_a_moved_queues_children_must_fit_the_new_parent_too(teams):
    inner = builders.make_queue("a-dev-inner", parent=teams.a_dev, clusters=[teams.local])  # any namespace
    teams.a_dev.allowed_namespaces = ["team-a"]
    teams.a_dev.save()
    GangJob.objects.filter(queue=teams.a_train).update(phase="Succeeded")
    r = teams.clients["a_admin"].patch("/api/v1/queues/a-dev/", {"parent": "a-train"}, format="json")
    assert r.status_code == 403, r.data
    assert "a-dev-inner" in r.data["parent"][0]
    assert QueuePolicy.objects.get(pk=inner.pk).parent_id == teams.a_dev.pk


def test_moving_a_queue_into_another_teams_queue_answers_as_an_unknown_name(teams):
    r = teams.clients["a_admin"].patch("/api/v1/queues/a-dev/", {"parent": "team-b"}, format="json")
    assert r.status_code == 400
    assert r.data == {"parent": ["no queue named 'team-b'"]}


@pytest.mark.parametrize("field", ["preempt_min_runtime", "reclaim_min_runtime"])
@pytest.mark.parametrize("value,code", [("99999999999999h", 400), ("2562048h", 400), ("2562047h", 200),
                                        ("1.5h", 200), ("10m\n", 200)])
def test_min_runtimes_stay_within_gos_duration_range(teams, field, value, code):
    r = teams.clients["a_admin"].patch("/api/v1/queues/a-dev/", {"display_name": "x"}, format="json")
    assert r.status_code == 200
    r = teams.clients["admin"].patch("/api/v1/queues/a-dev/", {field: value}, format="json")
    assert r.status_code == code, r.data
    if code == 400:
        assert "at most 2562047h" in r.data[field][0]
        assert getattr(QueuePolicy.objects.get(pk=teams.a_dev.pk), field) == ""
    else:
        assert r.data[field] == value.strip()


def test_a_queue_name_taken_by_another_team_is_refused_without_saying_whose(teams):
    r = teams.clients["a_admin"].post("/api/v1/queues/", {"name": "b-train", "parent": "team-a",
                                                          "clusters": ["local"]}, format="json")
    assert r.status_code == 409
    assert r.data == {"name": ["'b-train' is not available as a queue name; choose another"]}
    mine = teams.clients["a_admin"].post("/api/v1/queues/", {"name": "a-dev", "parent": "team-a",
                                                             "clusters": ["local"]}, format="json")
    assert mine.data == {"name": ["a queue named 'a-dev' already exists"]}


def test_a_template_name_taken_by_another_team_is_refused_without_saying_whose(teams):
    body = {"name": "b-tmpl", "queue": "team-a", "spec": builders.template_spec()}
    r = teams.clients["a_admin"].post("/api/v1/templates/", body, format="json")
    assert r.status_code == 409
    assert r.data == {"name": ["'b-tmpl' is not available as a runtime template name; choose another"]}
    r = teams.clients["a_admin"].post("/api/v1/templates/", dict(body, name="llm"), format="json")
    assert r.data == {"name": ["a runtime template named 'llm' already exists"]}  # shared: everyone sees it


def test_a_job_name_active_in_another_teams_queue_is_refused_without_saying_whose(teams):
    # b-job runs in namespace "default" of cluster local, in team-b's queue; a-train is given it too (team-a has it).
    teams.a_train.allowed_namespaces = ["team-a", "default"]
    teams.a_train.save()
    body = builders.submit_body(teams.llm, teams.a_train, teams.local, name="b-job", namespace="default")
    r = teams.clients["a_sub"].post("/api/v1/jobs/", body, format="json")
    assert r.status_code == 409
    assert r.data == {"name": ["'b-job' is not available as a job name in namespace 'default' of that cluster "
                               "now; choose another"]}
    r = teams.clients["a_sub"].post("/api/v1/jobs/bulk/", {"jobs": [body]}, format="json")
    assert r.status_code == 409
    assert "b-job" in r.data["jobs[0].name"][0] and "team-b" not in str(r.data)
    own = builders.submit_body(teams.llm, teams.a_train, teams.local, name="a-job", namespace="team-a")
    r = teams.clients["a_sub"].post("/api/v1/jobs/", own, format="json")
    assert r.data == {"name": ["an active job 'a-job' already exists in namespace 'team-a' of that cluster"]}


def test_warnings_never_name_a_sibling_queue_the_reader_cannot_see_nor_its_quota(teams):
    # a_sub's token t_sub sees a-train and its parent team-a, not a-dev; a-dev's quota makes team-a's children
    # add up to more than team-a's own.
    QueuePolicy.objects.filter(pk=teams.team_a.pk).update(gpu_quota=4)
    QueuePolicy.objects.filter(pk=teams.a_train.pk).update(gpu_quota=1)
    QueuePolicy.objects.filter(pk=teams.a_dev.pk).update(gpu_quota=37)
    for path in ("/api/v1/queues/a-train/", "/api/v1/queues/team-a/"):
        r = teams.clients["t_sub"].get(path)
        assert r.status_code == 200
        text = str(r.data["warnings"])
        assert "a-dev" not in text and "38" not in text and "37" not in text, text
        assert "1 other queue you cannot see" in text
    tree = str(teams.clients["t_sub"].get("/api/v1/queues/tree/").data)
    assert "a-dev" not in tree and "38 GPUs" not in tree
    # Who may see them all is told everything.
    full = str(teams.clients["a_admin"].get("/api/v1/queues/a-train/").data["warnings"])
    assert "a-dev" in full and "38 GPUs" in full


@pytest.mark.parametrize("path,body,field", [
    ("/api/v1/templates/", {"name": "sample-gang\n", "queue": "team-a", "spec": builders.template_spec()}, "name"),
    ("/api/v1/queues/", {"name": "a-new\n", "parent": "team-a", "clusters": ["local"]}, "name"),
    ("/api/v1/queues/", {"name": "a-new", "parent": "team-a", "clusters": ["local"],
                         "allowed_namespaces": ["team-a\n"]}, "allowed_namespaces[0]"),
    ("/api/v1/templates/", {"name": "t-nl", "queue": "team-a", "spec": builders.template_spec(
        priorityClassName="high\n")}, "spec.priorityClassName"),
    ("/api/v1/templates/", {"name": "t-nl", "queue": "team-a", "spec": builders.template_spec(
        pod_sets=[builders.pod_set(containers=[builders.container(env=[{"name": "A\n", "value": "x"}])])])},
     "spec.podSets[0].template.spec.containers[0].env[0].name"),
])
def test_names_with_a_trailing_newline_are_refused(teams, path, body, field):
    before = (QueuePolicy.objects.count(), AuditEvent.objects.count())
    r = teams.clients["a_admin"].post(path, body, format="json")
    assert r.status_code == 400, r.data
    assert field in r.data
    assert (QueuePolicy.objects.count(), AuditEvent.objects.count()) == before
