"""Kueue, Workload `kueue.x-k8s.io/v1beta2` (Kueue v0.17, its storage version).

Source: docs/upstream.md, Kueue Workload (Kueue `apis/kueue/v1beta2/workload_types.go`, `pkg/workload`,
`pkg/controller/jobframework/reconciler.go`, `pkg/webhooks/workload_webhook.go`).

**One Workload per job.** Kueue admits a Workload whole, across all its pod sets (`spec.podSets[]`, at most 8), so
nothing of the job holds quota or is placed before the whole gang is admitted. Kueue's batch/job integration would
make one Workload per Indexed Job (a gang per pod set, not per job), and its pod-group integration gates pods one by
one and fights the Job controller's retries; so gangweb writes the Workload itself, as Kueue's job framework does for
the jobs it owns, and no Kueue job integration is needed (docs/backends.md).

- spec: `queueName` = the job's queue policy (a LocalQueue of that name in the job's namespace, written by the queue
  sync); one `podSets[]` entry per pod set: `name`, `count` = replicas, `template` = the stamped pod template
  (the Indexed Job's); `minCount` is never set (partial admission is not used: `per_set_minimums` False), and
  one set by someone else is a drift that replaces the Workload (`diff`);
  `priorityClassRef` {group scheduling.k8s.io, kind PriorityClass, name} when the job has a priority class, and
  always `priority` = the value its pods get (the class's; without one the cluster's globalDefault class's, else 0),
  read when the Workload is created: the CRD requires it beside `priorityClassRef`, Kueue orders and preempts by it
  (its visibility API fails on a Workload without it), and Kueue's job framework fills it the same way
  (`pkg/util/priority`). Without a class gangweb names no `priorityClassRef` (the job framework would name the
  globalDefault class): the value is the same. Pods keep the default scheduler: kube-scheduler places admitted pods.
- The Indexed Jobs are created suspended; gangweb un-suspends them once the Workload is admitted (`pods_allowed`)
  and suspends them again when Kueue evicts it; once their pods are gone it clears the quota reservation
  (`status_writes`: `status.admission` removed, `QuotaReserved=False` reason `Pending`, `Admitted=False`, the
  `Requeued` condition), exactly as Kueue's job framework does for its own jobs
  (pkg/controller/jobframework/reconciler.go step 6, pkg/workload `UnsetQuotaReservationWithCondition`,
  `SyncAdmittedCondition`, `SetRequeuedCondition`), so Kueue requeues it. When the job ends, `Finished=True`
  (reason Succeeded or Failed, pkg/workload `Finish`) releases the quota at once. Cancel and clean-up delete the
  Workload only once no pod of the job is left (`gang_deleted_after_pods`).
- `priority` is put back to the class's value when edited by hand (patched: Kueue allows it at any time), since
  Kueue orders and preempts by it.
- Mutability, from Kueue's webhook (pkg/webhooks/workload_webhook.go `ValidateWorkloadUpdate`) and the CRD's
  validation rules (apis/kueue/v1beta2/workload_types.go): `podSets` cannot change once quota is reserved
  (`validateImmutablePodSets`), nor `queueName` or `priorityClassRef` while it is (CEL rules "queueName is
  immutable while workload quota reserved", "priorityClassRef is immutable ..."). gangweb never patches `podSets`
  (its Jobs' templates are made from the same template) or `priorityClassRef` (its `priority` goes with it): a drift
  there replaces the gang under new names; `queueName` is patched in place while no quota is reserved, and
  replaces otherwise.

Status (`read_status`), from the Workload's conditions as Kueue writes them (pkg/workload, pkg/scheduler): admitted
True only when `QuotaReserved` and `Admitted` are True and `Evicted` is not, and the admission is the whole gang in
the job's queue (`admission_refused`: a pod set admitted in part after someone set `minCount`, or a ClusterQueue
other than the job's queue's, is not admitted); `Evicted=True` is a disruption (its
reason, e.g. `Preempted`, with the `Preempted` condition's message naming the preemptor's UID); `QuotaReserved=False`
says why it waits (reason `Pending` or `Inadmissible`, message e.g. "couldn't assign flavors to pod set workers:
insufficient quota for nvidia.com/gpu in flavor gangweb-default, ..."). A condition type gangweb does not know is said
as it is (`GangStatus.unknown`), never mapped.

Root object (`root_ref`, ownerReferences): the Workload; the Indexed Jobs and the Service name it.
"""
from __future__ import annotations

