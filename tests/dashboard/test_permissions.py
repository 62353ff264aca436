"""The dashboard shows a user what services/access/roles.py lets them see, and refuses what it refuses (as the API)."""
import pytest

from scheduling.choices import GangPhase
from tests import builders


@pytest.fixture
def teams(db, admin_user, enqueued, queue_syncs):
    cluster = builders.make_cluster("local")
    a, b = builders.make_queue("team-a", clusters=[cluster]), builders.make_queue("team-b", clusters=[cluster])
    shared = builders.make_template("shared")
    from scheduling.services.templates import versions as template_versions
    template_versions.create_template(None, "b-only", "", builders.template_spec(), queue=b)
    builders.make_job(shared, a, cluster, name="job-a", phase=GangPhase.RUNNING, user=admin_user)
    job_b = builders.make_job(shared, b, cluster, name="job-b", phase=GangPhase.RUNNING, user=admin_user)
    sam = builders.make_user("sam")
    builders.grant(a, "submitter", user=sam)
    return {"sam": sam, "job_b": job_b}


def test_a_submitter_sees_only_their_queues_jobs_and_templates(client, teams):
    client.force_login(teams["sam"])
    assert [j.name for j in client.get("/jobs/").context["page"].object_list] == ["job-a"]
    assert client.get(f"/jobs/{teams['job_b'].pk}/").status_code == 404  # jobs of others are not even named
    assert [r["t"].name for r in client.get("/templates/").context["rows"]] == ["shared"]
    assert client.get("/templates/b-only/").status_code == 404  # as one that does not exist
    assert [n["name"] for n in client.get("/queues/").context["roots"]] == ["team-a"]
    assert client.get("/queues/team-a/").status_code == 200
    assert client.get("/queues/team-b/").status_code == 404
    overview = client.get("/").context
    assert [q["name"] for q in overview["top_queues"] + overview["busiest_queues"]] == ["team-a"]
    assert {p["phase"]: p["n"] for p in overview["phases"]}["Running"] == 1
    submit = client.get("/submit/").context["form"]
    assert [v for v, _ in submit.fields["queue"].choices][1:] == ["team-a"]


def test_a_submitter_cannot_register_clusters_or_create_queues(client, teams):
    client.force_login(teams["sam"])
    assert client.get("/clusters/new/").status_code == 403
    response = client.post("/queues/new/", {"name": "rogue", "priority": "100", **{
        f"{r}_{k}": d for r in ("gpu", "cpu", "memory") for k, d in (("quota", "0"), ("limit", "-1"),
                                                                      ("over_quota_weight", "1"))}})
    assert response.status_code == 200 and response.context["form"].errors  # the service's refusal, on the form
    from scheduling.models import QueuePolicy
    assert not QueuePolicy.objects.filter(name="rogue").exists()


def test_forbidden_pages_explain_themselves_and_hide_what_cannot_be_used(client, teams):
    client.force_login(teams["sam"])
    page = client.get("/templates/shared/edit/")  # visible, but not theirs to change: 403 saying what it needs
    assert page.status_code == 403
    assert "changing shared template &#x27;shared&#x27; needs a platform admin" in page.content.decode()
    assert client.get("/templates/b-only/edit/").status_code == 404  # not visible: as if it did not exist
    assert "Edit (new version)" not in client.get("/templates/shared/").content.decode()
    assert "Register a cluster" not in client.get("/clusters/").content.decode()
