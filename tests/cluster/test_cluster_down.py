"""The API server stops in the middle of a reconcile pass: the job records the error, nothing crashes, and after
the restart the job converges with exactly one gang object."""
from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from kubernetes import client

from scheduling import tasks
from scheduling.choices import ReconcileOutcome
from scheduling.kube import errors, objects
from scheduling.kube.objects import JOB, SERVICE

from .reconcile_support import make_world, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
APISERVER = "kube-apiserver"


def _state(kube_cluster):
    """The localcluster state (PIDs and command lines); also for an attached cluster, whose kubeconfig lives in
    its state directory."""
    from localcluster.state import load_state

    state = kube_cluster.state or load_state(Path(kube_cluster.kubeconfig).parent)
    if state is None or state.process(APISERVER) is None:
        pytest.skip("needs a localcluster whose processes this test can stop and start")
    return state


@contextlib.contextmanager
def apiserver_restart_after(kube_cluster):
    """Yield a `stop()` callable; whatever happens, start the API server again afterwards with the same command
    line and wait until it answers. The state file is updated with the new PID, so `down` still stops it."""
    from localcluster.processes import spawn, stop

    state = _state(kube_cluster)
    record = state.process(APISERVER)
    stopped = []

    def stop_apiserver():
        stop(record)
        stopped.append(True)

    try:
        yield stop_apiserver
    finally:
        if stopped:
            _, new = spawn(APISERVER, record.argv, Path(record.log), die_with_parent=kube_cluster.state is not None)
            state.processes[state.processes.index(record)] = new
            state.save()

            def answers():
                with kube_cluster.api_client() as api:
                    try:
                        client.VersionApi(api).get_code(_request_timeout=5)
                        client.CoreV1Api(api).list_namespace(limit=1, _request_timeout=5)
                        return True
                    except Exception:  # noqa: BLE001 - still starting
                        return False

            wait_for(answers, 120, "the API server to answer again", interval=1)
            _wait_runs_a_pod(kube_cluster)


def _wait_runs_a_pod(kube_cluster) -> None:
    """Wait until the control plane runs a Job's pod end to end again after the API server's restart (the Job
    controller makes it, kube-scheduler binds it, kwok runs it: each reconnects on its own backoff), then delete
    it. Answering is not enough: the next test on this control plane would depend on how soon they reconnect."""
    import uuid

    name = f"restart-probe-{uuid.uuid4().hex[:8]}"
    pod = {"containers": [{"name": "main", "image": "registry.invalid/fake:1",
                           "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
           "restartPolicy": "Never", "terminationGracePeriodSeconds": 0}
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {"probe": name}}, "spec": pod}}}
    with kube_cluster.api_client() as api:
        batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
        batch.create_namespaced_job("default", body)
        try:
            wait_for(lambda: any(p.status.phase == "Running" for p in core.list_namespaced_pod(
                "default", label_selector=f"probe={name}").items), 180, "a probe Job's pod Running", interval=1)
        finally:
            batch.delete_namespaced_job(name, "default", propagation_policy="Background", grace_period_seconds=0)


def test_apiserver_stopped_mid_reconcile_is_recorded_and_the_job_converges_after_restart(
        kube_cluster, kube_namespace, admin_user, enqueued, monkeypatch):
    world = make_world(kube_cluster, kube_namespace, admin_user)
    job = world.submit(backend="k8s-workload", replicas=3)
    real_create = objects.create

    with apiserver_restart_after(kube_cluster) as stop_apiserver:
        def create_then_stop(api, ref, body):  # the API server goes away right after the Workload is created
            created = real_create(api, ref, body)
            if ref == world.k8s.WORKLOAD:
                stop_apiserver()
            return created

        monkeypatch.setattr(objects, "create", create_then_stop)
        with pytest.raises(errors.TransientKubeError) as failure:
            world.reconcile(job)
        monkeypatch.setattr(objects, "create", real_create)
        assert failure.value.reason == "ClusterUnreachable"
        job.refresh_from_db()
        assert job.phase_reason == "ClusterUnreachable" and job.phase == "Submitted"
        attempt = job.attempts.first()
        assert (attempt.outcome, attempt.reason) == (ReconcileOutcome.TRANSIENT_ERROR, "ClusterUnreachable")

        # While it is down, further passes are recorded too and never crash the worker's task body.
        with pytest.raises(errors.TransientKubeError):
            tasks.reconcile_job(job.pk)  # called directly: the autoretry raises the error itself
        assert job.attempts.filter(outcome=ReconcileOutcome.TRANSIENT_ERROR).count() == 2

    result = world.reconcile(job)
    assert result.error is None, result.message
    job.refresh_from_db()
    assert job.phase == "Dispatched" and job.phase_reason == "WaitingForPods"
    assert len(world.gang(job, world.k8s.WORKLOAD)) == 1
    [pg] = world.gang(job, world.k8s.POD_GROUP)
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert len(world.gang(job, JOB)) == 1 and len(world.gang(job, SERVICE)) == 1
    assert world.reconcile(job).actions == []
