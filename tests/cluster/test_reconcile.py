"""Reconcile against the real control plane: stale gang objects, changes, long names, cleanup, a real gang."""
from __future__ import annotations

import re
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.backends import coscheduling_v1alpha1, k8s_workload_v1alpha2, kai_v2alpha2, registry, volcano_v1beta1
from scheduling.choices import GangPhase
from scheduling.constants import LABEL_JOB_UID
from scheduling.kube import objects
from scheduling.kube.objects import JOB, POD, SERVICE
from scheduling.models import GangJob, QueuePolicy
from scheduling.reconcile import ownership, resync
from scheduling.services.jobs import lifecycle as job_service

from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]

MUTABLE = {
    "kai": (kai_v2alpha2.POD_GROUP, "kai-scheduler"),
    "coscheduling": (coscheduling_v1alpha1.POD_GROUP, "scheduler-plugins-scheduler"),
    "volcano": (volcano_v1beta1.POD_GROUP, "volcano"),
}
V1A2_WORKLOAD, V1A2_POD_GROUP = k8s_workload_v1alpha2.WORKLOAD, k8s_workload_v1alpha2.POD_GROUP


def stale_copy(want: dict, labels: dict, **spec) -> dict:
    """A gang object as an earlier pass might have left it (it died before recording the UID): same name, labels
    and gangweb's creation mark (reconcile/ownership.py `creation_mark`), different spec."""
    return ownership.stamp({"apiVersion": want["apiVersion"], "kind": want["kind"],
                            "metadata": {"name": want["metadata"]["name"], "namespace": want["metadata"]["namespace"],
                                         "labels": labels}, "spec": {**want["spec"], **spec}}, labels[LABEL_JOB_UID])


@pytest.mark.parametrize("family", sorted(MUTABLE))
def test_a_stale_podgroup_with_min_member_4_is_updated_in_place_to_3(world, family):
    ref, scheduler = MUTABLE[family]
    job = world.submit(backend=family, replicas=3)
    spec = world.names(job)
    backend = registry.select(family, set(world.cluster.served_apis))()
    [want] = backend.build_gang_objects(spec)
    stale = objects.create(world.api, ref, stale_copy(want, spec.labels, minMember=4))

    result = world.reconcile(job)

    assert result.error is None, result.message
    pg = world.get(ref, spec.gang_name)
    assert pg["spec"]["minMember"] == 3
    assert pg["metadata"]["uid"] == stale["metadata"]["uid"]  # updated, not recreated
    assert f"update PodGroup {world.namespace}/{spec.gang_name}: minMember" in result.actions
    [owner] = world.gang(job, JOB)
    assert owner["spec"]["completions"] == owner["spec"]["parallelism"] == 3
    assert owner["spec"]["template"]["spec"]["schedulerName"] == scheduler
    assert len(world.gang(job, SERVICE)) == 1
    assert world.reconcile(job).actions == []  # idempotent: a second pass changes nothing


