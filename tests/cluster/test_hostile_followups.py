"""Findings of the hostile pass after issue 30 (F3, F4, F5), on the real control plane: a repair that something in
the cluster keeps undoing backs off and says why (F5); an object pre-made under the name gangweb will use next is
never adopted, counted or deleted (F3); a cancel names what keeps it from ending (F4).

Passes are run by the test, one at a time, as the task would run them; nothing here waits on a clock but the
cluster's own progress (polled with generous bounds).
"""
from __future__ import annotations

import re
from datetime import timedelta

import pytest

from scheduling.choices import GangPhase as P
from scheduling.choices import ReconcileOutcome
from scheduling.constants import ANNOTATION_CREATED, LABEL_JOB_UID
from scheduling.db import clock as dbclock
from scheduling.kube import objects
from scheduling.kube.objects import JOB, POD
from scheduling.models import GangJob, ReconcileAttempt
from scheduling.observe.evidence import JobObjects
from scheduling.reconcile import desired, ownership, resync, watching
from scheduling.services.jobs import lifecycle as job_service
from tests import builders

from .mutating_webhook import RewritingWebhook
from .reconcile_support import reconciled_until, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]
SMALL = [builders.container(cpu="100m", memory="64Mi")]
MIN_COUNT = "/spec/schedulingPolicy/gang/minCount"


def row(job) -> GangJob:
    return GangJob.objects.get(pk=job.pk)


def hold_elapsed(job) -> None:
    """As if the repair's backoff were over: its `hold_until` moved into the past (no test waits on a clock)."""
    fresh = row(job)
    fresh.repairs = {**fresh.repairs, "hold_until": (dbclock.now() - timedelta(seconds=1)).isoformat()}
    GangJob.objects.filter(pk=job.pk).update(repairs=fresh.repairs)


