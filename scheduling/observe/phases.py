"""From what the cluster says (gang status, pods, owner Jobs) to a job's phase and the timeline entries to append.

Phases (scheduling.choices.GangPhase), each reached when:
- **Dispatched**: a gang object or an owner Job exists. Time: the earliest creationTimestamp among them.
- **Queued**: the scheduler has taken the gang up: it said something about it (the gang object's status or a
  pod's `PodScheduled` condition) or bound a pod. Time: the earliest pod creationTimestamp (when the pods entered
  the scheduler's queue), else the scheduler's statement time. Before that the job stays Dispatched with reason
  `WaitingForScheduler` (no scheduler has looked at the pods yet) or `WaitingForPods` (no pod exists yet).
- **Scheduled**: at least minMember pods are bound (or the gang object says admitted). Time: the minMember-th
  pod's `PodScheduled` time (when the gang became whole), else the gang object's condition time.
- **Running**: every pod of the job has started. Time: the latest container start among them.
- **Succeeded**: every owner Job has `Complete=True` (time: `completionTime`), or without owners every pod
  Succeeded (time: the latest container finish).
- **Failed**: an owner Job has `Failed=True` (time: that condition's lastTransitionTime), or without owners a
  pod Failed.
- **Cancelled**: the user asked to cancel and nothing of the job is left live in the cluster (time: now).

Rules: phases only move forward; each phase gets one entry, in lifecycle order, and an entry is never invented
without a timestamp from the cluster (gangweb's own clock is used only for Cancelled). A phase passed quickly
(Scheduled and Running seen in the same pass) still gets its own entry with its own cluster time. Cluster times
have one-second precision and come from another clock than gangweb's, so each entry's time is clamped to be no
earlier than the previous entry's: the timeline always reads in order.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..backends.base import GangStatus
from ..choices import PHASE_ORDER, TERMINAL_PHASES, GangPhase
from . import objects as o
from .pods import POD_FAILED, POD_SUCCEEDED, OwnerFacts, PodFacts

# phase_reason values gangweb itself sets (scheduler reasons such as "Unschedulable" or "OverLimit" pass through).
REASON_WAITING_FOR_PODS = "WaitingForPods"
REASON_WAITING_FOR_SCHEDULER = "WaitingForScheduler"
REASON_PENDING = "Pending"
REASON_STARTING = "PodsStarting"
REASON_RUNNING = "Running"
REASON_OBJECTS_CREATED = "ObjectsCreated"
REASON_OBJECTS_MISSING = "ObjectsMissing"
REASON_CANCELLING = "Cancelling"
REASON_CANCELLED = "Cancelled"
REASON_COMPLETED = "Completed"
REASON_POD_FAILED = "PodFailed"
REASON_REQUEUED = "Requeued"  # a scheduled gang fell below minMember bound and its pods wait in the scheduler again
DISRUPTION_TARGET = "DisruptionTarget"  # v1alpha2 PodGroup condition set while the scheduler preempts the gang
GATED = "SchedulingGated"  # PodScheduled=False reason the API server sets on pods with scheduling gates


@dataclass(frozen=True)
class Entry:
    """One timeline entry to append: the job entered `phase` at `at` (cluster time), said by `source`."""

    phase: str
    at: datetime
    source: str
    reason: str
    message: str = ""


@dataclass
class Observation:
    """The result of one observation: the job's phase, its reason and message now, and the entries to append."""

    phase: str
    reason: str = ""
    message: str = ""
    entries: list[Entry] = field(default_factory=list)
    bound: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    pods: int = 0


@dataclass(frozen=True)
class JobShape:
    """What the job expects: `min_member` pods for the gang, `total` pods in all, whether it is being cancelled."""

    min_member: int
    total: int
    cancelling: bool = False


def bound_of(bound: int, required: int) -> str:
    """The "N of M bound" phrase the timeline and why-pending use."""
    return f"{bound} of {required} bound"


def _kth(times: list[datetime | None], k: int) -> datetime | None:
    known = sorted(t for t in times if t is not None)
    if not known:
        return None
    return known[min(max(k, 1), len(known)) - 1]


