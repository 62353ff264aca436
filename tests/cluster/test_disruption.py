"""A running gang whose member is evicted is re-queued, not failed (owner Jobs ignore DisruptionTarget failures)."""
from __future__ import annotations

import pytest
from kubernetes import client

localcluster = pytest.importorskip("localcluster")

from scheduling.choices import GangPhase as P  # noqa: E402
from scheduling.kube.watches import POD  # noqa: E402
from scheduling.models import GangJob  # noqa: E402
from scheduling.reconcile import desired  # noqa: E402
from scheduling.reconcile.desired import JOB  # noqa: E402
from tests import builders  # noqa: E402

from .reconcile_support import make_world, wait_for  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def world(kube_cluster, kube_namespace, admin_user, enqueued):
    return make_world(kube_cluster, kube_namespace, admin_user)


def running_pods(world, job) -> list[dict]:
    return [p for p in world.gang(job, POD) if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]


def test_an_evicted_member_is_replaced_and_the_owner_job_does_not_fail(world):
    job = world.submit(backend="k8s-workload", replicas=2,
                       containers=[builders.container(cpu="100m", memory="64Mi")])
    assert world.reconcile(job).error is None
    first = wait_for(lambda: len(pods := running_pods(world, job)) == 2 and pods, timeout=90, what="2 pods Running")
    victim = first[0]["metadata"]["name"]

    # What a preempting scheduler or a node drain does: the Eviction API (the pod gets DisruptionTarget).
    client.CoreV1Api(world.api).create_namespaced_pod_eviction(
        victim, world.namespace, client.V1Eviction(metadata=client.V1ObjectMeta(name=victim,
                                                                               namespace=world.namespace)))
    [owner_name] = [ps.owner_name for ps in world.names(job).pod_sets]

    def replaced():
        pods = running_pods(world, job)
        return len(pods) == 2 and victim not in {p["metadata"]["name"] for p in pods} and pods

    wait_for(replaced, timeout=60, what="the evicted member replaced and Running")
    owner = world.get(JOB, owner_name)
    status = owner.get("status") or {}
    assert not any(c["type"] == "Failed" and c["status"] == "True" for c in status.get("conditions") or [])
    assert status.get("failed", 0) == 0  # ignored by podFailurePolicy: not counted against backoffLimit 0
    assert owner["spec"]["podFailurePolicy"] == desired.IGNORE_DISRUPTIONS

    assert world.reconcile(job).error is None
    job = GangJob.objects.get(pk=job.pk)
    assert job.phase == P.RUNNING
    assert P.FAILED not in set(job.transitions.values_list("phase", flat=True))