import copy
from datetime import datetime

from .base import Drift, GangSpec, GangStatus, ObjectRef, PodSetSpec, SchedulerBackend, object_source, parse_time

WORKLOAD = ObjectRef("kueue.x-k8s.io/v1beta2", "Workload", "workloads")
# Kueue's label on a started Job's pod template naming its pod set (sigs.k8s.io/kueue pkg/constants PodSetLabel).
KUEUE_PODSET_LABEL = "kueue.x-k8s.io/podset"
# Condition types of apis/kueue/v1beta2/workload_types.go (v0.17.0).
QUOTA_RESERVED, ADMITTED, EVICTED, PREEMPTED = "QuotaReserved", "Admitted", "Evicted", "Preempted"
REQUEUED, FINISHED, PODS_READY = "Requeued", "Finished", "PodsReady"
KNOWN_CONDITIONS = {QUOTA_RESERVED, ADMITTED, EVICTED, PREEMPTED, REQUEUED, FINISHED, PODS_READY,
                    "DeactivationTarget", "BlockedOnPreemptionGates"}
# Evicted reasons after which the job framework sets Requeued=True (`setRequeued`, jobframework/reconciler.go).
REQUEUE_TRUE_REASONS = {"Preempted", "NodeFailures"}
MESSAGE_MAX = 32768  # metav1.Condition message maxLength (Kueue's api.TruncateConditionMessage)
CONDITION_REASON_MAX = 1024
POD_SET_CLAUSE = "couldn't assign flavors to pod set "
# gangweb's reasons for an admission it does not act on (`admission_refused`).
ADMITTED_ELSEWHERE, PARTIAL_ADMISSION = "AdmittedToAnotherQueue", "PartialAdmission"
WORKLOAD_FINISHED = "WorkloadFinished"  # Finished=True while the job's Jobs run: not written by gangweb


def _conditions(obj: dict) -> list[dict]:
    conds = (obj.get("status") or {}).get("conditions") if isinstance(obj.get("status"), dict) else None
    return [c for c in conds if isinstance(c, dict)] if isinstance(conds, list) else []


def _by_type(obj: dict) -> dict[str, dict]:
    """{type: condition} (conditions are a list map keyed by type: one per type)."""
    return {str(c.get("type")): c for c in _conditions(obj)}


def _true(conds: dict[str, dict], kind: str) -> bool:
    return (conds.get(kind) or {}).get("status") == "True"


def has_quota_reservation(obj: dict) -> bool:
    """pkg/workload `HasQuotaReservation`: QuotaReserved=True."""
    return _true(_by_type(obj), QUOTA_RESERVED)


def _pod_sets(obj: dict) -> list[dict]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    sets = spec.get("podSets")
    return [ps for ps in sets if isinstance(ps, dict)] if isinstance(sets, list) else []


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def lowered_minimums(obj: dict) -> list[str]:
    """The pod sets of a Workload that carry `minCount` (gangweb never sets it: someone else did), by name. With
    Kueue's PartialAdmission (beta, on by default since v0.5) such a pod set may be admitted with fewer pods than
    its `count`, while gangweb's Indexed Job runs them all."""
    return [str(ps.get("name"))[:63] for ps in _pod_sets(obj) if ps.get("minCount") is not None]