def _earliest(*times) -> datetime | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _latest(times) -> datetime | None:
    known = [t for t in times if t is not None]
    return max(known) if known else None


def candidates(shape: JobShape, gang: GangStatus, gang_objects: list[dict], pods: list[PodFacts],
               owners: list[OwnerFacts], now: datetime) -> dict[str, Entry]:
    """Every phase the evidence shows the job has reached, each with its own cluster time, source and reason.

    Pure; `now` is used only for Cancelled. Terminating objects and pods do not count as live.
    """
    live_gang = [g for g in gang_objects if not o.is_terminating(g)]
    live_owners = [w for w in owners if not w.terminating]
    live_pods = [p for p in pods if not p.terminating]
    found: dict[str, Entry] = {}

    created = [o.created_at(g) for g in live_gang] + [w.created_at for w in live_owners]
    if live_gang or live_owners:
        first = live_gang[0] if live_gang else None
        source = o.ref(first) if first is not None else live_owners[0].ref
        names = ", ".join([o.ref(g) for g in live_gang] + [w.ref for w in live_owners])
        at = _earliest(*created)
        if at is not None:
            found[GangPhase.DISPATCHED] = Entry(GangPhase.DISPATCHED, at, source, REASON_OBJECTS_CREATED,
                                                f"created {names}")

    bound = [p for p in live_pods if p.bound]
    required = shape.min_member
    # The scheduler has taken the gang up once it said anything about it or about a pod (a SchedulingGated pod
    # was only held back by the API server, not looked at by a scheduler).
    acknowledged = gang.admitted is not None or bool(bound) or any(
        p.waiting_reason and p.waiting_reason != GATED for p in live_pods)
    if acknowledged:
        at = _earliest(*[p.created_at for p in live_pods]) or gang.at or _earliest(
            *[p.waiting_since for p in live_pods])
        if at is not None:
            waiting = [p for p in live_pods if p.waiting_reason]
            if gang.admitted is False:
                reason, message, source = gang.reason or "Unschedulable", gang.message, gang.source
            elif waiting:
                reason, message, source = waiting[0].waiting_reason, waiting[0].waiting_message, waiting[0].ref
            else:
                reason, message, source = REASON_PENDING, "", gang.source or (live_pods[0].ref if live_pods else "")
            tail = bound_of(len(bound), required)
            found[GangPhase.QUEUED] = Entry(GangPhase.QUEUED, at, source, reason,
                                            f"{message} ({tail})" if message else tail)

    if len(bound) >= required and bound:
        at = _kth([p.scheduled_at for p in bound], required)
        ordered = sorted((p for p in bound if p.scheduled_at is not None), key=lambda p: p.scheduled_at)
        source = ordered[min(required, len(ordered)) - 1].ref if ordered else bound[0].ref
        if at is not None:
            found[GangPhase.SCHEDULED] = Entry(GangPhase.SCHEDULED, at, source, "Scheduled",
                                               bound_of(len(bound), required))
    elif gang.admitted is True and gang.at is not None:
        found[GangPhase.SCHEDULED] = Entry(GangPhase.SCHEDULED, gang.at, gang.source, gang.reason or "Scheduled",
                                           gang.message or bound_of(len(bound), required))

    started = [p for p in live_pods if p.started]
    if shape.total and len(started) >= shape.total:
        at = _latest(p.started_at for p in started)
        if at is not None:
            last = max((p for p in started if p.started_at is not None), key=lambda p: p.started_at)
            found[GangPhase.RUNNING] = Entry(GangPhase.RUNNING, at, last.ref, REASON_RUNNING,
                                             f"{len(started)} of {shape.total} pods running")

    failed_owner = next((w for w in live_owners if w.failed_at is not None), None)
    failed_pod = next((p for p in live_pods if p.phase == POD_FAILED), None)
    if failed_owner is not None:
        found[GangPhase.FAILED] = Entry(GangPhase.FAILED, failed_owner.failed_at, failed_owner.ref,
                                        failed_owner.failed_reason or "Failed", failed_owner.failed_message)
    elif failed_pod is not None and not live_owners:
        at = failed_pod.finished_at or now
        found[GangPhase.FAILED] = Entry(GangPhase.FAILED, at, failed_pod.ref, REASON_POD_FAILED,
                                        f"pod {failed_pod.name} failed")
    elif live_owners and all(w.complete_at is not None for w in live_owners):
        last = max(live_owners, key=lambda w: w.complete_at)
        found[GangPhase.SUCCEEDED] = Entry(GangPhase.SUCCEEDED, last.complete_at, last.ref, REASON_COMPLETED,
                                           f"{len(live_owners)} of {len(live_owners)} Jobs complete")
    elif not live_owners and shape.total and len([p for p in live_pods if p.phase == POD_SUCCEEDED]) >= shape.total:
        done = [p for p in live_pods if p.phase == POD_SUCCEEDED]
        at = _latest(p.finished_at for p in done)
        if at is not None:
            last = max((p for p in done if p.finished_at is not None), key=lambda p: p.finished_at)
            found[GangPhase.SUCCEEDED] = Entry(GangPhase.SUCCEEDED, at, last.ref, REASON_COMPLETED,
                                               f"{len(done)} of {shape.total} pods succeeded")

    if shape.cancelling and not (live_gang or live_owners or live_pods) and GangPhase.SUCCEEDED not in found \
            and GangPhase.FAILED not in found:
        found[GangPhase.CANCELLED] = Entry(GangPhase.CANCELLED, now, "gangweb", REASON_CANCELLED,
                                           "cancelled by the user; cluster objects deleted")
    return found


