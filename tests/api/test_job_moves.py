"""Moving a job (PATCH queue) or resubmitting it must pass the same queue checks as a submit: the new queue must
take jobs in the job's namespace, target the job's cluster, and be a leaf. Refused requests change nothing."""
from scheduling.choices import GangPhase
from scheduling.models import GangJob
from tests import builders


def test_moving_a_job_to_a_queue_that_refuses_its_namespace_is_400_and_changes_nothing(teams):
    job = teams.b_job  # namespace "default"; a-train only allows "team-a"
    builders.grant(teams.team_a, "submitter", user=teams.b_sub)
    r = teams.clients["b_sub"].patch(f"/api/v1/jobs/{job.pk}/", {"queue": "a-train"}, format="json")
    assert r.status_code == 400, r.data
    assert "queue" in r.data or "namespace" in r.data
    job.refresh_from_db()
    assert (job.queue.name, job.spec_revision) == ("b-train", 1)


def test_moving_a_job_to_a_queue_not_synced_to_its_cluster_is_400_and_changes_nothing(teams):
    builders.make_queue("a-spare", parent=teams.team_a, clusters=[teams.spare])
    job = teams.a_job  # on cluster "local"
    r = teams.clients["a_sub"].patch(f"/api/v1/jobs/{job.pk}/", {"queue": "a-spare"}, format="json")
    assert r.status_code == 400, r.data
    assert "queue" in r.data or "cluster" in r.data
    job.refresh_from_db()
    assert (job.queue.name, job.spec_revision) == ("a-train", 1)


def test_resubmitting_into_a_queue_that_became_a_parent_is_400_and_creates_nothing(teams):
    job = teams.a_job
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.SUCCEEDED)
    builders.make_queue("a-train-child", parent=teams.a_train, clusters=[teams.local])
    before = GangJob.objects.count()
    r = teams.clients["a_sub"].post(f"/api/v1/jobs/{job.pk}/resubmit/")
    assert r.status_code == 400, r.data
    assert "queue" in r.data
    assert GangJob.objects.count() == before


def test_resubmitting_after_the_queue_stopped_allowing_the_namespace_is_400_and_creates_nothing(teams):
    job = teams.a_job  # namespace team-a
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.SUCCEEDED)
    teams.a_train.allowed_namespaces = ["team-a-only"]
    teams.a_train.save()
    before = GangJob.objects.count()
    r = teams.clients["a_sub"].post(f"/api/v1/jobs/{job.pk}/resubmit/")
    assert r.status_code == 400, r.data
    assert GangJob.objects.count() == before


def test_a_resubmit_with_a_body_is_400_naming_the_field_and_creates_nothing(teams):
    """Resubmit asks again for the same inputs; overrides sent with it were silently dropped (201 with none)."""
    job = teams.a_job
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.SUCCEEDED)
    before = GangJob.objects.count()
    r = teams.clients["a_sub"].post(f"/api/v1/jobs/{job.pk}/resubmit/",
                                    {"overrides": {"podSets": {"worker": {"replicas": 3}}}}, format="json")
    assert r.status_code == 400, r.data
    assert list(r.data) == ["overrides"] and "resubmit takes no body" in r.data["overrides"][0]
    assert GangJob.objects.count() == before
    assert teams.clients["a_sub"].post(f"/api/v1/jobs/{job.pk}/resubmit/", {}, format="json").status_code == 201
