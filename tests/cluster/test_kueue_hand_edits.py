"""The Kueue backend when the cluster is edited by hand (issue 37's hostile pass).

- A member of a Running gang deleted by hand: the gang is never called Running below its minimum, the failed
  gang's other members are stopped, and the Workload's `Finished=True` (which releases the quota) waits until no pod
  of the job runs.
- An Indexed Job un-suspended by hand while its Workload waits is suspended again, and pods it ran outside the
  admission start a new attempt on the timeline.
- The Workload edited by hand: a `minCount` (Kueue's partial admission) never runs more pods than Kueue admitted and
  replaces the Workload; a raised `priority` is put back; `Finished=True` written while the job runs stops its pods
  and says so. A LocalQueue of the job's queue made by someone else for another ClusterQueue runs nothing, and while
  Kueue's manager is stopped a waiting job says so before Kueue's last words."""
from __future__ import annotations

import os
import signal
from datetime import UTC, datetime

import pytest
from kubernetes import client

from scheduling.choices import GangPhase
from scheduling.models import ReconcileAttempt
from scheduling.observe import presence
from scheduling.reconcile import probe

from .reconcile_support import reconciled_until, wait_for
from .test_kueue_backend import (  # noqa: F401 (fixtures)
    GROUP,
    VERSION,
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


def edit_workload(world, job, change) -> None:
    """`change(spec)` applied to the job's Workload by hand (a read and an update, as `kubectl edit` does)."""
    custom = client.CustomObjectsApi(world.api)
    wl = workload(world, job)
    change(wl["spec"])
    custom.replace_namespaced_custom_object(GROUP, VERSION, world.namespace, "workloads", wl["metadata"]["name"], wl)


def test_a_min_count_set_by_hand_never_runs_more_than_kueue_admitted_and_the_workload_is_replaced(
        kueue_world, kueue_queue):  # noqa: F811 (fixtures imported above)
    world = kueue_world
    queue = kueue_queue(gpus=2)  # the 3-GPU gang does not fit; with minCount 1 on the workers, 2 GPUs would
    job = submit_gang(world, queue)
    reconciled_until(world, job, GangPhase.QUEUED)
    first = workload(world, job)["metadata"]["name"]
    edit_workload(world, job, lambda spec: spec["podSets"][1].__setitem__("minCount", 1))
    custom = client.CustomObjectsApi(world.api)
    edited = wait_for(lambda: said(w := custom.get_namespaced_custom_object(
        GROUP, VERSION, world.namespace, "workloads", first), "Admitted") and w, 60, "Kueue admitting it in part")
    assert [a["count"] for a in edited["status"]["admission"]["podSetAssignments"]] == [1, 1]  # 2 GPUs of 3

    for _ in range(5):
        result = world.reconcile(job)
        assert result.error is None or result.requeue_after, result.message
        assert live_pods(world, job) == [], "pods ran beyond what Kueue admitted"
        assert fresh(job).phase in (GangPhase.DISPATCHED, GangPhase.QUEUED)
    row = fresh(job)
    assert row.gang_generation == 1  # replaced under new names: the new Workload has no minCount and waits
    wl = workload(world, job)
    assert wl["metadata"]["name"] != first and [ps.get("minCount") for ps in wl["spec"]["podSets"]] == [None, None]
    back = reconciled_until(world, job, GangPhase.QUEUED)
    assert back.phase_reason == "Pending" and pods(world, job) == []


def test_a_local_queue_of_the_jobs_queue_made_by_someone_else_for_another_cluster_queue_runs_nothing(
        kueue_world, kueue_queue):  # noqa: F811 (fixtures imported above)
    world = kueue_world
    ours, theirs = kueue_queue(gpus=2), kueue_queue(gpus=8)
    custom = client.CustomObjectsApi(world.api)
    custom.delete_namespaced_custom_object(GROUP, VERSION, world.namespace, "localqueues", ours)
    wait_for(lambda: all(q["metadata"]["name"] != ours for q in custom.list_namespaced_custom_object(
        GROUP, VERSION, world.namespace, "localqueues")["items"]), 60, "gangweb's LocalQueue gone")
    custom.create_namespaced_custom_object(GROUP, VERSION, world.namespace, "localqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": ours},
        "spec": {"clusterQueue": theirs}})
    job = submit_gang(world, ours)
    assert world.reconcile(job).error is None
    wait_for(lambda: said(workload(world, job), "Admitted"), 60, "Kueue admitting it through the other LocalQueue")
    assert workload(world, job)["status"]["admission"]["clusterQueue"] == theirs

    for _ in range(3):
        result = world.reconcile(job)
        assert result.error is None or result.requeue_after, result.message
    row = fresh(job)
    assert pods(world, job) == [] and all(j["spec"]["suspend"] is True for j in owner_jobs(world, job))
    assert (row.phase, row.phase_reason) == (GangPhase.QUEUED, "AdmittedToAnotherQueue")
    assert f"to ClusterQueue '{theirs}', not '{ours}'" in row.phase_message


