"""A cluster edited by hand, racing or throttling gangweb: what the job says and what gangweb does (issue 30, items
1, 2, 3, 4 and 12). Real control plane; the k8s-workload plugin is the one discovery picks (v1beta1 on 1.37,
v1alpha2 on 1.36), so the tests without a `k8s_version` marker hold on both releases. Where the watch matters it
runs in a thread of the test process (`watcher`), and the reconcile tasks it queues are recorded (`enqueued`):
passes are run by the test, as the task would run them.
"""
from __future__ import annotations

import copy

import pytest
from django.utils import timezone
from kubernetes.client.rest import ApiException

from scheduling.choices import GangPhase as P
from scheduling.kube import objects
from scheduling.kube.objects import JOB, POD
from scheduling.models import GangJob, ReconcileAttempt
from scheduling.observe.evidence import JobObjects
from scheduling.reconcile import watching
from tests import builders

from .conftest import POOL_LABEL
from .reconcile_support import reconciled_until, wait_for
from .throttling_webhook import ThrottlingWebhook

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]
HOLD = "gangweb.test/hold"  # a finalizer of the test's own: keeps a deleted gang object Terminating



def row(job) -> GangJob:
    return GangJob.objects.get(pk=job.pk)


def queued_passes(enqueued, job) -> int:
    """How many reconcile passes of `job` were queued (the watch queues them through `enqueue.send`)."""
    return sum(ids.count(job.pk) for ids in enqueued)


def hold(world, ref, name: str) -> None:
    objects.merge_patch(world.api, ref, world.namespace, name, {"metadata": {"finalizers": [HOLD]}})


def release(world, ref, name: str) -> None:
    """Take the test's finalizer off (whatever else holds the object stays)."""
    obj = world.get(ref, name)
    if obj is None:
        return
    keep = [f for f in obj["metadata"].get("finalizers") or [] if f != HOLD]
    try:
        objects.merge_patch(world.api, ref, world.namespace, name, {"metadata": {"finalizers": keep or None}})
    except ApiException as exc:
        if exc.status != 404:
            raise


def running_job(world, replicas: int = 2) -> GangJob:
    job = world.submit(backend="k8s-workload", replicas=replicas,
                       containers=[builders.container(cpu="100m", memory="64Mi")])
    return reconciled_until(world, job, P.RUNNING)


def live_pods(world, job) -> list[dict]:
    return [p for p in world.gang(job, POD) if not p["metadata"].get("deletionTimestamp")]


def group_of(pod: dict) -> str:
    return ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName", "")


# ---- item 1 ----------------------------------------------------------------------------------------------------
def test_item1_gang_replaced_under_a_finalizer_gets_a_new_name_and_reads_replacing(world, watcher, enqueued):
    job = running_job(world)
    old = world.names(job).gang_name
    pg = world.k8s.POD_GROUP
    hold(world, pg, old)
    try:
        enqueued.clear()
        objects.delete(world.api, world.k8s.WORKLOAD, world.namespace, old)
        # The garbage collector deletes what the Workload owned; the PodGroup stays Terminating under the finalizer.
        wait_for(lambda: (world.get(pg, old) or {}).get("metadata", {}).get("deletionTimestamp"), timeout=60,
                 what="the PodGroup Terminating")
        wait_for(lambda: queued_passes(enqueued, job), timeout=30, what="the watch to queue a pass")
        # Before any pass: the job says its gang is being replaced, never "Running, 0 of 2 pods running".
        seen = wait_for(lambda: (j := row(job)).phase_reason == "Replacing" and j, timeout=30,
                        what="the job to read Replacing")
        assert f"PodGroup {world.namespace}/{old} is being deleted" in seen.phase_message

        result = world.reconcile(job)

        assert result.error is None, result.message
        # (The Workload's own absence is named too while the garbage collector has not yet deleted its Jobs.)
        assert result.actions[0].startswith("replace gang: ")
        assert f"PodGroup {world.namespace}/{old} is being deleted (finalizers: " in result.actions[0]
        new = world.names(job).gang_name
        assert new != old
        assert world.get(pg, new)["metadata"]["uid"]  # the new generation, next to the terminating old one
        assert world.get(pg, old)["metadata"]["deletionTimestamp"]
        # A new attempt from Dispatched, reason Replaced (on an idle plane the watch may record the new gang Running
        # within the same second: the timeline, not the phase of the moment, is what is asserted).
        job = row(job)
        restart = job.transitions.get(phase=P.DISPATCHED, attempt=1)
        assert restart.reason == "Replaced"
        assert not job.transitions.filter(attempt=0, phase=P.RUNNING, at__gt=restart.at).exists()
        assert restart.message.startswith("replaced the gang under new names (")
        assert f"PodGroup {world.namespace}/{new}" in restart.message
        # The new pods name the new group, never the terminating one.
        pods = wait_for(lambda: len(p := live_pods(world, job)) == 2 and p, timeout=60, what="2 new pods")
        assert {group_of(p) for p in pods} == {new}
    finally:
        release(world, pg, old)


