"""gangweb's half of the Kueue backend against the real API server, with the test writing Kueue's half: the Workload
CRD of Kueue v0.17.0 is installed (its schema and validation rules, no manager), and the test sets the Workload's
status as Kueue's scheduler would (QuotaReserved, Admitted, Evicted with Preempted). What is checked is exactly what
gangweb does as the Workload's owner, at the API server's validation: the Jobs created suspended and no pod while it
waits; un-suspended once admitted; suspended again on eviction, the reservation cleared through the status
subresource once the pods are gone (the CRD accepts gangweb's status body), the job Queued again with Kueue's reason
in a new attempt; a cancel deletes the Workload only after the pods. With the real manager:
tests/cluster/test_kueue_backend.py."""
from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

import localcluster
from scheduling.backends.kueue_v1beta2 import WORKLOAD
from scheduling.choices import GangPhase
from scheduling.kube import objects
from scheduling.reconcile import probe
from scheduling.services.jobs import lifecycle as job_service
from tests import builders

from .conftest import POOL_LABEL
from .reconcile_support import make_world, reconciled_until, wait_for
from .test_kueue_backend import conditions, fresh, owner_jobs, pods, running, submit_gang, workload

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
QUEUE = "kq"
PREEMPTED = ("Preempted to accommodate a workload (UID: 6d1c2a4e-0000-4000-8000-000000000001, JobUID: UNKNOWN) due to "
             "prioritization in the ClusterQueue; preemptor path: /kq; preemptee path: /kq")


@pytest.fixture(scope="module")
def bare_cluster(local_binaries, tmp_path_factory):
    """A control plane of this module's own, with Kueue's Workload CRD and no Kueue manager: the session's cluster
    may run one (`kueue_cluster`), which would answer for Kueue here. Stopped after the module."""
    state_dir = tmp_path_factory.mktemp("kueue-bare")
    cluster = localcluster.up(localcluster.ClusterConfig(state_dir=state_dir, nodes=0, die_with_parent=True))
    try:
        with cluster.api_client() as api:
            ext = client.ApiextensionsV1Api(api)
            path = localcluster.binaries.kueue_dir() / "config" / "components" / "crd" / "bases" / \
                "kueue.x-k8s.io_workloads.yaml"
            try:
                ext.create_custom_resource_definition(yaml.safe_load(path.read_text()))
            except ApiException as exc:
                if exc.status != 409:  # installed with the cluster's CRDs
                    raise
            wait_for(lambda: any(c.type == "Established" and c.status == "True" for c in
                                 ext.read_custom_resource_definition("workloads.kueue.x-k8s.io").status.conditions
                                 or []), 60, "the Workload CRD established")
        yield cluster
    finally:
        localcluster.down(state_dir)


@pytest.fixture
def crd_world(bare_cluster, admin_user, enqueued):
    """`World` on `bare_cluster`: a namespace of the test's, one fake 8-GPU node labelled for it, probed."""
    namespace = f"t-owner-{uuid.uuid4().hex[:6]}"
    with bare_cluster.api_client() as api:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    bare_cluster.add_node(f"{namespace}-n0", gpus=8, labels={POOL_LABEL: namespace})
    world = make_world(bare_cluster, namespace, admin_user)

    def served():
        probe.probe_cluster(world.cluster)
        world.cluster.refresh_from_db()
        return WORKLOAD.api_version in (world.cluster.served_apis or [])

    wait_for(served, 60, "kueue.x-k8s.io/v1beta2 served")
    builders.make_queue(QUEUE, allowed_namespaces=[namespace])
    return world


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(kind, status, reason, message) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now()}


ADMISSION = {"clusterQueue": QUEUE, "podSetAssignments": [
    {"name": "launcher", "flavors": {"nvidia.com/gpu": "gangweb-default"}, "resourceUsage": {"nvidia.com/gpu": "1"},
     "count": 1},
    {"name": "worker", "flavors": {"nvidia.com/gpu": "gangweb-default"}, "resourceUsage": {"nvidia.com/gpu": "2"},
     "count": 2}]}


def kueue_writes(world, job, conds: list[dict], admission: dict | None = None) -> None:
    """Set the Workload's status as Kueue would (its conditions whole, and `admission` when given)."""
    status = {"conditions": conds, **({"admission": admission} if admission else {})}
    objects.patch_status(world.api, WORKLOAD, world.namespace, world.names(job).gang_name, {"status": status})


def admitted() -> list[dict]:
    return [cond("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {QUEUE}"),
            cond("Admitted", "True", "Admitted", "The workload is admitted")]


