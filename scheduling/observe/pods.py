"""What a job's pods and owner Jobs say, reduced to the facts the phase and "why pending" logic needs.

Sources of semantics (core/v1 Pod, batch/v1 Job):
- a pod is *bound* once `spec.nodeName` is set; the scheduler (or a Binding) also sets the `PodScheduled=True`
  condition, whose lastTransitionTime is the bind time;
- a pending pod the scheduler could not place carries `PodScheduled=False` with reason `Unschedulable` (or
  `SchedulerError`, `BindingError`) and the scheduler's message;
- container start and end times are `status.containerStatuses[].state.running.startedAt` /
  `state.terminated.startedAt|finishedAt`;
- a pod being preempted or evicted carries `DisruptionTarget=True` with the reason (`PreemptionByScheduler`,
  `EvictionByEvictionAPI`, `DeletionByTaintManager`, `TerminationByKubelet`, ...) and who did it in its message;
- a batch Job is finished when its `Complete` or `Failed` condition is True (`status.completionTime` is set on
  success).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ..constants import LABEL_POD_SET
from . import objects as o

POD_SUCCEEDED = "Succeeded"
POD_FAILED = "Failed"
POD_RUNNING = "Running"


@dataclass(frozen=True)
class PodFacts:
    """One pod, reduced. Times are aware UTC datetimes or None when the cluster has not said."""

    ref: str  # "Pod namespace/name"
    name: str
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    node_name: str
    created_at: datetime | None
    scheduled_at: datetime | None  # PodScheduled=True lastTransitionTime
    started_at: datetime | None  # latest container start (the pod counts as running from then)
    finished_at: datetime | None  # latest container finish
    waiting_reason: str  # PodScheduled=False reason, e.g. "Unschedulable"
    waiting_message: str
    waiting_since: datetime | None
    terminating: bool
    disruption_reason: str = ""  # DisruptionTarget=True reason, e.g. "PreemptionByScheduler"
    disruption_message: str = ""
    disrupted_at: datetime | None = None  # DisruptionTarget=True lastTransitionTime
    # True when the time above had no cluster timestamp of its own and was inferred from a weaker one (pod
    # startTime, creationTimestamp, the Ready condition): see docs/observability.md, "Inferred times".
    scheduled_inferred: bool = False
    started_inferred: bool = False
    # spec.schedulingGates names, at most MAX_GATES: while any is set the scheduler does not look at the pod
    scheduling_gates: tuple[str, ...] = ()
    pod_set: str = ""  # the `gangweb.io/pod-set` label gangweb puts on its pod templates ("" without one)
    owner_uid: str = ""  # the UID of the batch/v1 Job its controller reference names ("" without one)
    deleted_at: datetime | None = None  # when its deletion was asked: deletionTimestamp - deletionGracePeriodSeconds

    @property
    def bound(self) -> bool:
        """True once the pod has a node (or the scheduler said PodScheduled=True). A pod held by a scheduling gate
        (any gate, gangweb's or not) is never bound: the scheduler does not even look at it until every gate is
        removed (KEP-3521), whatever a gang object says."""
        if self.scheduling_gates and not self.node_name:
            return False
        return bool(self.node_name) or self.scheduled_at is not None

    @property
    def gated(self) -> bool:
        """True while a scheduling gate holds the pod (spec.schedulingGates, or PodScheduled=False
        SchedulingGated) and it has no node."""
        return not self.node_name and (bool(self.scheduling_gates) or self.waiting_reason == "SchedulingGated")

    @property
    def started(self) -> bool:
        """True when the pod is running or has run (Running, Succeeded, Failed with a start time)."""
        return self.phase == POD_RUNNING or (self.phase in (POD_SUCCEEDED, POD_FAILED) and self.started_at is not None)


def _placement(pod: dict, st: dict) -> tuple:
    """(scheduled_at, scheduled_inferred, waiting_reason, waiting_message, waiting_since) from the PodScheduled
    condition; a pod bound without a condition time (a Binding written by a test or an external binder) is
    scheduled at its startTime, else its creation, inferred."""
    sched = o.condition(pod, "PodScheduled")
    scheduled_at = waiting_since = None
    waiting_reason = waiting_message = ""
    inferred = False
    if sched is not None and sched.get("status") == "True":
        scheduled_at = o.parse_time(sched.get("lastTransitionTime"))
        if scheduled_at is None:
            scheduled_at, inferred = o.parse_time(st.get("startTime")), True
    elif sched is not None and sched.get("status") == "False":
        waiting_reason = sched.get("reason") or "Unschedulable"
        waiting_message = sched.get("message") or ""
        waiting_since = o.parse_time(sched.get("lastTransitionTime"))
    if (pod.get("spec") or {}).get("nodeName") and scheduled_at is None:
        scheduled_at, inferred = o.parse_time(st.get("startTime")) or o.created_at(pod), True
    return scheduled_at, inferred, waiting_reason, waiting_message, waiting_since


def _run_times(pod: dict, st: dict) -> tuple:
    """(started_at, finished_at, started_inferred): the latest container start and finish; a Running pod whose
    containers say no start time started at its startTime, else when it became Ready (inferred)."""
    starts, ends = [], []
    for cs in (st.get("containerStatuses") or []):
        state = cs.get("state") or {}
        if state.get("running"):
            starts.append(o.parse_time(state["running"].get("startedAt")))
        if state.get("terminated"):
            starts.append(o.parse_time(state["terminated"].get("startedAt")))
            ends.append(o.parse_time(state["terminated"].get("finishedAt")))
    starts = [t for t in starts if t is not None]
    ends = [t for t in ends if t is not None]
    started_at, inferred = (max(starts) if starts else None), False
    if started_at is None and st.get("phase") == POD_RUNNING:
        ready = o.condition_true(pod, "Ready")
        started_at = o.parse_time(st.get("startTime")) or (o.parse_time(ready.get("lastTransitionTime"))
                                                           if ready else None)
        inferred = started_at is not None
    return started_at, max(ends) if ends else None, inferred


def _deleted_at(pod: dict) -> datetime | None:
    """When the pod's deletion was asked (cluster time): its `metadata.deletionTimestamp` is that moment plus the
    grace period it was given (`metadata.deletionGracePeriodSeconds`, core/v1 ObjectMeta). None when not deleted."""
    meta = o.meta(pod)
    at = o.parse_time(meta.get("deletionTimestamp"))
    grace = meta.get("deletionGracePeriodSeconds")
    if at is None or not isinstance(grace, int) or isinstance(grace, bool) or grace < 0:
        return at
    return at - timedelta(seconds=grace)


def pod_facts(pod: dict) -> PodFacts:
    """Reduce a Pod dict to `PodFacts`."""
    st = o.status(pod)
    scheduled_at, scheduled_inferred, waiting_reason, waiting_message, waiting_since = _placement(pod, st)
    started_at, finished_at, started_inferred = _run_times(pod, st)
    disrupted = o.condition_true(pod, "DisruptionTarget") or {}
    return PodFacts(
        ref=o.ref(pod, "Pod"), name=o.meta(pod).get("name", ""), phase=st.get("phase") or "Pending",
        node_name=(pod.get("spec") or {}).get("nodeName") or "", created_at=o.created_at(pod),
        scheduled_at=scheduled_at, started_at=started_at, finished_at=finished_at, waiting_reason=waiting_reason,
        waiting_message=waiting_message, waiting_since=waiting_since, terminating=o.is_terminating(pod),
        disruption_reason=disrupted.get("reason") or ("DisruptionTarget" if disrupted else ""),
        disruption_message=disrupted.get("message") or "",
        disrupted_at=o.parse_time(disrupted.get("lastTransitionTime")),
        scheduled_inferred=scheduled_inferred, started_inferred=started_inferred, scheduling_gates=_gates(pod),
        pod_set=_pod_set(pod), owner_uid=controller_job_uid(pod), deleted_at=_deleted_at(pod),
    )


def _pod_set(pod: dict) -> str:
    value = (o.meta(pod).get("labels") or {}).get(LABEL_POD_SET)
    return value[:63] if isinstance(value, str) else ""


def controller_job_uid(pod: dict) -> str:
    """The UID of the batch/v1 Job the pod's controller reference (`ownerReferences[]` with `controller: true`)
    names, "" without one."""
    for ref in o.meta(pod).get("ownerReferences") or []:
        if (isinstance(ref, dict) and ref.get("controller") is True and ref.get("kind") == "Job"
                and ref.get("apiVersion") == "batch/v1" and isinstance(ref.get("uid"), str)):
            return ref["uid"]
    return ""


MAX_GATES = 16


def _gates(pod: dict) -> tuple[str, ...]:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    if not isinstance(gates, list):
        return ()
    return tuple(g["name"] for g in gates[:MAX_GATES] if isinstance(g, dict) and isinstance(g.get("name"), str))


@dataclass(frozen=True)
class OwnerFacts:
    """A batch Job (or other owner), reduced: whether it finished, how and when."""

    ref: str
    created_at: datetime | None
    complete_at: datetime | None
    failed_at: datetime | None
    failed_reason: str
    failed_message: str
    terminating: bool
    uid: str = ""
    # What the Job controller reports in the Job's status: {"active", "ready", "succeeded", "failed"} (ints; a field
    # it omits is 0), or None before it reported anything (no `status.startTime` and no count)
    reported: dict | None = None


def owner_facts(owner: dict) -> OwnerFacts:
    """Reduce an owner (batch/v1 Job dict) to `OwnerFacts`. Owners of other kinds never finish by themselves."""
    complete = o.condition_true(owner, "Complete")
    failed = o.condition_true(owner, "Failed")
    complete_at = None
    if complete is not None:
        complete_at = o.parse_time(o.status(owner).get("completionTime")) or o.parse_time(
            complete.get("lastTransitionTime"))
    return OwnerFacts(
        ref=o.ref(owner, "Job"), created_at=o.created_at(owner), complete_at=complete_at,
        failed_at=o.parse_time(failed.get("lastTransitionTime")) if failed else None,
        failed_reason=(failed or {}).get("reason", ""), failed_message=(failed or {}).get("message", ""),
        terminating=o.is_terminating(owner), uid=str(o.meta(owner).get("uid") or ""), reported=reported(owner),
    )


REPORTED = ("active", "ready", "succeeded", "failed")


def _count(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def reported(owner: dict) -> dict | None:
    """The pod counts the Job controller writes in a Job's status (batch/v1 JobStatus `active`, `ready`,
    `succeeded`, `failed`; omitted when 0), with the finished pods it has seen but not counted yet
    (`uncountedTerminatedPods.succeeded|failed`, pod UIDs) added to `succeeded` and `failed`; None when it has
    written none of them and no `startTime` (it has not synced the Job yet: nothing to check against)."""
    st = o.status(owner)
    if not isinstance(st, dict) or not (st.get("startTime") or any(k in st for k in REPORTED)):
        return None
    out = {k: _count(st.get(k)) for k in REPORTED}
    uncounted = st.get("uncountedTerminatedPods")
    if isinstance(uncounted, dict):
        for k in ("succeeded", "failed"):
            if isinstance(uncounted.get(k), list):
                out[k] += len(uncounted[k])
    return out


@dataclass(frozen=True)
class CrossCheck:
    """The pods that count after `cross_check`, and what was left out: `dropped` pods (their names), and
    `note`, one sentence saying where the pods seen and the controller's report disagree ("" when they agree)."""

    pods: list
    kept: list[int]  # indexes into the pods given
    dropped: list[str]
    note: str = ""


