"""Kueue's backend plugin (kueue-v1beta2): the one Workload it builds per job, how it reads the conditions Kueue writes
(pkg/workload, pkg/scheduler of Kueue v0.17.0, in their own words), the status writes it owes Kueue as the job's owner
(the job framework's), drift by Kueue's immutability rules, and the phase rules that keep a quota-only admission from
reading as placed."""
import copy
from datetime import UTC, datetime

import pytest

from scheduling.backends import registry
from scheduling.backends.base import GangStatus, PodSetSpec
from scheduling.backends.kueue_v1beta2 import KueueV1beta2
from scheduling.choices import GangPhase as P
from scheduling.observe import phases
from scheduling.observe.evidence import Evidence
from scheduling.observe.pods import owner_facts, pod_facts
from tests.kube_objects import at, batch_job, pod, t
from tests.unit.test_backends import LABELS, spec

KUEUE = KueueV1beta2()
NOW = datetime(2026, 12, 6, 14, 0, 0, tzinfo=UTC)
GPU = {"resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}
PENDING_MESSAGE = ("couldn't assign flavors to pod set worker: insufficient quota for nvidia.com/gpu in flavor "
                   "gangweb-default, previously considered podsets requests (0) + current podset request (2) > "
                   "maximum capacity (1)")
PREEMPTED_MESSAGE = ("Preempted to accommodate a workload (UID: 0b8a5c1e-4a0f-4f57-9d2c-7a3e2f1b6c90, JobUID: UNKNOWN) "
                     "due to prioritization in the ClusterQueue; preemptor path: /team-a; preemptee path: /team-a")


def gpu_spec(**over):
    template = {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "main", "image": "i", **GPU}]}}
    launcher = {"metadata": {}, "spec": {"containers": [{"name": "main", "image": "i"}]}}
    return spec(pod_sets=(PodSetSpec("launcher", 1, 1, launcher, "train-launcher-abcd1234"),
                          PodSetSpec("worker", 2, 2, template, "train-worker-abcd1234")), **over)


def served(conditions=(), admission=None, **status):
    """The Workload gangweb builds, as the API server returns it with Kueue's status."""
    [wl] = KUEUE.build_gang_objects(gpu_spec(priority=1000))
    wl = copy.deepcopy(wl)
    wl["metadata"].update(uid="uid-wl", resourceVersion="7", generation=1, creationTimestamp=at(1))
    wl["spec"]["active"] = True  # the CRD's default
    wl["status"] = {"conditions": [dict(c) for c in conditions], **status}
    if admission is not None:
        wl["status"]["admission"] = admission
    return wl


def cond(kind, status, reason, message, second):
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": at(second),
            "observedGeneration": 1}


ADMISSION = {"clusterQueue": "team-a", "podSetAssignments": [
    {"name": "launcher", "flavors": {"cpu": "gangweb-default"}, "resourceUsage": {"cpu": "0"}, "count": 1},
    {"name": "worker", "flavors": {"nvidia.com/gpu": "gangweb-default"}, "resourceUsage": {"nvidia.com/gpu": "2"},
     "count": 2}]}
WAITING = [cond("QuotaReserved", "False", "Pending", PENDING_MESSAGE, 3)]
ADMITTED = [cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team-a", 10),
            cond("Admitted", "True", "Admitted", "The workload is admitted", 11)]
EVICTED = [*ADMITTED, cond("Evicted", "True", "Preempted", PREEMPTED_MESSAGE, 40),
           cond("Preempted", "True", "InClusterQueue", PREEMPTED_MESSAGE, 40)]


def test_the_registry_knows_the_kueue_family_and_its_names():
    assert registry.select("kueue", {"kueue.x-k8s.io/v1beta2"}) is KueueV1beta2
    assert registry.select("kueue", {"kueue.x-k8s.io/v1beta1"}) is None  # v1beta1 is served too, never used
    assert (KUEUE.name, KUEUE.api_version, KUEUE.scheduler_name) == ("kueue-v1beta2", "kueue.x-k8s.io/v1beta2", "")
    assert KUEUE.scheduler_leases == (("", "c1f6bfd2.kueue.x-k8s.io"),)
    assert KUEUE.root_ref.kind == "Workload" and KUEUE.root_ref.plural == "workloads"