def test_a_priority_raised_by_hand_is_put_back_to_its_classs_value(
        kueue_world, kueue_queue, priority_classes):  # noqa: F811 (fixtures imported above)
    world = kueue_world
    queue = kueue_queue(gpus=2)  # the gang never fits: it waits, and Kueue orders it by its priority
    job = submit_gang(world, queue, priority_class=priority_classes(100))
    reconciled_until(world, job, GangPhase.QUEUED)

    edit_workload(world, job, lambda spec: spec.__setitem__("priority", 100000))  # Kueue accepts it at any time
    assert workload(world, job)["spec"]["priority"] == 100000
    result = world.reconcile(job)  # the watch queues this pass on the edit (the Workload's generation changed)
    assert result.error is None or result.requeue_after, result.message
    wl = workload(world, job)
    assert wl["spec"]["priority"] == 100  # the class's value again, on the same Workload
    assert fresh(job).gang_generation == 0
    assert any("priority" in a for a in result.actions), result.actions


def why_codes(job) -> list[str]:
    return [f["code"] for f in (fresh(job).why_pending or {}).get("blocking") or []]


def test_while_kueues_manager_is_stopped_a_waiting_job_says_so_before_kueues_last_words(
        kueue_world, kueue_queue, kueue_cluster, settings):  # noqa: F811 (fixtures imported above)
    if kueue_cluster.state is None:
        pytest.skip("Kueue runs outside this test's control (GANGWEB_TEST_KUBECONFIG)")
    world = kueue_world
    job = submit_gang(world, kueue_queue(gpus=2))  # never fits: Kueue's Pending words stay on the Workload
    reconciled_until(world, job, GangPhase.QUEUED)
    assert "QueueManagerNotSeen" not in why_codes(job)
    settings.GANGWEB_SCHEDULER_SEEN_WITHIN_SECONDS = 5  # Kueue's leader renews its Lease every 2 s (RETRY_PERIOD)

    def probed(state):
        probe.probe_cluster(world.cluster)
        world.cluster.refresh_from_db()
        return presence.presence(world.cluster, "kueue").state == state

    pid = kueue_cluster.state.process("kueue").pid
    os.kill(pid, signal.SIGSTOP)  # the manager of this test's own control plane: it renews nothing, admits nothing
    try:
        wait_for(lambda: probed(presence.NOT_SEEN), 60, "Kueue's Lease no longer renewed", interval=2)
        world.reconcile(job)
        row = fresh(job)
        assert why_codes(job)[0] == "QueueManagerNotSeen"
        assert row.why_pending["summary"].startswith(
            f"Kueue's manager has not been seen acting on cluster {world.cluster.name} for ")
        assert (row.phase, row.phase_reason) == (GangPhase.QUEUED, "Pending")  # Kueue's last word, not a guess
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: probed(presence.SEEN), 90, "Kueue's Lease renewed again", interval=2)
    world.reconcile(job)
    assert "QueueManagerNotSeen" not in why_codes(job)


def test_finished_written_by_hand_while_the_job_runs_stops_its_pods_and_says_why(
        kueue_world, kueue_queue):  # noqa: F811 (fixtures imported above)
    world = kueue_world
    job = submit_gang(world, kueue_queue(gpus=3))
    reconciled_until(world, job, GangPhase.RUNNING)
    wl = workload(world, job)
    forged = {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "by hand",
              "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}  # as a person writes it
    client.CustomObjectsApi(world.api).patch_namespaced_custom_object_status(
        GROUP, VERSION, world.namespace, "workloads", wl["metadata"]["name"],
        {"status": {"conditions": [*wl["status"]["conditions"], forged]}})  # Kueue releases the quota at once

    row = reconciled_until(world, job, GangPhase.QUEUED, attempt=1)
    assert all(j["spec"]["suspend"] is True for j in owner_jobs(world, job))  # nothing runs without quota
    wait_for(lambda: live_pods(world, job) == [] or None, 60, "the pods of the suspended Jobs gone")
    entry = row.transitions.get(phase=GangPhase.QUEUED, attempt=1)
    assert entry.reason == "WorkloadFinished" and "Finished=True (Succeeded: by hand) was written" in entry.message
    assert not row.transitions.filter(reason="ResumedWithoutAdmission").exists()  # nobody resumed anything
    world.reconcile(job)
    row = fresh(job)
    assert (row.phase, row.phase_reason) == (GangPhase.QUEUED, "WorkloadFinished")
    assert "cancel or resubmit the job" in row.phase_message
