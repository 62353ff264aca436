"""The Kueue backend when the cluster is edited by hand (issue 37's hostile pass).

- A member of a Running gang deleted by hand: the gang is never called Running below its minimum, the failed
  gang's other members are stopped, and the Workload's `Finished=True` (which releases the quota) waits until no pod
  of the job runs.
- An Indexed Job un-suspended by hand while its Workload waits is suspended again, and pods it ran outside the
  admission start a new attempt on the timeline."""
from __future__ import annotations

import pytest
from kubernetes import client

from scheduling.choices import GangPhase
from scheduling.models import ReconcileAttempt

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

    # The gang failed whole: gangweb stops the launcher (its Job suspended), and the quota is released (Finished=True)
    # only once no pod of the job is live any more. Read in that order (Workload, then pods), a Finished seen with a
    # pod still live means it was written while that pod ran.
    actions, seen_early = [], []

    def finished():
        actions.extend(world.reconcile(job).actions)
        wl = workload(world, job)
        live = live_pods(world, job)
        done = wl is None or said(wl, "Finished")
        if done and live:
            seen_early.append([(p["metadata"]["name"], p["status"].get("phase")) for p in live])
        return done and live == [] and (wl or "gone")

    wl = wait_for(finished, 120, "Finished=True once no pod of the job is live", interval=1)
    assert seen_early == []
    stopped = ReconcileAttempt.objects.filter(job=job, actions__icontains="suspend (the gang failed")
    assert [a for a in stopped.values_list("actions", flat=True) if "-launcher-" in str(a)], actions
    launcher_job = next(j for j in owner_jobs(world, job) if "-launcher-" in j["metadata"]["name"])
    assert launcher_job["spec"]["suspend"] is True  # kept for inspection, its pod stopped
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
