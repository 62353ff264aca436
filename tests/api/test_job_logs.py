"""GET /api/v1/jobs/<id>/logs/ against a fake API server (tests/fake_apiserver.py): the job's own pods only (a
controller reference to a Job UID gangweb recorded), 404 to whoever may not view the job, the byte cap said in a
header and a last line, and 4xx naming the parameter. The real path through kube-apiserver and kwok is
tests/cluster/test_failure_and_logs.py."""
import pytest

from scheduling.kube import client as kube_client
from scheduling.models import Cluster, GangJob
from tests.fake_apiserver import RecordingServer

pytestmark = pytest.mark.django_db

MINE, FOREIGN = "uid-of-the-worker-job", "uid-of-someone-elses-job"
LINES = "step 1 loss 2.31\nstep 2 loss nan\nTraceback: loss is NaN\n"


def pod(name, owner_uid, index, job_uid, containers=("trainer", "sidecar"), pod_set="worker"):
    return {"metadata": {"name": name, "namespace": "team-a", "creationTimestamp": "2026-12-06T08:00:00Z",
                         "labels": {"gangweb.io/job-uid": job_uid, "gangweb.io/pod-set": pod_set},
                         "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "w",
                                              "uid": owner_uid, "controller": True}]},
            "spec": {"containers": [{"name": c} for c in containers]}}


@pytest.fixture
def fake(teams, settings):
    """Cluster `local` pointed at a fake API server whose namespace team-a holds a-job's two pods and a look-alike
    (same labels, another Job as its controller, the first by name); a-job has failed in worker[1] `trainer`."""
    settings.GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES = "127.0.0.1/32"
    job = teams.a_job
    GangJob.objects.filter(pk=job.pk).update(owner_uids={"a-job-worker": MINE}, observed={"failure": {
        "kind": "ExitCode", "pod_set": "worker", "index": 1, "pod": "a-job-worker-1-x", "container": "trainer",
        "exit_code": 3}})
    uid = str(job.uid)
    pods = {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [
        pod("a-job-worker-0-a", FOREIGN, 1, uid), pod("a-job-worker-0-x", MINE, 0, uid),
        pod("a-job-worker-1-x", MINE, 1, uid)]}
    base = "/api/v1/namespaces/team-a/pods"
    answers = {base: (200, pods), f"{base}/a-job-worker-1-x/log": (200, LINES),
               f"{base}/a-job-worker-0-x/log": (200, "x" * 5000 + "\n"),
               f"{base}/a-job-worker-0-a/log": (200, "FOREIGN POD'S SECRET\n")}
    with RecordingServer(answers=answers) as server:
        Cluster.objects.filter(pk=teams.local.pk).update(kubeconfig=server.kubeconfig())
        kube_client.forget()
        yield server
    kube_client.forget()


def logs(teams, who, **query):
    return teams.clients[who].get(f"/api/v1/jobs/{teams.a_job.pk}/logs/", query)


def asked_logs(server) -> list[str]:
    return [r["path"] for r in server.requests if "/log" in r["path"]]


def test_a_viewer_reads_the_failed_containers_lines_by_default(teams, fake):
    r = logs(teams, "a_view", tail_lines=50)
    assert r.status_code == 200, r.content
    assert r.content.decode() == LINES
    assert (r["X-Gangweb-Log-Pod"], r["X-Gangweb-Log-Container"], r["X-Gangweb-Log-Index"]) == (
        "a-job-worker-1-x", "trainer", "1")
    assert "X-Gangweb-Log-Truncated" not in r
    [path] = asked_logs(fake)
    assert path.startswith("/api/v1/namespaces/team-a/pods/a-job-worker-1-x/log?")
    assert "container=trainer" in path and "tailLines=50" in path


def test_a_pod_naming_another_job_as_its_controller_is_never_read(teams, fake):
    r = logs(teams, "a_view", pod_set="worker", index=1, container="sidecar")
    assert r.status_code == 200 and r["X-Gangweb-Log-Pod"] == "a-job-worker-1-x"
    assert b"SECRET" not in r.content
    assert all("a-job-worker-0-a" not in p for p in asked_logs(fake))


def test_a_viewer_of_another_team_gets_404_and_the_cluster_is_not_asked(teams, fake):
    r = logs(teams, "b_sub")
    assert r.status_code == 404
    assert fake.requests == []


def test_a_log_longer_than_the_cap_is_cut_and_says_so(teams, fake, settings):
    settings.GANGWEB_LOG_MAX_BYTES = 1024
    r = logs(teams, "a_view", index=0)
    assert r.status_code == 200
    assert r["X-Gangweb-Log-Truncated"] == "true"
    body = r.content.decode()
    assert body.startswith("x" * 1024 + "\n[gangweb: log cut at 1024 bytes")
    assert len(r.content) < 1200
    assert "limitBytes=1025" in asked_logs(fake)[0]


@pytest.mark.parametrize(("query", "status", "field", "said"), [
    ({"pod_set": "ps"}, 404, "pod_set", "no pod of pod set 'ps'; the job's: worker"),
    ({"index": 7}, 404, "index", "no pod at index 7"),
    ({"container": "nope"}, 400, "container", "pod a-job-worker-1-x has no container 'nope'; its containers: "
                                              "trainer, sidecar"),
    ({"tail_lines": 0}, 400, "tail_lines", None),
    ({"since_seconds": "soon"}, 400, "since_seconds", None),
])
def test_a_query_that_matches_nothing_names_the_parameter(teams, fake, query, status, field, said):
    r = logs(teams, "a_view", **query)
    assert r.status_code == status
    assert list(r.json()) == [field]
    if said:
        assert r.json()[field] == [said]
    assert asked_logs(fake) == []


def test_follow_streams_the_lines_and_ends(teams, fake):
    r = logs(teams, "a_view", follow="true")
    assert r.status_code == 200 and r.streaming
    assert b"".join(r.streaming_content).decode() == LINES
    assert "follow=True" in asked_logs(fake)[0]  # the kubernetes client writes Python booleans; Go reads both


def test_a_cluster_that_cannot_be_asked_is_a_502_never_a_500(teams, fake):
    fake.answers["/api/v1/namespaces/team-a/pods"] = (503, {"kind": "Status", "message": "etcd is away"})
    r = logs(teams, "a_view")
    assert r.status_code == 502 and r.json()["error"]


def test_a_job_that_created_nothing_yet_is_404_without_asking_the_cluster(teams, fake):
    GangJob.objects.filter(pk=teams.a_job.pk).update(owner_uids={})
    r = logs(teams, "a_view")
    assert r.status_code == 404
    assert r.json() == {"detail": ["the job has no pods in its cluster (not started yet, or removed after the "
                                   "retention)"]}
    assert fake.requests == []


def test_a_hostile_pod_name_cannot_break_the_answers_headers(teams, fake):
    hostile = pod("a-job-worker-1-x\r\nSet-Cookie: x=1", MINE, 1, str(teams.a_job.uid))
    fake.answers["/api/v1/namespaces/team-a/pods"] = (200, {"items": [hostile]})
    fake.answers["/api/v1/namespaces/team-a/pods/a-job-worker-1-x%0D%0ASet-Cookie%3A%20x%3D1/log"] = (200, "ok\n")
    r = logs(teams, "a_view", index=1)
    assert r.status_code == 200, r.content
    assert r["X-Gangweb-Log-Pod"] == "a-job-worker-1-x??Set-Cookie??x?1"
    assert "Set-Cookie" not in {k.title() for k in r.headers}
