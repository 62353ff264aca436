"""`gangweb logs`, and the failure in `gangweb get` and `why`, against a live gangweb server (gunicorn on the test
database) whose cluster is a fake API server (tests/fake_apiserver.py) holding a failed job's pods and their logs.
The same commands against the real control plane: tests/cluster/test_failure_and_logs.py."""
import json

import pytest

from scheduling.choices import GangPhase
from scheduling.models import Cluster, GangJob
from tests import builders
from tests.cli import support
from tests.fake_apiserver import RecordingServer

pytestmark = pytest.mark.django_db(transaction=True)

OWNER = "uid-of-the-worker-job"
LINES = "epoch 1\nepoch 2\nloss is NaN, giving up\n"
FAILURE = {"kind": "ExitCode", "pod_set": "worker", "index": 1, "pod": "f-worker-1-x", "container": "trainer",
           "init_container": False, "exit_code": 3, "signal": None, "reason": "Error", "message": "loss is NaN",
           "restarts": 0, "at": "2026-12-06T08:00:10+00:00", "job_reason": "BackoffLimitExceeded",
           "job_message": "Job has reached the specified backoff limit", "failed_pods": 1,
           "summary": "worker[1] container trainer exited with code 3 (Error): loss is NaN"}


def _pod(name, index, job_uid):
    return {"metadata": {"name": name, "namespace": "default", "labels": {"gangweb.io/job-uid": job_uid,
                                                                         "gangweb.io/pod-set": "worker"},
                         "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "f-worker",
                                              "uid": OWNER, "controller": True}]},
            "spec": {"containers": [{"name": "trainer"}]}}


@pytest.fixture
def failed(cli_world, tmp_path):
    """A failed job of team-a whose cluster is a fake API server with its two pods (index 1 failed), and a
    gunicorn whose log cap is 1 KiB."""
    job = builders.make_job(*cli_world.setup, user=cli_world.admin, phase=GangPhase.FAILED, name="f")
    GangJob.objects.filter(pk=job.pk).update(owner_uids={"f-worker": OWNER}, observed={"failure": FAILURE})
    base = "/api/v1/namespaces/default/pods"
    pods = {"kind": "PodList", "apiVersion": "v1", "metadata": {},
            "items": [_pod("f-worker-0-x", 0, str(job.uid)), _pod("f-worker-1-x", 1, str(job.uid))]}
    answers = {base: (200, pods), f"{base}/f-worker-1-x/log": (200, LINES),
               f"{base}/f-worker-0-x/log": (200, "y" * 3000)}
    with RecordingServer(answers=answers) as fake:
        Cluster.objects.filter(pk=cli_world.cluster.pk).update(kubeconfig=fake.kubeconfig())
        (tmp_path / "srv").mkdir()
        server = support.Server(tmp_path / "srv", extra_env={"GANGWEB_LOG_MAX_BYTES": "1024"})
        try:
            yield type("Failed", (), {"job": job, "fake": fake,
                                      "env": support.cli_env(server.url, cli_world.token, tmp_path)})
        finally:
            server.stop()


def test_logs_prints_the_failed_containers_lines_and_names_it(failed):
    r = support.run_cli(["logs", str(failed.job.pk)], failed.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == LINES
    assert "pod f-worker-1-x (worker[1]), container trainer" in r.stderr


def test_logs_of_another_index_cut_at_the_cap_say_so(failed):
    r = support.run_cli(["logs", str(failed.job.pk), "--pod-set", "worker", "--index", "0", "--tail", "10"],
                        failed.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("y" * 1024 + "\n[gangweb: log cut at 1024 bytes")
    assert "the log was cut at the server's byte cap" in r.stderr
    asked = [q["path"] for q in failed.fake.requests if "/log" in q["path"]]
    assert "f-worker-0-x/log?" in asked[0] and "tailLines=10" in asked[0]


def test_logs_of_a_container_the_pod_lacks_exits_4_naming_it(failed):
    r = support.run_cli(["logs", str(failed.job.pk), "-c", "nope"], failed.env)
    assert r.returncode == 4
    assert "has no container 'nope'; its containers: trainer" in r.stderr


def test_logs_of_a_job_the_token_cannot_see_exits_4_as_not_found(failed, django_user_model):
    other = django_user_model.objects.create_user("other", password="x")
    failed.env["GANGWEB_TOKEN"] = builders.make_token(other, ["read"])
    r = support.run_cli(["logs", str(failed.job.pk)], failed.env)
    assert r.returncode == 4 and "404" in r.stderr
    assert [q for q in failed.fake.requests if "/log" in q["path"]] == []


def test_get_and_why_print_the_failure(failed):
    for args in (["get", str(failed.job.pk)], ["why", str(failed.job.pk)]):
        r = support.run_cli(args, failed.env)
        assert r.returncode == 0, r.stderr
        assert "failure: worker[1] container trainer exited with code 3 (Error): loss is NaN" in r.stdout
        assert "pod set worker, index 1, pod f-worker-1-x, container trainer, exit code 3, reason Error" in r.stdout
    r = support.run_cli(["get", str(failed.job.pk), "-o", "json"], failed.env)
    assert json.loads(r.stdout)["failure"]["exit_code"] == 3