# ---- F5 --------------------------------------------------------------------------------------------------------
@pytest.mark.k8s_version("1.37")  # v1beta1 lets minCount change in place; on 1.36 (v1alpha2) a change replaces
def test_f5_a_repair_an_admission_webhook_keeps_undoing_backs_off_and_says_why(world, settings):
    settings.GANGWEB_REPAIR_LIMIT = 3
    settings.GANGWEB_REPAIR_BACKOFF_SECONDS = 100  # long enough that no pass of this test outlives a hold
    settings.GANGWEB_RESYNC_SECONDS = 300
    job = world.submit(backend="k8s-workload", replicas=3, containers=SMALL)
    name = world.names(job).gang_name
    pg = world.k8s.POD_GROUP
    what = f"PodGroup {world.namespace}/{name} schedulingPolicy.gang.minCount"
    with RewritingWebhook(world.api, world.namespace, pg, str(job.uid), MIN_COUNT, 1) as hook:
        wait_for(hook.probe, timeout=60, what="the API server to call the rewriting webhook")
        assert world.reconcile(job).error is None  # creates the set; the PodGroup is stored with minCount 1
        assert world.get(pg, name)["spec"]["schedulingPolicy"]["gang"]["minCount"] == 1

        # The first repairs go out at once: each is undone by the webhook as it is written.
        for count in range(3):
            result = world.reconcile(job)
            assert result.error is None, result.message
            assert f"update PodGroup {world.namespace}/{name}: schedulingPolicy.gang.minCount" in result.actions
            assert result.reason != "RepairNotHolding"
            assert row(job).repairs["count"] == count and row(job).repairs["hold_until"] is None

        # The fourth repair is the third that did not hold: gangweb backs off and says why.
        result = world.reconcile(job)
        assert f"update PodGroup {world.namespace}/{name}: schedulingPolicy.gang.minCount" in result.actions
        assert (result.reason, result.requeue_after) == ("RepairNotHolding", 100)
        said = re.compile(re.escape(f"{what} set to 3 was changed back 3 times in ") + r"\d+" + re.escape(
            " s by something in the cluster (an admission policy or another controller); gangweb sets it again in "
            "100 s, then backs off up to every 300 s"))
        assert said.fullmatch(result.message), result.message
        attempt = ReconcileAttempt.objects.filter(job=job).latest("pk")
        assert (attempt.reason, attempt.message) == ("RepairNotHolding", result.message)
        assert {k: row(job).repairs[k] for k in ("what", "count", "delay")} == {"what": what, "count": 3,
                                                                                "delay": 100}

        # While the hold lasts a pass writes nothing: no patch, so no watch event and no pass it would queue.
        rewritten, version = hook.rewritten, world.get(pg, name)["metadata"]["resourceVersion"]
        result = world.reconcile(job)
        assert not any(a.startswith(f"update PodGroup {world.namespace}/{name}") for a in result.actions)
        assert result.reason == "RepairNotHolding" and 1 <= result.requeue_after <= 100
        assert any(a.startswith(f"not repaired yet (RepairNotHolding): {what} set to 3") for a in result.actions)
        assert hook.rewritten == rewritten
        assert world.get(pg, name)["metadata"]["resourceVersion"] == version

        # Each repair after a hold that still does not hold doubles the wait, up to the resync period.
        for count, delay in ((4, 200), (5, 300), (6, 300)):
            hold_elapsed(job)
            result = world.reconcile(job)
            assert f"update PodGroup {world.namespace}/{name}: schedulingPolicy.gang.minCount" in result.actions
            assert (result.reason, result.requeue_after) == ("RepairNotHolding", delay), result.message
            assert f"was changed back {count} times in " in result.message
            assert result.message.endswith(f"gangweb sets it again in {delay} s, then backs off up to every 300 s")

    # The webhook is gone: the next repair (once the hold is over) holds, and the backoff ends with it.
    hold_elapsed(job)
    result = world.reconcile(job)
    assert f"update PodGroup {world.namespace}/{name}: schedulingPolicy.gang.minCount" in result.actions
    assert world.get(pg, name)["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
    result = world.reconcile(job)
    assert result.reason != "RepairNotHolding" and not any(a.startswith("update PodGroup") for a in result.actions)
    assert row(job).repairs["hold_until"] is None  # in sync: the watch queues the job's passes again
    assert world.gang(job, JOB)


# ---- F3 --------------------------------------------------------------------------------------------------------
def next_generation_spec(world, job):
    """The GangSpec (names, objects) of the job's next generation: what anyone can compute from its name and UID."""
    ahead = GangJob.objects.select_related("queue").get(pk=job.pk)
    ahead.gang_generation += 1
    return desired.gang_spec(ahead)


def test_f3_objects_premade_under_the_next_generations_names_are_never_adopted_counted_or_deleted(world):
    job = world.submit(backend="k8s-workload", replicas=2, containers=SMALL)
    assert world.reconcile(job).error is None
    now = world.names(job)
    ahead = next_generation_spec(world, job)
    assert ahead.gang_name != now.gang_name
    # Someone who can read the job (its UID) and create in its namespace makes its next generation's Workload and
    # PodGroup before gangweb does, with the job's gangweb labels on them.
    workload, pod_group = world.k8s().build_gang_objects(ahead)
    squatters = {"Workload": objects.create(world.api, world.k8s.WORKLOAD, workload),
                 "PodGroup": objects.create(world.api, world.k8s.POD_GROUP, pod_group)}
    assert squatters["PodGroup"]["metadata"]["labels"][LABEL_JOB_UID] == str(job.uid)
    assert ANNOTATION_CREATED not in (squatters["PodGroup"]["metadata"].get("annotations") or {})

    # The job's PodGroup is deleted by hand: gangweb replaces the gang under the next generation's names.
    objects.delete(world.api, world.k8s.POD_GROUP, world.namespace, now.gang_name)
    result = world.reconcile(job)

    assert any(a.startswith("replace gang: ") for a in result.actions), result.actions
    assert (result.outcome, result.reason) == (ReconcileOutcome.TERMINAL_ERROR, "NameConflict"), result.message
    squat = squatters["Workload"]["metadata"]["uid"]
    assert result.message == (
        f"Workload {world.namespace}/{ahead.gang_name} already exists and belongs to something other than gangweb: "
        f"gangweb did not make it (uid {squat}), though it carries this job's gangweb labels, so it is not adopted, "
        "counted or deleted. gangweb creates nothing under this name until it is gone: delete it, or resubmit the "
        "job under another name.")
    job = row(job)
    assert job.gang_generation == 1 and (job.phase_reason, job.phase_message) == ("NameConflict", result.message)
    # Never bound to them: no UID of theirs recorded, no Indexed Job (whose pods would join their PodGroup).
    theirs = {o["metadata"]["uid"] for o in squatters.values()}
    assert not theirs & set((job.owner_uids or {}).values())
    assert not [j for j in world.gang(job, JOB) if j["metadata"]["name"] in {p.owner_name for p in ahead.pod_sets}]

    # More passes, a resync and the watch's observation of them: still neither adopted, patched nor deleted, and
    # never among the job's objects.
    for _ in range(2):
        assert world.reconcile(job).reason == "NameConflict"
    resync.resync_cluster(world.cluster)  # its pass of the job meets the same name: NameConflict again
    assert ReconcileAttempt.objects.filter(job=job).latest("pk").reason == "NameConflict"
    watching.observe_job(str(job.uid), JobObjects(gang=[world.get(world.k8s.WORKLOAD, ahead.gang_name),
                                                        world.get(world.k8s.POD_GROUP, ahead.gang_name)]), False)
    for kind, made in squatters.items():
        ref = world.k8s.WORKLOAD if kind == "Workload" else world.k8s.POD_GROUP
        there = world.get(ref, ahead.gang_name)
        assert there is not None and there["metadata"]["uid"] == made["metadata"]["uid"], f"{kind} was deleted"
        assert there["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"], f"{kind} was changed"
    job = row(job)
    assert not theirs & {o["metadata"]["uid"] for o in job.observed.get("objects") or []}
    assert not theirs & set((job.owner_uids or {}).values())

    # Once they are gone, gangweb makes its own under those names (its mark on them) and the job goes on.
    for ref in (world.k8s.POD_GROUP, world.k8s.WORKLOAD):
        objects.delete(world.api, ref, world.namespace, ahead.gang_name)
    wait_for(lambda: world.get(world.k8s.WORKLOAD, ahead.gang_name) is None
             and world.get(world.k8s.POD_GROUP, ahead.gang_name) is None, timeout=60, what="the squatters gone")
    result = world.reconcile(job)
    assert result.error is None, result.message
    mine = world.get(world.k8s.POD_GROUP, ahead.gang_name)
    assert mine["metadata"]["uid"] not in theirs
    assert ownership.made_by_gangweb(mine, str(job.uid))
    job = row(job)
    assert job.owner_uids[ownership.object_key(mine)] == mine["metadata"]["uid"]
    assert {j["metadata"]["name"] for j in world.gang(job, JOB)} == {p.owner_name for p in ahead.pod_sets}


# ---- F4 --------------------------------------------------------------------------------------------------------
HOLD = "gangweb.test/hold"  # a finalizer of the test's own: keeps a deleted pod Terminating


def test_f4_a_cancel_names_the_pod_a_finalizer_holds_after_its_job_was_deleted_by_hand(world):
    job = reconciled_until(world, world.submit(backend="k8s-workload", replicas=2, containers=SMALL), P.RUNNING)
    [owner] = world.gang(job, JOB)
    pods = sorted(world.gang(job, POD), key=lambda p: p["metadata"]["name"])
    held = pods[0]["metadata"]["name"]
    objects.merge_patch(world.api, POD, world.namespace, held, {"metadata": {"finalizers": [HOLD]}})
    try:
        # Someone deletes the job's Indexed Job by hand: the garbage collector deletes its pods; the one with the
        # test's finalizer stays Terminating, still naming the deleted Job as its controller.
        objects.delete(world.api, JOB, world.namespace, owner["metadata"]["name"])
        wait_for(lambda: [p["metadata"]["name"] for p in world.gang(job, POD)] == [held]
                 and world.get(POD, held)["metadata"].get("deletionTimestamp")
                 and world.get(JOB, owner["metadata"]["name"]) is None, timeout=90,
                 what="the Job gone and only the held pod left, terminating")
        job_service.cancel(world.user, row(job))
        expected = (f"deleting the job's cluster objects; waiting for Pod {world.namespace}/{held} (being deleted; "
                    f"held by finalizer {HOLD})")

        # The pass deletes what is left of the job; what it cannot delete is named, with its finalizer. (The gang
        # objects go at the first pass; later passes find only the pod.)
        def named():
            result = world.reconcile(job)
            assert result.error is None, result.message
            fresh = row(job)
            return fresh.phase_reason == "Cancelling" and fresh.phase_message == expected and (fresh, result)

        fresh, result = wait_for(named, timeout=90, what="the Cancelling message naming the held pod", interval=1)
        assert fresh.phase == P.RUNNING  # not Cancelled while the pod is there
        assert (result.reason, result.message) == ("CleaningUp", "waiting for the job's objects to be deleted; "
                                                                 f"waiting for Pod {world.namespace}/{held} (being "
                                                                 f"deleted; held by finalizer {HOLD})")
        # The watch's observation of the same objects says the same.
        GangJob.objects.filter(pk=job.pk).update(phase_message="")
        watching.observe_job(str(job.uid), JobObjects(pods=[world.get(POD, held)]), False)
        assert (row(job).phase_reason, row(job).phase_message) == ("Cancelling", expected)
    finally:
        objects.merge_patch(world.api, POD, world.namespace, held, {"metadata": {"finalizers": None}})

    def cancelled():
        world.reconcile(job)
        return row(job).phase == P.CANCELLED

    wait_for(cancelled, timeout=90, what="the job Cancelled once the pod is gone", interval=1)
    assert world.gang(job, POD) == []
