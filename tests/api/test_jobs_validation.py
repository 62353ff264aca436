"""Bad submissions: a 400 naming the field, and nothing created anywhere."""
import pytest
from django.apps import apps

from scheduling.services.jobs import lifecycle as job_service
from tests import builders

pytestmark = pytest.mark.django_db


def row_counts():
    return {m._meta.label: m.objects.count() for m in apps.get_app_config("scheduling").get_models()}


def body(setup, **changes):
    b = builders.submit_body(*setup, name="ok-name")
    for key, value in changes.items():
        if value is None:
            b.pop(key, None)
        else:
            b[key] = value
    return b


def worker(**fields):
    return {"podSets": {"worker": fields}}


CASES = [
    # (case, body changes, field named in the error)
    ("replicas zero", {"overrides": worker(replicas=0)}, "overrides.podSets.worker.replicas"),
    ("replicas negative", {"overrides": worker(replicas=-3)}, "overrides.podSets.worker.replicas"),
    ("unknown template", {"template": "nope"}, "template"),
    ("unknown template version", {"template_version": 7}, "template_version"),
    ("override not allowed", {"overrides": worker(image="evil:latest")}, "overrides.podSets.worker.image"),
    ("override unknown pod set", {"overrides": {"podSets": {"ghost": {"replicas": 1}}}}, "overrides.podSets.ghost"),
    ("quantity two dots", {"overrides": worker(resources={"memory": "1.5.3Gi"})},
     "overrides.podSets.worker.resources.memory"),
    ("quantity negative", {"overrides": worker(resources={"cpu": "-2"})}, "overrides.podSets.worker.resources.cpu"),
    ("quantity huge", {"overrides": worker(resources={"cpu": "1e999"})}, "overrides.podSets.worker.resources.cpu"),
    ("half a GPU", {"overrides": worker(resources={"nvidia.com/gpu": "0.5"})},
     "overrides.podSets.worker.resources.nvidia.com/gpu"),
    ("milli GPU", {"overrides": worker(resources={"nvidia.com/gpu": "1m"})},
     "overrides.podSets.worker.resources.nvidia.com/gpu"),
    ("name not dns", {"name": "Train_Job"}, "name"),
    ("name too long", {"name": "a" * 64}, "name"),
    ("namespace not dns", {"namespace": "Default!"}, "namespace"),
    ("unknown queue", {"queue": "nobody"}, "queue"),
    ("unknown cluster", {"cluster": "mars"}, "cluster"),
    ("name missing", {"name": None}, "name"),
    ("name wrong type", {"name": 12}, "name"),
    ("replicas wrong type", {"overrides": worker(replicas="3")}, "overrides.podSets.worker.replicas"),
    ("overrides wrong type", {"overrides": ["replicas", 3]}, "overrides"),
    ("template version wrong type", {"template_version": "1"}, "template_version"),
    ("unknown field", {"gpus": 8}, "gpus"),
]


@pytest.mark.parametrize("case,changes,field", CASES, ids=[c[0] for c in CASES])
def test_bad_submit_is_400_naming_the_field_and_changes_nothing(api, setup, case, changes, field):
    before = row_counts()
    r = api.post("/api/v1/jobs/", body(setup, **changes), format="json")
    assert r.status_code == 400, r.data
    assert field in r.data, r.data
    assert row_counts() == before


def test_a_non_object_body_is_400(api, setup):
    r = api.post("/api/v1/jobs/", [1, 2], format="json")
    assert r.status_code == 400


def test_parent_queue_takes_no_jobs(api, setup):
    template, queue, cluster = setup
    builders.make_queue("child", parent=queue)
    r = api.post("/api/v1/jobs/", builders.submit_body(template, queue, cluster), format="json")
    assert r.status_code == 400
    assert "only leaf queues" in r.data["queue"][0]


TEMPLATE_CASES = [
    ("duplicate pod sets", {"podSets": [builders.pod_set("w"), builders.pod_set("w")]}, "spec.podSets[1].name"),
    ("empty image", {"podSets": [builders.pod_set(containers=[builders.container(image="")])]},
     "spec.podSets[0].template.spec.containers[0].image"),
    ("replicas zero", {"podSets": [builders.pod_set(replicas=0)]}, "spec.podSets[0].replicas"),
    ("unknown backend", {"backend": "yarn"}, "spec.backend"),
    ("bad quantity", {"podSets": [builders.pod_set(containers=[builders.container(memory="1.5.3Gi")])]},
     "spec.podSets[0].template.spec.containers[0].resources.requests.memory"),
    ("fractional GPU", {"podSets": [builders.pod_set(containers=[builders.container(gpu="1.5")])]},
     "spec.podSets[0].template.spec.containers[0].resources.requests.nvidia.com/gpu"),
    ("bad overridable", {"overridable": ["podSets.*.securityContext"]}, "spec.overridable[0]"),
]


@pytest.mark.parametrize("case,changes,field", TEMPLATE_CASES, ids=[c[0] for c in TEMPLATE_CASES])
def test_bad_template_is_400_naming_the_field_and_changes_nothing(api, case, changes, field):
    before = row_counts()
    spec = builders.template_spec(**changes)
    r = api.post("/api/v1/templates/", {"name": "t1", "spec": spec}, format="json")
    assert r.status_code == 400, r.data
    assert field in r.data, r.data
    assert row_counts() == before


def test_a_bulk_body_with_an_unknown_key_is_400_naming_it_and_creates_nothing(api, setup):
    before = row_counts()
    r = api.post("/api/v1/jobs/bulk/", {"jobs": [body(setup)], "dry_run": True}, format="json")
    assert r.status_code == 400, r.data
    assert "dry_run" in r.data
    assert row_counts() == before


@pytest.mark.parametrize("changes,field,message", [
    # null or left out: gangweb places the job (tests/api/test_job_placement.py); another type is named
    ({"cluster": 7}, "cluster", "must be a cluster name, a non-empty list of cluster names, or left out (gangweb "
                                "chooses)"),
    ({"overrides": ["replicas", 3]}, "overrides", "must be an object, got an array"),
])
def test_a_missing_or_mistyped_field_is_named_in_json_terms(api, setup, changes, field, message):
    r = api.post("/api/v1/jobs/", body(setup, **changes), format="json")
    assert r.status_code == 400, r.data
    assert [str(m) for m in r.data[field]] == [message]


def test_every_bad_field_of_a_submit_is_named_in_one_answer(api, setup):
    """Not only the first (a new user's pass): unknown fields, names and types, each with what is wrong."""
    body = {"name": "BAD NAME", "namespace": "Also_Bad", "template": 5, "queue": ["x"], "cluster": [],
            "template_version": 0, "priority_class_name": "Not.Valid", "priority": 1, "gpus": 2}
    r = api.post("/api/v1/jobs/", body, format="json")
    assert r.status_code == 400
    assert sorted(r.data) == ["cluster", "gpus", "name", "namespace", "priority", "priority_class_name", "queue",
                              "template", "template_version"]
    assert r.data["priority"] == [f"unknown field; allowed fields are {', '.join(job_service.SUBMIT_FIELDS)}"]
    bulk = api.post("/api/v1/jobs/bulk/", {"jobs": [{**body, "priority": None, "gpus": None}]}, format="json")
    assert bulk.status_code == 400 and {"jobs[0].name", "jobs[0].queue", "jobs[0].cluster"} <= set(bulk.data)
