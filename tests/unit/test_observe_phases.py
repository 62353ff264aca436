"""A job's phase and timeline entries follow from the gang status, pods and owner Jobs, with cluster times."""
import pytest

from scheduling.backends.base import GangStatus
from scheduling.backends.k8s_workload_v1alpha2 import K8sWorkloadV1alpha2
from scheduling.choices import GangPhase as P
from scheduling.observe import phases
from scheduling.observe.evidence import Evidence
from scheduling.observe.pods import owner_facts, pod_facts
from tests.kube_objects import T0, at, batch_job, pod, t, v1alpha2_podgroup

GANG3 = phases.JobShape(min_member=3, total=3)
UNSCHEDULABLE = GangStatus(admitted=False, reason="Unschedulable", message="0/4 nodes are available",
                           at=t(3), source="PodGroup default/j-pg")
NOT_YET = GangStatus(source="PodGroup default/j-pg")
SUBMITTED = {P.SUBMITTED: T0}
OWNERS = (batch_job(),)
GANG_OBJECTS = (v1alpha2_podgroup(),)
LATER = t(100)


def run(gang, pods=(), owners=OWNERS, gang_objects=GANG_OBJECTS, current=P.SUBMITTED, recorded=None, shape=GANG3,
        now=LATER, attempt=0):
    evidence = Evidence(shape, gang, list(gang_objects), [pod_facts(p) for p in pods], [owner_facts(w) for w in owners],
                        now)
    return phases.observe(evidence, current, dict(recorded or SUBMITTED), attempt=attempt)


def pods3(**kw):
    return [pod(name=f"p-{i}", **kw) for i in range(3)]


def test_an_unschedulable_gang_is_queued_with_the_schedulers_reason_and_0_of_3_bound():
    obs = run(UNSCHEDULABLE, pods3(unschedulable="0/4 nodes are available"))
    assert [(e.phase, e.at) for e in obs.entries] == [(P.DISPATCHED, t(1)), (P.QUEUED, t(2))]
    queued = obs.entries[1]
    assert (queued.reason, queued.source) == ("Unschedulable", "PodGroup default/j-pg")
    assert queued.message == "0/4 nodes are available (0 of 3 bound)"
    assert (obs.phase, obs.reason, obs.message) == (P.QUEUED, "Unschedulable", "0/4 nodes are available (0 of 3 bound)")


def test_objects_created_but_no_pods_yet_is_dispatched_waiting_for_pods():
    obs = run(NOT_YET, pods=[])
    assert [e.phase for e in obs.entries] == [P.DISPATCHED]
    assert (obs.phase, obs.reason, obs.message) == (P.DISPATCHED, "WaitingForPods", "0 of 3 pods created")


def test_pods_nobody_looked_at_stay_dispatched_waiting_for_the_scheduler():
    obs = run(NOT_YET, pods3())
    assert obs.phase == P.DISPATCHED
    assert obs.reason == "WaitingForScheduler"


def test_scheduled_and_running_seen_in_one_pass_each_get_their_own_cluster_time():
    pods = [pod(name="p-0", bound=4, started=6), pod(name="p-1", bound=5, started=7), pod(name="p-2", bound=5,
                                                                                          started=9)]
    obs = run(GangStatus(admitted=True, reason="Scheduled", at=t(5), source="PodGroup default/j-pg"), pods)
    assert [(e.phase, e.at) for e in obs.entries] == [
        (P.DISPATCHED, t(1)), (P.QUEUED, t(2)), (P.SCHEDULED, t(5)), (P.RUNNING, t(9))]
    assert obs.entries[2].message == "3 of 3 bound"
    assert obs.entries[3].source == "Pod default/p-2"
    assert (obs.phase, obs.reason, obs.message) == (P.RUNNING, "Running", "3 of 3 pods running")


@pytest.mark.parametrize("gang", [NOT_YET, GangStatus(admitted=True, reason="Scheduled", at=t(5),
                                                       source="PodGroup default/j-pg")], ids=["silent", "admitted"])
