"""Issue 30, items 5, 6, 7 and 10, on the real control plane: gangweb acts only on objects whose UID it recorded,
counts only the pods the Job controller made and reports, and says unknown values as they are.

No KAI or Volcano scheduler runs on the local cluster (their CRDs are installed): the tests write what a scheduler
would (status) by hand, as tests/cluster/test_observability.py does.
"""
from __future__ import annotations

import time
import uuid

import pytest
from kubernetes import client

from scheduling.backends import kai_v2alpha2, volcano_v1beta1
from scheduling.choices import GangPhase
from scheduling.constants import LABEL_JOB_UID
from scheduling.kube import objects
from scheduling.kube.objects import JOB, POD
from scheduling.models import GangJob
from scheduling.reconcile import resync
from scheduling.reconcile import volcano_desired as vd
from scheduling.services.jobs import lifecycle as job_service

from .conftest import POOL_LABEL
from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]  # the watcher reads from its threads
KAI_PG = kai_v2alpha2.POD_GROUP
VOLCANO_PG = volcano_v1beta1.POD_GROUP


def api_job(api, job) -> dict:
    r = api.get(f"/api/v1/jobs/{job.id}/")
    assert r.status_code == 200, r.data
    return r.data


def uid_of(obj: dict) -> str:
    return obj["metadata"]["uid"]


def get_by_uid(world, ref, name: str, uid: str) -> dict | None:
    """The object `name` when it is still the one with `uid`, else None."""
    obj = world.get(ref, name)
    return obj if obj is not None and uid_of(obj) == uid else None


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def test_item5_a_lookalike_podgroup_is_never_deleted_and_a_foreign_one_is_reported(world, api):
    job = world.submit(backend="kai", replicas=2)
    assert world.reconcile(job).error is None
    [real] = world.gang(job, KAI_PG)
    [owner] = world.gang(job, JOB)
    # A look-alike: someone's PodGroup carrying copies of the job's gangweb labels, under a name of their own.
    lookalike = objects.create(world.api, KAI_PG, {
        "apiVersion": KAI_PG.api_version, "kind": "PodGroup",
        "metadata": {"name": f"lookalike-{uuid.uuid4().hex[:6]}", "namespace": world.namespace,
                     "labels": dict(real["metadata"]["labels"])},
        "spec": {"minMember": 1, "queue": "someone-elses"}})
    # A foreign PodGroup claiming the job's pods: an ownerReference to the job's Indexed Job, no gangweb label.
    foreign = objects.create(world.api, KAI_PG, {
        "apiVersion": KAI_PG.api_version, "kind": "PodGroup",
        "metadata": {"name": f"foreign-{uuid.uuid4().hex[:6]}", "namespace": world.namespace,
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": owner["metadata"]["name"],
                                          "uid": uid_of(owner)}]},
        "spec": {"minMember": 2, "queue": "team-a"}})

    result = world.reconcile(job)  # a pass of its own (per-job LISTs)
    assert result.error is None, result.message
    stats = resync.resync_cluster(world.cluster)  # and a resync (the cluster-wide snapshot by label)
    assert stats["failed"] == 0

    for made in (lookalike, foreign):  # neither deleted nor patched: the very object, unchanged
        now_there = get_by_uid(world, KAI_PG, made["metadata"]["name"], uid_of(made))
        assert now_there is not None, f"{made['metadata']['name']} was deleted"
        assert now_there["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
    assert get_by_uid(world, KAI_PG, real["metadata"]["name"], uid_of(real)) is not None
    assert not any(a.startswith("delete ") for a in result.actions), result.actions
    data = api_job(api, job)
    reported = {(f["kind"], f["name"]): f for f in data["observed"]["foreign"]}
    assert reported[("PodGroup", lookalike["metadata"]["name"])]["reason"] == "LookAlike"
    assert reported[("PodGroup", foreign["metadata"]["name"])]["reason"] == "ClaimsJobObjects"
    assert "gangweb did not create it" in reported[("PodGroup", lookalike["metadata"]["name"])]["message"]
    # The job's own objects and counts are its own: one PodGroup, the recorded one.
    assert [o["metadata"]["uid"] for o in data["observed"]["objects"] if o["kind"] == "PodGroup"] == [uid_of(real)]


def test_item6_a_disowning_label_edit_is_repaired_and_a_cancel_deletes_by_recorded_uid(world, api):
    job = world.submit(backend="kai", replicas=2)
    assert world.reconcile(job).error is None
    [owner] = world.gang(job, JOB)
    [pg] = world.gang(job, KAI_PG)
    disown = {"metadata": {"labels": {LABEL_JOB_UID: None}}}

    # The Indexed Job loses its job-UID label: repaired (labels put back), never a NameConflict, never replaced.
    objects.merge_patch(world.api, JOB, world.namespace, owner["metadata"]["name"], disown)
    result = world.reconcile(job)
    assert result.error is None and result.reason != "NameConflict", (result.reason, result.message)
    again = world.get(JOB, owner["metadata"]["name"])
    assert uid_of(again) == uid_of(owner) and again["metadata"]["labels"][LABEL_JOB_UID] == str(job.uid)
    assert GangJob.objects.get(pk=job.pk).phase_reason != "NameConflict"

    # The PodGroup loses it too, and the job is cancelled: nothing of it may stay behind holding queue quota.
    objects.merge_patch(world.api, KAI_PG, world.namespace, pg["metadata"]["name"], disown)
    job_service.cancel(world.user, GangJob.objects.get(pk=job.pk))

    def cancelled():
        world.reconcile(job)
        return GangJob.objects.get(pk=job.pk).phase == GangPhase.CANCELLED

    wait_for(cancelled, 90, "the job Cancelled", interval=1)
    # Cancelled is a promise: the recorded PodGroup, labelled or not, is gone (deleted by its UID).
    assert get_by_uid(world, KAI_PG, pg["metadata"]["name"], uid_of(pg)) is None
    assert get_by_uid(world, JOB, owner["metadata"]["name"], uid_of(owner)) is None
    assert api_job(api, job)["phase"] == GangPhase.CANCELLED


def forged_pod(job: GangJob, owner: dict, node: str, controller: bool) -> dict:
    """A pod made by hand in the job's namespace, carrying the job's labels and an ownerReference naming the
    job's Indexed Job by UID (with `controller`), placed on `node` (kwok runs it)."""
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": owner["metadata"]["name"], "uid": uid_of(owner)}
    if controller:
        ref["controller"] = True
    labels = {k: v for k, v in owner["metadata"]["labels"].items() if k.startswith("gangweb.io/")}
    labels["batch.kubernetes.io/job-name"] = owner["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"forged-{uuid.uuid4().hex[:6]}", "namespace": job.namespace, "labels": labels,
                         "ownerReferences": [ref]},
            "spec": {"nodeName": node, "restartPolicy": "Never",
                     "containers": [{"name": "x", "image": "registry.example/x:1"}]}}