def test_one_workload_per_job_one_pod_set_each_with_its_count_the_stamped_template_queue_and_priority():
    s = gpu_spec(priority=1000)
    [wl] = KUEUE.build_gang_objects(s)
    assert (wl["apiVersion"], wl["kind"]) == ("kueue.x-k8s.io/v1beta2", "Workload")
    assert wl["metadata"] == {"name": "train-abcd1234", "namespace": "ml", "labels": LABELS}
    body = wl["spec"]
    assert body["queueName"] == "team-a"
    assert body["priorityClassRef"] == {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "train"}
    assert body["priority"] == 1000
    assert [(ps["name"], ps["count"]) for ps in body["podSets"]] == [("launcher", 1), ("worker", 2)]
    assert not any("minCount" in ps for ps in body["podSets"])  # partial admission is not used
    worker = body["podSets"][1]["template"]
    # The Indexed Job's template exactly: Kueue counts what the pods will ask.
    assert worker == KUEUE.job_pod_template(s, s.pod_sets[1])
    assert worker["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"}
    assert worker["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "worker"
    assert worker["metadata"]["labels"]["gangweb.io/pod-set"] == "worker"
    assert "schedulerName" not in worker["spec"]  # kube-scheduler places the admitted pods
    assert set(body) == {"queueName", "podSets", "priorityClassRef", "priority"}


def test_without_a_priority_class_the_priority_its_pods_get_and_no_class_reference():
    [wl] = KUEUE.build_gang_objects(gpu_spec(priority_class_name="", priority=0))
    assert "priorityClassRef" not in wl["spec"] and wl["spec"]["priority"] == 0
    [later] = KUEUE.build_gang_objects(gpu_spec(priority_class_name=""))  # a pass that does not create reads none
    assert "priority" not in later["spec"]


def test_kueue_admits_the_whole_job_so_a_pod_set_minimum_is_refused_with_a_sentence():
    assert KUEUE.per_set_minimums is False and KUEUE.set_minimums(KUEUE.build_gang_objects(gpu_spec())) is None
    assert "partial admission" in KUEUE.set_minimum_refusal
    assert registry.expresses_set_minimums("kueue") is False


def test_nothing_said_yet_is_admitted_none_and_the_jobs_stay_suspended():
    status = KUEUE.read_status([served()])
    assert status.admitted is None and status.source == "Workload ml/train-abcd1234" and status.quota_only
    assert KUEUE.pods_allowed([served()]) is False


def test_a_waiting_workload_says_kueues_pending_reason_and_message_per_pod_set():
    status = KUEUE.read_status([served(WAITING, resourceRequests=[{"name": "worker"}])])
    assert (status.admitted, status.reason, status.message) == (False, "Pending", PENDING_MESSAGE)
    assert status.at == t(3)
    assert status.reasons == [{"reason": "Pending", "message": PENDING_MESSAGE}]
    two = PENDING_MESSAGE + "; " + PENDING_MESSAGE.replace("pod set worker", "pod set launcher")
    assert [r["message"][:45] for r in KUEUE.read_status([served([cond("QuotaReserved", "False", "Pending", two,
                                                                       3)])]).reasons] == [
        "couldn't assign flavors to pod set worker: in", "couldn't assign flavors to pod set launcher: "]


def test_inadmissible_says_kueues_words():
    status = KUEUE.read_status([served([cond("QuotaReserved", "False", "Inadmissible",
                                             "LocalQueue team-a doesn't exist", 3)])])
    assert (status.admitted, status.reason, status.message) == (False, "Inadmissible",
                                                                "LocalQueue team-a doesn't exist")


def test_admitted_only_when_quota_reserved_and_admitted_both_true():
    status = KUEUE.read_status([served(ADMITTED, ADMISSION)])
    assert (status.admitted, status.reason, status.message) == (True, "Admitted",
                                                                "Quota reserved in ClusterQueue team-a")
    assert status.at == t(11) and status.quota_only
    assert KUEUE.pods_allowed([served(ADMITTED, ADMISSION)]) is True
    checks = [ADMITTED[0], cond("Admitted", "False", "UnsatisfiedChecks", "The workload has not all checks ready", 11)]
    waiting = KUEUE.read_status([served(checks, ADMISSION)])
    assert (waiting.admitted, waiting.reason) == (False, "UnsatisfiedChecks")


def test_an_evicted_workload_is_not_admitted_and_says_who_preempted_it():
    status = KUEUE.read_status([served(EVICTED, ADMISSION)])
    assert status.admitted is False and status.reason == "Preempted"
    assert "UID: 0b8a5c1e-4a0f-4f57-9d2c-7a3e2f1b6c90" in status.message
    assert (status.disruption_reason, status.disrupted_at) == ("Preempted", t(40))
    assert status.disruption_message == PREEMPTED_MESSAGE
    assert KUEUE.pods_allowed([served(EVICTED, ADMISSION)]) is False


def test_a_condition_type_gangweb_does_not_know_is_said_as_it_is():
    status = KUEUE.read_status([served([cond("QuantumReserved", "True", "Entangled", "", 5)])])
    assert status.admitted is None and status.reason == "QuantumReserved"
    assert status.unknown == "Kueue reports condition QuantumReserved (Entangled), which gangweb does not know"


def test_an_evicted_workload_whose_pods_are_gone_has_its_reservation_cleared_as_the_job_framework_does():
    wl = served(EVICTED, ADMISSION)
    assert KUEUE.status_writes([wl], pods_gone=False, ended=None, now=NOW) == []
    [(ref, obj, body)] = KUEUE.status_writes([wl], pods_gone=True, ended=None, now=NOW)
    assert ref.kind == "Workload" and obj is wl
    status = body["status"]
    assert status["admission"] is None  # removed by the merge patch
    by_type = {c["type"]: c for c in status["conditions"]}
    assert {k: by_type["QuotaReserved"][k] for k in ("status", "reason", "message", "lastTransitionTime")} == {
        "status": "False", "reason": "Pending", "message": PREEMPTED_MESSAGE,
        "lastTransitionTime": "2026-12-06T14:00:00Z"}
    assert (by_type["Admitted"]["status"], by_type["Admitted"]["reason"]) == ("False", "NoReservation")
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("True", "Preempted")
    assert by_type["Evicted"]["status"] == "True"  # Kueue resets it when it reserves quota again
    admitted_for = int((NOW - t(11)).total_seconds())
    assert status["accumulatedPastExecutionTimeSeconds"] == admitted_for
    assert wl["status"]["conditions"] == EVICTED  # the object read is not changed


def test_a_cleared_reservation_is_not_written_again_and_the_job_then_waits_with_kueues_words():
    cleared = [*EVICTED[2:], cond("QuotaReserved", "False", "Pending", PREEMPTED_MESSAGE, 45),
               cond("Admitted", "False", "NoReservation", "The workload has no reservation", 45)]
    wl = served(cleared)
    assert KUEUE.status_writes([wl], pods_gone=True, ended=None, now=NOW) == []
    status = KUEUE.read_status([wl])
    assert (status.admitted, status.reason) == (False, "Preempted")
    later = [*cleared[:2], cond("QuotaReserved", "False", "Pending", PENDING_MESSAGE, 60), cleared[3]]
    status = KUEUE.read_status([served(later)])
    assert (status.admitted, status.reason, status.message) == (False, "Pending", PENDING_MESSAGE)


def test_the_jobs_end_writes_finished_once_so_kueue_releases_the_quota():
    wl = served(ADMITTED, ADMISSION)
    [(_, _, body)] = KUEUE.status_writes([wl], pods_gone=True, ended=("Succeeded", "2 of 2 Jobs complete"), now=NOW)
    finished = next(c for c in body["status"]["conditions"] if c["type"] == "Finished")
    assert (finished["status"], finished["reason"], finished["message"]) == (
        "True", "Succeeded", "2 of 2 Jobs complete")
    assert "admission" not in body["status"]
    done = served([*ADMITTED, cond("Finished", "True", "Succeeded", "done", 50)], ADMISSION)
    assert KUEUE.status_writes([done], pods_gone=True, ended=("Succeeded", "x"), now=NOW) == []


@pytest.mark.parametrize(("conditions", "suspended", "pods", "wants"), [
    (ADMITTED, True, [], True),  # admitted, Jobs still suspended: un-suspend
    (ADMITTED, False, [], False),
    (WAITING, True, [], False),
    (EVICTED, False, [pod(bound=3, started=4)], True),  # evicted, Jobs running: suspend
    (EVICTED, True, [pod(bound=3, started=4)], False),  # suspended, pods still going
    (EVICTED, True, [], True),  # pods gone, reservation still held: clear it
], ids=["admitted-suspended", "admitted-running", "waiting", "evicted-running", "evicted-going", "evicted-gone"])
def test_the_watch_asks_for_a_pass_when_the_jobs_must_follow_the_admission(conditions, suspended, pods, wants):
    job = batch_job()
    job["spec"] = {"suspend": suspended}
    admission = ADMISSION if conditions is not WAITING else None
    assert KUEUE.wants_pass([served(conditions, admission)], [job], pods) is wants


def test_drift_queue_name_is_patched_before_quota_is_reserved_and_replaces_after():
    [want] = KUEUE.build_gang_objects(gpu_spec(priority=1000))
    assert KUEUE.diff(want, served(WAITING)).in_sync
    moved = copy.deepcopy(served(WAITING))
    moved["spec"]["queueName"] = "team-b"
    drift = KUEUE.diff(want, moved)
    assert (drift.fields, drift.patch, drift.replace) == (["queueName"], {"spec": {"queueName": "team-a"}}, False)
    moved_admitted = copy.deepcopy(served(ADMITTED, ADMISSION))
    moved_admitted["spec"]["queueName"] = "team-b"
    assert KUEUE.diff(want, moved_admitted).replace  # "queueName is immutable while workload quota reserved"


def test_a_changed_priority_class_replaces_the_workload_its_priority_goes_with_it():
    [want] = KUEUE.build_gang_objects(gpu_spec(priority_class_name="urgent"))
    drift = KUEUE.diff(want, served(WAITING))  # no quota reserved, still not a patch of the reference alone
    assert drift.replace and drift.fields == ["podSets", "priorityClassRef"]  # the pods' priorityClassName too


def test_drift_in_pod_sets_replaces_and_the_priority_kueue_keeps_is_not_compared():
    [want] = KUEUE.build_gang_objects(gpu_spec())  # no priority value: a pass that does not create
    have = served(ADMITTED, ADMISSION)
    assert KUEUE.diff(want, have).in_sync
    edited = copy.deepcopy(have)
    edited["spec"]["podSets"][1]["count"] = 1
    drift = KUEUE.diff(want, edited)
    assert drift.replace and drift.fields == ["podSets"]


# ---- phases: a quota-only admission is not a placed gang; an eviction starts a new attempt ------------------------
SHAPE = phases.JobShape(min_member=3, total=3)


def observe(gang, pods=(), current=P.SUBMITTED, recorded=None, attempt=0):
    ev = Evidence(SHAPE, gang, [served()], [pod_facts(p) for p in pods], [owner_facts(batch_job())], t(100))
    return phases.observe(ev, current, dict(recorded or {P.SUBMITTED: t(0)}), attempt=attempt)


def test_a_workload_admitted_before_its_pods_exist_is_queued_not_scheduled():
    gang = KUEUE.read_status([served(ADMITTED, ADMISSION)])
    obs = observe(gang)
    assert [e.phase for e in obs.entries] == [P.DISPATCHED, P.QUEUED]
    assert (obs.phase, obs.reason) == (P.QUEUED, "Admitted")
    assert obs.message == "Quota reserved in ClusterQueue team-a; pods being created (0 of 3 bound)"
    partial = observe(gang, [pod(name="p-0", bound=12, started=13), pod(name="p-1", bound=12, started=13),
                             pod(name="p-2", created=12, unschedulable="0/1 nodes are available")])
    assert partial.phase == P.QUEUED and P.RUNNING not in [e.phase for e in partial.entries]
    whole = observe(gang, [pod(name=f"p-{i}", bound=12, started=13) for i in range(3)])
    assert [e.phase for e in whole.entries][-2:] == [P.SCHEDULED, P.RUNNING]
    assert whole.entries[-2].source.startswith("Pod ")  # scheduled by its pods, not by the admission


def test_a_workload_kueue_has_not_looked_at_yet_waits_for_it_dispatched():
    obs = observe(KUEUE.read_status([served()]))
    assert (obs.phase, obs.reason) == (P.DISPATCHED, "WaitingForScheduler")
    assert obs.message == ("waiting for the queue manager to admit Workload ml/train-abcd1234; its Jobs are "
                           "suspended until then (0 of 3 pods created)")


def test_a_waiting_workload_is_queued_with_kueues_reason_and_no_pod():
    obs = observe(KUEUE.read_status([served(WAITING)]))
    assert (obs.phase, obs.reason) == (P.QUEUED, "Pending")
    assert obs.message == f"{PENDING_MESSAGE} (0 of 3 bound)"
    assert obs.entries[-1].source == "Workload ml/train-abcd1234"


def test_an_evicted_gang_whose_pods_are_gone_is_requeued_at_the_eviction_with_kueues_reason():
    ran = {P.SUBMITTED: t(0), P.DISPATCHED: t(1), P.QUEUED: t(2), P.SCHEDULED: t(12), P.RUNNING: t(13)}
    # Just evicted, its Jobs not suspended yet: still running, and the reason says Kueue is taking it apart.
    going = observe(KUEUE.read_status([served(EVICTED, ADMISSION)]),
                    [pod(name=f"p-{i}", bound=12, started=13) for i in range(3)], current=P.RUNNING, recorded=ran)
    assert going.entries == [] and (going.phase, going.reason) == (P.RUNNING, "Preempted")
    gone = observe(KUEUE.read_status([served(EVICTED, ADMISSION)]), [], current=P.RUNNING, recorded=ran)
    [entry] = gone.entries
    assert (entry.phase, entry.attempt, entry.at, entry.reason, entry.source) == (
        P.QUEUED, 1, t(40), "Preempted", "Workload ml/train-abcd1234")
    assert "UID: 0b8a5c1e-4a0f-4f57-9d2c-7a3e2f1b6c90" in entry.message
    assert (gone.phase, gone.reason) == (P.QUEUED, "Preempted")


def test_gang_status_defaults_keep_other_backends_as_they_were():
    assert GangStatus().quota_only is False and GangStatus().disrupted_at is None


def test_a_template_with_more_pod_sets_than_a_workload_holds_is_refused_naming_the_field():
    from django.core.exceptions import ValidationError

    from scheduling.services.templates.specs import validate_template_spec
    from tests import builders

    sets = [builders.pod_set(f"s{i}", replicas=1) for i in range(9)]
    with pytest.raises(ValidationError) as refused:
        validate_template_spec({"backend": "kueue", "podSets": sets})
    assert refused.value.message_dict == {"spec.podSets": [
        "the 'kueue' backend takes at most 8 pod sets (its gang object holds one entry per pod set); this spec has 9"]}
    assert validate_template_spec({"backend": "kueue", "podSets": sets[:8]})["backend"] == "kueue"


def test_the_watch_queues_a_pass_for_the_current_generations_workload_only():
    from types import SimpleNamespace

    from scheduling.observe.evidence import JobObjects
    from scheduling.reconcile import names, watching

    job = SimpleNamespace(phase=P.QUEUED, backend_plugin="kueue-v1beta2", name="train", uid="u-1", gang_generation=1)
    current = served(ADMITTED, ADMISSION)
    current["metadata"]["name"] = names.gang_name("train", "u-1", 1)
    old = served(ADMITTED, ADMISSION)  # an earlier generation's name
    suspended = batch_job()
    suspended["spec"] = {"suspend": True}
    assert watching.backend_wants_pass(job, JobObjects(gang=[current], owners=[suspended]))
    assert not watching.backend_wants_pass(job, JobObjects(gang=[old], owners=[suspended]))
    assert not watching.backend_wants_pass(SimpleNamespace(**{**vars(job), "phase": P.SUCCEEDED}),
                                           JobObjects(gang=[current], owners=[suspended]))
    assert not watching.backend_wants_pass(SimpleNamespace(**{**vars(job), "backend_plugin": "kai-v2alpha2"}),
                                           JobObjects(gang=[current], owners=[suspended]))


# ---- hand edits and hostile tenants (issue 37's hostile pass) -----------------------------------------------------
def test_a_min_count_set_by_someone_else_is_drift_that_replaces_the_workload():
    [want] = KUEUE.build_gang_objects(gpu_spec())
    edited = copy.deepcopy(served(WAITING))
    edited["spec"]["podSets"][1]["minCount"] = 1  # Kueue's PartialAdmission would admit 1 of 2 workers
    drift = KUEUE.diff(want, edited)
    assert drift.replace and drift.fields == ["podSets"]
    moved = copy.deepcopy(edited)
    moved["spec"]["queueName"] = "team-b"
    assert KUEUE.diff(want, moved).replace and KUEUE.diff(want, moved).fields == ["podSets", "queueName"]


def test_a_workload_admitted_in_part_is_not_admitted_and_its_pods_are_held():
    part = copy.deepcopy(ADMISSION)
    part["podSetAssignments"][1]["count"] = 1
    edited = served(ADMITTED, part)
    edited["spec"]["podSets"][1]["minCount"] = 1
    status = KUEUE.read_status([edited])
    assert (status.admitted, status.reason) == (False, "PartialAdmission")
    assert status.message == ("Kueue admitted Workload ml/train-abcd1234 only in part: pod set worker 1 of 2 pods; "
                              "gangweb runs a gang only whole, so it starts no pod (minCount set by someone else "
                              "on pod set worker: gangweb replaces the Workload)")
    assert KUEUE.pods_allowed([edited]) is False
    missing = copy.deepcopy(ADMISSION)
    del missing["podSetAssignments"][1]
    assert KUEUE.read_status([served(ADMITTED, missing)]).reason == "PartialAdmission"
    no_count = copy.deepcopy(ADMISSION)  # Kueue's job framework reads a missing count as the pod set's
    del no_count["podSetAssignments"][1]["count"]
    assert KUEUE.pods_allowed([served(ADMITTED, no_count)]) is True


def test_a_workload_admitted_to_another_teams_cluster_queue_is_not_admitted():
    elsewhere = {**ADMISSION, "clusterQueue": "team-b"}  # a LocalQueue team-a made by someone else points there
    status = KUEUE.read_status([served(ADMITTED, elsewhere)])
    assert (status.admitted, status.reason) == (False, "AdmittedToAnotherQueue")
    assert status.message == ("Kueue admitted Workload ml/train-abcd1234 to ClusterQueue 'team-b', not 'team-a' (the "
                              "job's queue): LocalQueue 'team-a' of the namespace points there. The quota is another "
                              "queue's, so gangweb starts no pod of it")
    assert KUEUE.pods_allowed([served(ADMITTED, elsewhere)]) is False
    assert KUEUE.pods_allowed([served(ADMITTED)]) is False  # admitted with no admission at all: no ClusterQueue


def test_a_priority_raised_by_hand_is_put_back_to_the_classs_value_even_while_admitted():
    [want] = KUEUE.build_gang_objects(gpu_spec(priority=1000))  # the class's value, known to the pass
    for conditions, admission in ((WAITING, None), (ADMITTED, ADMISSION)):
        raised = copy.deepcopy(served(conditions, admission))
        raised["spec"]["priority"] = 100000  # Kueue would order and preempt by it
        drift = KUEUE.diff(want, raised)
        assert (drift.fields, drift.patch, drift.replace) == (["priority"], {"spec": {"priority": 1000}}, False)
    [unknown] = KUEUE.build_gang_objects(gpu_spec())  # the class is gone, or the LIST failed: nothing compared
    raised = copy.deepcopy(served(WAITING))
    raised["spec"]["priority"] = 100000
    assert KUEUE.diff(unknown, raised).in_sync


def test_finished_written_by_someone_else_while_the_jobs_run_takes_the_gang_apart_and_says_so():
    forged = served([*ADMITTED, cond("Finished", "True", "Succeeded", "forged", 50)], ADMISSION)
    status = KUEUE.read_status([forged])
    assert KUEUE.pods_allowed([forged]) is False  # Kueue released the quota: the pods must stop
    assert (status.disruption_reason, status.disrupted_at) == ("WorkloadFinished", t(50))
    ran = {P.SUBMITTED: t(0), P.DISPATCHED: t(1), P.QUEUED: t(2), P.SCHEDULED: t(12), P.RUNNING: t(13)}
    going = observe(status, [pod(name=f"p-{i}", bound=12, started=13) for i in range(3)], current=P.RUNNING,
                    recorded=ran)
    assert going.entries == [] and (going.phase, going.reason) == (P.RUNNING, "WorkloadFinished")
    gone = observe(status, [], current=P.RUNNING, recorded=ran)
    [entry] = gone.entries
    assert (entry.phase, entry.attempt, entry.at, entry.reason) == (P.QUEUED, 1, t(50), "WorkloadFinished")
    assert entry.message == (
        "gang disrupted: 0 of 3 bound; Workload ml/train-abcd1234: Finished=True (Succeeded: forged) was written "
        "while the job's Jobs had not ended: Kueue released its quota and admits it no more, so gangweb stopped its "
        "pods; cancel or resubmit the job to run it again")
    # An ended job's phase comes from its Jobs: gangweb's own Finished changes nothing there.
    ended = observe(status, [], current=P.SUCCEEDED, recorded={**ran, P.SUCCEEDED: t(49)})
    assert ended.entries == [] and ended.phase == P.SUCCEEDED
