"""Issue 30 item 9: no read path answers 500. The reproduction: a queue with a 4-GPU limit; job A (4 x 1 GPU, a
template with no finished run yet) Running with its pods kept by a finalizer, then cancelled (it still holds its
GPUs); job B (4 GPUs) pending in the same queue. The job detail, its estimate, the job page and the CLI's reads
answered 500 (an IndexError in the estimate's quantile of A's empty history). A field that cannot be computed
reads `unknown` with its reason; the rest of the answer stands."""
import pytest

from scheduling.choices import DesiredState, GangPhase
from scheduling.models import GangJob
from scheduling.queueing import estimate as model
from scheduling.services.queues import line as queue_line
from tests import builders

pytestmark = pytest.mark.django_db

CAPACITY = {"nodes": 1, "allocatable": {"nvidia.com/gpu": 8, "cpu": 64, "memory": 512 * 2**30},
            "largest": {"nvidia.com/gpu": 8, "cpu": 64, "memory": 512 * 2**30}}


@pytest.fixture
def lingering(admin_user):
    """A cancelled whose pods remain (Running, desired Cancel) and B pending behind it in a 4-GPU queue."""
    cluster = builders.make_cluster("local", capacity=CAPACITY)
    queue = builders.make_queue("team-a", clusters=[cluster], gpu_limit=4)
    template = builders.make_template("fresh", pod_sets=[builders.pod_set(replicas=4, containers=[
        builders.container(gpu=1)])])
    a = builders.make_job(template, queue, cluster, name="job-a", user=admin_user, phase=GangPhase.RUNNING,
                          desired_state=DesiredState.CANCEL)
    b = builders.make_job(template, queue, cluster, name="job-b", user=admin_user, phase=GangPhase.QUEUED)
    return a, b


def test_item9_a_pending_job_behind_a_cancelled_job_with_lingering_pods_reads_without_500(api, lingering):
    _, b = lingering
    r = api.get(f"/api/v1/jobs/{b.pk}/estimate/")
    assert r.status_code == 200, r.content[:500]
    # A frees its 4 GPUs as soon as its pods are gone: B starts then. A's empty history is not needed for that.
    assert r.data["status"] == "estimated" and r.data["p50_seconds"] == 0.0
    assert r.data["freed_by"] == {"name": "job-a", "running": True, "history": None}
    assert "job-a is being cancelled" in r.data["evidence"]
    detail = api.get(f"/api/v1/jobs/{b.pk}/")
    assert detail.status_code == 200
    assert detail.data["name"] == "job-b" and detail.data["phase"] == GangPhase.QUEUED
    assert detail.data["estimated_start"]["status"] == "estimated"
    assert detail.data["position"]["text"] == "1 of 1 in team-a"


def test_item9_the_job_page_of_the_pending_job_answers(client, admin_user, lingering):
    _, b = lingering
    client.force_login(admin_user)
    r = client.get(f"/jobs/{b.pk}/")
    assert r.status_code == 200
    assert b"job-b" in r.content


def test_item9_an_estimate_that_raises_reads_unknown_and_the_rest_of_the_job_stands(api, lingering, monkeypatch):
    _, b = lingering

    def broken(*args, **kwargs):
        raise IndexError("list index out of range")

    monkeypatch.setattr(model, "estimate", broken)
    detail = api.get(f"/api/v1/jobs/{b.pk}/")
    assert detail.status_code == 200
    assert detail.data["estimated_start"]["status"] == "unknown"
    assert "could not be computed" in detail.data["estimated_start"]["reason"]
    assert detail.data["estimated_start"]["text"].startswith("unknown: ")
    assert detail.data["position"]["text"] == "1 of 1 in team-a" and detail.data["name"] == "job-b"
    r = api.get(f"/api/v1/jobs/{b.pk}/estimate/")
    assert r.status_code == 200 and r.data["status"] == "unknown"


def test_item9_a_position_that_raises_reads_unknown_and_the_rest_of_the_job_stands(api, lingering, monkeypatch):
    _, b = lingering

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(queue_line, "rank_of", broken)
    detail = api.get(f"/api/v1/jobs/{b.pk}/")
    assert detail.status_code == 200
    assert detail.data["position"]["status"] == "unknown"
    assert detail.data["position"]["text"].startswith("unknown: ")
    assert detail.data["name"] == "job-b"


def test_item9_the_job_moves_on_when_a_is_gone(api, lingering):
    a, b = lingering
    GangJob.objects.filter(pk=a.pk).update(phase=GangPhase.CANCELLED)
    data = api.get(f"/api/v1/jobs/{b.pk}/estimate/").data
    assert data["status"] == "now"


def test_item9_the_job_page_answers_when_its_estimate_and_position_raise(client, admin_user, lingering, monkeypatch):
    _, b = lingering

    def broken(*args, **kwargs):
        raise IndexError("list index out of range")

    monkeypatch.setattr(model, "estimate", broken)
    monkeypatch.setattr(queue_line, "rank_of", broken)
    client.force_login(admin_user)
    r = client.get(f"/jobs/{b.pk}/")
    assert r.status_code == 200
    assert b"could not be computed" in r.content and b"job-b" in r.content