def _kind_of(p: PodFacts) -> str:
    if p.phase == POD_SUCCEEDED:
        return "succeeded"
    if p.phase == POD_FAILED:
        return "failed"
    return "active"


def cross_check(pods: list[PodFacts], owners: list[OwnerFacts]) -> CrossCheck:
    """The pods that count for the job: of each owner Job's pods (by `owner_uid`), at most as many active
    (not finished, not terminating), succeeded and failed ones as the Job controller reports in its status
    (`reported`): count = min(pods seen, controller-reported). The earliest created are kept (the controller's own
    came first when anyone else's came later). Pods of a Job that reported nothing yet, or not at hand, and
    terminating pods are kept as they are. Pure.

    Why: a pod's ownerReferences are written by whoever creates it, so a hand-made pod can name the Job as its
    controller; the Job's status is written by the Job controller alone and counts only the pods it matches
    (pkg/controller/job: `active`, `ready`, `succeeded`, `failed`)."""
    by_uid = {w.uid: w for w in owners if w.uid and w.reported is not None}
    groups: dict[tuple[str, str], list[int]] = {}
    for i, p in enumerate(pods):
        if p.owner_uid in by_uid and not p.terminating:
            groups.setdefault((p.owner_uid, _kind_of(p)), []).append(i)
    dropped_at: set[int] = set()
    said = []
    for uid, owner in sorted(by_uid.items()):
        for kind in ("active", "succeeded", "failed"):
            seen, allowed = len(groups.get((uid, kind), [])), owner.reported[kind]
            if seen < allowed:
                # Pods gangweb finds by its label: one whose label was taken off is the controller's and not seen.
                said.append(f"{seen} {kind} pods of {owner.ref} seen, its Job controller reports {allowed} (a pod "
                            "without gangweb's labels is not counted)")
    for (uid, kind), idx in sorted(groups.items()):
        allowed = by_uid[uid].reported[kind]
        if len(idx) <= allowed:
            continue
        ordered = sorted(idx, key=lambda i: (pods[i].created_at is None,
                                             pods[i].created_at.timestamp() if pods[i].created_at else 0, i))
        dropped_at |= set(ordered[allowed:])
        said.append(f"{len(idx)} {kind} pods of {by_uid[uid].ref} seen, its Job controller reports {allowed}")
    kept = [i for i in range(len(pods)) if i not in dropped_at]
    note = ""
    if said:
        note = "; ".join(said) + f": counting {len(kept)} of {len(pods)} pods (the controller's word caps the count)"
    return CrossCheck([pods[i] for i in kept], kept, [pods[i].name for i in sorted(dropped_at)], note)
