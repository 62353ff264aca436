"""The k8s-workload family across Kubernetes versions, through gangweb's reconciler against the real control plane:
on 1.37 (v1beta1) a hand-edited minCount is patched back in place, an immutable change replaces the gang under new
names, and the protection finalizer is left to kube-controller-manager; on 1.36 (v1alpha2) the same minCount edit
replaces; a job pinned to a version the cluster stopped serving moves to the served one (APIVersionChanged)."""
from __future__ import annotations

import pytest
from kubernetes import client

import localcluster
from scheduling.backends.k8s_workload_v1alpha2 import K8sWorkloadV1alpha2
from scheduling.backends.k8s_workload_v1beta1 import K8sWorkloadV1beta1
from scheduling.choices import GangPhase, ReconcileOutcome
from scheduling.kube import objects
from scheduling.kube.objects import JOB, POD
from scheduling.models import Cluster, GangJob
from scheduling.reconcile import jobs
from scheduling.services.jobs import lifecycle as job_service
from tests import builders

from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
PROTECTION = "scheduling.k8s.io/podgroup-protection"


def small(world, **extra) -> GangJob:
    return world.submit(backend="k8s-workload", replicas=2, containers=[builders.container(cpu="100m", memory="64Mi")],
                        **extra)


def running(world, job) -> list[dict]:
    return [p for p in world.gang(job, POD) if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]