def observe(shape: JobShape, current_phase: str, recorded: dict[str, datetime], gang: GangStatus,
            gang_objects: list[dict], pods: list[PodFacts], owners: list[OwnerFacts], now: datetime) -> Observation:
    """The job's phase after this observation and the timeline entries to append (in order).

    - `current_phase`: the job's phase before; `recorded`: {phase: at} of the entries already in its timeline.
    - Returns an Observation whose `entries` holds only phases not yet recorded and later than the latest
      recorded one; a finished job (terminal phase) is never changed.
    """
    live_pods = [p for p in pods if not p.terminating]
    obs = Observation(
        phase=current_phase, pods=len(live_pods), bound=sum(1 for p in live_pods if p.bound),
        running=sum(1 for p in live_pods if p.phase == "Running"),
        succeeded=sum(1 for p in live_pods if p.phase == POD_SUCCEEDED),
        failed=sum(1 for p in live_pods if p.phase == POD_FAILED),
    )
    if current_phase in TERMINAL_PHASES:
        return obs
    found = candidates(shape, gang, gang_objects, pods, owners, now)
    reached = [PHASE_ORDER[p] for p in recorded] + [PHASE_ORDER.get(current_phase, 0)]
    high = max(reached)
    # One terminal phase only: Failed wins over Succeeded when both show (a Job can fail after others completed).
    if GangPhase.FAILED in found:
        found.pop(GangPhase.SUCCEEDED, None)
        found.pop(GangPhase.CANCELLED, None)
    last_at = max(recorded.values()) if recorded else None
    for phase in GangPhase:
        entry = found.get(phase)
        if entry is None or phase in recorded or PHASE_ORDER[phase] <= high:
            continue
        if last_at is not None and entry.at < last_at:
            entry = Entry(entry.phase, last_at, entry.source, entry.reason, entry.message)
        obs.entries.append(entry)
        last_at = entry.at
        high = PHASE_ORDER[phase]
        obs.phase = phase
    obs.reason, obs.message = _reason(obs, shape, gang, found, pods, gang_objects, owners)
    return obs


