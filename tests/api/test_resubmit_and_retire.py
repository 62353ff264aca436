"""Resubmit is a submit (issue 15, M3), and template versions can be retired (M5).

The `teams` fixture (tests/api/conftest.py): a_sub and b_sub are submitters (a_sub in team-a through a group),
a_admin is team-a's queue admin; a-tmpl is team-a's template.
"""
import pytest

from scheduling.choices import GangPhase
from scheduling.models import AuditEvent, GangJob, RuntimeTemplateVersion
from scheduling.services.jobs import lifecycle as job_service
from scheduling.services.templates import versions as template_versions
from tests import builders

pytestmark = pytest.mark.django_db


def finished(job):
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.SUCCEEDED)
    return job


def test_a_submitter_cannot_resubmit_another_submitters_job_in_the_same_queue(teams):
    other = builders.make_user("a_sub2", groups=["team-a"])
    job = finished(teams.a_job)  # a_sub's
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(other)
    before = GangJob.objects.count()
    r = client.post(f"/api/v1/jobs/{job.pk}/resubmit/")
    assert r.status_code == 403, r.data
    # The refusal says why (the bulk cancel reports it per job): another's job, and only the submitter role.
    assert r.data == {"job": ["not allowed to resubmit this job: only its submitter (with the submitter role) or an "
                              "admin of queue 'a-train' may; it is not your job, and you have submitter on that "
                              "queue"]}
    assert GangJob.objects.count() == before
    # Its submitter and the queue's admin may.
    assert teams.clients["a_sub"].post(f"/api/v1/jobs/{job.pk}/resubmit/").status_code == 201
    finished(GangJob.objects.get(resubmitted_from=job))
    r = teams.clients["a_admin"].post(f"/api/v1/jobs/{GangJob.objects.get(resubmitted_from=job).pk}/resubmit/")
    assert r.status_code == 201, r.data
    assert r.data["submitted_by"] == "a_admin"


def test_resubmit_does_not_inherit_a_system_priority_class_a_platform_admin_chose(teams):
    # A kai template: a k8s-workload PodGroup refuses every system- class (tests/api/test_system_priority_gangs.py).
    kai = builders.make_template("llm-kai", backend="kai")
    body = builders.submit_body(kai, teams.a_train, teams.local, name="critical", namespace="team-a",
                                priority_class_name="system-cluster-critical")
    job, _ = job_service.submit(teams.admin, body)
    finished(job)
    # The job's queue admin may resubmit it, but not with a priority class only platform admins may choose.
    before = GangJob.objects.count()
    r = teams.clients["a_admin"].post(f"/api/v1/jobs/{job.pk}/resubmit/")
    assert r.status_code == 403, r.data
    assert "priority_class_name" in r.data
    assert GangJob.objects.count() == before
    assert teams.clients["admin"].post(f"/api/v1/jobs/{job.pk}/resubmit/").status_code == 201


def test_resubmit_runs_the_submit_checks_again_a_limit_the_job_no_longer_fits(teams):
    job = finished(teams.a_job)  # 2 replicas x 1 cpu
    teams.team_a.cpu_limit = 1000
    teams.team_a.save()
    r = teams.clients["a_sub"].post(f"/api/v1/jobs/{job.pk}/resubmit/")
    assert r.status_code == 400, r.data
    assert "cpu_limit" in r.data["queue"][0]


def test_a_retired_version_takes_no_new_jobs_and_old_jobs_keep_their_history(teams):
    v1 = teams.a_tmpl
    v2 = template_versions.add_version(None, v1.template, builders.template_spec(overridable=[]))
    old, _ = job_service.submit(teams.a_sub, builders.submit_body(v1, teams.a_train, teams.local,
                                                                  name="old-job", namespace="team-a",
                                                                  template_version=1))
    finished(old)
    r = teams.clients["a_sub"].post("/api/v1/templates/a-tmpl/versions/1/retire/")
    assert r.status_code == 403  # submitters do not manage templates
    r = teams.clients["a_admin"].post("/api/v1/templates/a-tmpl/versions/1/retire/")
    assert r.status_code == 200, r.data
    assert r.data["version"] == 1 and r.data["retired_at"]
    assert AuditEvent.objects.filter(action="template.retire", object_name="a-tmpl").count() == 1
    again = teams.clients["a_admin"].post("/api/v1/templates/a-tmpl/versions/1/retire/")
    assert again.status_code == 200 and again.data["retired_at"] == r.data["retired_at"]
    assert AuditEvent.objects.filter(action="template.retire").count() == 1

    before = GangJob.objects.count()
    body = builders.submit_body(v1, teams.a_train, teams.local, name="new", namespace="team-a")
    r = teams.clients["a_sub"].post("/api/v1/jobs/", dict(body, template_version=1), format="json")
    assert r.status_code == 400
    assert r.data == {"template_version": ["version 1 of template 'a-tmpl' is retired and takes no new jobs; use "
                                           "a newer version"]}
    r = teams.clients["a_sub"].post("/api/v1/jobs/bulk/", {"jobs": [dict(body, template_version=1)]}, format="json")
    assert r.status_code == 400 and "jobs[0].template_version" in r.data
    r = teams.clients["a_sub"].post(f"/api/v1/jobs/{old.pk}/resubmit/")
    assert r.status_code == 400 and "template_version" in r.data
    assert GangJob.objects.count() == before
    # The latest version still takes jobs; the old job keeps its version and history.
    assert teams.clients["a_sub"].post("/api/v1/jobs/", body, format="json").status_code == 201
    r = teams.clients["a_sub"].get(f"/api/v1/jobs/{old.pk}/")
    assert (r.status_code, r.data["template_version"]) == (200, 1)
    versions = teams.clients["a_sub"].get("/api/v1/templates/a-tmpl/versions/").data
    assert [(v["version"], v["retired_at"] is not None) for v in versions] == [(v2.version, False), (1, True)]
    # Deleting the template is still refused while jobs use it.
    assert teams.clients["a_admin"].delete("/api/v1/templates/a-tmpl/").status_code == 409


def test_the_template_page_shows_retired_versions_and_retires_one(teams, client):
    template_versions.add_version(None, teams.a_tmpl.template, builders.template_spec(overridable=[]))
    client.force_login(teams.a_admin)
    page = client.get("/templates/a-tmpl/").content.decode()
    assert page.count(">Retire</button>") == 2
    r = client.post("/templates/a-tmpl/versions/1/retire/", follow=True)
    page = r.content.decode()
    assert "Version 1 is retired: it takes no new jobs." in page
    assert page.count(">Retire</button>") == 1 and ">retired</span>" in page
    assert RuntimeTemplateVersion.objects.get(template__name="a-tmpl", version=1).retired_at is not None
    # A viewer sees the badge but no button, and may not retire over the form either.
    client.force_login(teams.a_view)
    assert ">Retire</button>" not in client.get("/templates/a-tmpl/").content.decode()
    r = client.post("/templates/a-tmpl/versions/2/retire/", follow=True)
    assert RuntimeTemplateVersion.objects.get(template__name="a-tmpl", version=2).retired_at is None


def test_storing_a_retired_versions_spec_again_makes_a_new_version(teams):
    spec = RuntimeTemplateVersion.objects.get(pk=teams.a_tmpl.pk).spec
    assert teams.clients["a_admin"].post("/api/v1/templates/a-tmpl/versions/1/retire/").status_code == 200
    r = teams.clients["a_admin"].put("/api/v1/templates/a-tmpl/", {"spec": spec}, format="json")
    assert (r.status_code, r.data["latest_version"]) == (200, 2)
