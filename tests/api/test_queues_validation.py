"""Queue policies through the API: refusals name the field and change nothing; doubtful input is accepted with
warnings; what users type is converted to KAI units."""
import pytest
from django.apps import apps

from scheduling.choices import GangPhase, QueueWarning
from scheduling.models import GangJob, QueuePolicy
from tests import builders

pytestmark = pytest.mark.django_db
URL = "/api/v1/queues/"


def row_counts():
    return {m._meta.label: m.objects.count() for m in apps.get_app_config("scheduling").get_models()}


def codes(data, field=None):
    return sorted({w["code"] for w in data["warnings"] if field is None or w["field"] == field})


@pytest.fixture
def client(api, queue_syncs):
    return api


REFUSED = [
    # (case, body, field named in the 400)
    ("missing parent", {"name": "team", "parent": "ghost"}, "parent"),
    ("name not dns", {"name": "Team_A"}, "name"),
    ("name missing", {"display_name": "x"}, "name"),
    ("limit below -1", {"name": "team", "gpu_limit": -2}, "gpu_limit"),
    ("quota not a quantity", {"name": "team", "cpu_quota": "four"}, "cpu_quota"),
    ("fractional millicores as a number", {"name": "team", "cpu_quota": 1.5}, "cpu_quota"),
    ("quota wrong type", {"name": "team", "memory_quota": [1]}, "memory_quota"),
    ("quota boolean", {"name": "team", "gpu_quota": True}, "gpu_quota"),
    ("negative quantity string", {"name": "team", "memory_limit": "-5Gi"}, "memory_limit"),
    ("negative weight", {"name": "team", "gpu_over_quota_weight": -1}, "gpu_over_quota_weight"),
    ("weight as a string", {"name": "team", "cpu_over_quota_weight": "1"}, "cpu_over_quota_weight"),
    ("bad duration", {"name": "team", "preempt_min_runtime": "ten minutes"}, "preempt_min_runtime"),
    ("priority wrong type", {"name": "team", "priority": "high"}, "priority"),
    ("unknown cluster", {"name": "team", "clusters": ["mars"]}, "clusters"),
    ("bad namespace", {"name": "team", "allowed_namespaces": ["Bad NS"]}, "allowed_namespaces[0]"),
    ("unknown field", {"name": "team", "gpus": 8}, "gpus"),
]


@pytest.mark.parametrize("case,body,field", REFUSED, ids=[c[0] for c in REFUSED])
def test_bad_queue_is_400_naming_the_field_and_changes_nothing(client, queue_syncs, case, body, field):
    builders.make_cluster("local")
    before = row_counts()
    r = client.post(URL, body, format="json")
    assert r.status_code == 400, r.data
    assert field in r.data, r.data
    assert row_counts() == before
    assert queue_syncs == []


def test_a_taken_name_is_409(client):
    builders.make_queue("team")
    r = client.post(URL, {"name": "team"}, format="json")
    assert r.status_code == 409
    assert "already exists" in r.data["name"][0]


def test_a_cycle_is_refused_naming_the_loop_and_nothing_changes(client):
    dept = builders.make_queue("dept")
    team = builders.make_queue("team", parent=dept)
    builders.make_queue("proj", parent=team)
    r = client.patch(f"{URL}dept/", {"parent": "proj"}, format="json")
    assert r.status_code == 400
    assert "dept → team → proj → dept" in r.data["parent"][0]
    assert QueuePolicy.objects.get(name="dept").parent is None


def test_a_queue_cannot_be_its_own_parent(client):
    builders.make_queue("dept")
    r = client.patch(f"{URL}dept/", {"parent": "dept"}, format="json")
    assert r.status_code == 400
    assert "dept → dept" in r.data["parent"][0]


def test_a_queue_with_active_jobs_cannot_become_a_parent(client, setup):
    template, queue, cluster = setup
    assert client.post("/api/v1/jobs/", builders.submit_body(template, queue, cluster), format="json").status_code \
        == 201
    r = client.post(URL, {"name": "sub", "parent": queue.name}, format="json")
    assert r.status_code == 400
    assert "1 active jobs" in r.data["parent"][0]
    assert not QueuePolicy.objects.filter(name="sub").exists()


def test_the_name_cannot_change(client):
    builders.make_queue("team")
    r = client.patch(f"{URL}team/", {"name": "other"}, format="json")
    assert r.status_code == 400 and "name" in r.data