def admission_refused(obj: dict) -> tuple[str, str] | None:
    """(reason, message) when a Workload Kueue says is admitted (QuotaReserved and Admitted True) is not admitted
    as gangweb runs the gang, else None:

    - ADMITTED_ELSEWHERE: `status.admission.clusterQueue` is not the ClusterQueue named after the job's queue
      (`spec.queueName`: the queue sync names a policy's LocalQueue and ClusterQueue alike, docs/queues.md), e.g. a
      LocalQueue of that name made by someone else points at another team's ClusterQueue: the quota is another
      queue's, so gangweb starts no pod;
    - PARTIAL_ADMISSION: a pod set assigned fewer pods than its `count` (`podSetAssignments[].count`, Kueue's partial
      admission after someone set `minCount`), or none: Kueue reserved quota for part of the gang, and the Indexed
      Jobs would run every pod. A missing `count` is the pod set's, as Kueue's job framework reads it
      (`ptr.Deref(psa.Count, ps.Count)`).

    Names and numbers quoted from the cluster are bounded."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    where = f"Workload {str(meta.get('namespace', ''))[:63]}/{str(meta.get('name', ''))[:253]}"
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    admission = status.get("admission") if isinstance(status.get("admission"), dict) else {}
    queue = str((obj.get("spec") or {}).get("queueName") or "")[:253] if isinstance(obj.get("spec"), dict) else ""
    held = str(admission.get("clusterQueue") or "")[:253]
    if held != queue:
        return ADMITTED_ELSEWHERE, (
            f"Kueue admitted {where} to ClusterQueue '{held}', not '{queue}' (the job's queue): LocalQueue "
            f"'{queue}' of the namespace points there. The quota is another queue's, so gangweb starts no pod of it")
    assigned = {str(a.get("name")): a for a in admission.get("podSetAssignments") or [] if isinstance(a, dict)}
    short = []
    for ps in _pod_sets(obj):
        name, count = str(ps.get("name")), _int(ps.get("count"))
        if count is None:
            continue
        given = assigned.get(name)
        got = 0 if given is None else _int(given.get("count"))
        got = count if got is None else got
        if got < count:
            short.append(f"pod set {name[:63]} {got} of {count}")
    if short:
        lowered = lowered_minimums(obj)
        why = (f" (minCount set by someone else on pod set {', '.join(lowered)}: gangweb replaces the Workload)"
               if lowered else "")
        return PARTIAL_ADMISSION, (
            f"Kueue admitted {where} only in part: {'; '.join(short)} pods; gangweb runs a gang only whole, so it "
            f"starts no pod{why}")
    return None


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(conditions: list[dict], new: dict, now: datetime) -> bool:
    """k8s.io/apimachinery `meta.SetStatusCondition` on a list of condition dicts, in place: a new type is appended
    (its lastTransitionTime `now` unless given); an existing one takes the new status (and lastTransitionTime only
    when the status changes), reason, message and observedGeneration. Returns True when anything changed."""
    for cond in conditions:
        if cond.get("type") != new["type"]:
            continue
        changed = False
        if cond.get("status") != new["status"]:
            cond["status"] = new["status"]
            cond["lastTransitionTime"] = new.get("lastTransitionTime") or _stamp(now)
            changed = True
        for key in ("reason", "message", "observedGeneration"):
            if key in new and cond.get(key) != new[key]:
                cond[key] = new[key]
                changed = True
        return changed
    conditions.append({**new, "lastTransitionTime": new.get("lastTransitionTime") or _stamp(now)})
    return True


class KueueV1beta2(SchedulerBackend):
    """Kueue Workload v1beta2: one Workload per job, admitted whole; the Jobs are held suspended until then."""

    family = "kueue"
    name = "kueue-v1beta2"
    api_version = WORKLOAD.api_version
    WORKLOAD = WORKLOAD
    scheduler_name = ""  # pods keep the default scheduler: Kueue admits, kube-scheduler places
    # Kueue's default leaderElection.resourceName (config/components/manager/controller_manager_config.yaml).
    scheduler_leases = (("", "c1f6bfd2.kueue.x-k8s.io"),)
    gang_refs = ("WORKLOAD",)
    status_refs = ("WORKLOAD",)
    immutable_spec = False
    # queueName only while no quota is reserved (module docstring); `priority` always (Kueue has no rule on it), put
    # back to the class's value when edited by hand. `priorityClassRef` is not: its `priority` is set with it at
    # create, so a change of class replaces the Workload (a patch of the ref alone would leave the old value).
    mutable_fields = ("queueName", "priority")
    # Fields that the webhook or CRD freeze once QuotaReserved=True.
    frozen_when_reserved = ("podSets", "queueName", "priorityClassRef")
    max_pod_sets = 8  # WorkloadSpec.podSets +kubebuilder:validation:MaxItems=8
    holds_pods_until_admitted = True
    gang_deleted_after_pods = True
    needs_priority_value = True
    per_set_minimums = False
    set_minimum_refusal = ("Kueue admits the whole Workload, every pod set at its count (partial admission, one "
                           "pod set's minCount, is not used)")

    # ---- build ------------------------------------------------------------------------------------------------
    def build_gang_objects(self, spec: GangSpec) -> list[dict]:
        """One Workload named `spec.gang_name` (module docstring). The pod sets' templates are stamped here as
        the Indexed Jobs' are (`job_pod_template`), so Kueue counts what the pods will ask."""
        body = {
            "queueName": spec.queue,
            "podSets": [{"name": ps.name, "count": ps.replicas, "template": self.job_pod_template(spec, ps)}
                        for ps in spec.pod_sets],
        }
        if spec.priority_class_name:
            body["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                        "name": spec.priority_class_name}
        if spec.priority is not None:  # always at create: Kueue orders and preempts by it
            body["priority"] = int(spec.priority)
        return [self.new_gang_object(self.WORKLOAD, spec, body)]

    def stamp_pod_template(self, template: dict, spec: GangSpec, pod_set: PodSetSpec) -> dict:
        """Label `kueue.x-k8s.io/podset: <pod set>`, as Kueue's job framework labels the pods of a started Job
        (the default scheduler is kept)."""
        out = super().stamp_pod_template(template, spec, pod_set)
        out.setdefault("metadata", {}).setdefault("labels", {})[KUEUE_PODSET_LABEL] = pod_set.name
        return out

    # ---- status -----------------------------------------------------------------------------------------------
    def read_status(self, objects: list[dict]) -> GangStatus:
        """The Workload's conditions (module docstring): admitted True when QuotaReserved and Admitted are True and
        Evicted is not (reason Admitted, the QuotaReserved message naming the ClusterQueue, at the later of the two);
        False while Evicted is True (reason its reason, message the Preempted condition's when there is one, which
        names the preemptor; `disruption_*` and `disrupted_at` set), while QuotaReserved is False (its reason and
        message; `reasons` one per pod set Kueue names), or while Admitted is False under a reservation (admission
        checks), or while the admission is not the whole gang in the job's queue (`admission_refused`);
        Finished=True says so, as a disruption (WORKLOAD_FINISHED: it matters only while the job's Jobs have not
        ended, since an ended job's phase comes from them); None when Kueue wrote nothing yet. Only condition types
        gangweb does not know: `unknown`, said as it is."""
        wl = self.gang_object(self.WORKLOAD, objects)
        if wl is None:
            return GangStatus()
        conds = _by_type(wl)
        # queued_at: when the Workload entered its LocalQueue (its creation), the Queued time of a gang Kueue holds
        # before any pod exists.
        result = GangStatus(source=object_source(wl), conditions=_conditions(wl), quota_only=True,
                            queued_at=parse_time((wl.get("metadata") or {}).get("creationTimestamp")))
        reserved, admitted = conds.get(QUOTA_RESERVED), conds.get(ADMITTED)
        if _true(conds, FINISHED):
            # gangweb writes Finished only once the job's Jobs ended (`status_writes`), and then the job's phase
            # comes from them; while they still run, it was written by someone else: Kueue released the quota and
            # admits this Workload no more, so the gang is taken apart (its Jobs suspended), said as such.
            self._said(result, conds[FINISHED], admitted=None)
            result.disruption_reason = WORKLOAD_FINISHED
            result.disruption_message = (
                f"Finished=True ({result.reason}: {result.message[:1000]}) was written while the job's Jobs had not "
                "ended: Kueue released its quota and admits it no more, so gangweb stopped its pods; cancel or "
                "resubmit the job to run it again")[:MESSAGE_MAX]
            result.disrupted_at = result.at
            return result
        if _true(conds, EVICTED):
            evicted = conds[EVICTED]
            preempted = conds.get(PREEMPTED) if _true(conds, PREEMPTED) else None
            self._said(result, evicted, admitted=False)
            if preempted is not None and preempted.get("message"):
                result.message = str(preempted["message"])[:MESSAGE_MAX]
            # Kueue took the gang apart (its pods must go; once gone, the reservation is cleared and it waits again).
            result.disruption_reason, result.disruption_message = result.reason, result.message
            result.disrupted_at = result.at
            if not _true(conds, QUOTA_RESERVED) and reserved is not None and reserved.get("status") == "False":
                # Evicted and requeued: waiting again; Kueue's own pending words once its scheduler looked again.
                later = (reserved.get("lastTransitionTime") or "") >= (evicted.get("lastTransitionTime") or "")
                if later and reserved.get("message") and reserved.get("message") != evicted.get("message"):
                    self._said(result, reserved, admitted=False)
            result.reasons = [{"reason": result.reason, "message": result.message}]
            return result
        if _true(conds, QUOTA_RESERVED) and _true(conds, ADMITTED):
            refused = admission_refused(wl)
            if refused is not None:  # Kueue admitted something else than the whole gang in the job's queue
                self._said(result, admitted, admitted=False)
                result.reason, result.message = refused
                result.reasons = [{"reason": result.reason, "message": result.message}]
                return result
            self._said(result, admitted, admitted=True)
            result.reason = str(admitted.get("reason") or ADMITTED)[:CONDITION_REASON_MAX]
            result.message = str(reserved.get("message") or admitted.get("message") or "")[:MESSAGE_MAX]
            result.at = max((t for t in (parse_time(reserved.get("lastTransitionTime")), result.at) if t),
                            default=None)
            return result
        if reserved is not None and reserved.get("status") == "False":
            self._said(result, reserved, admitted=False)
            result.reasons = self.pending_reasons(result.reason, result.message)
            return result
        if _true(conds, QUOTA_RESERVED) and admitted is not None:  # reserved, admission checks not all ready
            return self._said(result, admitted, admitted=False)
        if _true(conds, QUOTA_RESERVED):
            return self._said(result, reserved, admitted=None)
        unknown = [c for t, c in conds.items() if t not in KNOWN_CONDITIONS]
        if unknown:
            latest = max(unknown, key=lambda c: str(c.get("lastTransitionTime") or ""))
            kind = str(latest.get("type"))[:64]
            said = f" ({str(latest.get('reason'))[:128]})" if latest.get("reason") else ""
            result.reason = kind
            result.at = parse_time(latest.get("lastTransitionTime"))
            result.unknown = f"Kueue reports condition {kind}{said}, which gangweb does not know"
        return result

    @staticmethod
    def _said(result: GangStatus, cond: dict, admitted: bool | None) -> GangStatus:
        """`result` with `cond`'s reason (else its type), message and lastTransitionTime, and `admitted`."""
        result.admitted = admitted
        result.reason = str(cond.get("reason") or cond.get("type") or "")[:CONDITION_REASON_MAX]
        result.message = str(cond.get("message") or "")[:MESSAGE_MAX]
        result.at = parse_time(cond.get("lastTransitionTime"))
        return result

    @staticmethod
    def pending_reasons(reason: str, message: str) -> list[dict]:
        """Kueue's pending message split per pod set ("couldn't assign flavors to pod set a: ...; couldn't assign
        flavors to pod set b: ...", scheduler/flavorassigner `Assignment.Message`), one {"reason", "message"} each;
        the message whole when it names no pod set."""
        if not message:
            return [{"reason": reason, "message": ""}]
        parts = [p for p in message.split("; " + POD_SET_CLAUSE) if p]
        if len(parts) > 1 and message.startswith(POD_SET_CLAUSE):
            return [{"reason": reason, "message": p if i == 0 else POD_SET_CLAUSE + p} for i, p in enumerate(parts)]
        return [{"reason": reason, "message": message}]

    # ---- the reconciler's hooks -------------------------------------------------------------------------------
    def pods_allowed(self, objects: list[dict]) -> bool:
        """True only while the current Workload is admitted and not evicted (`read_status(...).admitted`)."""
        return self.read_status(objects).admitted is True

    def status_writes(self, objects: list[dict], *, pods_gone: bool, ended: tuple[str, str] | None,
                      now: datetime) -> list[tuple[ObjectRef, dict, dict]]:
        """What Kueue's job framework writes for a job it owns (module docstring), as merge patches of the
        Workload's status:

        - the job ended (`ended` = ("Succeeded" | "Failed", message)) and `Finished` is not True: `Finished=True`
          with that reason (pkg/workload `Finish`), so Kueue releases the quota at once;
        - else, evicted (`Evicted=True`) with quota still reserved and no pod left (`pods_gone`): `Requeued`
          (True for reasons Preempted and NodeFailures, else False; the eviction's reason and message),
          `QuotaReserved=False` reason `Pending` with the eviction's message, `status.admission` removed, and
          `Admitted` synced (False, NoReservation; the admitted time added to `accumulatedPastExecutionTimeSeconds`),
          so Kueue requeues it.

        The conditions list is sent whole (a merge patch replaces a list), with the read resourceVersion: a Workload
        Kueue changed meanwhile is answered 409 and looked at again by the next pass."""
        wl = self.gang_object(self.WORKLOAD, objects)
        if wl is None or (wl.get("metadata") or {}).get("deletionTimestamp"):
            return []
        conds = _by_type(wl)
        generation = (wl.get("metadata") or {}).get("generation")
        conditions = copy.deepcopy(_conditions(wl))
        gen = {"observedGeneration": generation} if isinstance(generation, int) else {}
        if ended is not None:
            if _true(conds, FINISHED):
                return []
            reason, message = ended
            set_condition(conditions, {"type": FINISHED, "status": "True", "reason": reason,
                                       "message": str(message or "")[:MESSAGE_MAX], **gen}, now)
            return [(self.WORKLOAD, wl, {"status": {"conditions": conditions}})]
        if not (_true(conds, EVICTED) and _true(conds, QUOTA_RESERVED) and pods_gone):
            return []
        evicted = conds[EVICTED]
        reason, message = str(evicted.get("reason") or EVICTED), str(evicted.get("message") or "")[:MESSAGE_MAX]
        set_condition(conditions, {"type": REQUEUED, "status": "True" if reason in REQUEUE_TRUE_REASONS else "False",
                                   "reason": reason, "message": message, **gen}, now)
        set_condition(conditions, {"type": QUOTA_RESERVED, "status": "False", "reason": "Pending",
                                   "message": message, "lastTransitionTime": _stamp(now), **gen}, now)
        status = {"admission": None, "conditions": conditions}
        self._sync_admitted(wl, conditions, status, now, gen)
        return [(self.WORKLOAD, wl, {"status": status})]

    @staticmethod
    def _sync_admitted(wl: dict, conditions: list[dict], status: dict, now: datetime, gen: dict) -> None:
        """pkg/workload `SyncAdmittedCondition` once the reservation is gone: `Admitted=False` (NoReservation, or
        NoReservationUnsatisfiedChecks while an admission check is not Ready), and the time it was admitted added
        to `accumulatedPastExecutionTimeSeconds`."""
        checks = (wl.get("status") or {}).get("admissionChecks") or []
        ready = all(isinstance(c, dict) and c.get("state") == "Ready" for c in checks)
        before = next((c for c in conditions if c.get("type") == ADMITTED), None)
        was_admitted = before is not None and before.get("status") == "True"
        if ready:
            new = {"type": ADMITTED, "status": "False", "reason": "NoReservation",
                   "message": "The workload has no reservation", **gen}
        else:
            new = {"type": ADMITTED, "status": "False", "reason": "NoReservationUnsatisfiedChecks",
                   "message": "The workload has no reservation and not all checks ready", **gen}
        if before is not None and before.get("status") == "False":
            return  # already not admitted: SyncAdmittedCondition changes nothing
        if was_admitted:
            since = parse_time(before.get("lastTransitionTime"))
            if since is not None:
                past = (wl.get("status") or {}).get("accumulatedPastExecutionTimeSeconds")
                past = past if isinstance(past, int) and not isinstance(past, bool) else 0
                status["accumulatedPastExecutionTimeSeconds"] = past + max(0, int((now - since).total_seconds()))
        set_condition(conditions, {**new, "lastTransitionTime": _stamp(now)}, now)

    def wants_pass(self, objects: list[dict], owners: list[dict], pods: list[dict]) -> bool:
        """True when a live owner Job's `spec.suspend` disagrees with `pods_allowed` (admitted: un-suspend; evicted:
        suspend), or an evicted Workload still holds its reservation while no pod of the job is left."""
        live = [o for o in owners if not (o.get("metadata") or {}).get("deletionTimestamp")]
        if not live or self.gang_object(self.WORKLOAD, objects) is None:
            return False
        allowed = self.pods_allowed(objects)
        if any(bool((o.get("spec") or {}).get("suspend")) == allowed for o in live):
            return True
        gone = not any((p.get("status") or {}).get("phase", "Pending") in ("Pending", "Running", "Unknown")
                       for p in pods)
        return bool(self.status_writes(objects, pods_gone=gone, ended=None, now=datetime.now().astimezone()))

    # ---- drift ------------------------------------------------------------------------------------------------
    def diff(self, desired: dict, observed: dict) -> Drift:
        """The base comparison (queueName and priority patched in place, anything else replaced), but a
        patch of a field Kueue freezes while quota is reserved (`frozen_when_reserved`) is a replace then.
        `spec.priority` is compared only when `desired` carries it (the value of the job's PriorityClass as the
        cluster defines it, `AdmissionSteps.known_priority`): a value raised by hand would make Kueue order and
        preempt by it, so it is put back; without a known value the observed one is kept. A `minCount` on any pod
        set (never gangweb's) is a drift of podSets."""
        want = copy.deepcopy(desired)
        want_spec = want.setdefault("spec", {})
        if want_spec.get("priority") is None:
            want_spec.pop("priority", None)
            have = (observed.get("spec") or {}).get("priority") if isinstance(observed.get("spec"), dict) else None
            if have is not None:
                want_spec["priority"] = have
        drift = super().diff(want, observed)
        if lowered_minimums(observed) and "podSets" not in drift.fields:
            # minCount (never gangweb's) lets Kueue admit part of the gang: a drift of podSets, which is replaced.
            return Drift(fields=sorted([*drift.fields, "podSets"]), replace=True)
        if drift.patch and has_quota_reservation(observed):
            if any(f.split(".")[0] in self.frozen_when_reserved for f in drift.fields):
                return Drift(fields=drift.fields, replace=True)
        return drift
