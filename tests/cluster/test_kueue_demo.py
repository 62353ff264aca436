"""The Kueue demo `make run` installs (services/clusters/local.py `ensure_kueue_demo`) has its limit enforced on
the local control plane with the Kueue v0.17.0 manager running (issue 37, the README's "What schedules on the local
cluster"), end to end through gangweb's own queue sync and REST API (no Kueue object made by hand): queue
"kueue-demo" (quota 4 GPUs, limit 8) under "kueue-pool" becomes a ClusterQueue in a Cohort; jobs of the
`sample-kueue` template (4 GPUs: 1 launcher + 3 workers) run up to the limit (one on the quota, one borrowing), the
next one stays Queued with Kueue's reason and numbers in why_pending and no pod, the Running pods' GPUs never exceed
8 although the test's nodes have 16, and cancelling a running job lets the waiting one be admitted and run."""
from __future__ import annotations

import copy

import pytest
from kubernetes import client

from scheduling.backends.kueue_v1beta2 import WORKLOAD
from scheduling.choices import GangPhase
from scheduling.kube.objects import POD
from scheduling.models import GangJob
from scheduling.reconcile import kueue_desired as kd
from scheduling.reconcile import queues as queue_tasks
from scheduling.services.clusters import local as local_cluster
from scheduling.services.templates import versions as template_versions

from .conftest import POOL_LABEL
from .reconcile_support import make_world, reconciled_until, wait_for
from .test_kueue_queues import reset_kueue

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
G, V = kd.GROUP, kd.VERSION
GPU = "nvidia.com/gpu"
LIMIT = 8


@pytest.fixture
def demo(kueue_cluster, kube_namespace, admin_user, api, queue_syncs, pool_nodes):
    """The demo's policies and a `sample-kueue`-like template on this test's two 8-GPU nodes (16 GPUs: the nodes
    never hold a job back before the limit does), synced to the cluster by gangweb's queue sync. Starts and ends with
    no Kueue queue or Workload on this worker's control plane. Yields (World, template name)."""
    custom = client.CustomObjectsApi(kueue_cluster.api_client())
    reset_kueue(custom)
    pool_nodes(2)
    world = make_world(kueue_cluster, kube_namespace, admin_user)
    local_cluster.ensure_kueue_demo(world.cluster, namespace=kube_namespace)
    # The demo's template, on this test's nodes, its pods running until cancelled (kwok's sim-duration).
    spec = copy.deepcopy(local_cluster.KUEUE_SPEC)
    for ps in spec["podSets"]:
        ps["template"]["metadata"]["annotations"]["gangweb.io/sim-duration"] = "2h"
        ps["template"]["spec"]["nodeSelector"] = {POOL_LABEL: kube_namespace}
    template_versions.create_template(None, "sample-kueue-here", "the demo's, on this test's nodes", spec)
    queue_tasks.sync_cluster_id(world.cluster.id)
    cq = custom.get_cluster_custom_object(G, V, "clusterqueues", local_cluster.KUEUE_QUEUE)
    assert cq["spec"]["cohortName"] == local_cluster.KUEUE_PARENT
    [gpu] = [r for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == GPU]
    assert (gpu["nominalQuota"], gpu["borrowingLimit"]) == ("4", "4")
    yield world, "sample-kueue-here"
    reset_kueue(custom)


def submit(api, world, template: str, name: str) -> GangJob:
    body = {"name": name, "template": template, "queue": local_cluster.KUEUE_QUEUE, "cluster": world.cluster.name,
            "namespace": world.namespace}
    r = api.post("/api/v1/jobs/", body, format="json")
    assert r.status_code == 201, r.data
    return GangJob.objects.select_related("cluster", "queue").get(pk=r.data["id"])


def running_gpus(world) -> int:
    """GPUs of the Running pods in the test's namespace, from the API server (container limits)."""
    total = 0
    for pod in client.CoreV1Api(world.api).list_namespaced_pod(world.namespace).items:
        if pod.status.phase == "Running":
            total += sum(int((c.resources.limits or {}).get(GPU, 0)) for c in pod.spec.containers)
    return total


def test_the_kueue_demo_queue_holds_its_limit_and_admits_the_next_job_when_one_is_cancelled(api, demo):
    world, template = demo
    seen = []

    def reconcile_all(jobs):
        for job in jobs:
            result = world.reconcile(job)
            assert result.error is None, result.message
        seen.append(running_gpus(world))
        assert seen[-1] <= LIMIT, seen

    first, second = submit(api, world, template, "k-1"), submit(api, world, template, "k-2")
    for job in (first, second):
        reconciled_until(world, job, GangPhase.RUNNING)
        reconcile_all([first, second])
    wait_for(lambda: running_gpus(world) == LIMIT, 60, "8 GPUs of Running pods")

    third = submit(api, world, template, "k-3")

    def explained():
        reconcile_all([first, second, third])
        row = api.get(f"/api/v1/jobs/{third.id}/").data
        facts = [f for f in ((row["why_pending"] or {}).get("blocking") or []) if f["code"].startswith("Kueue")]
        return facts and row

    row = wait_for(explained, 90, "the third job's why-pending with Kueue's reason", interval=1)
    assert row["phase"] == GangPhase.QUEUED
    fact = [f for f in row["why_pending"]["blocking"] if f["code"].startswith("Kueue")][0]
    assert (fact["resource"], fact["flavor"]) == (GPU, kd.FLAVOR), fact
    assert fact["more_needed"] > 0, fact
    assert "more needed" in row["why_pending"]["summary"], row["why_pending"]
    assert row["why_pending"]["queue"]["name"] == row["why_pending"]["queue_name"] != ""
    wl = world.get(WORKLOAD, world.names(third).gang_name)
    assert {c["type"]: c["status"] for c in wl["status"]["conditions"]}.get("QuotaReserved") == "False"
    for _ in range(3):  # still waiting, nothing of it placed, the limit held
        reconcile_all([first, second, third])
    assert world.gang(third, POD) == []
    assert running_gpus(world) == LIMIT

    r = api.post(f"/api/v1/jobs/{first.id}/cancel/")
    assert r.status_code in (200, 202), r.data

    def admitted():
        reconcile_all([first, second, third])
        rows = {j.pk: GangJob.objects.get(pk=j.pk) for j in (first, third)}
        return rows[first.pk].phase == GangPhase.CANCELLED and rows[third.pk].phase == GangPhase.RUNNING

    wait_for(admitted, 180, "the first job Cancelled and the waiting one Running", interval=1)
    assert len(world.gang(third, POD)) == 4
    wait_for(lambda: running_gpus(world) == LIMIT, 60, "8 GPUs of Running pods again")
    assert max(seen) <= LIMIT