CONVERSIONS = [
    # (field, what the user sends, stored KAI amount, display string)
    ("cpu_quota", "4", 4000, "4"),
    ("cpu_quota", "500m", 500, "500m"),
    ("cpu_quota", 4000, 4000, "4"),
    ("cpu_quota", "1.5", 1500, "1500m"),
    ("memory_quota", "64Gi", 68720, "68720M"),
    ("memory_quota", "8G", 8000, "8G"),
    ("memory_quota", 4096, 4096, "4096M"),
    ("memory_quota", "1Gi", 1074, "1074M"),
    ("gpu_quota", "4", 4.0, "4"),
    ("gpu_quota", "500m", 0.5, "0.5"),
    ("gpu_quota", 0.7, 0.7, "0.7"),
    ("gpu_limit", "unlimited", -1, "unlimited"),
    ("cpu_limit", "-1", -1, "unlimited"),
    ("memory_limit", -1, -1, "unlimited"),
]


@pytest.mark.parametrize("field,sent,stored,shown", CONVERSIONS, ids=[f"{c[0]}={c[1]}" for c in CONVERSIONS])
def test_what_users_type_is_stored_in_kai_units(client, field, sent, stored, shown):
    r = client.post(URL, {"name": "team", field: sent}, format="json")
    assert r.status_code == 201, r.data
    assert r.data[field] == stored
    resource, kind = field.split("_")
    assert r.data["quantities"][resource][f"{kind}_display"] == shown


def test_limits_default_to_unlimited_explicitly(client):
    r = client.post(URL, {"name": "team", "gpu_quota": 2}, format="json")
    assert r.status_code == 201
    assert (r.data["gpu_limit"], r.data["cpu_limit"], r.data["memory_limit"]) == (-1, -1, -1)
    assert r.data["warnings"] == []


def make(client, name, **fields):
    r = client.post(URL, {"name": name, **fields}, format="json")
    assert r.status_code == 201, r.data
    return r.data


WARNED = [
    # (case, parent fields or None, queue fields, sibling fields or None, expected warning codes on the queue)
    ("zero limit", None, {"gpu_limit": 0}, None, [QueueWarning.ZERO_LIMIT]),
    ("quota over limit", None, {"gpu_quota": 8, "gpu_limit": 4}, None, [QueueWarning.QUOTA_OVER_LIMIT]),
    ("unlimited quota under a finite limit", None, {"cpu_quota": -1, "cpu_limit": "4"}, None,
     [QueueWarning.QUOTA_OVER_LIMIT]),
    ("weight zero", None, {"memory_over_quota_weight": 0}, None, [QueueWarning.NO_SURPLUS_SHARE]),
    ("unlimited child under a finite parent", {"gpu_limit": 8}, {}, None, [QueueWarning.UNLIMITED_UNDER_FINITE]),
    ("child limit over the parent's", {"gpu_limit": 8}, {"gpu_limit": 16}, None, [QueueWarning.LIMIT_OVER_ANCESTOR]),
    ("children over the parent's quota", {"gpu_quota": 4}, {"gpu_quota": 3}, {"gpu_quota": 2},
     [QueueWarning.CHILDREN_OVER_PARENT]),
    ("an unlimited child counts as unlimited, not -1", {"gpu_quota": 4}, {"gpu_quota": -1}, {"gpu_quota": 2},
     [QueueWarning.CHILDREN_OVER_PARENT]),
    ("children under an unlimited parent", {"gpu_quota": -1}, {"gpu_quota": 100}, {"gpu_quota": 50}, []),
    ("children exactly at the parent's quota", {"cpu_quota": "4"}, {"cpu_quota": "3"}, {"cpu_quota": "1"}, []),
    ("fractional GPUs within tolerance", {"gpu_quota": 0.3}, {"gpu_quota": 0.1}, {"gpu_quota": 0.2}, []),
    ("fractional GPUs over", {"gpu_quota": 0.3}, {"gpu_quota": 0.1}, {"gpu_quota": 0.25},
     [QueueWarning.CHILDREN_OVER_PARENT]),
    ("a clean queue", {"gpu_quota": 8, "gpu_limit": -1}, {"gpu_quota": 4, "gpu_limit": 8}, None, []),
]