def test_a_gang_first_seen_bound_has_a_queued_entry_that_says_it_never_waited(gang):
    """Not "Pending" next to "3 of 3 bound" (a fresh user read that as a contradiction)."""
    pods = [pod(name=f"p-{i}", bound=4) for i in range(3)]
    queued = next(e for e in run(gang, pods).entries if e.phase == P.QUEUED)
    assert (queued.reason, queued.message, queued.source) == (
        "PlacedWithoutWait", "placed as soon as it was queued (3 of 3 bound)", "Pod default/p-0")


def test_a_gang_seen_while_its_pods_are_being_bound_says_the_same_as_one_seen_whole():
    """Issue 33 item 4: one reason for one instant placement. Seen with 1 of 3 pods bound a second after their
    creation (the others not yet looked at), the Queued entry says PlacedWithoutWait, as when seen with 3 of 3,
    never "Pending"."""
    pods = [pod(name="p-0", bound=3), pod(name="p-1"), pod(name="p-2")]
    queued = next(e for e in run(NOT_YET, pods).entries if e.phase == P.QUEUED)
    assert (queued.reason, queued.source) == ("PlacedWithoutWait", "Pod default/p-0")
    assert queued.message.startswith("placed as soon as it was queued")


@pytest.mark.parametrize("admitted_at, reason, message", [
    (3, "PlacedWithoutWait", "admitted as soon as it was queued (1 of 3 bound)"),
    (73, "PlacedAfterWait", "admitted after waiting 71 s (1 of 3 bound)"),
    (None, "PlacedUnseen", "already admitted when first observed; the cluster gives no time to tell how long it "
                           "waited (1 of 3 bound)")])
def test_a_gang_first_seen_admitted_but_not_yet_bound_has_a_queue_side_queued_reason(admitted_at, reason, message):
    """Not the admission's "Scheduled" on the Queued entry (a fresh user's pass): that is the Scheduled entry's."""
    gang = GangStatus(admitted=True, reason="Scheduled", at=None if admitted_at is None else t(admitted_at),
                      source="PodGroup default/j-pg")
    pods = [pod(name="p-0", bound=4), pod(name="p-1"), pod(name="p-2")]
    obs = run(gang, pods)
    queued = next(e for e in obs.entries if e.phase == P.QUEUED)
    assert (queued.reason, queued.message, queued.source) == (reason, message, "PodGroup default/j-pg")
    if admitted_at is not None:
        scheduled = next(e for e in obs.entries if e.phase == P.SCHEDULED)
        assert scheduled.reason == "Scheduled"


def test_scheduled_time_is_when_the_min_member_th_pod_was_bound():
    pods = [pod(name="p-0", bound=4), pod(name="p-1", bound=8), pod(name="p-2", unschedulable="no room")]
    obs = run(NOT_YET, pods, shape=phases.JobShape(min_member=2, total=3))
    assert obs.entries[-1].phase == P.SCHEDULED
    assert (obs.entries[-1].at, obs.entries[-1].source) == (t(8), "Pod default/p-1")
    assert obs.reason == "PodsStarting"


def test_already_recorded_phases_are_never_repeated():
    recorded = {P.SUBMITTED: T0, P.DISPATCHED: t(1), P.QUEUED: t(2)}
    obs = run(UNSCHEDULABLE, pods3(unschedulable="0/4"), current=P.QUEUED, recorded=recorded)
    assert obs.entries == []
    assert obs.phase == P.QUEUED


def test_the_job_ends_succeeded_when_its_jobs_complete_and_missed_phases_are_filled_in():
    recorded = {P.SUBMITTED: T0, P.DISPATCHED: t(1), P.QUEUED: t(2)}
    pods = [pod(name=f"p-{i}", bound=5, started=6 + i, finished=20 + i) for i in range(3)]
    obs = run(GangStatus(admitted=True, at=t(5)), pods, owners=[batch_job(complete=23)], current=P.QUEUED,
              recorded=recorded)
    assert [(e.phase, e.at) for e in obs.entries] == [(P.SCHEDULED, t(5)), (P.RUNNING, t(8)), (P.SUCCEEDED, t(23))]
    assert obs.entries[-1].source == "Job default/j-worker"
    assert (obs.phase, obs.reason) == (P.SUCCEEDED, "Completed")


