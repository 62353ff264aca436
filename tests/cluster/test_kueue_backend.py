"""The Kueue backend (kueue-v1beta2) through gangweb's reconciler against the real control plane with the Kueue
v0.17.0 manager running (issue 37 item 3): a 2-pod-set gang (1 launcher + 2 workers, 1 GPU each pod) waits Queued
with no pod and Kueue's own reason while its ClusterQueue has 2 GPUs, is admitted whole and runs whole once it has
3; a cancel deletes the Workload only after the pods, and a waiting job is then admitted (the quota is freed); an
evicted Workload (Kueue preempts it for a higher-priority job) has its Jobs suspended, its pods go, the job is
Queued again with Kueue's reason on its timeline, and it is admitted and runs again when room returns.

The queue objects are made here as the queue sync names them (docs/backends.md, KUEUE names): the ResourceFlavor
`gangweb-default`, and per test a ClusterQueue and a LocalQueue named after the test's queue policy."""
from __future__ import annotations

import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from scheduling.backends.kueue_v1beta2 import WORKLOAD
from scheduling.choices import GangPhase
from scheduling.kube import objects
from scheduling.kube.objects import JOB, POD
from scheduling.models import GangJob, QueuePolicy
from scheduling.services.jobs import lifecycle as job_service
from tests import builders

from .conftest import POOL_LABEL
from .reconcile_support import make_world, reconciled_until, wait_for

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
def kueue_queue(kueue_world):
    """`make(gpus, preemption=None) -> queue name`: a gangweb queue policy granted the test's namespace, with the
    Kueue objects the queue sync would write for it: ClusterQueue (cpu, memory, GPUs in flavor gangweb-default,
    `gpus` nominal), LocalQueue in the namespace. Deleted after the test."""
    custom = client.CustomObjectsApi(kueue_world.api)
    made = []
    try:
        custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR, "labels": {"app.kubernetes.io/managed-by": "gangweb"}}, "spec": {}})
    except ApiException as exc:
        if exc.status != 409:
            raise

    def make(gpus: int, preemption: dict | None = None) -> str:
        name = f"kq-{uuid.uuid4().hex[:8]}"
        builders.make_queue(name, allowed_namespaces=[kueue_world.namespace])
        spec = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": kueue_world.namespace}},
                "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{
                    "name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": "64"},
                                                  {"name": "memory", "nominalQuota": "256Gi"},
                                                  {"name": GPU, "nominalQuota": str(gpus)}]}]}]}
        if preemption:
            spec["preemption"] = preemption
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}
        try:
            custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", body)
        except ApiException as exc:  # made by the queue sync already: this test's quota on it
            if exc.status != 409:
                raise
            have = custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)
            custom.replace_cluster_custom_object(GROUP, VERSION, "clusterqueues", name, {
                **body, "metadata": {"name": name, "resourceVersion": have["metadata"]["resourceVersion"]}})
        made.append(name)
        try:
            custom.create_namespaced_custom_object(GROUP, VERSION, kueue_world.namespace, "localqueues", {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": name},
                "spec": {"clusterQueue": name}})
        except ApiException as exc:
            if exc.status != 409:
                raise
        return name

    yield make
    for name in made:
        try:
            custom.delete_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def set_gpus(world, queue: str, gpus: int) -> None:
    """The ClusterQueue's nominal GPU quota, changed by hand (as the queue sync would after a policy change)."""
    custom = client.CustomObjectsApi(world.api)
    cq = custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", queue)
    flavor = cq["spec"]["resourceGroups"][0]["flavors"][0]
    for res in flavor["resources"]:
        if res["name"] == GPU:
            res["nominalQuota"] = str(gpus)
    custom.replace_cluster_custom_object(GROUP, VERSION, "clusterqueues", queue, cq)


def submit_gang(world, queue: str, priority_class: str = "", annotations: dict | None = None) -> GangJob:
    """A 2-pod-set job on the kueue backend: 1 launcher + 2 workers, 1 GPU each pod (3 GPUs), on this test's node
    (`annotations` on the pods: `gangweb.io/sim-exit: "0"` makes kwok end them successfully)."""
    containers = [builders.container(cpu="100m", memory="64Mi", gpu=1)]
    selector = {POOL_LABEL: world.namespace}
    sets = [builders.pod_set("launcher", replicas=1, containers=containers),
            builders.pod_set("worker", replicas=2, containers=containers)]
    for ps in sets:
        ps["template"]["spec"]["nodeSelector"] = selector
        if annotations:
            ps["template"]["metadata"]["annotations"] = dict(annotations)
    extra = {"priorityClassName": priority_class} if priority_class else {}
    version = builders.make_template(name=f"t-{uuid.uuid4().hex[:8]}", backend="kueue", pod_sets=sets, **extra)
    body = builders.submit_body(version, QueuePolicy.objects.get(name=queue), world.cluster,
                                name=f"job-{uuid.uuid4().hex[:6]}", namespace=world.namespace)
    job, _ = job_service.submit(world.user, body)
    return GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)


