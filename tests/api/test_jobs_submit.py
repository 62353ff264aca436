"""Submitting jobs over the API: created, idempotent, bulk all-or-nothing."""
import pytest

from scheduling.models import GangJob, PhaseTransition
from tests import builders

pytestmark = pytest.mark.django_db


def test_submit_creates_a_job_with_its_resolved_spec_and_a_submitted_entry(api, setup, enqueued):
    template, queue, cluster = setup
    overrides = {"podSets": {"worker": {"replicas": 3, "resources": {"nvidia.com/gpu": "1"}}}}
    body = builders.submit_body(template, queue, cluster, name="train-1", overrides=overrides)
    r = api.post("/api/v1/jobs/", body, format="json")
    assert r.status_code == 201, r.data
    job = GangJob.objects.get()
    assert (job.name, job.phase, job.queue.name, job.cluster.name) == ("train-1", "Submitted", "team-a", "local")
    worker = job.resolved_spec["podSets"][0]
    assert worker["replicas"] == 3
    assert worker["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert template.spec["podSets"][0]["replicas"] == 2  # the template is not mutated
    assert [t["phase"] for t in r.data["timeline"]] == ["Submitted"]
    assert enqueued == [[job.id]]


def test_same_idempotency_key_returns_the_first_job_with_201_again(api, setup, enqueued):
    body = builders.submit_body(*setup, name="train-2")
    first = api.post("/api/v1/jobs/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-123")
    again = api.post("/api/v1/jobs/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-123")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.data["uid"] == first.data["uid"]
    assert GangJob.objects.count() == 1
    assert len(enqueued) == 1


def test_same_idempotency_key_with_another_body_is_422_and_creates_nothing(api, setup):
    body = builders.submit_body(*setup, name="train-3")
    assert api.post("/api/v1/jobs/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-9").status_code == 201
    other = dict(body, namespace="other")
    r = api.post("/api/v1/jobs/", other, format="json", HTTP_IDEMPOTENCY_KEY="k-9")
    assert r.status_code == 422
    assert "Idempotency-Key" in r.data
    assert GangJob.objects.count() == 1


def test_an_active_job_name_cannot_be_reused_in_the_same_namespace(api, setup):
    body = builders.submit_body(*setup, name="dup")
    assert api.post("/api/v1/jobs/", body, format="json").status_code == 201
    r = api.post("/api/v1/jobs/", body, format="json")
    assert r.status_code == 409
    assert "name" in r.data


def test_bulk_submit_creates_all_jobs_in_one_request(api, setup, enqueued):
    bodies = [builders.submit_body(*setup, name=f"bulk-{i}") for i in range(250)]
    r = api.post("/api/v1/jobs/bulk/", {"jobs": bodies}, format="json")
    assert r.status_code == 201, r.data
    assert r.data["count"] == 250
    assert GangJob.objects.count() == 250
    assert PhaseTransition.objects.filter(phase="Submitted").count() == 250
    assert [len(batch) for batch in enqueued] == [50] * 5  # dispatch.BATCH: spread over the worker processes


def test_bulk_submit_is_all_or_nothing_and_names_the_bad_item(api, setup):
    bodies = [builders.submit_body(*setup, name=f"ok-{i}") for i in range(3)]
    bodies.append(builders.submit_body(*setup, name="Bad_Name"))
    r = api.post("/api/v1/jobs/bulk/", {"jobs": bodies}, format="json")
    assert r.status_code == 400
    assert "jobs[3].name" in r.data
    assert GangJob.objects.count() == 0


def test_cancel_marks_desired_state_and_a_finished_job_cannot_be_cancelled(api, setup, enqueued):
    r = api.post("/api/v1/jobs/", builders.submit_body(*setup, name="c1"), format="json")
    job_id = r.data["id"]
    r = api.post(f"/api/v1/jobs/{job_id}/cancel/")
    assert (r.status_code, r.data["desired_state"]) == (202, "Cancel")
    GangJob.objects.filter(pk=job_id).update(phase="Cancelled")
    assert api.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 409


def test_resubmit_a_finished_job_creates_a_new_job_with_the_same_inputs(api, setup):
    r = api.post("/api/v1/jobs/", builders.submit_body(*setup, name="again"), format="json")
    old = GangJob.objects.get(pk=r.data["id"])
    assert api.post(f"/api/v1/jobs/{old.id}/resubmit/").status_code == 409  # still active
    GangJob.objects.filter(pk=old.id).update(phase="Failed")
    r = api.post(f"/api/v1/jobs/{old.id}/resubmit/")
    assert r.status_code == 201
    new = GangJob.objects.get(pk=r.data["id"])
    assert (new.name, new.resolved_spec, new.resubmitted_from_id) == ("again", old.resolved_spec, old.id)
    assert new.uid != old.uid


def test_patch_changes_queue_and_priority_and_bumps_the_revision(api, setup, enqueued):
    template, queue, cluster = setup
    other = builders.make_queue("team-b", clusters=[cluster])
    r = api.post("/api/v1/jobs/", builders.submit_body(template, queue, cluster, name="p1"), format="json")
    r = api.patch(f"/api/v1/jobs/{r.data['id']}/", {"queue": other.name, "priority_class_name": "train"},
                  format="json")
    assert r.status_code == 200, r.data
    job = GangJob.objects.get(pk=r.data["id"])
    assert (job.queue.name, job.priority_class_name, job.spec_revision) == ("team-b", "train", 2)