def test_a_failed_job_ends_failed_with_the_jobs_reason():
    recorded = {P.SUBMITTED: T0, P.DISPATCHED: t(1), P.QUEUED: t(2), P.SCHEDULED: t(5), P.RUNNING: t(8)}
    pods = [pod(name=f"p-{i}", bound=5, started=6, finished=20, phase="Failed") for i in range(3)]
    obs = run(GangStatus(admitted=True, at=t(5)), pods, owners=[batch_job(failed=21)], current=P.RUNNING,
              recorded=recorded)
    assert [(e.phase, e.at, e.reason) for e in obs.entries] == [(P.FAILED, t(21), "BackoffLimitExceeded")]
    assert obs.phase == P.FAILED


def test_bare_pods_that_all_succeed_end_succeeded_at_the_last_finish():
    pods = [pod(name=f"p-{i}", bound=5, started=6, finished=30 + i) for i in range(3)]
    obs = run(GangStatus(), pods, owners=[], current=P.RUNNING,
              recorded={P.SUBMITTED: T0, P.DISPATCHED: t(1), P.QUEUED: t(2), P.SCHEDULED: t(5), P.RUNNING: t(6)})
    assert [(e.phase, e.at, e.source) for e in obs.entries] == [(P.SUCCEEDED, t(32), "Pod default/p-2")]


def test_a_terminal_job_never_changes():
    obs = run(UNSCHEDULABLE, pods3(unschedulable="x"), current=P.CANCELLED,
              recorded={P.SUBMITTED: T0, P.CANCELLED: t(1)})
    assert obs.entries == [] and obs.phase == P.CANCELLED


def test_a_cancelling_job_says_cancelling_and_is_never_cancelled_by_an_observation():
    # Only the reconcile pass's own LIST may conclude that nothing is left (reconcile/jobs/cleanup.py `cancel`): a watch
    # cache or a resync snapshot may lag behind objects that exist, e.g. pods the Job controller just made.
    shape = phases.JobShape(min_member=3, total=3, cancelling=True)
    still = run(UNSCHEDULABLE, pods3(unschedulable="x", terminating=True), current=P.QUEUED, shape=shape,
                recorded={P.SUBMITTED: T0, P.DISPATCHED: t(1), P.QUEUED: t(2)})
    assert still.entries == [] and still.reason == "Cancelling"
    empty = run(GangStatus(), [], owners=[], gang_objects=[], current=P.RUNNING, shape=shape, now=t(50),
                recorded={P.SUBMITTED: T0, P.DISPATCHED: t(1), P.QUEUED: t(2)})
    assert P.CANCELLED not in [e.phase for e in empty.entries] and empty.phase != P.CANCELLED
    assert empty.reason == "Cancelling"


@pytest.mark.parametrize("submitted_at,expected", [
    # The cluster's creationTimestamp has one-second precision: an object made 0.4 s after the submit can carry
    # an earlier second. The entry is clamped so the timeline reads in order.
    (t(1.4), t(1.4)),
    (t(0.5), t(1)),
])
def test_cluster_times_earlier_than_the_previous_entry_are_clamped(submitted_at, expected):
    obs = run(NOT_YET, [], recorded={P.SUBMITTED: submitted_at})
    assert obs.entries[0].at == expected


def test_pods_that_vanish_while_queued_say_objects_missing():
    obs = run(GangStatus(), [], owners=[], gang_objects=[], current=P.QUEUED,
              recorded={P.SUBMITTED: T0, P.DISPATCHED: t(1), P.QUEUED: t(2)})
    assert (obs.phase, obs.reason) == (P.QUEUED, "ObjectsMissing")


