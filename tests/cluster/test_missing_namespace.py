"""A job submitted to a namespace its cluster does not have: recorded on the job (NamespaceNotFound), never
breaking the resync of other jobs; once the namespace is created the next pass dispatches it (level-triggered)."""
from __future__ import annotations

import dataclasses
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from scheduling.choices import GangPhase, ReconcileOutcome
from scheduling.kube.objects import JOB
from scheduling.models import QueuePolicy, ReconcileAttempt
from scheduling.reconcile import resync

from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]


@pytest.fixture
def missing_namespace(kube_api, world):
    """A namespace name that does not exist yet (queue team-a allows it); deleted after the test if the test
    created it."""
    name = f"t-missing-{uuid.uuid4().hex[:6]}"
    QueuePolicy.objects.filter(name="team-a").update(allowed_namespaces=[world.namespace, name])
    yield name
    try:
        client.CoreV1Api(kube_api).delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_a_job_in_a_missing_namespace_is_recorded_and_others_still_reconcile(world, missing_namespace, kube_api):
    lost = dataclasses.replace(world, namespace=missing_namespace).submit(backend="kai", replicas=1)
    fine = world.submit(backend="kai", replicas=1)
    assert lost.pk < fine.pk  # the broken job comes first in the resync's order

    stats = resync.resync_cluster(world.cluster)

    assert stats["jobs"] == 2 and stats["failed"] == 1
    lost.refresh_from_db()
    assert lost.phase == GangPhase.SUBMITTED
    assert lost.phase_reason == "NamespaceNotFound"
    assert f'namespace "{missing_namespace}" does not exist in cluster local' in lost.phase_message
    assert lost.why_pending["reason"] == "NamespaceNotFound"
    assert missing_namespace in lost.why_pending["message"]
    assert lost.why_pending["summary"].startswith(f'namespace "{missing_namespace}" does not exist in cluster local')
    attempt = ReconcileAttempt.objects.filter(job=lost).latest("pk")
    assert attempt.outcome == ReconcileOutcome.TRANSIENT_ERROR and attempt.reason == "NamespaceNotFound"
    fine.refresh_from_db()
    assert fine.phase == GangPhase.DISPATCHED
    assert len(world.gang(fine, JOB)) == 1

    core = client.CoreV1Api(kube_api)
    core.create_namespace({"metadata": {"name": missing_namespace, "labels": {"gangweb.io/test": "true"}}})

    def has_default_sa():
        try:
            return core.read_namespaced_service_account("default", missing_namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    wait_for(has_default_sa, 30, f"ServiceAccount {missing_namespace}/default")
    stats = resync.resync_cluster(world.cluster)

    assert stats["failed"] == 0 and stats["acted"] == 1
    lost.refresh_from_db()
    assert lost.phase == GangPhase.DISPATCHED
    assert lost.phase_reason != "NamespaceNotFound"
    assert len(dataclasses.replace(world, namespace=missing_namespace).gang(lost, JOB)) == 1


def test_an_unexpected_error_in_one_jobs_pass_does_not_stop_the_others_or_other_clusters(world, monkeypatch,
                                                                                          caplog):
    from scheduling.models import Cluster
    from scheduling.reconcile import jobs as job_reconcile

    broken = world.submit(backend="kai", replicas=1)
    fine = world.submit(backend="kai", replicas=1)
    real_backend_for = job_reconcile.backend_for

    def backend_for(job, api):  # a bug in one job's pass (fault injected; the cluster stays real)
        if job.pk == broken.pk:
            raise RuntimeError("bug in one job")
        return real_backend_for(job, api)

    monkeypatch.setattr(job_reconcile, "backend_for", backend_for)
    Cluster.objects.create(name="also-local", kubeconfig=world.cluster.kubeconfig)

    stats = resync.resync_all()

    assert stats["local"]["jobs"] == 2 and stats["local"]["failed"] == 1 and stats["local"]["acted"] == 1
    assert "also-local" in stats
    fine.refresh_from_db()
    assert fine.phase == GangPhase.DISPATCHED
    assert f"job {broken.pk}" in caplog.text and "bug in one job" in caplog.text
