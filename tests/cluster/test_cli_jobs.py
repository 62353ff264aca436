"""The installed `gangweb` console script against a live gangweb server and the real control plane: jobs that
really run on the local cluster (kwok's pod-completion annotations end them), reconciled by passes in the test
process as a worker would run them.

- submit --wait of a job that succeeds exits 0 and prints its phases as they happen, Submitted ... Succeeded;
- one whose pods exit 1 exits 1;
- a cancel from another process makes the waiter exit 2;
- a wait that spans a burst, an idle gap and a second burst of a 20-job set exits only when all 20 are terminal.
"""
import json
import time
from types import SimpleNamespace

import pytest

from scheduling.choices import PHASE_ORDER, GangPhase
from scheduling.models import GangJob, QueuePolicy
from tests import builders
from tests.cli import support
from tests.cluster.reconcile_support import make_world, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def live(kube_cluster, kube_namespace, admin_user, tmp_path):
    """Cluster `local` (the session's control plane), queue team-a (naming no cluster: it takes every cluster), the
    token of a submitter on team-a as a CI pipeline would hold, and gunicorn serving them."""
    world = make_world(kube_cluster, kube_namespace, admin_user)
    ci = builders.make_user("ci-pipeline")
    builders.grant(QueuePolicy.objects.get(name="team-a"), "submitter", user=ci)
    token = builders.make_token(ci, ["read", "submit", "cancel"], queues=[QueuePolicy.objects.get(name="team-a")])
    (tmp_path / "server").mkdir()
    server = support.Server(tmp_path / "server")
    yield SimpleNamespace(world=world, server=server, env=support.cli_env(server.url, token, tmp_path),
                          namespace=kube_namespace)
    server.stop()


def _template(name: str, replicas: int = 2, **annotations):
    """A k8s-workload template whose pods carry kwok's completion annotations (none: they run until deleted)."""
    pod_set = builders.pod_set("worker", replicas=replicas, containers=[builders.container(cpu="1", memory="1Gi")])
    if annotations:
        pod_set["template"]["metadata"]["annotations"] = {f"gangweb.io/{k.replace('_', '-')}": v
                                                          for k, v in annotations.items()}
    return builders.make_template(name=name, backend="k8s-workload", pod_sets=[pod_set])


def _submit_args(live, template: str, name: str) -> list[str]:
    return ["submit", "--name", name, "--template", template, "--queue", "team-a", "--cluster", "local",
            "--namespace", live.namespace]


def _in_lifecycle_order(phases: list[str]) -> bool:
    return [PHASE_ORDER[p] for p in phases] == sorted(PHASE_ORDER[p] for p in phases)


@pytest.mark.parametrize(("exit_code", "phase", "cli_code"), [("0", "Succeeded", 0), ("1", "Failed", 1)])
def test_submit_wait_prints_each_phase_in_order_and_exits_with_the_jobs_result(live, exit_code, phase, cli_code):
    _template("ends", sim_exit=exit_code, sim_duration="2s")
    with support.Reconciler() as reconciler:
        r = support.run_cli([*_submit_args(live, "ends", "ends"), "--wait", "--timeout", "240", "-o", "json"],
                            live.env, timeout=300)
    assert not reconciler.errors
    assert r.returncode == cli_code, r.stderr
    job = GangJob.objects.get(name="ends")
    printed = support.phases_printed(r.stderr)[job.pk]
    assert printed[0] == "Submitted" and printed[-1] == phase, r.stderr
    assert _in_lifecycle_order(printed) and "Running" in printed
    assert sorted(printed) == sorted(job.transitions.values_list("phase", flat=True))  # each entry, once
    assert [j["phase"] for j in json.loads(r.stdout)] == [phase]


def test_a_cancel_from_another_process_makes_the_waiter_exit_2(live):
    _template("forever")  # its pods run until deleted
    with support.Reconciler():
        r = support.run_cli([*_submit_args(live, "forever", "long"), "-o", "json"], live.env)
        assert r.returncode == 0, r.stderr
        job_id = json.loads(r.stdout)["id"]
        waiter = support.start_cli(["wait", str(job_id), "--timeout", "240"], live.env)
        wait_for(lambda: GangJob.objects.get(pk=job_id).phase == GangPhase.RUNNING, 120, "the job to run")
        cancel = support.run_cli(["cancel", str(job_id)], live.env)
        assert cancel.returncode == 0, cancel.stderr
        stdout, stderr = waiter.communicate(timeout=180)
    assert waiter.returncode == 2, stderr
    printed = support.phases_printed(stderr)[job_id]
    assert printed[-1] == "Cancelled" and "Running" in printed
    assert "cancelled:" in stderr


def test_a_wait_across_a_burst_an_idle_gap_and_a_second_burst_exits_only_when_all_20_are_terminal(live, tmp_path):
    _template("quick", replicas=1, sim_exit="0", sim_duration="2s")
    _template("slow", replicas=1, sim_exit="0", sim_duration="45s")
    jobs = [{"name": f"quick-{i}", "template": "quick"} for i in range(10)] + [
        {"name": f"slow-{i}", "template": "slow"} for i in range(10)]
    for job in jobs:
        job.update(queue="team-a", cluster="local", namespace=live.namespace)
    (tmp_path / "set.json").write_text(json.dumps(jobs))
    with support.Reconciler():
        r = support.run_cli(["submit", "-f", str(tmp_path / "set.json"), "--wait", "--timeout", "400", "-o", "json"],
                            live.env, timeout=480)
        ended = time.time()
    assert r.returncode == 0, r.stderr
    rows = list(GangJob.objects.all())
    assert len(rows) == 20 and {row.phase for row in rows} == {GangPhase.SUCCEEDED}
    assert [j["phase"] for j in json.loads(r.stdout)] == ["Succeeded"] * 20
    quick_done = max(row.finished_at for row in rows if row.name.startswith("quick"))
    first_slow_done = min(row.finished_at for row in rows if row.name.startswith("slow"))
    # The idle gap was real: every quick job had finished seconds before the first slow one did, ...
    assert (first_slow_done - quick_done).total_seconds() > 5, (quick_done, first_slow_done)
    # ... and the wait ended only after the last of the 20 (recorded_at: when gangweb learned it).
    last_recorded = max(row.transitions.get(phase="Succeeded").recorded_at for row in rows)
    assert ended >= last_recorded.timestamp()
    printed = support.phases_printed(r.stderr)
    assert len(printed) == 20 and all(p[-1] == "Succeeded" and _in_lifecycle_order(p) for p in printed.values())
