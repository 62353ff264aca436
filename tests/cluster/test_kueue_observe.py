"""What gangweb says about a Kueue job and queue comes from Kueue itself (issue 37 item 4), against the real control
plane with the Kueue v0.17.0 manager running: two ClusterQueues under one cohort (quota 4 and 4 GPUs, team-a's
limit 8, i.e. borrowingLimit 4). Team-a fills its quota, borrows up to its limit, and its next job waits with
Kueue's reason in why-pending (with numbers) and a place in line from Kueue's visibility API; Kueue's ClusterQueue
status gives the queue's reserved and borrowed GPUs and is what the submit-time limit check reads; a team-b job
reclaims its quota (Kueue preempts a team-a job) and the preempted job's timeline names the team-b job.

The Kueue objects are made here as the Kueue queue sync names them (KUEUE names: ResourceFlavor gangweb-default, a
ClusterQueue and a LocalQueue named after each leaf policy, `cohortName` the parent policy); the ClusterQueue's
status is stored where that sync stores it (QueueClusterState of family kueue), in Kueue's own field names
(kube/kueue_status.normalized reads those and the sync's stored shape alike; unit-tested for both).

Run on this branch with main's kueue-local and kueue-backend (14:40 UTC, load 8-13): passes in 24 s. Kueue v0.17.0's
visibility server panics on the pendingworkloads read when a pending Workload has no `spec.priority`
(`pkg/visibility/storage/utils.go:44`), after which the aggregator marks the APIService unavailable and the place
reads unknown ("... its APIService is unavailable (HTTP 503)"): the Kueue backend always writes it."""
from __future__ import annotations

import uuid

import pytest
from django.utils import timezone
from kubernetes import client
from kubernetes.client.rest import ApiException

from scheduling.choices import GangPhase, SyncState
from scheduling.kube.refs import POD
from scheduling.models import GangJob, QueueClusterState, QueuePolicy
from scheduling.queueing.tree import QueueTree
from scheduling.services.jobs import lifecycle as job_service
from scheduling.services.queues import allocation, kueue_usage, limits, line
from tests import builders

from .conftest import POOL_LABEL
from .reconcile_support import make_world, reconciled_until, wait_for
from .test_kueue_backend import conditions, said, workload

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
FLAVOR = "gangweb-default"
GPU = "nvidia.com/gpu"


@pytest.fixture
def kueue_world(kueue_cluster, kube_namespace, admin_user, enqueued, pool_nodes):
    """`World` on the session's cluster with Kueue running, one fake 8-GPU node for this test's pods."""
    pool_nodes(1)
    return make_world(kueue_cluster, kube_namespace, admin_user)


@pytest.fixture
def cohort(kueue_world):
    """(team-a, team-b): leaf policies under one parent, with their ClusterQueues in the parent's cohort: team-a
    quota 4 GPUs, limit 8 (borrowingLimit 4); team-b quota 4, reclaiming its quota from borrowers
    (`preemption.reclaimWithinCohort: Any`). Deleted after the test."""
    world, tag = kueue_world, uuid.uuid4().hex[:6]
    custom = client.CustomObjectsApi(world.api)
    try:
        custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR, "labels": {"app.kubernetes.io/managed-by": "gangweb"}}, "spec": {}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    parent = builders.make_queue(f"research-{tag}", allowed_namespaces=[world.namespace])
    made = []

    def leaf(name: str, borrowing: int | None, preemption: dict | None) -> str:
        builders.make_queue(name, parent=parent, allowed_namespaces=[world.namespace], gpu_quota=4,
                            gpu_limit=4 + borrowing if borrowing is not None else -1)
        gpu = {"name": GPU, "nominalQuota": "4", **({"borrowingLimit": str(borrowing)} if borrowing is not None
                                                      else {})}
        spec = {"cohortName": parent.name,
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": world.namespace}},
                "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{
                    "name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": "32"},
                                                  {"name": "memory", "nominalQuota": "128Gi"}, gpu]}]}]}
        if preemption:
            spec["preemption"] = preemption
        custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
        made.append(name)
        custom.create_namespaced_custom_object(GROUP, VERSION, world.namespace, "localqueues", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": name},
            "spec": {"clusterQueue": name}})
        return name

    yield (leaf(f"ta-{tag}", 4, None), leaf(f"tb-{tag}", None, {"reclaimWithinCohort": "Any"}))
    for name in made:
        try:
            custom.delete_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def submit(world, queue: str) -> GangJob:
    """A 4-GPU job on the kueue backend (2 workers of 2 GPUs), on this test's node."""
    containers = [builders.container(cpu="100m", memory="64Mi", gpu=2)]
    ps = builders.pod_set("worker", replicas=2, containers=containers)
    ps["template"]["spec"]["nodeSelector"] = {POOL_LABEL: world.namespace}
    version = builders.make_template(name=f"t-{uuid.uuid4().hex[:8]}", backend="kueue", pod_sets=[ps])
    body = builders.submit_body(version, QueuePolicy.objects.get(name=queue), world.cluster,
                                name=f"job-{uuid.uuid4().hex[:6]}", namespace=world.namespace)
    job, _ = job_service.submit(world.user, body)
    return GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)


def fresh(job) -> GangJob:
    return GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)


def reserved_gpus(cq: dict) -> tuple[str, str]:
    for flavor in (cq.get("status") or {}).get("flavorsReservation") or []:
        for res in flavor.get("resources") or []:
            if res.get("name") == GPU:
                return str(res.get("total")), str(res.get("borrowed"))
    return "0", "0"