def workload(world, job) -> dict | None:
    return world.get(WORKLOAD, world.names(job).gang_name)


def conditions(wl: dict | None) -> dict[str, dict]:
    return {c["type"]: c for c in ((wl or {}).get("status") or {}).get("conditions") or []}


def said(wl, kind: str, status: str = "True") -> bool:
    return conditions(wl).get(kind, {}).get("status") == status


def pods(world, job) -> list[dict]:
    return world.gang(job, POD)


def running(world, job) -> list[dict]:
    return [p for p in pods(world, job) if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]


def owner_jobs(world, job) -> list[dict]:
    return world.gang(job, JOB)


def fresh(job) -> GangJob:
    return GangJob.objects.get(pk=job.pk)


def test_a_two_pod_set_gang_waits_with_no_pod_and_kueues_reason_then_runs_whole(kueue_world, kueue_queue):
    world = kueue_world
    queue = kueue_queue(gpus=2)
    job = submit_gang(world, queue)

    assert world.reconcile(job).error is None
    assert fresh(job).backend_plugin == "kueue-v1beta2"
    wl = wait_for(lambda: said(w := workload(world, job), "QuotaReserved", "False") and w, 60,
                  "Kueue's QuotaReserved=False on the Workload")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("launcher", 1), ("worker", 2)]
    assert wl["spec"]["queueName"] == queue
    pending = conditions(wl)["QuotaReserved"]
    assert pending["reason"] == "Pending"
    assert f"insufficient quota for {GPU} in flavor {FLAVOR}" in pending["message"]
    assert all(j["spec"]["suspend"] is True for j in owner_jobs(world, job)) and len(owner_jobs(world, job)) == 2

    queued = reconciled_until(world, job, GangPhase.QUEUED)
    assert queued.phase_reason == "Pending"
    assert f"insufficient quota for {GPU} in flavor {FLAVOR}" in queued.phase_message
    assert pods(world, job) == []  # nothing of the gang exists while it waits
    entry = queued.transitions.get(phase=GangPhase.QUEUED, attempt=0)
    assert entry.reason == "Pending" and entry.source == f"Workload {world.namespace}/{wl['metadata']['name']}"

    set_gpus(world, queue, 3)
    wait_for(lambda: said(workload(world, job), "Admitted"), 90, "Kueue admits the Workload")
    seen_partial = []

    def whole_and_running():
        result = world.reconcile(job)
        assert result.error is None, result.message
        row, now = fresh(job), running(world, job)
        if row.phase == GangPhase.RUNNING and len(now) < 3:
            seen_partial.append(len(now))
        return row.phase == GangPhase.RUNNING and row

    row = wait_for(whole_and_running, 120, "the job Running", interval=1)
    assert seen_partial == []  # never Running with part of the gang
    assert len(running(world, job)) == 3
    assert all(not j["spec"].get("suspend") for j in owner_jobs(world, job))
    assert row.transitions.get(phase=GangPhase.RUNNING, attempt=0).message == "3 of 3 pods running"
    assert sorted(p["metadata"]["labels"]["kueue.x-k8s.io/podset"] for p in running(world, job)) == [
        "launcher", "worker", "worker"]


def test_cancel_deletes_the_workload_only_after_the_pods_and_the_waiting_job_is_then_admitted(kueue_world,
                                                                                               kueue_queue):
    world = kueue_world
    queue = kueue_queue(gpus=3)
    first = submit_gang(world, queue)
    reconciled_until(world, first, GangPhase.RUNNING)
    second = submit_gang(world, queue)
    assert world.reconcile(second).error is None
    wait_for(lambda: said(workload(world, second), "QuotaReserved", "False"), 60, "the second job waiting in Kueue")
    assert pods(world, second) == []

    job_service.cancel(world.user, fresh(first))
    result = world.reconcile(first)
    assert result.error is None or result.requeue_after, result.message
    # The first cancel pass deleted the Jobs; the pods were still there, so the Workload (the quota) stays.
    assert workload(world, first) is not None
    assert any(a.startswith("Workload kept until the pods are gone") for a in result.actions), result.actions
    assert not said(workload(world, second), "Admitted")

    def cancelled():
        world.reconcile(first)
        row = fresh(first)
        if workload(world, first) is None:
            assert pods(world, first) == [], "the Workload went before the pods"
        return row.phase == GangPhase.CANCELLED and row

    wait_for(cancelled, 120, "the first job Cancelled", interval=1)
    assert workload(world, first) is None and pods(world, first) == [] and owner_jobs(world, first) == []

    wait_for(lambda: said(workload(world, second), "Admitted"), 90, "Kueue admits the waiting job (quota freed)")
    reconciled_until(world, second, GangPhase.RUNNING)
    assert len(running(world, second)) == 3


