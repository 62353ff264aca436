"""POST /api/v1/jobs/cancel/: several jobs cancelled in one request, each checked as the single cancel checks it;
refused ones reported with the reason and left as they were; bad input a 400 naming the field, changing nothing."""
import pytest

from scheduling.choices import DesiredState, GangPhase
from scheduling.models import AuditEvent, GangJob
from scheduling.services.jobs import lifecycle as job_service
from tests import builders

pytestmark = pytest.mark.django_db


def desired(*jobs):
    return [GangJob.objects.get(pk=j.pk).desired_state for j in jobs]


def test_a_submitter_cancels_their_own_jobs_and_is_told_which_others_were_refused_and_why(teams, enqueued):
    a_sub = teams.a_sub
    mine = job_service.submit(a_sub, builders.submit_body(teams.llm, teams.a_train, teams.local, name="mine-2",
                                                          namespace="team-a"))[0]
    colleague = builders.make_user("a_sub2", groups=["team-a"])
    theirs = job_service.submit(colleague, builders.submit_body(teams.llm, teams.a_train, teams.local,
                                                                name="theirs", namespace="team-a"))[0]
    finished = job_service.submit(a_sub, builders.submit_body(teams.llm, teams.a_train, teams.local, name="old",
                                                              namespace="team-a"))[0]
    GangJob.objects.filter(pk=finished.pk).update(phase=GangPhase.SUCCEEDED)
    ids = [teams.a_job.pk, theirs.pk, teams.b_job.pk, mine.pk, finished.pk]
    r = teams.clients["a_sub"].post("/api/v1/jobs/cancel/", {"ids": ids}, format="json")
    assert r.status_code == 200, r.data
    assert (r.data["cancelled"], r.data["refused"]) == (2, 3)
    by_id = {j["id"]: j for j in r.data["jobs"]}
    assert [j["id"] for j in r.data["jobs"]] == ids
    assert by_id[teams.a_job.pk] == {"id": teams.a_job.pk, "name": "a-job", "namespace": "team-a",
                                     "cancelled": True, "status": 202, "reason": ""}
    assert by_id[theirs.pk]["status"] == 403 and not by_id[theirs.pk]["cancelled"]
    assert "it is not your job" in by_id[theirs.pk]["reason"] and "'a-train'" in by_id[theirs.pk]["reason"]
    # b-job is in a queue a_sub has no role on: answered as a job that does not exist, its name not disclosed.
    assert by_id[teams.b_job.pk] == {"id": teams.b_job.pk, "name": "", "namespace": "", "cancelled": False,
                                     "status": 404, "reason": f"no job '{teams.b_job.pk}' that you can see"}
    assert by_id[finished.pk]["status"] == 409 and "already finished as Succeeded" in by_id[finished.pk]["reason"]
    assert desired(teams.a_job, mine) == [DesiredState.CANCEL] * 2
    assert desired(theirs, teams.b_job, finished) == [DesiredState.RUN] * 3
    assert sorted(int(e.object_id) for e in AuditEvent.objects.filter(action="job.cancel")) == sorted(
        [teams.a_job.pk, mine.pk])
    # Asking again: the cancelled ones are already being cancelled (no second audit entry), the others refused.
    again = teams.clients["a_sub"].post("/api/v1/jobs/cancel/", {"ids": ids}, format="json").data
    assert {j["id"]: j["reason"] for j in again["jobs"] if j["cancelled"]} == {
        teams.a_job.pk: "already being cancelled", mine.pk: "already being cancelled"}
    assert AuditEvent.objects.filter(action="job.cancel").count() == 2


def test_a_queue_admin_cancels_anyones_jobs_in_their_queue(teams):
    r = teams.clients["a_admin"].post("/api/v1/jobs/cancel/", {"ids": [teams.a_job.pk, teams.b_job.pk]},
                                      format="json")
    assert [(j["id"], j["status"]) for j in r.data["jobs"]] == [(teams.a_job.pk, 202), (teams.b_job.pk, 404)]
    assert desired(teams.a_job, teams.b_job) == [DesiredState.CANCEL, DesiredState.RUN]


def test_a_token_without_the_cancel_action_is_refused_per_job(teams):
    r = teams.clients["t_sub"].post("/api/v1/jobs/cancel/", {"ids": [teams.a_job.pk]}, format="json")
    assert r.status_code == 200
    assert r.data["jobs"][0]["status"] == 403 and "lacks the 'cancel' action" in r.data["jobs"][0]["reason"]
    assert desired(teams.a_job) == [DesiredState.RUN]


@pytest.mark.parametrize("body, field", [
    ({}, "ids"), ({"ids": []}, "ids"), ({"ids": "1,2"}, "ids"), ({"ids": [1, "x"]}, "ids[1]"),
    ({"ids": [1, 0]}, "ids[1]"), ({"ids": [True]}, "ids[0]"), ({"ids": [1.5]}, "ids[0]"),
    ({"ids": [7, 8, 7]}, "ids[2]"), ({"ids": [2**63]}, "ids[0]"), ({"ids": ["1" * 19]}, "ids[0]"),
    ({"ids": [1], "force": True}, "force"), ([1, 2], "ids"),
    ({"ids": list(range(1, 502))}, "ids"),
])
def test_bad_input_is_a_400_naming_the_field_and_cancels_nothing(teams, body, field):
    r = teams.clients["admin"].post("/api/v1/jobs/cancel/", body, format="json")
    assert r.status_code == 400 and field in r.data, r.data
    assert desired(teams.a_job, teams.b_job) == [DesiredState.RUN] * 2


def test_anonymous_callers_are_refused(teams):
    assert teams.clients["anon"].post("/api/v1/jobs/cancel/", {"ids": [teams.a_job.pk]},
                                      format="json").status_code in (401, 403)
    assert desired(teams.a_job) == [DesiredState.RUN]