def test_a_running_gang_being_preempted_says_so():
    pg = v1alpha2_podgroup(scheduled=("True", "Scheduled", "", 5))
    pg["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                       "message": "preempted by default/big-job", "lastTransitionTime": at(7)})
    disrupted = K8sWorkloadV1alpha2().read_status([pg])  # the plugin reads its own conditions
    assert disrupted.disruption_reason == "PreemptionByScheduler"
    pods = [pod(name=f"p-{i}", bound=5, started=6) for i in range(3)]
    obs = run(disrupted, pods, current=P.RUNNING,
              recorded={P.SUBMITTED: T0, P.DISPATCHED: t(1), P.QUEUED: t(2), P.SCHEDULED: t(5), P.RUNNING: t(6)})
    assert (obs.phase, obs.reason, obs.message) == (P.RUNNING, "PreemptionByScheduler", "preempted by default/big-job")


RAN = {P.SUBMITTED: T0, P.DISPATCHED: t(1), P.QUEUED: t(2), P.SCHEDULED: t(5), P.RUNNING: t(6)}


def preempted(name: str) -> dict:
    """A pod the scheduler is preempting: terminating, with DisruptionTarget=True (core/v1 pod condition)."""
    p = pod(name=name, bound=5, started=6, terminating=True)
    p["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                      "message": "Kai-scheduler: preempting to make room for default/big-job",
                                      "lastTransitionTime": at(50)})
    return p


def entries(obs):
    return [(e.phase, e.attempt, e.at, e.reason, e.source) for e in obs.entries]


def test_a_running_gang_whose_pods_are_preempted_is_requeued_as_a_new_attempt_with_the_pods_reason_and_who():
    pods = [preempted(f"p-{i}") for i in range(3)] + [
        pod(name=f"q-{i}", created=51, unschedulable="0/4 nodes are available") for i in range(3)]
    obs = run(GangStatus(), pods, current=P.RUNNING, recorded=RAN)
    assert entries(obs) == [(P.QUEUED, 1, t(50), "PreemptionByScheduler", "Pod default/p-0")]
    message = ("gang disrupted: 0 of 3 bound; Pod default/p-0: Kai-scheduler: preempting to make room for "
               "default/big-job")
    assert obs.entries[0].message == message
    assert (obs.phase, obs.attempt, obs.reason, obs.message) == (P.QUEUED, 1, "PreemptionByScheduler", message)


def test_a_running_gang_whose_pods_were_replaced_and_wait_again_is_requeued_at_the_replacements_creation():
    pods = [pod(name=f"q-{i}", created=51, unschedulable="0/4 nodes are available") for i in range(3)]
    obs = run(GangStatus(), pods, current=P.RUNNING, recorded=RAN)
    assert entries(obs) == [(P.QUEUED, 1, t(51), "Requeued", "Pod default/q-0")]
    assert (obs.phase, obs.attempt, obs.reason, obs.message) == (
        P.QUEUED, 1, "Requeued", "requeued: 0 of 3 bound; 0/4 nodes are available")


def test_a_late_observation_that_sees_only_the_replacement_running_records_the_whole_new_attempt():
    # One member evicted and replaced between two observations (a resync, no watch): the replacement was created
    # after the gang was scheduled, so the gang as scheduled was taken apart, and is whole again.
    pods = [pod(name="p-0", bound=5, started=6), pod(name="p-1", bound=5, started=6),
            pod(name="p-2b", created=40, bound=42, started=43)]
    obs = run(GangStatus(admitted=True, at=t(5)), pods, current=P.RUNNING, recorded=RAN)
    assert entries(obs) == [(P.QUEUED, 1, t(40), "Requeued", "Pod default/p-2b"),
                            (P.SCHEDULED, 1, t(42), "Scheduled", "Pod default/p-2b"),
                            (P.RUNNING, 1, t(43), "Running", "Pod default/p-2b")]
    assert (obs.phase, obs.attempt, obs.reason) == (P.RUNNING, 1, "Running")

    again = run(GangStatus(admitted=True, at=t(5)), pods, current=P.RUNNING, attempt=1,
                recorded={P.QUEUED: t(40), P.SCHEDULED: t(42), P.RUNNING: t(43)})
    assert again.entries == [] and (again.phase, again.attempt) == (P.RUNNING, 1)