def recorded(job, wl_uid: str) -> bool:
    return any(o.get("kind") == "Workload" and (o.get("metadata") or {}).get("uid") == wl_uid
               for o in (fresh(job).observed or {}).get("objects") or [])


def test_a_kueue_queue_says_kueues_numbers_place_and_who_preempted(kueue_world, cohort):
    world, (team_a, team_b) = kueue_world, cohort
    custom = client.CustomObjectsApi(world.api)

    # Team-a fills its quota (4 GPUs), then borrows up to its limit (8).
    first, second = submit(world, team_a), submit(world, team_a)
    reconciled_until(world, first, GangPhase.RUNNING)
    reconciled_until(world, second, GangPhase.RUNNING)
    cq = wait_for(lambda: reserved_gpus(c := custom.get_cluster_custom_object(
        GROUP, VERSION, "clusterqueues", team_a)) == ("8", "4") and c, 60, "team-a's ClusterQueue: 8 GPUs, 4 borrowed")

    # Kueue's status, stored as the queue sync stores it: the queue answer and the limit check read it.
    policy = QueuePolicy.objects.get(name=team_a)
    state, _ = QueueClusterState.objects.update_or_create(
        policy=policy, cluster=world.cluster, family="kueue",
        defaults={"state": SyncState.IN_SYNC, "status": cq["status"], "status_at": timezone.now()})
    report = kueue_usage.kueue_payload(state)
    assert report["usage"]["gpu"]["allocated"] == 8 and report["usage"]["gpu"]["borrowed"] == 4
    assert report["workloads"]["admitted"] == 2
    assert report["text"].startswith("Kueue's ClusterQueue status: 8 GPUs reserved (4 GPUs borrowed from the cohort)")
    third = submit(world, team_a)
    (warning,) = limits.check_job_limits(policy, world.cluster, third.resolved_spec, QueueTree.load_rows(),
                                         allocation.Allocations({policy.id}, {world.cluster.id}))
    assert (warning["source"], warning["allocated"], warning["requested"], warning["limit"]) == ("kueue", 8, 4, 8)
    assert "Kueue's ClusterQueue status says 8 of 8 GPUs allocated (gpu_limit)" in warning["message"]

    # The next team-a job waits, with Kueue's reason and numbers, and Kueue's place in line.
    assert world.reconcile(third).error is None
    wait_for(lambda: said(workload(world, third), "QuotaReserved", "False"), 60, "Kueue's pending reason")

    def explained():
        assert world.reconcile(third).error is None
        why = fresh(third).why_pending or {}
        return any(f["code"].startswith("Kueue") for f in why.get("blocking") or []) and why

    why = wait_for(explained, 60, "why-pending with Kueue's facts", interval=1)
    [fact] = [f for f in why["blocking"] if f["code"].startswith("Kueue")]
    assert (fact["code"], fact["resource"], fact["flavor"], fact["more_needed"]) == (
        "KueueQuotaInUse", GPU, FLAVOR, 4), fact
    assert "insufficient unused quota for nvidia.com/gpu in flavor gangweb-default: 4 GPUs more needed" in \
        why["summary"]
    last = []
    place = wait_for(lambda: (p := line.position(fresh(third))) and (last.append(p) or p["status"] == "known") and p,
                     60, lambda: f"a place from Kueue's visibility API (last: {last[-1:]})", interval=2)
    assert (place["queue"], place["queue_total"], place["cluster_queue"], place["source"]) == (
        1, 1, 1, "Kueue visibility API")

    # Team-b reclaims its quota: Kueue preempts a borrowing team-a job, whose timeline names the team-b job.
    reclaimer = submit(world, team_b)
    assert world.reconcile(reclaimer).error is None
    wl_uid = wait_for(lambda: (w := workload(world, reclaimer)) and w["metadata"]["uid"], 30, "team-b's Workload")
    wait_for(lambda: world.reconcile(reclaimer).error is None and recorded(reclaimer, wl_uid), 30,
             "team-b's Workload recorded by gangweb", interval=1)
    victim = wait_for(lambda: next((j for j in (first, second) if said(workload(world, j), "Evicted")), None), 90,
                      "Kueue evicts a team-a job")
    assert conditions(workload(world, victim))["Preempted"]["reason"] == "InCohortReclamation"
    requeued = reconciled_until(world, victim, GangPhase.QUEUED, attempt=1)
    entry = requeued.transitions.get(phase=GangPhase.QUEUED, attempt=1)
    assert entry.reason == "Preempted"
    assert entry.source == f"Workload {world.namespace}/{world.names(victim).gang_name}"
    assert (f"preempted by Kueue for job {world.namespace}/{reclaimer.name} (#{reclaimer.id}, queue {team_b}, "
            f"Workload UID {wl_uid}): this job's queue was borrowing, and the preemptor's queue took back its own "
            "quota (Kueue: InCohortReclamation") in entry.message, entry.message

    def reclaimed():
        # The victim's passes suspend its Jobs and, once its pods are gone, clear its reservation (as the watch and
        # the resync run them); only then does Kueue admit the reclaimer.
        for job in (victim, reclaimer):
            result = world.reconcile(job)
            assert result.error is None, result.message
        row = fresh(reclaimer)
        return row.phase == GangPhase.RUNNING and row

    wait_for(reclaimed, 180, "the team-b job Running on its reclaimed quota", interval=1)
    assert len(world.gang(reclaimer, POD)) == 2