@pytest.mark.parametrize("case,parent,fields,sibling,expected", WARNED, ids=[c[0] for c in WARNED])
def test_doubtful_queues_are_accepted_with_warnings(client, case, parent, fields, sibling, expected):
    body = dict(fields)
    if parent is not None:
        make(client, "dept", **parent)
        body["parent"] = "dept"
    if sibling is not None:
        make(client, "sibling", parent="dept", **sibling)
    data = make(client, "team", **body)
    assert codes(data) == sorted(expected), data["warnings"]
    # The same warnings on a later read, and on the parent when it is the parent's children that overflow.
    assert codes(client.get(f"{URL}team/").data) == sorted(expected)
    if QueueWarning.CHILDREN_OVER_PARENT in expected:
        assert QueueWarning.CHILDREN_OVER_PARENT in codes(client.get(f"{URL}dept/").data)


def test_warning_messages_carry_the_numbers(client):
    make(client, "dept", gpu_quota=4, gpu_limit=6)
    make(client, "a", parent="dept", gpu_quota=3)
    data = make(client, "b", parent="dept", gpu_quota=2)
    messages = {w["code"]: w["message"] for w in data["warnings"]}
    assert "add up to 5 GPUs" in messages[QueueWarning.CHILDREN_OVER_PARENT]
    assert "more than the 4 GPUs quota of 'dept'" in messages[QueueWarning.CHILDREN_OVER_PARENT]
    assert "at most 6 GPUs" in messages[QueueWarning.UNLIMITED_UNDER_FINITE]


def test_update_merges_and_enqueues_a_sync(client, queue_syncs):
    builders.make_cluster("local")
    created = make(client, "team", gpu_quota=2, clusters=["local"])
    r = client.patch(f"{URL}team/", {"gpu_quota": "3"}, format="json")
    assert r.status_code == 200
    assert (r.data["gpu_quota"], r.data["clusters"], r.data["gpu_limit"]) == (3.0, ["local"], -1)
    assert queue_syncs == [("reconcile_queue", created["id"]), ("reconcile_queue", created["id"])]


def test_delete_of_a_parent_with_children_is_409_and_changes_nothing(client, queue_syncs):
    dept = builders.make_queue("dept", gpu_quota=8)
    builders.make_queue("team", parent=dept)
    before = row_counts()
    r = client.delete(f"{URL}dept/")
    assert r.status_code == 409
    assert "team" in r.data["children"][0]
    assert row_counts() == before
    assert QueuePolicy.objects.get(name="team").parent.name == "dept"
    assert queue_syncs == []


def test_delete_of_a_queue_with_active_jobs_is_409(client, setup):
    template, queue, cluster = setup
    client.post("/api/v1/jobs/", builders.submit_body(template, queue, cluster), format="json")
    r = client.delete(f"{URL}{queue.name}/")
    assert r.status_code == 409
    assert "1 active jobs" in r.data["jobs"][0]
    assert QueuePolicy.objects.filter(name=queue.name).exists()


def test_delete_of_a_queue_whose_jobs_finished_keeps_their_history(client, setup):
    template, queue, cluster = setup
    client.post("/api/v1/jobs/", builders.submit_body(template, queue, cluster), format="json")
    GangJob.objects.update(phase=GangPhase.SUCCEEDED)
    r = client.delete(f"{URL}{queue.name}/")
    assert r.status_code == 409
    assert "finished jobs" in r.data["jobs"][0]


def test_delete_of_a_leaf_syncs_its_clusters(client, queue_syncs):
    cluster = builders.make_cluster("local")
    builders.make_queue("team", clusters=[cluster])
    r = client.delete(f"{URL}team/")
    assert r.status_code == 204
    assert not QueuePolicy.objects.filter(name="team").exists()
    assert queue_syncs == [("sync_queues", cluster.id)]


def test_imported_queues_are_not_changed_or_deleted(client):
    builders.make_queue("foreign", managed=False)
    assert client.patch(f"{URL}foreign/", {"gpu_quota": 1}, format="json").status_code == 409
    assert client.delete(f"{URL}foreign/").status_code == 409
    assert QueuePolicy.objects.get(name="foreign").gpu_quota == 0


def test_only_platform_admins_change_queues(db, django_user_model, queue_syncs):
    from rest_framework.test import APIClient

    user = django_user_model.objects.create_user("ann", password="pw-ann-12345")
    c = APIClient()
    c.force_authenticate(user)
    assert c.post(URL, {"name": "team"}, format="json").status_code == 403
    assert c.get(URL).status_code == 200