def test_item7_hand_made_pods_naming_the_indexed_job_never_make_the_job_scheduled_or_running(world, api, watcher,
                                                                                            pool_nodes):
    pool_nodes(1)
    node = next(n.metadata.name for n in client.CoreV1Api(world.api).list_node(
        label_selector=f"{POOL_LABEL}={world.namespace}").items)
    job = world.submit(backend="kai", replicas=3)  # no KAI scheduler runs: its real pods stay Pending
    assert world.reconcile(job).error is None
    [owner] = world.gang(job, JOB)
    wait_for(lambda: len([p for p in world.gang(job, POD) if p["metadata"]["name"].startswith(
        owner["metadata"]["name"])]) == 3, 60, "the Job's 3 real pods")
    forged = [objects.create(world.api, POD, forged_pod(job, owner, node, controller))
              for controller in (False, False, False, True, True, True)]
    names = {p["metadata"]["name"] for p in forged}

    def forged_running():
        pods = [p for p in world.gang(job, POD) if p["metadata"]["name"] in names]
        return len(pods) == 6 and all(p["status"].get("phase") == "Running" for p in pods)

    wait_for(forged_running, 90, "the 6 hand-made pods Running")
    assert world.reconcile(job).error is None
    assert resync.resync_cluster(world.cluster)["failed"] == 0

    data = api_job(api, job)
    counts = data["observed"]["pod_counts"]
    assert data["phase"] in (GangPhase.DISPATCHED, GangPhase.QUEUED), (data["phase"], data["phase_message"])
    assert (counts["created"], counts["bound"], counts["running"]) == (3, 0, 0), counts
    assert not {r["name"] for r in data["observed"]["pods"]} & names
    assert GangPhase.SCHEDULED not in [e["phase"] for e in data["timeline"]]
    assert data["why_pending"]["pods"]["bound"] == 0


