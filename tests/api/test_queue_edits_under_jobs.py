"""Issue 30 item 8: a queue edit that would pull the floor from under its active jobs is refused (409 naming the
jobs), as DELETE already is; nothing changes. Edits that strand nothing still pass."""
import pytest
from django.apps import apps

from scheduling.choices import GangPhase
from scheduling.models import GangJob, QueuePolicy
from tests import builders

pytestmark = pytest.mark.django_db
URL = "/api/v1/queues/"


def row_counts():
    return {m._meta.label: m.objects.count() for m in apps.get_app_config("scheduling").get_models()}


@pytest.fixture
def running(api, queue_syncs, setup, admin_user):
    """Queue team-a on clusters local and other, namespaces default and team-b; job train-1 Running in
    default on local."""
    template, queue, cluster = setup
    other = builders.make_cluster("other")
    queue.clusters.set([cluster, other])
    queue.allowed_namespaces = ["default", "team-b"]
    queue.save()
    job = builders.make_job(template, queue, cluster, name="train-1", phase=GangPhase.RUNNING,
                            user=admin_user)
    queue_syncs.clear()
    return queue, job


def clusters_of(name):
    return sorted(QueuePolicy.objects.get(name=name).clusters.values_list("name", flat=True))


def test_item8_dropping_the_cluster_of_a_running_job_is_409_naming_it_and_changes_nothing(api, running,
                                                                                          queue_syncs):
    queue, _ = running
    before = row_counts()
    r = api.patch(f"{URL}{queue.name}/", {"clusters": ["other"]}, format="json")
    assert r.status_code == 409, r.data
    message = r.data["clusters"][0]
    assert "local" in message and "default/train-1" in message
    assert clusters_of("team-a") == ["local", "other"]
    assert row_counts() == before
    assert queue_syncs == []


def test_item8_dropping_the_namespace_of_a_running_job_is_409_naming_it_and_changes_nothing(api, running,
                                                                                            queue_syncs):
    queue, _ = running
    r = api.patch(f"{URL}{queue.name}/", {"allowed_namespaces": ["team-b"]}, format="json")
    assert r.status_code == 409, r.data
    assert "default/train-1" in r.data["allowed_namespaces"][0]
    assert QueuePolicy.objects.get(name="team-a").allowed_namespaces == ["default", "team-b"]
    assert queue_syncs == []


def test_item8_emptying_the_namespaces_of_a_queue_with_a_pending_job_is_409(api, running):
    queue, job = running
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.QUEUED)
    r = api.patch(f"{URL}{queue.name}/", {"allowed_namespaces": []}, format="json")
    assert r.status_code == 409 and "default/train-1" in r.data["allowed_namespaces"][0]


def test_item8_a_parents_namespace_edit_that_strands_a_childs_job_is_409(api, queue_syncs, setup, admin_user):
    template, _, cluster = setup
    dept = builders.make_queue("dept", allowed_namespaces=["default", "team-b"])
    team = builders.make_queue("team", parent=dept, clusters=[cluster])
    builders.make_job(template, team, cluster, name="child-job", phase=GangPhase.RUNNING,
                      user=admin_user)
    r = api.patch(f"{URL}dept/", {"allowed_namespaces": ["team-b"]}, format="json")
    assert r.status_code == 409, r.data
    assert "default/child-job" in r.data["allowed_namespaces"][0]
    assert QueuePolicy.objects.get(name="dept").allowed_namespaces == ["default", "team-b"]


STILL_ALLOWED = [
    ("dropping a cluster without jobs", {"clusters": ["local"]}),
    ("every cluster", {"clusters": []}),
    ("dropping a namespace without jobs", {"allowed_namespaces": ["default"]}),
    ("a quota change", {"gpu_quota": 2}),
]


@pytest.mark.parametrize("case,body", STILL_ALLOWED, ids=[c[0] for c in STILL_ALLOWED])
def test_item8_edits_that_strand_no_job_are_accepted(api, running, case, body):
    queue, _ = running
    r = api.patch(f"{URL}{queue.name}/", body, format="json")
    assert r.status_code == 200, r.data


def test_item8_a_finished_job_does_not_hold_its_cluster_or_namespace(api, running):
    queue, job = running
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.SUCCEEDED)
    r = api.patch(f"{URL}{queue.name}/", {"clusters": ["other"], "allowed_namespaces": ["team-b"]}, format="json")
    assert r.status_code == 200, r.data
    assert clusters_of("team-a") == ["other"]
