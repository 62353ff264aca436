"""The Kueue backend when the cluster is edited by hand (issue 37's hostile pass): a member of a Running gang
deleted by hand is never called Running below the gang, and the Workload's `Finished=True` (which releases the quota)
waits until no pod of the job runs; an Indexed Job un-suspended by hand while its Workload waits is suspended again,
and pods it ran outside the admission start a new attempt on the timeline."""
from __future__ import annotations

import pytest
from kubernetes import client

from scheduling.choices import GangPhase

from .reconcile_support import reconciled_until, wait_for
from .test_kueue_backend import (  # noqa: F401 (fixtures)
    conditions,
    fresh,
    kueue_queue,
    kueue_world,
    owner_jobs,
    pods,
    running,
    said,
    submit_gang,
    workload,
)

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
LIVE = ("Pending", "Running", "Unknown")


def live_pods(world, job) -> list[dict]:
    return [p for p in pods(world, job) if (p.get("status") or {}).get("phase", "Pending") in LIVE]


def test_a_member_deleted_by_hand_never_leaves_the_gang_running_and_finished_waits_for_the_last_pod(
        kueue_world, kueue_queue):  # noqa: F811 (fixtures imported above)
    world = kueue_world
    queue = kueue_queue(gpus=3)
    job = submit_gang(world, queue)
    reconciled_until(world, job, GangPhase.RUNNING)
    worker = next(p for p in running(world, job) if p["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "worker")
    client.CoreV1Api(world.api).delete_namespaced_pod(worker["metadata"]["name"], world.namespace)

    said_running = []

    def ended():
        result = world.reconcile(job)
        assert result.error is None or result.requeue_after, result.message
        row = fresh(job)
        if row.phase == GangPhase.RUNNING:  # every pass here saw the deletion: the gang is not whole any more
            said_running.append(row.phase_message)
        return row.phase == GangPhase.FAILED and row

    row = wait_for(ended, 120, "the job Failed (its worker Job has backoffLimit 0)", interval=1)
    assert said_running == []
    assert row.phase_reason == "BackoffLimitExceeded"
    taken_apart = list(row.transitions.filter(phase=GangPhase.QUEUED, attempt=1).values_list("reason", flat=True))
    # The pass that saw the member go first, either while it was terminating or after it was gone: both are true.
    assert taken_apart in ([], ["MemberDeleted"], ["MembersLost"])

    # The launcher still runs: its quota is not released under it.
    def only_the_launcher():  # the failed Job's other worker is deleted by its Job controller, in its own time
        live = [p for p in live_pods(world, job) if not p["metadata"].get("deletionTimestamp")]
        return [p["metadata"]["labels"]["kueue.x-k8s.io/podset"] for p in live] == ["launcher"] and live
    launcher = wait_for(only_the_launcher, 60, "the launcher the only pod left running")
    for _ in range(3):
        result = world.reconcile(job)
        wl = workload(world, job)
        states = [(p["metadata"]["name"], p["status"].get("phase"), bool(p["metadata"].get("deletionTimestamp")))
                  for p in pods(world, job)]
        assert wl is not None and not said(wl, "Finished"), (result.actions, states)
    client.CoreV1Api(world.api).delete_namespaced_pod(launcher[0]["metadata"]["name"], world.namespace)

    def finished():
        world.reconcile(job)
        wl = workload(world, job)
        if wl is None:  # written Finished=True, then deleted in the same pass: only once no pod was live
            return "gone"
        return said(wl, "Finished") and wl
    wl = wait_for(finished, 90, "Finished=True once the launcher is gone", interval=1)
    assert live_pods(world, job) == []
    if wl != "gone":
        assert conditions(wl)["Finished"]["reason"] == "Failed"


def test_a_job_unsuspended_by_hand_while_its_workload_waits_is_suspended_again_and_what_ran_is_recorded(
        kueue_world, kueue_queue):  # noqa: F811 (fixtures imported above)
    world = kueue_world
    queue = kueue_queue(gpus=2)  # the 3-GPU gang never fits: Kueue keeps it waiting
    job = submit_gang(world, queue)
    reconciled_until(world, job, GangPhase.QUEUED)
    batch = client.BatchV1Api(world.api)
    worker = next(j for j in owner_jobs(world, job) if "-worker-" in j["metadata"]["name"])
    batch.patch_namespaced_job(worker["metadata"]["name"], world.namespace, {"spec": {"suspend": False}})

    def counted():  # the Job controller acted on the resume: it counts pods it made outside the admission
        j = batch.read_namespaced_job(worker["metadata"]["name"], world.namespace)
        return (j.status.active or 0) + (j.status.succeeded or 0) + (j.status.failed or 0) > 0
    wait_for(counted, 60, "the Job controller starting pods of the un-suspended Job")

    result = world.reconcile(job)
    assert result.error is None or result.requeue_after, result.message
    assert all(j["spec"]["suspend"] is True for j in owner_jobs(world, job))
    row = fresh(job)
    entry = row.transitions.get(reason="ResumedWithoutAdmission")
    assert (entry.phase, entry.attempt) == (GangPhase.DISPATCHED, 1)
    assert entry.source == f"Job {world.namespace}/{worker['metadata']['name']}"
    assert "was not admitted" in entry.message and "outside the admission" in entry.message
    assert not said(workload(world, job), "Admitted")
    wait_for(lambda: live_pods(world, job) == [] or None, 60, "the pods of the un-suspended Job gone")
    back = reconciled_until(world, job, GangPhase.QUEUED, attempt=1)
    assert back.phase_reason == "Pending" and pods(world, job) == []
