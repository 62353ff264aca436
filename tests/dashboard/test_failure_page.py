"""The job page and the overview say a failed job's first failure; the page's logs panel reads the failed
container's last lines through gangweb's cluster connection (a fake API server here; the real one in
tests/cluster/test_failure_and_logs.py)."""
import pytest

from scheduling.choices import GangPhase
from scheduling.kube import client as kube_client
from scheduling.models import Cluster, GangJob
from tests import builders
from tests.fake_apiserver import RecordingServer

pytestmark = pytest.mark.django_db

FAILURE = {"kind": "ExitCode", "pod_set": "worker", "index": 1, "pod": "f-worker-1-x", "container": "trainer",
           "init_container": False, "exit_code": 3, "signal": None, "reason": "Error", "message": "loss is NaN",
           "restarts": 0, "at": "2026-12-06T08:00:10+00:00", "job_reason": "BackoffLimitExceeded",
           "job_message": "Job has reached the specified backoff limit", "failed_pods": 1,
           "summary": "worker[1] container trainer exited with code 3 (Error): loss is NaN"}


@pytest.fixture
def failed(ui, admin_user):
    cluster = builders.make_cluster("local")
    queue = builders.make_queue("team-a", clusters=[cluster])
    job = builders.make_job(builders.make_template("llm"), queue, cluster, user=admin_user, phase=GangPhase.FAILED,
                            name="f")
    GangJob.objects.filter(pk=job.pk).update(observed={"failure": FAILURE}, owner_uids={"f-worker": "owner-uid"})
    return job


def test_the_job_page_names_pod_set_index_container_and_exit_code(ui, failed):
    page = ui.get(f"/jobs/{failed.pk}/").content.decode()
    assert 'id="job-failure" data-kind="ExitCode"' in page
    assert "worker[1] container trainer exited with code 3 (Error): loss is NaN" in page
    for field, value in (("pod_set", "worker"), ("index", "1"), ("container", "trainer"), ("exit_code", "3")):
        assert f'data-field="{field}">{value}' in page
    assert "BackoffLimitExceeded" in page
    assert f'hx-get="/jobs/{failed.pk}/logs/"' in page


def test_the_overview_lists_the_failure_line_under_recent_failures(ui, failed):
    page = ui.get("/").content.decode()
    assert "worker[1] container trainer exited with code 3 (Error): loss is NaN" in page


def test_the_logs_panel_shows_the_failed_containers_tail(ui, failed, settings):
    settings.GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES = "127.0.0.1/32"
    base = "/api/v1/namespaces/default/pods"
    pod = {"metadata": {"name": "f-worker-1-x", "namespace": "default",
                        "labels": {"gangweb.io/pod-set": "worker"},
                        "annotations": {"batch.kubernetes.io/job-completion-index": "1"},
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "uid": "owner-uid",
                                             "controller": True, "name": "f-worker"}]},
           "spec": {"containers": [{"name": "trainer"}]}}
    answers = {base: (200, {"items": [pod]}), f"{base}/f-worker-1-x/log": (200, "epoch 1\n<b>loss is NaN</b>\n")}
    with RecordingServer(answers=answers) as fake:
        Cluster.objects.filter(name="local").update(kubeconfig=fake.kubeconfig())
        kube_client.forget()
        panel = ui.get(f"/jobs/{failed.pk}/logs/").content.decode()
    kube_client.forget()
    assert "container <span class=\"mono\">trainer</span> in pod <span class=\"mono\">f-worker-1-x</span>" in panel
    assert "epoch 1\n&lt;b&gt;loss is NaN&lt;/b&gt;" in panel  # the container's words, escaped
    assert "tailLines=200" in [r["path"] for r in fake.requests if "/log" in r["path"]][0]


def test_the_logs_panel_of_a_job_you_cannot_see_is_404(client, failed):
    client.force_login(builders.make_user("stranger"))
    assert client.get(f"/jobs/{failed.pk}/logs/").status_code == 404
