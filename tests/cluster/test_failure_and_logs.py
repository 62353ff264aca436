"""A job whose container exits 3 on the real control plane (kwok's pod-finish stage ends it): the failure (pod set,
index, container, exit code 3) in the API, the CLI and the job page; its container's log read through
kube-apiserver's pod log endpoint, which kwok serves from the local cluster's log file (localcluster/stages.py
`pod_logs`), by `gangweb logs` (and `--follow`, which streams lines appended later); 404 to a viewer of another
team; a log longer than the server's cap cut, and said so. gangweb here is gunicorn on the test database; the
reconcile passes run in the test process (tests/cli/support.py `Reconciler`)."""
import select
import time
import uuid
from types import SimpleNamespace

import pytest
import requests
from django.test import Client

from localcluster.stages import cri_line
from scheduling.models import GangJob, QueuePolicy
from tests import builders
from tests.cli import support
from tests.cluster.reconcile_support import make_world

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

CAP = 4096


@pytest.fixture
def live(kube_cluster, kube_namespace, admin_user, tmp_path):
    """Cluster `local`, queue team-a with a submitter's token, and gunicorn serving them with a 4 KiB log cap and
    30 s follow streams."""
    world = make_world(kube_cluster, kube_namespace, admin_user)
    dev = builders.make_user("dev")
    team_a = QueuePolicy.objects.get(name="team-a")
    builders.grant(team_a, "submitter", user=dev)
    token = builders.make_token(dev, ["read", "submit", "cancel"], queues=[team_a])
    (tmp_path / "server").mkdir()
    server = support.Server(tmp_path / "server", extra_env={"GANGWEB_LOG_MAX_BYTES": str(CAP),
                                                            "GANGWEB_LOG_FOLLOW_SECONDS": "30"})
    yield SimpleNamespace(world=world, server=server, env=support.cli_env(server.url, token, tmp_path), dev=dev,
                          token=token, namespace=kube_namespace, log=kube_cluster.pod_log)
    server.stop()


def _write(log, *lines: str) -> None:
    with open(log, "a", encoding="utf-8") as f:
        f.write("".join(cri_line(line) for line in lines))


def _read_stdout_until(proc, text: str, timeout: float = 60) -> str:
    got, deadline = "", time.monotonic() + timeout
    while text not in got and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        got += line
    assert text in got, f"no {text!r} on the follower's stdout; got: {got[-2000:]}"
    return got


def test_a_container_that_exits_3_is_named_everywhere_and_its_log_is_read_through_the_api_server(live):
    marker = uuid.uuid4().hex[:8]
    _write(live.log, f"{marker} epoch 1 loss 2.31", f"{marker} epoch 2 loss nan", f"{marker} giving up: exit 3")
    pod_set = builders.pod_set("worker", replicas=2, containers=[builders.container("trainer", cpu="1",
                                                                                    memory="1Gi")])
    pod_set["template"]["metadata"]["annotations"] = {"gangweb.io/sim-exit": "3", "gangweb.io/sim-duration": "2s"}
    builders.make_template(name="exits3", backend="k8s-workload", pod_sets=[pod_set])

    with support.Reconciler() as reconciler:
        r = support.run_cli(["submit", "--name", "exits3", "--template", "exits3", "--queue", "team-a", "--cluster",
                             "local", "--namespace", live.namespace, "--wait", "--timeout", "240"], live.env,
                            timeout=300)
    assert not reconciler.errors
    assert r.returncode == 1, r.stderr
    job = GangJob.objects.get(name="exits3")

    # The API: which pod set, index and container failed first, and how
    api = requests.get(f"{live.server.url}/api/v1/jobs/{job.pk}/",
                       headers={"Authorization": f"Bearer {live.token}"}, timeout=30).json()
    failure = api["failure"]
    assert (failure["pod_set"], failure["container"], failure["exit_code"], failure["reason"]) == (
        "worker", "trainer", 3, "Error")
    assert failure["index"] in (0, 1) and failure["pod"].startswith("exits3-")
    assert failure["job_reason"]  # the Indexed Job's Failed condition (backoffLimit 0)
    said = f"worker[{failure['index']}] container trainer exited with code 3 (Error)"
    assert failure["summary"] == said

    # The CLI: submit --wait named it on exit, get and why print it
    assert f"job {job.pk}: failure: {said}" in r.stderr
    for args in (["get", str(job.pk)], ["why", str(job.pk)]):
        shown = support.run_cli(args, live.env)
        assert shown.returncode == 0 and said in shown.stdout, shown.stderr
        assert f"pod set worker, index {failure['index']}," in shown.stdout and "exit code 3" in shown.stdout

    # The page
    browser = Client()
    browser.force_login(live.dev)
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert said in page and 'data-field="exit_code">3' in page and 'data-field="container">trainer' in page

    # The log, through kube-apiserver -> kwok: the failed container's lines
    logs = support.run_cli(["logs", str(job.pk)], live.env)
    assert logs.returncode == 0, logs.stderr
    assert f"{marker} epoch 2 loss nan\n{marker} giving up: exit 3\n" in logs.stdout
    assert f"pod {failure['pod']} (worker[{failure['index']}]), container trainer" in logs.stderr
    panel = browser.get(f"/jobs/{job.pk}/logs/").content.decode()
    assert f"{marker} giving up: exit 3" in panel

    # --follow streams a line written after it started
    follower = support.start_cli(["logs", str(job.pk), "--follow", "--tail", "1"], live.env)
    try:
        _read_stdout_until(follower, f"{marker} giving up: exit 3")
        _write(live.log, f"{marker} a line written later")
        _read_stdout_until(follower, f"{marker} a line written later")
    finally:
        follower.kill()
        follower.communicate(timeout=30)

    # A viewer of another team: 404, as for the job itself
    stranger = builders.make_user("stranger")
    builders.grant(QueuePolicy.objects.get(name="team-b"), "viewer", user=stranger)
    env = {**live.env, "GANGWEB_TOKEN": builders.make_token(stranger, ["read"])}
    refused = support.run_cli(["logs", str(job.pk)], env)
    assert refused.returncode == 4 and "404" in refused.stderr
    theirs = requests.get(f"{live.server.url}/api/v1/jobs/{job.pk}/logs/",
                          headers={"Authorization": f"Bearer {env['GANGWEB_TOKEN']}"}, timeout=30)
    assert theirs.status_code == 404

    # A log longer than the cap: cut, and said so
    _write(live.log, *(f"{marker} filler line {i:05d} " + "x" * 60 for i in range(200)))
    cut = requests.get(f"{live.server.url}/api/v1/jobs/{job.pk}/logs/",
                       headers={"Authorization": f"Bearer {live.token}"}, timeout=60)
    assert cut.status_code == 200 and cut.headers["X-Gangweb-Log-Truncated"] == "true"
    assert len(cut.content) < CAP + 200
    assert cut.text.rstrip().endswith("ask with tail_lines or since_seconds for the rest]")
    assert cut.headers["X-Gangweb-Log-Container"] == "trainer"
