"""A cancel's answer and the job say what is happening: `phase_reason` `CancelRequested` from the moment the cancel
is accepted (the phase stays until a worker's pass says `Cancelling` or ends it Cancelled), also for a job no
worker has dispatched yet; not the reason of the phase it had ("Running")."""
import pytest

from scheduling.models import GangJob
from scheduling.services.jobs import lifecycle as job_service
from tests import builders

pytestmark = pytest.mark.django_db


def _submit(api, setup, name):
    return api.post("/api/v1/jobs/", builders.submit_body(*setup, name=name), format="json").data["id"]


def test_cancelling_a_running_job_answers_cancel_requested_not_running(api, setup):
    job_id = _submit(api, setup, "runs")
    GangJob.objects.filter(pk=job_id).update(phase="Running", phase_reason="Running", phase_message="2 of 2 running")
    r = api.post(f"/api/v1/jobs/{job_id}/cancel/")
    assert r.status_code == 202
    said = (r.data["phase"], r.data["phase_reason"], r.data["phase_message"])
    assert said == ("Running", "CancelRequested", job_service.CANCEL_REQUESTED_MESSAGE)
    job = GangJob.objects.get(pk=job_id)
    assert (job.desired_state, job.phase_reason, job.phase_message) == ("Cancel", *said[1:])
    assert api.get(f"/api/v1/jobs/{job_id}/").data["phase_reason"] == "CancelRequested"


def test_a_cancel_before_dispatch_says_so_too(api, setup):
    job_id = _submit(api, setup, "early")
    r = api.post(f"/api/v1/jobs/{job_id}/cancel/")
    assert (r.data["phase"], r.data["phase_reason"]) == ("Submitted", "CancelRequested")
    listed = api.get("/api/v1/jobs/").data["results"][0]
    assert (listed["id"], listed["phase_reason"]) == (job_id, "CancelRequested")


def test_a_second_cancel_leaves_what_the_worker_said(api, setup):
    job_id = _submit(api, setup, "twice")
    api.post(f"/api/v1/jobs/{job_id}/cancel/")
    GangJob.objects.filter(pk=job_id).update(phase_reason="Cancelling", phase_message="deleting the job's objects")
    r = api.post(f"/api/v1/jobs/{job_id}/cancel/")
    assert (r.status_code, r.data["phase_reason"]) == (202, "Cancelling")
