"""The job list's name filter, GPU and waiting-reason columns, and grouping, as the API answers them (the dashboard
reads the same FilterSet and services/jobs/lists.py: tests/dashboard/test_jobs_list_columns.py)."""
import pytest

from scheduling.choices import GangPhase
from scheduling.models import GangJob
from scheduling.services.templates import versions as template_versions
from tests import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(admin_user):
    local, spare = builders.make_cluster("local"), builders.make_cluster("spare")
    team_a = builders.make_queue("team-a", clusters=[local, spare])
    team_b = builders.make_queue("team-b", clusters=[local, spare])
    # 2 workers x (2 GPUs in the trainer + 1 in a sidecar) = 6 GPUs for the gang.
    gpus = builders.make_template("gpus", pod_sets=[builders.pod_set(replicas=2, containers=[
        builders.container(gpu=2), builders.container(name="side", gpu=1)])])
    plain = builders.make_template("plain")
    made = {
        "Train-Big": builders.make_job(gpus, team_a, local, name="train-big", phase=GangPhase.QUEUED,
                                       user=admin_user),
        "eval": builders.make_job(plain, team_b, spare, name="eval-1", phase=GangPhase.RUNNING, user=admin_user),
        "sub": builders.make_job(plain, team_b, local, name="retrain-small", user=admin_user),
        "done": builders.make_job(plain, team_a, spare, name="done-1", phase=GangPhase.SUCCEEDED, user=admin_user),
    }
    GangJob.objects.filter(pk=made["Train-Big"].pk).update(why_pending={
        "reason": "OverLimit", "summary": "Queue 'team-a' is at its GPU limit: 8 of 8 GPUs allocated, this job "
                                          "asks for 6 " + "and more words " * 20})
    return made


def names(response):
    assert response.status_code == 200, response.data
    return [j["name"] for j in response.data["results"]]


def test_name_filters_the_list_by_a_case_insensitive_substring(api, jobs):
    assert sorted(names(api.get("/api/v1/jobs/?name=TRAIN"))) == ["retrain-small", "train-big"]
    assert names(api.get("/api/v1/jobs/?name=eval")) == ["eval-1"]
    assert names(api.get("/api/v1/jobs/?name=nothing-like-it")) == []


def test_each_job_says_how_many_gpus_its_gang_asks_for_and_why_it_waits(api, jobs):
    rows = {j["name"]: j for j in api.get("/api/v1/jobs/").data["results"]}
    assert rows["train-big"]["gpus"] == 6.0
    assert rows["eval-1"]["gpus"] == 0.0
    reason = rows["train-big"]["waiting_reason"]
    assert reason.startswith("Queue 'team-a' is at its GPU limit: 8 of 8 GPUs allocated") and len(reason) == 120
    assert reason.endswith("…")
    assert rows["retrain-small"]["waiting_reason"] == "waiting to be dispatched"
    assert rows["eval-1"]["waiting_reason"] == "" and rows["done-1"]["waiting_reason"] == ""


@pytest.mark.parametrize("group, expected", [
    ("queue", ["team-a", "team-a", "team-b", "team-b"]),
    ("cluster", ["local", "local", "spare", "spare"]),
    ("phase", ["Submitted", "Queued", "Running", "Succeeded"]),
])
def test_group_lists_each_groups_jobs_together_and_counts_them(api, jobs, group, expected):
    r = api.get(f"/api/v1/jobs/?group={group}")
    assert r.status_code == 200
    assert [j[group] for j in r.data["results"]] == expected
    counts = api.get(f"/api/v1/jobs/groups/?group={group}").data
    keys = sorted(set(expected), key=expected.index)
    assert counts == {"group": group, "groups": [{"key": k, "count": expected.count(k)} for k in keys]}


def test_group_keeps_the_order_asked_within_each_group_and_the_filters(api, jobs):
    r = api.get("/api/v1/jobs/?group=queue&ordering=name")
    assert [(j["queue"], j["name"]) for j in r.data["results"]] == [
        ("team-a", "done-1"), ("team-a", "train-big"), ("team-b", "eval-1"), ("team-b", "retrain-small")]
    counts = api.get("/api/v1/jobs/groups/?group=cluster&name=train").data["groups"]
    assert counts == [{"key": "local", "count": 2}]


@pytest.mark.parametrize("url", ["/api/v1/jobs/?group=owner", "/api/v1/jobs/groups/?group=owner",
                                 "/api/v1/jobs/groups/"])
def test_an_unknown_group_is_a_400_naming_the_field(api, jobs, url):
    r = api.get(url)
    assert r.status_code == 400 and "group" in r.data, r.data


def test_a_reader_counts_only_the_jobs_they_may_see(jobs):
    from rest_framework.test import APIClient

    viewer = builders.make_user("vera")
    builders.grant(jobs["eval"].queue, "viewer", user=viewer)
    client = APIClient()
    client.force_authenticate(viewer)
    assert client.get("/api/v1/jobs/groups/?group=queue").data["groups"] == [{"key": "team-b", "count": 2}]


def test_the_list_names_each_jobs_template_and_version_as_its_detail_does(api, admin_user):
    # Template ids and version numbers differ here (ids 3.. vs versions 1..2), so a swapped pair shows.
    local = builders.make_cluster("local")
    queue = builders.make_queue("team-a", clusters=[local])
    for i in range(2):
        builders.make_template(f"filler-{i}")
    first = builders.make_template("ddp")
    job_v1 = builders.make_job(first, queue, local, name="ddp-1", user=admin_user)  # a submit takes the latest
    second = template_versions.add_version(admin_user, first.template,
                                          builders.template_spec(pod_sets=[builders.pod_set(replicas=3)]))
    job_v2 = builders.make_job(second, queue, local, name="ddp-2", user=admin_user)
    assert first.template.pk not in (1, 2)
    rows = {j["name"]: j for j in api.get("/api/v1/jobs/").data["results"]}
    for job, version in ((job_v1, 1), (job_v2, 2)):
        detail = api.get(f"/api/v1/jobs/{job.pk}/").data
        assert (rows[job.name]["template"], rows[job.name]["template_version"]) == ("ddp", version)
        assert (detail["template"], detail["template_version"]) == ("ddp", version)