# ---- item 2 ----------------------------------------------------------------------------------------------------
def test_item2_hand_deleted_podgroup_is_noticed_at_once_and_replaced_not_bound_against(world, watcher, enqueued):
    job = running_job(world)
    old = world.names(job).gang_name
    pg = world.k8s.POD_GROUP
    hold(world, pg, old)  # as the protection finalizer does while the pods run, but for as long as the test says
    try:
        enqueued.clear()
        objects.delete(world.api, pg, world.namespace, old)
        # The watch queues a pass for the deletionTimestamp alone (no resync), and the job stops reading Running.
        wait_for(lambda: queued_passes(enqueued, job), timeout=30, what="the watch to queue a pass")
        seen = wait_for(lambda: (j := row(job)).phase_reason == "Replacing" and j, timeout=30,
                        what="the job to read Replacing")
        assert seen.phase_message.startswith(f"PodGroup {world.namespace}/{old} is being deleted: gangweb replaces "
                                             "the gang under new names (")

        result = world.reconcile(job)

        assert result.error is None, result.message
        assert result.actions[0].startswith(f"replace gang: PodGroup {world.namespace}/{old} is being deleted")
        new = world.names(job).gang_name
        assert new != old and world.get(pg, new) is not None
        assert ReconcileAttempt.objects.filter(job=job, actions__icontains="replace gang").exists()
        # No pod of the job binds against the terminating group: the old Jobs went, the new pods name the new one.
        pods = wait_for(lambda: len(p := live_pods(world, job)) == 2 and p, timeout=60, what="2 new pods")
        assert {group_of(p) for p in pods} == {new}
        job = reconciled_until(world, job, P.RUNNING, attempt=1)
        assert job.phase_reason == "Running"
    finally:
        release(world, pg, old)