@pytest.mark.k8s_version("1.37")
def test_v1beta1_is_chosen_by_discovery_and_a_hand_edited_min_count_is_patched_back_in_place(world):
    job = small(world)
    assert world.reconcile(job).error is None
    job.refresh_from_db()
    assert job.backend_plugin == "k8s-workload-v1beta1"
    name = world.names(job).gang_name
    pods = wait_for(lambda: len(p := running(world, job)) == 2 and p, 90, "2 pods Running")
    pg = world.get(K8sWorkloadV1beta1.POD_GROUP, name)
    wl = world.get(K8sWorkloadV1beta1.WORKLOAD, name)
    assert pg["spec"]["workloadRef"] == {"workloadName": name, "templateName": "gang"}
    assert pg["metadata"]["finalizers"] == [PROTECTION]

    # Someone lowers the gang minimum by hand, on both objects.
    objects.merge_patch(world.api, K8sWorkloadV1beta1.POD_GROUP, world.namespace, name,
                        {"spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}})
    template = wl["spec"]["podGroupTemplates"][0]
    objects.merge_patch(world.api, K8sWorkloadV1beta1.WORKLOAD, world.namespace, name, {"spec": {"podGroupTemplates": [
        {**template, "schedulingPolicy": {"gang": {"minCount": 1}}}]}})
    result = world.reconcile(job)

    assert result.error is None, result.message
    assert result.actions == [
        f"update Workload {world.namespace}/{name}: podGroupTemplates[gang].schedulingPolicy.gang.minCount",
        f"update PodGroup {world.namespace}/{name}: schedulingPolicy.gang.minCount"]
    pg_after = world.get(K8sWorkloadV1beta1.POD_GROUP, name)
    wl_after = world.get(K8sWorkloadV1beta1.WORKLOAD, name)
    assert (pg_after["metadata"]["uid"], wl_after["metadata"]["uid"]) == (pg["metadata"]["uid"], wl["metadata"]["uid"])
    assert pg_after["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    assert wl_after["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    assert sorted(p["metadata"]["uid"] for p in running(world, job)) == sorted(p["metadata"]["uid"] for p in pods)
    job.refresh_from_db()
    assert job.gang_generation == 0
    assert world.reconcile(job).actions == []  # in sync now


@pytest.mark.k8s_version("1.37")
def test_v1beta1_priority_class_change_replaces_the_gang_under_new_names_and_the_pods_follow(world, priority_classes):
    first, second = priority_classes(100), priority_classes(101)
    job = world.submit(backend="k8s-workload", replicas=2, containers=[builders.container(cpu="100m", memory="64Mi")],
                       priorityClassName=first)
    assert world.reconcile(job).error is None
    old = world.names(job)
    wait_for(lambda: len(running(world, job)) == 2, 90, "2 pods Running")
    pg = world.get(K8sWorkloadV1beta1.POD_GROUP, old.gang_name)
    assert (pg["spec"]["priorityClassName"], pg["spec"]["priority"]) == (first, 100)
    assert world.get(K8sWorkloadV1beta1.WORKLOAD, old.gang_name)["spec"]["podGroupTemplates"][0][
        "priorityClassName"] == first

    job_service.update(world.user, GangJob.objects.get(pk=job.pk), {"priority_class_name": second})
    result = world.reconcile(job)

    assert result.error is None, result.message
    assert result.actions[0].startswith("replace gang: immutable drift in Workload.spec.podGroupTemplates, "
                                        "PodGroup.spec.priorityClassName")
    new = world.names(job)
    assert new.gang_name != old.gang_name and new.pod_sets[0].owner_name != old.pod_sets[0].owner_name
    pg_new = world.get(K8sWorkloadV1beta1.POD_GROUP, new.gang_name)
    assert pg_new["spec"]["priorityClassName"] == second and pg_new["metadata"]["uid"] != pg["metadata"]["uid"]
    pods = wait_for(lambda: len(p := running(world, job)) == 2 and p, 90, "2 new pods Running")
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {new.gang_name}
    assert {p["spec"]["priorityClassName"] for p in pods} == {second}


@pytest.mark.k8s_version("1.37")
def test_v1beta1_leaves_the_protection_finalizer_to_the_controller_while_any_pod_of_the_group_can_run(world):
    """The early-strip race (upstream review of KubeRay's plugin): a PodGroup is deleted while a pod of its group
    still runs, here one gangweb does not own (a debugging pod someone pointed at the group), so gangweb's own view
    says "no live pods". Stripping `podgroup-protection` then would race kube-controller-manager's
    podgroup-protection-controller; gangweb must leave it, and the controller removes it once the pod finished."""
    job = small(world)
    assert world.reconcile(job).error is None
    name = world.names(job).gang_name
    wait_for(lambda: len(running(world, job)) == 2, 90, "2 pods Running")
    core = client.CoreV1Api(world.api)
    core.create_namespaced_pod(world.namespace, {"metadata": {"name": "visitor"}, "spec": {
        "schedulingGroup": {"podGroupName": name}, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "registry.invalid/debug:1",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}})
    wait_for(lambda: core.read_namespaced_pod("visitor", world.namespace).status.phase == "Running", 60,
             "the visitor Running")
    job_service.cancel(world.user, GangJob.objects.get(pk=job.pk))

    def own_pods_gone():
        world.reconcile(job)
        return not world.gang(job, POD)

    wait_for(own_pods_gone, 90, "the job's own pods deleted", interval=1)
    for _ in range(3):  # passes while only the visitor holds the group: none may strip the finalizer
        actions = world.reconcile(job).actions
        assert not any(a.startswith("release finalizers") for a in actions), actions
        left = world.get(K8sWorkloadV1beta1.POD_GROUP, name)
        assert left is not None and left["metadata"].get("deletionTimestamp")
        assert left["metadata"]["finalizers"] == [PROTECTION], "stripped while a pod of the group could run"
    assert GangJob.objects.get(pk=job.pk).cleaned_up_at is None  # still waiting for it

    core.patch_namespaced_pod("visitor", world.namespace,
                              {"metadata": {"annotations": {localcluster.SIM_EXIT_ANNOTATION: "0"}}})
    wait_for(lambda: world.get(K8sWorkloadV1beta1.POD_GROUP, name) is None, 90,
             "the PodGroup removed by the protection controller once the visitor finished")

    def cleaned():
        world.reconcile(job)
        return GangJob.objects.get(pk=job.pk).cleaned_up_at is not None

    wait_for(cleaned, 60, "the cancel complete", interval=1)


@pytest.mark.k8s_version("1.36")
def test_v1alpha2_min_count_edit_still_replaces(world):
    job = small(world)
    assert world.reconcile(job).error is None
    job.refresh_from_db()
    assert job.backend_plugin == "k8s-workload-v1alpha2"
    old = world.names(job)
    pg = world.get(K8sWorkloadV1alpha2.POD_GROUP, old.gang_name)
    # v1alpha2 refuses the edit itself (the spec is immutable), so the drift can only come from a stale copy: a
    # PodGroup gangweb finds with another minCount is replaced, never patched.
    with pytest.raises(Exception) as refused:
        objects.merge_patch(world.api, K8sWorkloadV1alpha2.POD_GROUP, world.namespace, old.gang_name,
                            {"spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}})
    assert getattr(refused.value, "status", None) == 422
    GangJob.objects.filter(pk=job.pk).update(resolved_spec={**job.resolved_spec, "gang": {
        **job.resolved_spec["gang"], "minMember": 1}})
    result = world.reconcile(job)
    assert result.error is None, result.message
    assert result.actions[0] == ("replace gang: immutable drift in Workload.spec.podGroupTemplates, "
                                 "PodGroup.spec.schedulingPolicy")
    new = world.names(job)
    assert new.gang_name != old.gang_name
    assert world.get(K8sWorkloadV1alpha2.POD_GROUP, new.gang_name)["metadata"]["uid"] != pg["metadata"]["uid"]


# ---- a cluster that changes version ------------------------------------------------------------------------------
def pin_to_retired_version(job: GangJob) -> None:
    """Make `job` look as if it had been dispatched before an upgrade: pinned to v1alpha2, which 1.37 does not serve."""
    GangJob.objects.filter(pk=job.pk).update(backend_plugin=K8sWorkloadV1alpha2.name)


@pytest.mark.k8s_version("1.37")
def test_a_queued_job_pinned_to_a_removed_version_is_recreated_in_v1beta1_under_new_names(world):
    job = world.submit(backend="k8s-workload", replicas=2, containers=[builders.container(cpu="1", gpu=8)],
                       node_selector={"gangweb.io/test-pool": "nowhere"})
    assert world.reconcile(job).error is None  # v1beta1 objects, pods pending (no such pool): Queued
    wait_for(lambda: (world.reconcile(job), GangJob.objects.get(pk=job.pk).phase)[1] == GangPhase.QUEUED, 60,
             "Queued")
    old = world.names(job)
    old_jobs = world.gang(job, JOB)
    # As an upgrade leaves it: pinned to v1alpha2, its v1alpha2 objects no longer visible (here: removed).
    for ref in (K8sWorkloadV1beta1.POD_GROUP, K8sWorkloadV1beta1.WORKLOAD):
        objects.delete(world.api, ref, world.namespace, old.gang_name)
    pin_to_retired_version(job)

    result = world.reconcile(job)

    assert result.error is None, result.message
    assert result.reason == "APIVersionChanged"
    assert result.actions[0] == ("switch backend k8s-workload-v1alpha2 -> k8s-workload-v1beta1: cluster local no "
                                 "longer serves scheduling.k8s.io/v1alpha2; it serves scheduling.k8s.io/v1beta1")
    job.refresh_from_db()
    assert job.backend_plugin == "k8s-workload-v1beta1" and job.gang_generation == 1
    new = world.names(job)
    assert new.gang_name != old.gang_name
    assert world.get(K8sWorkloadV1beta1.POD_GROUP, new.gang_name) is not None
    assert {j["metadata"]["name"] for j in world.gang(job, JOB) if not j["metadata"].get("deletionTimestamp")} == {
        new.pod_sets[0].owner_name} != {j["metadata"]["name"] for j in old_jobs}
    entry = job.transitions.order_by("-attempt", "-at").first()
    assert (entry.phase, entry.reason, entry.attempt) == (GangPhase.DISPATCHED, "APIVersionChanged", 1)
    assert "scheduling.k8s.io/v1alpha2" in entry.message and "scheduling.k8s.io/v1beta1" in entry.message
    attempt = job.attempts.order_by("-id").first()
    assert (attempt.outcome, attempt.reason) == (ReconcileOutcome.OK, "APIVersionChanged")


@pytest.mark.k8s_version("1.37")
def test_a_running_job_pinned_to_a_removed_version_keeps_its_pods_and_gets_v1beta1_objects(world):
    job = small(world)
    assert world.reconcile(job).error is None
    pods = wait_for(lambda: len(p := running(world, job)) == 2 and p, 90, "2 pods Running")
    wait_for(lambda: (world.reconcile(job), GangJob.objects.get(pk=job.pk).phase)[1] == GangPhase.RUNNING, 60,
             "Running")
    name = world.names(job).gang_name
    # As an upgrade leaves it: its v1alpha2 objects are no longer visible. Removed here as the release note asks an
    # admin to, finalizer first: with its pods running, a plain delete would leave the PodGroup Terminating; and
    # with `--cascade=orphan` (docs/backends.md): the Workload is the job's root object, and a cascading delete would
    # let the garbage collector delete the Indexed Job and its running pods with it.
    for ref in (K8sWorkloadV1beta1.POD_GROUP, K8sWorkloadV1beta1.WORKLOAD):
        objects.merge_patch(world.api, ref, world.namespace, name, {"metadata": {"finalizers": None}})
        objects.delete(world.api, ref, world.namespace, name, propagation="Orphan")
    wait_for(lambda: world.get(K8sWorkloadV1beta1.POD_GROUP, name) is None
             and world.get(K8sWorkloadV1beta1.WORKLOAD, name) is None, 30, "the PodGroup and Workload gone")
    pin_to_retired_version(job)
    # The probe has not run since the upgrade: the cluster row still lists v1alpha2 as served.
    Cluster.objects.filter(pk=world.cluster.pk).update(
        served_apis=sorted({*world.cluster.served_apis, "scheduling.k8s.io/v1alpha2"}))

    result = world.reconcile(job)

    assert result.error is None, result.message
    assert result.reason == "APIVersionChanged" and "scheduling.k8s.io/v1alpha2" in result.message
    job.refresh_from_db()
    assert job.backend_plugin == "k8s-workload-v1beta1" and job.gang_generation == 0
    assert job.phase == GangPhase.RUNNING
    assert sorted(p["metadata"]["uid"] for p in running(world, job)) == sorted(p["metadata"]["uid"] for p in pods)
    workload = world.get(K8sWorkloadV1beta1.WORKLOAD, name)
    assert workload is not None  # the same names: its pods name them
    [owner] = world.gang(job, JOB)  # and the kept Indexed Job is owned by the new root
    assert [r["uid"] for r in owner["metadata"]["ownerReferences"]] == [workload["metadata"]["uid"]]


def test_an_exception_escaping_a_pass_is_recorded_as_an_attempt_with_a_reason(world, monkeypatch):
    job = small(world)

    def boom(*args, **kwargs):
        raise client.ApiException(status=404, reason="Not Found")

    monkeypatch.setattr(jobs.JobReconciler, "ensure", boom)
    result = world.reconcile(job)

    assert result.reason == "UnexpectedError" and "ApiException" in result.message
    job.refresh_from_db()
    assert job.phase_reason == "UnexpectedError"
    attempt = job.attempts.order_by("-id").first()
    assert (attempt.outcome, attempt.reason) == (ReconcileOutcome.TERMINAL_ERROR, "UnexpectedError")