def test_a_requeued_attempt_is_scheduled_by_its_pods_not_by_a_gang_object_still_saying_admitted():
    pods = [pod(name="p-0", bound=5, started=6), pod(name="p-1", bound=5, started=6),
            pod(name="p-2b", created=40, unschedulable="0/4 nodes are available")]
    obs = run(GangStatus(admitted=True, at=t(5)), pods, current=P.QUEUED, attempt=1, recorded={P.QUEUED: t(40)})
    assert obs.entries == [] and (obs.phase, obs.reason) == (P.QUEUED, "Requeued")

    pods[2] = pod(name="p-2b", created=40, bound=44, started=45)
    obs = run(GangStatus(admitted=True, at=t(5)), pods, current=P.QUEUED, attempt=1, recorded={P.QUEUED: t(40)})
    assert [(e.phase, e.attempt, e.at) for e in obs.entries] == [(P.SCHEDULED, 1, t(44)), (P.RUNNING, 1, t(45))]


@pytest.mark.parametrize("case, shape, pods, recorded", [
    # KAI may admit the gang before its pods are bound: created before the admission, they are not replacements.
    ("admitted before binding", GANG3, [pod(name=f"p-{i}", created=2, unschedulable="binding") for i in range(3)],
     {**SUBMITTED, P.DISPATCHED: t(1), P.QUEUED: t(2), P.SCHEDULED: t(5)}),
    # A Job creates a large gang's pods in batches: later pods while minMember of the first ones live.
    ("pods created in batches", phases.JobShape(min_member=2, total=4),
     [pod(name="p-0", bound=4), pod(name="p-1", bound=5), pod(name="p-2", created=7, unschedulable="no room"),
      pod(name="p-3", created=7, unschedulable="no room")],
     {**SUBMITTED, P.DISPATCHED: t(1), P.QUEUED: t(2), P.SCHEDULED: t(5)}),
])
def test_no_requeue_while_the_pods_the_gang_was_scheduled_with_are_still_there(case, shape, pods, recorded):
    obs = run(GangStatus(admitted=True, at=t(5)), pods, current=P.SCHEDULED, recorded=recorded, shape=shape)
    assert obs.entries == [] and (obs.phase, obs.attempt) == (P.SCHEDULED, 0)


def test_a_member_evicted_within_the_second_the_gang_was_scheduled_still_starts_a_new_attempt():
    # Scheduled was clamped to gangweb's sub-second Submitted time; the cluster's DisruptionTarget time is whole.
    p = pod(name="p-1", bound=5, started=5, terminating=True)
    p["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                                      "message": "Eviction API: evicting", "lastTransitionTime": at(5)})
    recorded = {**SUBMITTED, P.DISPATCHED: t(5.4), P.QUEUED: t(5.4), P.SCHEDULED: t(5.4), P.RUNNING: t(5.4)}
    obs = run(GangStatus(), [pod(name="p-0", bound=5, started=5), p], current=P.RUNNING, recorded=recorded,
              shape=phases.JobShape(min_member=2, total=2))
    assert entries(obs) == [(P.QUEUED, 1, t(5.4), "EvictionByEvictionAPI", "Pod default/p-1")]


def reporting_job(active: int, succeeded: int = 0, failed: int = 0) -> dict:
    """The Indexed Job of the gang with the counts its controller reports (batch/v1 JobStatus)."""
    job = batch_job()
    job["status"].update({"startTime": at(1), "active": active, "succeeded": succeeded, "failed": failed})
    return job


def owned(p: dict, job: str = "j-worker") -> dict:
    """`p` with the controller reference its Job controller writes (batch/v1 Job `uid-<job>`)."""
    p["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": f"uid-{job}",
                                         "controller": True}]
    return p


def test_a_terminating_pod_no_live_job_owns_is_no_member_deleted():
    # The pods of Jobs gangweb already deleted (a replacement under new names): not this gang's members any more.
    gone = owned(pod(name="p-2", bound=5, started=6, terminating=True), job="old-worker")
    pods = [owned(pod(name="p-0", bound=5, started=6)), owned(pod(name="p-1", bound=5, started=6)), gone]
    obs = run(GangStatus(), pods, owners=(reporting_job(active=3),), current=P.RUNNING, recorded=RAN)
    assert obs.entries == [] and obs.phase == P.RUNNING