@pytest.mark.k8s_version("1.36")
def test_a_stale_v1alpha2_podgroup_is_replaced_and_pods_point_at_the_new_one(world):
    job = world.submit(backend="k8s-workload", replicas=3)
    spec = world.names(job)
    backend = k8s_workload_v1alpha2.K8sWorkloadV1alpha2()
    workload, pod_group = backend.build_gang_objects(spec)
    objects.create(world.api, V1A2_WORKLOAD, stale_copy(workload, spec.labels, podGroupTemplates=[
        {"name": "gang", "schedulingPolicy": {"gang": {"minCount": 4}}}]))
    old = objects.create(world.api, V1A2_POD_GROUP, stale_copy(pod_group, spec.labels,
                                                                 schedulingPolicy={"gang": {"minCount": 4}}))

    result = world.reconcile(job)

    assert result.error is None, result.message
    job.refresh_from_db()
    assert job.gang_generation == 1
    new_name = world.names(job).gang_name
    assert new_name != spec.gang_name
    def old_gone():  # its protection finalizer goes once no live pod references it (a later pass, at worst)
        if world.get(V1A2_POD_GROUP, spec.gang_name) is None:
            return True
        world.reconcile(job)
        return False

    wait_for(old_gone, 30, "the old PodGroup to be gone")
    assert world.get(V1A2_WORKLOAD, spec.gang_name) is None
    [pg] = world.gang(job, V1A2_POD_GROUP)
    assert pg["metadata"]["name"] == new_name and pg["metadata"]["uid"] != old["metadata"]["uid"]
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    [wl] = world.gang(job, V1A2_WORKLOAD)
    assert wl["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    pods = wait_for(lambda: len(p := world.gang(job, POD)) == 3 and p, 60, "3 pods")
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {new_name}


@pytest.mark.parametrize("family", ["kai", "k8s-workload"])
def test_an_object_of_another_job_under_our_name_is_never_adopted(world, family):
    job = world.submit(backend=family, replicas=3)
    spec = world.names(job)
    backend = registry.select(family, set(world.cluster.served_apis))()
    want, ref = backend.build_gang_objects(spec)[0], backend.gang_kinds[0]  # v1alpha2: the Workload
    other = {**spec.labels, LABEL_JOB_UID: str(uuid.uuid4())}
    foreign = objects.create(world.api, ref, stale_copy(want, other))

    result = world.reconcile(job)

    assert result.error is not None and result.reason == "NameConflict"
    job.refresh_from_db()
    assert job.phase_reason == "NameConflict" and "not adopted" in job.phase_message
    assert world.get(ref, spec.gang_name)["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]
    assert world.gang(job, JOB) == []  # no owners without our gang object
    assert job.attempts.filter(outcome="TerminalError", reason="NameConflict").exists()


@pytest.mark.parametrize("family", ["kai", "volcano"])
def test_changing_queue_and_priority_changes_the_podgroup(world, family):
    ref, _ = MUTABLE[family]
    job = world.submit(backend=family, replicas=2)
    world.reconcile(job)
    name = world.names(job).gang_name
    assert world.get(ref, name)["spec"]["queue"] == "team-a"

    job_service.update(world.user, GangJob.objects.get(pk=job.pk),
                       {"queue": "team-b", "priority_class_name": "inference"})
    result = world.reconcile(job)

    pg = world.get(ref, name)
    assert (pg["spec"]["queue"], pg["spec"]["priorityClassName"]) == ("team-b", "inference")
    assert result.actions == [f"update PodGroup {world.namespace}/{name}: priorityClassName, queue"]


def test_a_60_character_job_name_gives_valid_objects_and_label_values(world):
    name = "l" * 30 + "-" + "n" * 29
    job = world.submit(backend="k8s-workload", replicas=2, name=name)
    result = world.reconcile(job)
    assert result.error is None, result.message
    pods = wait_for(lambda: len(p := world.gang(job, POD)) == 2 and p, 60, "2 pods")
    everything = [*world.gang(job, world.k8s.WORKLOAD), *world.gang(job, world.k8s.POD_GROUP), *world.gang(job, JOB),
                  *world.gang(job, SERVICE), *pods]
    assert len(everything) == 6  # Workload, PodGroup, Job, Service, 2 pods
    label_value = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
    for obj in everything:
        assert len(obj["metadata"]["name"]) <= 63
        for value in obj["metadata"]["labels"].values():
            assert len(value) <= 63 and label_value.match(value), value
        assert obj["metadata"]["labels"]["gangweb.io/job"] == name


@pytest.mark.parametrize("exit_code, phase, condition", [("0", GangPhase.SUCCEEDED, "Complete"),
                                                         ("1", GangPhase.FAILED, "Failed")])
def test_after_the_pods_finish_the_gang_object_is_gone_within_one_resync(world, exit_code, phase, condition):
    job = world.submit(backend="k8s-workload", replicas=2, annotations={"gangweb.io/sim-exit": exit_code})
    world.reconcile(job)
    spec = world.names(job)

    def owner_finished():
        return all(any(c["type"] == condition and c["status"] == "True"
                       for c in (o.get("status") or {}).get("conditions") or []) for o in world.gang(job, JOB))

    wait_for(owner_finished, 90, f"the Indexed Job to be {condition}")
    wait_for(lambda: all(p["status"].get("phase") in ("Succeeded", "Failed") for p in world.gang(job, POD)),
             60, "no live pod")

    stats = resync.resync_cluster(world.cluster)

    job.refresh_from_db()
    assert job.phase == phase and job.finished_at is not None
    assert world.get(world.k8s.POD_GROUP, spec.gang_name) is None
    # The root (the Workload) is deleted with propagation Orphan, so the Indexed Job kept for the retention
    # survives it: the garbage collector removes its orphan finalizer first, a moment after the DELETE.
    wait_for(lambda: world.get(world.k8s.WORKLOAD, spec.gang_name) is None, 30, "the Workload gone")
    assert world.gang(job, SERVICE) == []
    assert len(world.gang(job, JOB)) == 1  # the Indexed Job stays for inspection; it holds no quota
    assert stats["failed"] == 0
    resync.resync_cluster(world.cluster)
    job.refresh_from_db()
    assert job.cleaned_up_at is not None
    assert list(job.transitions.values_list("phase", flat=True))[-1] == phase


@pytest.mark.parametrize("family", ["k8s-workload", "volcano"])
def test_cancel_removes_every_object_of_the_job(world, family):
    job = world.submit(backend=family, replicas=2)
    world.reconcile(job)
    wait_for(lambda: len(world.gang(job, POD)) == 2, 60, "2 pods")
    job_service.cancel(world.user, GangJob.objects.get(pk=job.pk))

    def converged():
        world.reconcile(job)
        job.refresh_from_db()
        return job.cleaned_up_at is not None

    wait_for(converged, 90, "every object of the job to be deleted", interval=1)
    assert job.phase == GangPhase.CANCELLED
    backend = registry.by_name(job.backend_plugin)()
    for ref in [*backend.gang_kinds, JOB, SERVICE, POD]:
        assert world.gang(job, ref) == [], ref.kind


def test_a_3_pod_gang_with_room_for_2_stays_pending_until_capacity_is_added(world, kube_cluster):
    pool = world.namespace[-20:].strip("-")
    nodes = [f"gang-{pool}-{i}" for i in range(3)]
    for node in nodes[:2]:
        kube_cluster.add_node(node, gpus=8, labels={"gangweb.io/test-pool": pool})
    try:
        job = world.submit(backend="k8s-workload", replicas=3, node_selector={"gangweb.io/test-pool": pool},
                           containers=[{"name": "main", "image": "img", "resources": {
                               "requests": {"cpu": "1", "nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}])
        world.reconcile(job)
        spec = world.names(job)

        def unschedulable():
            pg = world.get(world.k8s.POD_GROUP, spec.gang_name)
            return any(c["type"] == world.k8s.SCHEDULED and c["status"] == "False"
                       for c in (pg.get("status") or {}).get("conditions") or [])

        wait_for(unschedulable, 60, f"{world.k8s.SCHEDULED}=False")
        pods = world.gang(job, POD)
        assert len(pods) == 3 and not any(p["spec"].get("nodeName") for p in pods)  # wholly pending
        world.reconcile(job)
        job.refresh_from_db()
        assert job.phase == GangPhase.QUEUED and job.phase_reason == "Unschedulable"
        assert job.observed["gang"]["admitted"] is False
        assert (job.observed["pod_counts"]["created"], job.observed["pod_counts"]["bound"]) == (3, 0)

        kube_cluster.add_node(nodes[2], gpus=8, labels={"gangweb.io/test-pool": pool})
        wait_for(lambda: [(p.get("status") or {}).get("phase") for p in world.gang(job, POD)] == ["Running"] * 3,
                 120, "all 3 pods Running")
        world.reconcile(job)
        job.refresh_from_db()
        assert job.phase == GangPhase.RUNNING
        assert job.observed["pod_counts"]["running"] == 3 and job.observed["gang"]["admitted"] is True
        assert len({p["spec"]["nodeName"] for p in world.gang(job, POD)}) == 3
    finally:
        for node in nodes:
            kube_cluster.remove_node(node)


def test_resync_lists_each_kind_once_whatever_the_number_of_jobs(world):
    kinds = len(registry.gang_kinds(set(world.cluster.served_apis))) + 3  # + Jobs, Services, Pods
    counts = []
    for _ in range(2):
        for _ in range(3):
            world.reconcile(world.submit(backend="kai", replicas=1))
        resync.resync_cluster(world.cluster)  # records what the cluster says of the new jobs
        objects.requests.reset()
        with CaptureQueriesContext(connection) as queries:
            stats = resync.resync_cluster(world.cluster)
        assert stats["acted"] == 0 and stats["failed"] == 0
        assert all(verb.startswith("LIST ") and n == 1 for verb, n in objects.requests.counts.items())
        # Savepoints are the test's transaction around each pass's (empty) atomic block; outside tests none is sent.
        sql = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
        counts.append((stats["jobs"], objects.requests.total(), len(sql)))
    # In-sync jobs are neither locked nor written: the SQL queries of a resync do not grow with its jobs either.
    assert counts[0][:2] == (3, kinds) and counts[1][:2] == (6, kinds)
    # ids, timelines, rows (one chunk), orphan check, the attempt row; the resync lease: claimed, its cursor read
    # (where the last bounded run stopped), released; and the objects a moved job left here (reconcile/stranded.py).
    assert counts[0][2] == counts[1][2] == 9


def test_a_resync_reads_each_namespaces_limitranges_once_however_long_it_takes(world, monkeypatch):
    from django.core.cache import cache

    from scheduling.kube import limit_ranges

    for _ in range(3):
        world.reconcile(world.submit(backend="kai", replicas=1))
    resync.resync_cluster(world.cluster)
    # Nothing outlives a read in the cache, as in a resync of 10,000 jobs that takes longer than its minute.
    monkeypatch.setattr(limit_ranges, "CACHE_SECONDS", 0)
    cache.delete(limit_ranges.cache_key(world.cluster.pk, world.namespace))  # what the reconciles cached before
    objects.requests.reset()
    stats = resync.resync_cluster(world.cluster)
    assert (stats["jobs"], stats["acted"], stats["failed"]) == (3, 0, 0)
    assert objects.requests.counts.get("LIST core/limitranges") == 1  # one namespace, read once for its 3 jobs


def test_the_registered_local_cluster_takes_a_sample_job_at_once(kube_cluster, kube_namespace, admin_user, enqueued):
    from scheduling.services.clusters import local as local_cluster

    cluster = local_cluster.register(kube_cluster.kubeconfig)
    expected = registry.select("k8s-workload", set(cluster.served_apis)).name
    assert cluster.health == "Healthy" and expected in cluster.available_backends
    assert QueuePolicy.objects.get(name="default").allowed_namespaces == ["default"]
    demo = QueuePolicy.objects.get(name="kueue-demo")  # and the Kueue demo, its limit held by Kueue (test_kueue_demo)
    assert (demo.parent.name, list(demo.clusters.all())) == ("kueue-pool", [cluster])
    QueuePolicy.objects.filter(name="default").update(allowed_namespaces=[kube_namespace])  # this test's namespace
    job, _ = job_service.submit(admin_user, {"name": "first", "namespace": kube_namespace,
                                             "template": "sample-gang", "queue": "default", "cluster": "local"})
    result = resync.job_reconcile.run_pass(GangJob.objects.select_related("cluster", "queue").get(pk=job.pk))
    assert result.error is None, result.message
    job.refresh_from_db()
    assert job.phase == GangPhase.DISPATCHED and job.backend_plugin == expected


def test_a_bulk_batch_of_new_jobs_lists_none_of_their_objects_and_only_creates(world):
    batch = [world.submit(backend="kai", replicas=1) for _ in range(5)]
    objects.requests.reset()
    counts = resync.job_reconcile.reconcile_many([j.pk for j in batch])
    assert counts == {"ok": 5, "failed": 0, "requeued": 0}
    # No snapshot: the batch recorded their backends, so nothing gangweb made of them can exist yet
    # (reconcile/jobs/batch.py). Only the namespace's LimitRanges (kube/limit_ranges.py, cached a minute per cluster
    # and namespace: their default requests count in minResources), then PodGroup, Indexed Job, Service per job.
    assert dict((verb, n) for verb, n in objects.requests.counts.items() if verb.startswith("LIST ")) == {
        "LIST core/limitranges": 1}
    assert sum(n for verb, n in objects.requests.counts.items() if verb.startswith("CREATE ")) == 5 * 3
    assert set(GangJob.objects.filter(pk__in=[j.pk for j in batch]).values_list("phase", flat=True)) == {
        GangPhase.DISPATCHED}