# ---- item 3 ----------------------------------------------------------------------------------------------------
@pytest.mark.k8s_version("1.37")  # v1beta1 lets minCount change; on 1.36 (v1alpha2) every field is immutable
def test_item3_partial_gang_after_a_mincount_edit_is_reported_and_released(world, watcher, enqueued, pool_nodes,
                                                                           settings):
    pool_nodes(4)  # 32 GPUs: 4 of the 5 pods fit, the gang does not
    job = world.submit(backend="k8s-workload", replicas=5, node_selector={POOL_LABEL: world.namespace},
                       containers=[builders.container(cpu="1", memory="1Gi", gpu=8)])
    job = reconciled_until(world, job, P.QUEUED)
    name = world.names(job).gang_name
    pg, wl = world.k8s.POD_GROUP, world.k8s.WORKLOAD

    enqueued.clear()
    objects.merge_patch(world.api, pg, world.namespace, name,
                        {"spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}})
    templates = copy.deepcopy(world.get(wl, name)["spec"]["podGroupTemplates"])
    templates[0]["schedulingPolicy"]["gang"]["minCount"] = 1
    objects.merge_patch(world.api, wl, world.namespace, name, {"spec": {"podGroupTemplates": templates}})
    # The watch queues a pass for the spec edit (no resync needed).
    wait_for(lambda: queued_passes(enqueued, job), timeout=30, what="the watch to queue a pass for the edit")
    wait_for(lambda: sum(1 for p in live_pods(world, job) if p["spec"].get("nodeName")) == 4, timeout=90,
             what="kube-scheduler to bind 4 of 5 pods under minCount 1")

    settings.GANGWEB_PARTIAL_GANG_GRACE_SECONDS = 3600
    result = world.reconcile(job)

    assert result.error is None, result.message
    assert any(a.startswith(f"update PodGroup {world.namespace}/{name}: schedulingPolicy.gang.minCount")
               for a in result.actions), result.actions
    assert world.get(pg, name)["spec"]["schedulingPolicy"]["gang"]["minCount"] == 5
    assert result.reason == "PartialGang" and 3500 < result.requeue_after <= 3600
    job = row(job)
    assert job.phase not in (P.SCHEDULED, P.RUNNING)
    assert job.phase_reason == "PartialGang"
    assert job.phase_message.startswith("4 of 5 bound after minCount was edited; gangweb deletes its bound pods")
    assert not job.transitions.filter(phase=P.SCHEDULED).exists()

    settings.GANGWEB_PARTIAL_GANG_GRACE_SECONDS = 0
    result = world.reconcile(job)

    assert result.error is None, result.message
    assert any(a.startswith("replace gang: partial gang: 4 of 5 bound after minCount was edited")
               for a in result.actions), result.actions
    new = world.names(job).gang_name
    assert new != name and world.get(pg, new)["spec"]["schedulingPolicy"]["gang"]["minCount"] == 5
    job = row(job)
    released = job.transitions.get(phase=P.DISPATCHED, attempt=1)
    assert released.reason == "PartialGangReleased"
    assert released.message.startswith("released a partial gang: 4 of 5 bound after minCount was edited; deleted "
                                       "its Jobs with the bound pods (")
    # The gang waits whole again: 5 new pods, none bound (5 x 8 GPUs do not fit in 32), none of the old ones left.
    wait_for(lambda: len(p := live_pods(world, job)) == 5 and {group_of(x) for x in p} == {new}
             and not any(x["spec"].get("nodeName") for x in p), timeout=90, what="5 unbound pods of the new gang")
    job = reconciled_until(world, job, P.QUEUED, attempt=1)
    assert job.phase_reason != "PartialGang" and job.observed["pod_counts"]["bound"] == 0


# ---- item 4 ----------------------------------------------------------------------------------------------------
def test_item4_throttled_podgroup_create_honours_retry_after_and_is_not_dispatched(world):
    job = world.submit(backend="k8s-workload", replicas=2, containers=[builders.container(cpu="100m", memory="64Mi")])
    name = world.names(job).gang_name
    with ThrottlingWebhook(world.api, world.namespace, world.k8s.POD_GROUP, str(job.uid), retry_after=3) as hook:
        wait_for(lambda: hook.probe() == 429, timeout=60, what="the API server to call the throttling webhook")

        result = world.reconcile(job)

        assert result.reason == "Throttled" and result.requeue_after == 3, (result.reason, result.message)
        assert result.error is None  # a countdown, not the task's exponential backoff
        assert f"create PodGroup {world.namespace}/{name} throttled (429); retry in 3 s" in result.actions
        assert world.get(world.k8s.WORKLOAD, name) is not None and world.get(world.k8s.POD_GROUP, name) is None
        assert not world.gang(job, JOB)
        job = row(job)
        assert job.phase == P.SUBMITTED  # not Dispatched: the set is not whole
        assert job.phase_reason == "Throttled"
        assert (f"the API server throttled the create of PodGroup {world.namespace}/{name} (HTTP 429, Retry-After "
                f"3 s); gangweb creates it again in 3 s, at ") in job.phase_message
        # What the watch records of the half-made set says the same: waiting for the PodGroup, not Dispatched.
        watching.observe_job(str(job.uid), JobObjects(gang=[world.get(world.k8s.WORKLOAD, name)]), False)
        job = row(job)
        assert (job.phase, job.phase_reason) == (P.SUBMITTED, "WaitingForGangObject")
        assert job.phase_message == f"waiting for the gang object set: PodGroup {world.namespace}/{name} is missing"
        assert hook.refused >= 1
        hook.throttling = False
        result = world.reconcile(job)

    assert result.error is None, result.message
    assert world.get(world.k8s.POD_GROUP, name) is not None and world.gang(job, JOB)
    job = row(job)
    assert job.phase == P.DISPATCHED
    dispatched = job.transitions.get(phase=P.DISPATCHED, attempt=0)
    assert dispatched.at <= timezone.now()


# ---- item 12 ---------------------------------------------------------------------------------------------------
def test_item12_one_pass_names_one_source_for_the_gang_and_why_pending(world):
    """The gang's observed source and why-pending's source are written by one derivation of one snapshot; once the
    gang object has spoken they name the same object. (The de-flaked test_replacement_source asserts the same
    after a replacement; this one on a first attempt.)"""
    job = world.submit(backend="k8s-workload", replicas=2, containers=[builders.container(cpu="1000", memory="64Mi")])
    job = wait_for(lambda: world.reconcile(job).error is None and (
        j := row(job)).observed.get("gang", {}).get("admitted") is False and j, timeout=120,
        what="the PodGroup's Unschedulable condition in the job's observation", interval=1)
    name = world.names(job).gang_name
    assert job.observed["gang"]["source"] == job.why_pending["source"] == f"PodGroup {world.namespace}/{name}"
    assert job.why_pending["reason"] == job.observed["gang"]["reason"] == "Unschedulable"