def test_gangweb_holds_releases_and_suspends_the_jobs_as_the_workloads_owner(crd_world):
    world = crd_world
    job = submit_gang(world, QUEUE)
    assert world.reconcile(job).error is None
    assert [j["spec"]["suspend"] for j in owner_jobs(world, job)] == [True, True]
    wl = workload(world, job)
    assert wl["spec"]["queueName"] == QUEUE and [ps["count"] for ps in wl["spec"]["podSets"]] == [1, 2]

    message = ("couldn't assign flavors to pod set worker: insufficient quota for nvidia.com/gpu in flavor "
               "gangweb-default, previously considered podsets requests (1) + current podset request (2) > maximum "
               "capacity (2)")
    kueue_writes(world, job, [cond("QuotaReserved", "False", "Pending", message)])
    queued = reconciled_until(world, job, GangPhase.QUEUED)
    assert (queued.phase_reason, queued.phase_message) == ("Pending", f"{message} (0 of 3 bound)")
    assert pods(world, job) == [] and [j["spec"]["suspend"] for j in owner_jobs(world, job)] == [True, True]

    kueue_writes(world, job, admitted(), ADMISSION)
    row = reconciled_until(world, job, GangPhase.RUNNING)
    assert len(running(world, job)) == 3 and not any(j["spec"].get("suspend") for j in owner_jobs(world, job))
    assert row.transitions.get(phase=GangPhase.SCHEDULED, attempt=0).source.startswith("Pod ")

    time.sleep(1.1)  # the eviction's time after the Scheduled entry's (cluster times are whole seconds)
    kueue_writes(world, job, [*admitted(), cond("Evicted", "True", "Preempted", PREEMPTED),
                              cond("Preempted", "True", "InClusterQueue", PREEMPTED)], ADMISSION)
    requeued = reconciled_until(world, job, GangPhase.QUEUED, attempt=1)
    assert [j["spec"]["suspend"] for j in owner_jobs(world, job)] == [True, True]
    entry = requeued.transitions.get(phase=GangPhase.QUEUED, attempt=1)
    assert entry.reason == "Preempted"
    assert "a workload gangweb did not create, UID 6d1c2a4e-0000-4000-8000-000000000001" in entry.message

    def cleared():
        assert world.reconcile(job).error is None
        w = workload(world, job)
        return conditions(w)["QuotaReserved"]["status"] == "False" and w

    after = wait_for(cleared, 90, "the reservation cleared by gangweb", interval=1)
    assert pods(world, job) == []  # cleared only once the pods were gone
    by_type = conditions(after)
    assert "admission" not in after["status"]
    assert (by_type["QuotaReserved"]["reason"], by_type["QuotaReserved"]["message"]) == ("Pending", PREEMPTED)
    assert (by_type["Admitted"]["status"], by_type["Admitted"]["reason"]) == ("False", "NoReservation")
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("True", "Preempted")
    assert fresh(job).phase == GangPhase.QUEUED

    # Kueue reserves quota again: Evicted and Preempted reset to False ("Previously: ...", SetQuotaReservation).
    kueue_writes(world, job, [c for c in after["status"]["conditions"] if c["type"] == "Requeued"] + admitted() + [
        cond("Evicted", "False", "QuotaReserved", f"Previously: {PREEMPTED}"),
        cond("Preempted", "False", "QuotaReserved", f"Previously: {PREEMPTED}")], ADMISSION)
    reconciled_until(world, job, GangPhase.RUNNING, attempt=1)
    assert len(running(world, job)) == 3

    job_service.cancel(world.user, fresh(job))
    first = world.reconcile(job)
    assert workload(world, job) is not None  # the pods were there: the Workload (the quota) stays
    assert any(a.startswith("Workload kept until the pods are gone") for a in first.actions), first.actions

    def cancelled():
        world.reconcile(job)
        if workload(world, job) is None:
            assert pods(world, job) == [], "the Workload went before the pods"
        return fresh(job).phase == GangPhase.CANCELLED

    wait_for(cancelled, 120, "Cancelled", interval=1)
    assert workload(world, job) is None and owner_jobs(world, job) == []


def test_a_finished_job_marks_its_workload_finished_before_it_is_deleted(crd_world):
    world = crd_world
    job = submit_gang(world, QUEUE, annotations={"gangweb.io/sim-exit": "0"})
    assert world.reconcile(job).error is None
    kueue_writes(world, job, admitted(), ADMISSION)
    name = world.names(job).gang_name
    # Kueue's manager puts this finalizer on every Workload it admits and lifts it once the Workload is finished:
    # a deletion then leaves the Workload readable, with what gangweb wrote before deleting it.
    objects.merge_patch(world.api, WORKLOAD, world.namespace, name,
                        {"metadata": {"finalizers": ["kueue.x-k8s.io/resource-in-use"]}})
    seen = {}

    def finished():
        assert world.reconcile(job).error is None
        w = world.get(WORKLOAD, name)
        if w is not None and "Finished" in conditions(w):
            seen.update(conditions(w)["Finished"])
        return fresh(job).phase == GangPhase.SUCCEEDED and seen

    wait_for(finished, 120, "Succeeded with Finished=True on the Workload", interval=1)
    assert (seen["status"], seen["reason"]) == ("True", "Succeeded")
    wait_for(lambda: (world.reconcile(job), (world.get(WORKLOAD, name) or {}).get("metadata", {}).get(
        "deletionTimestamp"))[1], 60, "the finished job's Workload deleted once its pods ended", interval=1)
    objects.merge_patch(world.api, WORKLOAD, world.namespace, name, {"metadata": {"finalizers": None}})
    wait_for(lambda: world.get(WORKLOAD, name) is None, 30, "the Workload gone once Kueue's finalizer is lifted")
    assert len(owner_jobs(world, job)) == 2  # the Indexed Jobs stay for the retention
