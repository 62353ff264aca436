"""Clean ends on the real control plane: retention of finished jobs' Indexed Jobs and pods, ownerReferences to one
root object per job (the garbage collector of kube-controller-manager removes the rest when it is deleted by hand),
completions that follow replicas, and LimitRange default requests counted in minResources."""
from __future__ import annotations

from datetime import timedelta

import pytest
from kubernetes.client.rest import ApiException
from kubernetes.utils import parse_quantity

from scheduling.backends import coscheduling_v1alpha1, kai_v2alpha2
from scheduling.choices import GangPhase
from scheduling.kube import objects
from scheduling.kube.limit_ranges import LIMIT_RANGE
from scheduling.kube.objects import JOB, POD, SERVICE
from scheduling.reconcile import resync

from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
KAI_PG = kai_v2alpha2.POD_GROUP


def owner_uids(obj: dict) -> list[str]:
    """The UIDs an object's ownerReferences name."""
    return [ref["uid"] for ref in obj["metadata"].get("ownerReferences") or []]


def dependents(world, job) -> list[dict]:
    """Every object of the job but its root: the other gang objects, the Indexed Jobs, the Service."""
    backend = world.backend(job)
    gang = [o for ref in backend.gang_kinds if ref != backend.root_ref for o in world.gang(job, ref)]
    return [*gang, *world.gang(job, JOB), *world.gang(job, SERVICE)]


def patch_retrying(world, ref, name: str, body: dict) -> dict:
    """A hand edit as `kubectl patch` makes it (no resourceVersion); retried on 409 (controllers write status)."""
    for _ in range(5):
        try:
            return objects.merge_patch(world.api, ref, world.namespace, name, body, None)
        except ApiException as exc:
            if exc.status != 409:
                raise
    raise AssertionError(f"{ref.kind} {name}: kept conflicting")


# ---- retention ---------------------------------------------------------------------------------------------------
def test_a_finished_jobs_indexed_job_and_pods_stay_for_the_retention_then_are_gone(world):
    job = world.submit(backend="k8s-workload", replicas=2, annotations={"gangweb.io/sim-exit": "0"},
                       retentionSeconds=4)
    assert world.reconcile(job).error is None
    wait_for(lambda: [p for p in world.gang(job, POD)] and all(
        p["status"].get("phase") == "Succeeded" for p in world.gang(job, POD)), 90, "2 pods Succeeded")

    def cleaned():
        resync.resync_cluster(world.cluster)
        job.refresh_from_db()
        return job.cleaned_up_at is not None

    wait_for(cleaned, 60, "the gang objects cleaned up", interval=1)
    assert job.phase == GangPhase.SUCCEEDED
    assert job.remove_after == job.finished_at + timedelta(seconds=4)
    assert job.objects_removed_at is None
    [owner] = world.gang(job, JOB)
    assert len(world.gang(job, POD)) == 2  # kept for inspection until the retention is over
    assert owner_uids(owner) == []  # the root went with propagation Orphan: the Job is no longer its dependent
    assert world.gang(job, SERVICE) == []

    def removed():
        resync.resync_cluster(world.cluster)
        job.refresh_from_db()
        return job.objects_removed_at is not None

    wait_for(removed, 90, "the retained Job and pods removed", interval=1)
    assert world.gang(job, JOB) == [] and world.gang(job, POD) == []
    assert job.objects_removed_at >= job.remove_after
    # done with: the resync no longer looks at it
    assert not resync.jobs_to_resync(world.cluster).filter(pk=job.pk).exists()


def test_the_default_retention_comes_from_the_setting_and_shows_on_the_page_and_api(world, settings, client):
    settings.GANGWEB_FINISHED_RETENTION_SECONDS = 7200
    job = world.submit(backend="k8s-workload", replicas=1, annotations={"gangweb.io/sim-exit": "1"})
    world.reconcile(job)

    def finished():
        world.reconcile(job)
        job.refresh_from_db()
        return job.phase == GangPhase.FAILED and job.remove_after is not None

    wait_for(finished, 90, "the job Failed", interval=1)
    assert job.remove_after == job.finished_at + timedelta(hours=2)
    client.force_login(world.user)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f"Jobs and pods kept until {job.remove_after:%Y-%m-%d %H:%M:%S} UTC" in page
    body = client.get(f"/api/v1/jobs/{job.pk}/").json()
    assert body["remove_after"].startswith(f"{job.remove_after:%Y-%m-%dT%H:%M:%S}")
    assert body["objects_removed_at"] is None
    assert len(world.gang(job, JOB)) == 1  # not yet


# ---- ownerReferences and the garbage collector ---------------------------------------------------------------------
@pytest.mark.parametrize("family", ["k8s-workload", "kai"])
def test_every_object_names_the_root_and_deleting_the_root_by_hand_lets_the_gc_remove_the_rest(world, family):
    job = world.submit(backend=family, replicas=2)
    assert world.reconcile(job).error is None
    backend = world.backend(job)
    [root] = world.gang(job, backend.root_ref)
    root_uid = root["metadata"]["uid"]
    wait_for(lambda: len(world.gang(job, POD)) == 2, 60, "the Job controller's 2 pods")
    others = dependents(world, job)
    assert len(others) == (3 if family == "k8s-workload" else 2)  # (PodGroup,) Job, Service
    for obj in others:
        assert owner_uids(obj) == [root_uid], obj["kind"]
        [ref] = obj["metadata"]["ownerReferences"]
        assert ref["kind"] == backend.root_ref.kind and ref["blockOwnerDeletion"] is False
    for pod in world.gang(job, POD):  # pods hang off their Indexed Job (the Job controller's reference)
        assert [r["kind"] for r in pod["metadata"]["ownerReferences"]] == ["Job"]

    objects.delete(world.api, backend.root_ref, world.namespace, root["metadata"]["name"])  # as kubectl does

    # gangweb does nothing meanwhile: kube-controller-manager's garbage collector removes everything else.
    wait_for(lambda: not dependents(world, job) and not world.gang(job, POD), 120,
             "the garbage collector to delete the root's dependents and their pods", interval=1)

    def recreated():
        world.reconcile(job)
        return (len(world.gang(job, backend.root_ref)) == 1 and len(world.gang(job, JOB)) == 1
                and len(world.gang(job, SERVICE)) == 1)

    wait_for(recreated, 60, "the next passes to recreate the set", interval=1)
    [again] = world.gang(job, backend.root_ref)
    assert again["metadata"]["uid"] != root_uid
    for obj in dependents(world, job):
        assert owner_uids(obj) == [again["metadata"]["uid"]], obj["kind"]