def test_jobs_made_after_the_gang_was_scheduled_are_a_restart_not_lost_members():
    # gangweb replaced the gang under new names: the new Job (created at t(60), after the gang was scheduled at
    # t(5)) reports no pod yet. That attempt is `note_restart`'s (Replaced), not a loss.
    new = reporting_job(active=0)
    new["metadata"]["creationTimestamp"] = at(60)
    obs = run(GangStatus(), [], owners=(new,), current=P.RUNNING, recorded=RAN)
    assert all(e.reason != "MembersLost" for e in obs.entries)


def test_a_running_gang_with_a_member_deleted_by_hand_is_requeued_at_the_deletion_never_left_running():
    # A plain DELETE of one member (no DisruptionTarget): the pod is terminating with a 30 s grace period, and no
    # replacement exists yet. deletionTimestamp = t(102) = asked at t(72) + 30 s.
    gone = owned(pod(name="p-2", bound=5, started=6, terminating=True))
    gone["metadata"]["deletionGracePeriodSeconds"] = 30
    pods = [owned(pod(name="p-0", bound=5, started=6)), owned(pod(name="p-1", bound=5, started=6)), gone]
    obs = run(GangStatus(), pods, owners=(reporting_job(active=3),), current=P.RUNNING, recorded=RAN)
    assert entries(obs) == [(P.QUEUED, 1, t(72), "MemberDeleted", "Pod default/p-2")]
    assert obs.entries[0].message == "gang taken apart: 2 of 3 bound; Pod default/p-2 was deleted"
    assert (obs.phase, obs.attempt, obs.reason, obs.message) == (
        P.QUEUED, 1, "MemberDeleted", "gang taken apart: 2 of 3 bound; Pod default/p-2 is being deleted")


def test_a_running_gang_whose_member_vanished_unseen_is_requeued_at_gangwebs_clock_marked_inferred():
    # The deleted member is gone before gangweb looked; its Job controller counts it failed (2 active, 1 failed).
    pods = [pod(name="p-0", bound=5, started=6), pod(name="p-1", bound=5, started=6)]
    obs = run(GangStatus(), pods, owners=(reporting_job(active=2, failed=1),), current=P.RUNNING, recorded=RAN)
    assert entries(obs) == [(P.QUEUED, 1, LATER, "MembersLost", "gangweb")]
    assert obs.entries[0].inferred is True
    assert (obs.phase, obs.reason) == (P.QUEUED, "MembersLost")
    assert obs.message == "gang taken apart: 2 of 3 bound; no pod waits in the lost members' place yet"


def test_a_member_the_job_controller_still_counts_is_no_requeue_when_the_pods_run_ahead_of_its_report():
    # One pod finished (Succeeded) before the Job controller counted it: it is left out of the count for now
    # (cross_check), but the controller's report (3 active) says the members are all there: no new attempt.
    pods = [pod(name="p-0", bound=5, started=6), pod(name="p-1", bound=5, started=6),
            pod(name="p-2", bound=5, started=6, finished=50)]
    obs = run(GangStatus(), pods, owners=(reporting_job(active=3),), current=P.RUNNING, recorded=RAN)
    assert obs.entries == [] and (obs.phase, obs.attempt) == (P.RUNNING, 0)


def test_a_gang_gangweb_is_taking_down_gets_no_member_deleted_entry():
    # The owner Job is being deleted (a replacement or a clean-up by gangweb): those entries are its own.
    job = reporting_job(active=3)
    job["metadata"]["deletionTimestamp"] = at(70)
    pods = [pod(name="p-0", bound=5, started=6), pod(name="p-1", bound=5, started=6),
            pod(name="p-2", bound=5, started=6, terminating=True)]
    obs = run(GangStatus(), pods, owners=(job,), current=P.RUNNING, recorded=RAN)
    assert obs.entries == [] and obs.phase == P.RUNNING