def _requeued(obs: Observation, shape: JobShape, pods: list[PodFacts],
              live_pods: list[PodFacts]) -> tuple[str, str] | None:
    """(reason, message) when a gang that was scheduled has fewer than minMember pods bound again and its pods are
    being disrupted (preempted, evicted) or wait for the scheduler again (recreated after a loss).

    The reason is the pods' own DisruptionTarget reason while a disrupted pod is still visible (e.g.
    `PreemptionByScheduler`, with who preempted in the message), else `Requeued`. The phase itself stays: phases
    only move forward (see the module docstring and docs/observability.md, "Re-queued gangs").
    """
    if obs.bound >= shape.min_member:
        return None
    tail = bound_of(obs.bound, shape.min_member)
    disrupted = next((p for p in pods if p.disruption_reason), None)
    if disrupted is not None:
        said = f"; {disrupted.ref}: {disrupted.disruption_message}" if disrupted.disruption_message else ""
        # While the disrupted pod is visible its own reason is the more precise one; its replacement (owner Jobs
        # ignore DisruptionTarget failures, reconcile/desired.py) then makes the gang say Requeued.
        return disrupted.disruption_reason, f"gang disrupted: {tail}{said}"
    waiting = next((p for p in live_pods if not p.bound), None)
    if waiting is None:
        return None  # no pod waits: nothing says the gang is back in the queue (objects missing, or finishing)
    said = f"; {waiting.waiting_message}" if waiting.waiting_message else ""
    return REASON_REQUEUED, f"requeued: {tail}{said}"


def _reason(obs: Observation, shape: JobShape, gang: GangStatus, found: dict[str, Entry], pods: list[PodFacts],
            gang_objects: list[dict], owners: list[OwnerFacts]) -> tuple[str, str]:
    """phase_reason and phase_message for the job's phase now (they may change while the phase stays)."""
    phase = obs.phase
    if phase in TERMINAL_PHASES:
        entry = found.get(phase) or next((e for e in obs.entries if e.phase == phase), None)
        return (entry.reason, entry.message) if entry else ("", "")
    tail = bound_of(obs.bound, shape.min_member)
    live_pods = [p for p in pods if not p.terminating]
    if shape.cancelling:
        return REASON_CANCELLING, "deleting the job's cluster objects"
    disrupted = next((c for c in gang.conditions if isinstance(c, dict) and c.get("type") == DISRUPTION_TARGET
                      and c.get("status") == "True"), None)
    if disrupted is not None and phase in (GangPhase.SCHEDULED, GangPhase.RUNNING):
        # v1alpha2 DisruptionTarget: the scheduler is preempting the gang; say so while the pods still run.
        return disrupted.get("reason") or DISRUPTION_TARGET, disrupted.get("message", "")
    requeued = _requeued(obs, shape, pods, live_pods) if phase in (GangPhase.SCHEDULED, GangPhase.RUNNING) else None
    if requeued is not None:
        return requeued
    if phase == GangPhase.RUNNING:
        return REASON_RUNNING, f"{obs.running} of {shape.total} pods running"
    if phase == GangPhase.SCHEDULED:
        started = sum(1 for p in live_pods if p.started)
        return REASON_STARTING, f"{tail}; {started} of {shape.total} pods started"
    live_objects = [g for g in gang_objects if not o.is_terminating(g)] + [w for w in owners if not w.terminating]
    if phase in (GangPhase.DISPATCHED, GangPhase.QUEUED) and not live_objects and not live_pods:
        return REASON_OBJECTS_MISSING, "the job's objects are not in the cluster (yet); the reconciler recreates them"
    waiting = [p for p in live_pods if p.waiting_reason]
    if obs.bound >= shape.min_member and obs.bound:
        return REASON_STARTING, tail
    if gang.admitted is False:
        return gang.reason or "Unschedulable", f"{gang.message} ({tail})" if gang.message else tail
    if waiting:
        return waiting[0].waiting_reason, f"{waiting[0].waiting_message} ({tail})" if waiting[0].waiting_message \
            else tail
    if phase == GangPhase.QUEUED:
        return REASON_PENDING, tail
    if phase == GangPhase.DISPATCHED:
        if not live_pods:
            return REASON_WAITING_FOR_PODS, f"0 of {shape.total} pods created"
        return REASON_WAITING_FOR_SCHEDULER, f"{len(live_pods)} of {shape.total} pods created; {tail}"
    return "", ""