def test_item10_unknown_scheduler_values_are_shown_as_they_are(world, api, watcher):
    # Volcano: a PodGroup phase gangweb does not know. The pass creates the job's Volcano Queue (team-a) first.
    custom = client.CustomObjectsApi(world.api)

    def volcano_queues() -> set[str]:
        return {q["metadata"]["name"] for q in custom.list_cluster_custom_object(vd.GROUP, vd.VERSION,
                                                                                 vd.PLURAL)["items"]}

    existed = volcano_queues()
    try:
        vjob = world.submit(backend="volcano", replicas=2)
        assert world.reconcile(vjob).error is None
        [vpg] = world.gang(vjob, VOLCANO_PG)
        wait_for(lambda: api_job(api, vjob)["why_pending"]["pods"]["created"] == 2, 60, "2 pods created")
        # The Volcano PodGroup CRD has no status subresource: Volcano writes the whole object.
        objects.merge_patch(world.api, VOLCANO_PG, world.namespace, vpg["metadata"]["name"],
                            {"status": {"phase": "Draining"}})
        data = wait_for(lambda: (d := api_job(api, vjob))["why_pending"].get("unknown") and d, 60,
                        "the watch to record the phase")
        why = data["why_pending"]
        assert why["reason"] == "Draining"
        assert why["summary"].startswith("Volcano reports phase Draining, which gangweb does not know")
        assert "has not said anything yet" not in why["summary"]
        assert data["phase_reason"] == "Draining"
        assert "Volcano reports phase Draining, which gangweb does not know" in data["phase_message"]
    finally:
        for name in volcano_queues() - existed:  # the Volcano Queues this test's pass created
            try:
                custom.delete_cluster_custom_object(vd.GROUP, vd.VERSION, vd.PLURAL, name)
            except client.ApiException as exc:
                assert exc.status == 404

    # KAI: a schedulingConditions type gangweb does not know, without reasons.
    kjob = world.submit(backend="kai", replicas=2)
    assert world.reconcile(kjob).error is None
    [kpg] = world.gang(kjob, KAI_PG)
    wait_for(lambda: api_job(api, kjob)["why_pending"]["pods"]["created"] == 2, 60, "2 pods created")
    custom.patch_namespaced_custom_object_status(
        KAI_PG.group, KAI_PG.version, world.namespace, KAI_PG.plural, kpg["metadata"]["name"],
        {"status": {"schedulingConditions": [{"type": "DrainingOnNodePool", "nodePool": "default", "status": "True",
                                              "reason": "Unschedulable", "transitionID": "0",
                                              "lastTransitionTime": now()}]}})
    data = wait_for(lambda: (d := api_job(api, kjob))["why_pending"].get("unknown") and d, 60,
                    "the watch to record the condition")
    why = data["why_pending"]
    assert why["reason"] == "DrainingOnNodePool"
    assert why["summary"].startswith("KAI reports condition DrainingOnNodePool, which gangweb does not know")
    assert "Not enough room" not in why["summary"]
    assert data["phase_reason"] == "DrainingOnNodePool"


def test_item6_a_gang_object_that_lost_its_label_is_not_replaced_by_a_resync(world, api):
    """A resync finds the job's objects by label in its snapshot: the PodGroup whose label was taken off is missing
    there, but it is still the job's (its recorded UID). The pass must read the job's own objects before it calls the
    gang gone, so the running gang is kept and the label put back (it was replaced, pods and all)."""
    job = world.submit(backend="k8s-workload", replicas=2)
    assert world.reconcile(job).error is None
    ref = world.backend(job).POD_GROUP
    [pg] = world.gang(job, ref)
    generation = GangJob.objects.get(pk=job.pk).gang_generation
    objects.merge_patch(world.api, ref, world.namespace, pg["metadata"]["name"],
                        {"metadata": {"labels": {LABEL_JOB_UID: None}}})

    stats = resync.resync_cluster(world.cluster)
    assert stats["failed"] == 0

    row = GangJob.objects.get(pk=job.pk)
    assert row.gang_generation == generation, (row.phase_reason, row.phase_message)
    assert row.phase_reason != "Replaced"
    kept = get_by_uid(world, ref, pg["metadata"]["name"], uid_of(pg))
    assert kept is not None, "the PodGroup was replaced"
    assert kept["metadata"]["labels"][LABEL_JOB_UID] == str(job.uid)
