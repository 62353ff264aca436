"""A system- PriorityClass on a Kubernetes PodGroup can never work: the Priority admission plugin fills the
PodGroup's `spec.priority` from the class (system-cluster-critical: 2000000000) and v1beta1 validation caps it at
1000000000 (tests/cluster/test_localcluster_137.py shows the API server's 422). So on the k8s-workload backend such
a class is a 400 naming the field wherever it is asked for (template create and PATCH, submit, override, job PATCH),
nothing is created or changed; other backends' gang objects have no such cap and keep taking it."""
import pytest
from django.apps import apps

from scheduling.models import GangJob, RuntimeTemplate
from tests import builders

pytestmark = pytest.mark.django_db
CRITICAL = "system-cluster-critical"


def row_counts():
    return {m._meta.label: m.objects.count() for m in apps.get_app_config("scheduling").get_models()}


def template_body(name, backend="k8s-workload", **spec):
    return {"name": name, "queue": "team-a", "spec": builders.template_spec(backend=backend, **spec),
            "policy_exceptions": ["priorityClassName"]}


def job_body(template, **extra):
    return {"name": "critical", "namespace": "team-a", "template": template, "queue": "a-train", "cluster": "local",
            **extra}


def assert_refused(r, field):
    assert r.status_code == 400, r.data
    message = r.data[field][0]
    assert f"'{CRITICAL}' has priority 2,000,000,000" in message
    assert "at most 1,000,000,000" in message and "scheduling.k8s.io/v1beta1" in message


def test_a_k8s_workload_template_with_a_system_class_is_400_even_with_the_policy_exception(teams):
    before = row_counts()
    r = teams.clients["padmin"].post("/api/v1/templates/", template_body("crit", priorityClassName=CRITICAL),
                                     format="json")
    assert_refused(r, "spec.priorityClassName")
    assert row_counts() == before


def test_patching_a_template_to_a_system_class_is_400_and_keeps_its_versions(teams):
    spec = builders.template_spec(priorityClassName=CRITICAL)
    r = teams.clients["padmin"].patch("/api/v1/templates/a-tmpl/", {"spec": spec}, format="json")
    assert_refused(r, "spec.priorityClassName")
    assert RuntimeTemplate.objects.get(name="a-tmpl").versions.count() == 1


def test_a_platform_admins_job_with_a_system_class_is_400_naming_priority_class_name(teams):
    before = row_counts()
    r = teams.clients["admin"].post("/api/v1/jobs/", job_body("llm", priority_class_name=CRITICAL), format="json")
    assert_refused(r, "priority_class_name")
    assert row_counts() == before


def test_an_override_to_a_system_class_is_400_naming_the_override(teams):
    body = template_body("open-prio", overridable=["priorityClassName"])
    r = teams.clients["padmin"].post("/api/v1/templates/", body, format="json")
    assert r.status_code == 201, r.data
    before = row_counts()
    r = teams.clients["admin"].post("/api/v1/jobs/", job_body("open-prio", overrides={"priorityClassName": CRITICAL}),
                                    format="json")
    assert_refused(r, "overrides.priorityClassName")
    assert row_counts() == before


def test_a_template_version_stored_before_the_check_refuses_its_jobs_naming_the_version(teams):
    # Written straight to the tables, as a version stored before the check existed was.
    template = RuntimeTemplate.objects.create(name="old-crit", policy_exceptions=["priorityClassName"])
    template.versions.create(version=1, spec={**teams.llm.spec, "priorityClassName": CRITICAL})
    before = row_counts()
    r = teams.clients["admin"].post("/api/v1/jobs/", job_body("old-crit"), format="json")
    assert_refused(r, "template_version")
    assert row_counts() == before


def test_moving_a_job_to_a_system_class_is_400_and_leaves_it_unchanged(teams):
    r = teams.clients["admin"].patch(f"/api/v1/jobs/{teams.a_job.pk}/", {"priority_class_name": CRITICAL},
                                     format="json")
    assert_refused(r, "priority_class_name")
    job = GangJob.objects.get(pk=teams.a_job.pk)
    assert (job.priority_class_name, job.spec_revision) == ("", teams.a_job.spec_revision)


@pytest.mark.parametrize("backend", ["kai", "volcano", "coscheduling"])
def test_other_backends_gang_objects_take_a_system_class(teams, backend):
    r = teams.clients["padmin"].post("/api/v1/templates/", template_body(f"crit-{backend}", backend=backend,
                                                                         priorityClassName=CRITICAL), format="json")
    assert r.status_code == 201, r.data
    r = teams.clients["admin"].post("/api/v1/jobs/", job_body(f"crit-{backend}"), format="json")
    assert r.status_code == 201, r.data
    assert r.data["priority_class_name"] == CRITICAL