def test_a_root_deleted_while_gangweb_passes_leaves_no_object_of_the_old_root(world):
    """gangweb reconciles right after the delete, racing the garbage collector: what names the old root is deleted,
    never re-pointed to the new one."""
    job = world.submit(backend="kai", replicas=2)
    assert world.reconcile(job).error is None
    [root] = world.gang(job, KAI_PG)
    [owner] = world.gang(job, JOB)
    objects.delete(world.api, KAI_PG, world.namespace, root["metadata"]["name"])
    wait_for(lambda: not world.gang(job, KAI_PG), 30, "the PodGroup gone")

    def settled():
        world.reconcile(job)
        jobs_now = world.gang(job, JOB)
        return len(jobs_now) == 1 and jobs_now[0]["metadata"]["uid"] != owner["metadata"]["uid"] and \
            len(world.gang(job, KAI_PG)) == 1 and len(world.gang(job, SERVICE)) == 1

    wait_for(settled, 90, "a new set under a new root", interval=1)
    [new_root] = world.gang(job, KAI_PG)
    for obj in dependents(world, job):
        assert owner_uids(obj) == [new_root["metadata"]["uid"]], obj["kind"]


def test_an_owner_reference_removed_by_hand_is_put_back(world):
    job = world.submit(backend="kai", replicas=2)
    assert world.reconcile(job).error is None
    [root] = world.gang(job, KAI_PG)
    [owner], [svc] = world.gang(job, JOB), world.gang(job, SERVICE)
    patch_retrying(world, JOB, owner["metadata"]["name"], {"metadata": {"ownerReferences": None}})
    patch_retrying(world, SERVICE, svc["metadata"]["name"], {"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "someone-elses", "uid": "0000-foreign"}]}})

    result = world.reconcile(job)

    assert result.error is None, result.message
    [now], [svc_now] = world.gang(job, JOB), world.gang(job, SERVICE)
    assert owner_uids(now) == owner_uids(svc_now) == [root["metadata"]["uid"]]
    assert now["metadata"]["uid"] == owner["metadata"]["uid"]  # patched, not replaced
    assert any(a.endswith("ownerReferences") for a in result.actions), result.actions
    assert world.reconcile(job).actions == []


# ---- completions follow replicas ---------------------------------------------------------------------------------
def test_an_indexed_job_scaled_by_hand_gets_parallelism_and_completions_back_together(world):
    job = world.submit(backend="kai", replicas=3)
    assert world.reconcile(job).error is None
    [owner] = world.gang(job, JOB)
    # Elastic Indexed Job: the API server lets both change together (to the same value).
    patch_retrying(world, JOB, owner["metadata"]["name"], {"spec": {"parallelism": 5, "completions": 5}})

    result = world.reconcile(job)

    assert result.error is None, result.message
    [now] = world.gang(job, JOB)
    assert (now["spec"]["parallelism"], now["spec"]["completions"]) == (3, 3), result.actions
    assert now["metadata"]["uid"] == owner["metadata"]["uid"]
    assert f"update Job {world.namespace}/{owner['metadata']['name']}: completions, parallelism" in result.actions
    assert world.reconcile(job).actions == []


# ---- LimitRange defaults -----------------------------------------------------------------------------------------
def test_limitrange_default_requests_are_counted_in_min_resources(world):
    objects.create(world.api, LIMIT_RANGE, {
        "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": world.namespace},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "500m", "memory": "256Mi"},
                             "default": {"cpu": "1", "memory": "512Mi"}}]}})
    bare = {"name": "main", "image": "registry.example/train:1"}  # no requests, no limits
    half = {"name": "side", "image": "registry.example/train:1", "resources": {"limits": {"cpu": "2"}}}
    job = world.submit(backend="coscheduling", replicas=2, containers=[bare, half])

    assert world.reconcile(job).error is None

    [pg] = world.gang(job, coscheduling_v1alpha1.POD_GROUP)
    # per pod: main 500m + side 2 (its limit, as API defaulting sets it) = 2500m; memory 256Mi + 256Mi; × 2 pods
    counted = {k: parse_quantity(v) for k, v in pg["spec"]["minResources"].items()}
    assert counted == {"cpu": 5, "memory": 1024 ** 3}  # without the LimitRange it was cpu 4, no memory
    wait_for(lambda: len(world.gang(job, POD)) == 2, 60, "2 pods")
    [pod, _] = world.gang(job, POD)
    admitted = {c["name"]: c["resources"]["requests"] for c in pod["spec"]["containers"]}
    assert admitted == {"main": {"cpu": "500m", "memory": "256Mi"}, "side": {"cpu": "2", "memory": "256Mi"}}