def test_an_evicted_workload_suspends_its_jobs_goes_back_to_queued_with_kueues_reason_and_runs_again(
        kueue_world, kueue_queue, priority_classes):
    world = kueue_world
    queue = kueue_queue(gpus=3, preemption={"withinClusterQueue": "LowerPriority"})
    low, high = priority_classes(100), priority_classes(1000)
    victim = submit_gang(world, queue, priority_class=low)
    reconciled_until(world, victim, GangPhase.RUNNING)
    wl = workload(world, victim)
    assert (wl["spec"]["priorityClassRef"], wl["spec"]["priority"]) == (
        {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": low}, 100)

    urgent = submit_gang(world, queue, priority_class=high)
    assert world.reconcile(urgent).error is None
    evicted = wait_for(lambda: said(w := workload(world, victim), "Evicted") and w, 90, "Kueue evicts the victim")
    assert conditions(evicted)["Evicted"]["reason"] == "Preempted"
    preemptor_uid = workload(world, urgent)["metadata"]["uid"]
    assert preemptor_uid in conditions(evicted)["Preempted"]["message"]

    # Its Jobs are suspended, the pods go, then the reservation is cleared and the job is Queued again.
    requeued = reconciled_until(world, victim, GangPhase.QUEUED, attempt=1)
    assert all(j["spec"]["suspend"] is True for j in owner_jobs(world, victim))
    wait_for(lambda: pods(world, victim) == [] or None, 90, "the victim's pods gone")
    entry = requeued.transitions.get(phase=GangPhase.QUEUED, attempt=1)
    assert entry.reason == "Preempted" and preemptor_uid in entry.message
    assert entry.source == f"Workload {world.namespace}/{evicted['metadata']['name']}"

    def cleared():
        world.reconcile(victim)
        w = workload(world, victim)
        return said(w, "QuotaReserved", "False") and not (w.get("status") or {}).get("admission") and w

    after = wait_for(cleared, 90, "the victim's reservation cleared by gangweb")
    assert conditions(after)["Requeued"]["reason"] == "Preempted"
    reconciled_until(world, urgent, GangPhase.RUNNING)
    assert fresh(victim).phase == GangPhase.QUEUED and pods(world, victim) == []

    # Room returns: the urgent job is cancelled, the victim is admitted again and runs whole in a new attempt.
    job_service.cancel(world.user, fresh(urgent))
    wait_for(lambda: (world.reconcile(urgent), fresh(urgent).phase == GangPhase.CANCELLED)[1], 120,
             "the urgent job Cancelled", interval=1)
    reconciled_until(world, victim, GangPhase.RUNNING, attempt=1)
    assert len(running(world, victim)) == 3
    assert objects.get(world.api, WORKLOAD, world.namespace, evicted["metadata"]["name"])["metadata"]["uid"] == \
        evicted["metadata"]["uid"]  # the same Workload, requeued by Kueue, not a replacement


def queued_since(enqueued, start: int, job) -> bool:
    """True when a pass of `job` was queued after the first `start` entries of `enqueued`."""
    return [job.pk] in enqueued[start:]


@pytest.mark.django_db(transaction=True)  # the watch observes from its own threads
def test_the_watch_queues_a_pass_when_kueue_admits_and_when_it_evicts(kueue_world, kueue_queue, enqueued,
                                                                      priority_classes):
    """Acting stays with the reconciler, but the watch sees Kueue's admission (the Jobs must be un-suspended) and its
    eviction (they must be suspended) and queues the job's pass at once (`watching.backend_wants_pass`), not at the
    resync's turn."""
    from scheduling.reconcile import watching

    world = kueue_world
    queue = kueue_queue(gpus=3, preemption={"withinClusterQueue": "LowerPriority"})
    w = watching.watcher_for(world.cluster, api=world.api).start()
    try:
        assert w.wait_synced(30)
        job = submit_gang(world, queue, priority_class=priority_classes(100))
        start = len(enqueued)  # the submit's own dispatch is before this
        assert world.reconcile(job).error is None
        wait_for(lambda: said(workload(world, job), "Admitted"), 90, "Kueue admits the Workload")
        wait_for(lambda: queued_since(enqueued, start, job), 60, "the watch queues the job's pass on the admission")
        assert all(j["spec"]["suspend"] is True for j in owner_jobs(world, job))  # the pass acts, not the watch
        reconciled_until(world, job, GangPhase.RUNNING)

        start = len(enqueued)  # running whole and admitted: nothing asks for a pass of it from here
        urgent = submit_gang(world, queue, priority_class=priority_classes(1000))
        assert world.reconcile(urgent).error is None
        wait_for(lambda: said(workload(world, job), "Evicted"), 90, "Kueue evicts the job")
        wait_for(lambda: queued_since(enqueued, start, job), 60, "the watch queues the job's pass on the eviction")
    finally:
        w.stop()
