"""What each phase's evidence says, one rule per phase: the candidate timeline entry (phase, time, reason) that
the evidence of one pass supports for Dispatched, Queued, Scheduled, Running, Succeeded and Failed, and the
reasons gangweb shows with a phase. observe/phases.py decides which candidates become the job's timeline.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..backends.base import GangStatus
from ..choices import GangPhase
from . import objects as o
from .evidence import Evidence, sets_phrase
from .pods import POD_FAILED, POD_SUCCEEDED, PodFacts

# phase_reason values gangweb itself sets (scheduler reasons such as "Unschedulable" or "OverLimit" pass through).
REASON_WAITING_FOR_PODS = "WaitingForPods"

REASON_WAITING_FOR_SCHEDULER = "WaitingForScheduler"

REASON_PENDING = "Pending"

# The Queued entry of a gang the scheduler placed before gangweb ever saw it wait (first seen with minMember bound).
REASON_NO_WAIT = "PlacedWithoutWait"

REASON_WAITED = "PlacedAfterWait"  # first seen placed, but the cluster's times show the pods waited unbound

REASON_UNSEEN = "PlacedUnseen"  # first seen placed, and the cluster gives no bind time to tell how long it waited

# Cluster times have one-second precision (creationTimestamp, lastTransitionTime), and a scheduler takes a moment
# even with room: a gang whose pods were all bound within this many seconds of their creation did not wait.
NO_WAIT_SECONDS = 2

REASON_STARTING = "PodsStarting"

REASON_RUNNING = "Running"

REASON_OBJECTS_CREATED = "ObjectsCreated"

REASON_OBJECTS_MISSING = "ObjectsMissing"

REASON_CANCELLING = "Cancelling"

REASON_COMPLETED = "Completed"

REASON_POD_FAILED = "PodFailed"

REASON_REQUEUED = "Requeued"  # a scheduled gang fell below minMember bound and its pods wait in the scheduler again
# A scheduled gang fell below minMember because members were deleted (no DisruptionTarget: a plain DELETE, by hand or
# by a controller) or are gone without a trace, and nothing waits in their place yet.
REASON_MEMBER_DELETED = "MemberDeleted"
REASON_MEMBERS_LOST = "MembersLost"

GATED = "SchedulingGated"  # PodScheduled=False reason the API server sets on pods with scheduling gates

# A gang object of the job's current generation is missing or terminating while the job's Jobs or pods are there
# (deleted by hand, or its root was): the reconciler replaces the whole gang under new names (docs/observability.md).
REASON_REPLACING = "Replacing"

# Part of the job's gang object set exists and the rest not yet (a create throttled or refused for now): the job is
# not Dispatched until every gang object exists.
REASON_WAITING_FOR_GANG_OBJECT = "WaitingForGangObject"

# Pods bound below the job's minimum after someone else edited the gang's minimum (never Scheduled).
REASON_PARTIAL_GANG = "PartialGang"

@dataclass(frozen=True)
class Entry:
    """One timeline entry to append: the job entered `phase` at `at` (cluster time), said by `source`."""

    phase: str
    at: datetime
    source: str
    reason: str
    message: str = ""
    attempt: int = 0  # 0 for the first pass through the lifecycle, n after the n-th re-queue
    inferred: bool = False  # `at` is not the cluster's own timestamp for this event (module docstring, Inferred)

@dataclass
class Observation:
    """The result of one observation: the job's phase, its reason and message now, the entries to append, and the
    attempt the job is in afterwards."""

    phase: str
    attempt: int = 0
    reason: str = ""
    message: str = ""
    entries: list[Entry] = field(default_factory=list)
    bound: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    pods: int = 0

def bound_of(bound: int, required: int, short: list[dict] | None = None) -> str:
    """The "N of M bound" phrase the timeline and why-pending use; with `short` (pod sets below their own minimum,
    `Evidence.short_sets`) followed by theirs: "5 of 3 bound; gpu-workers 0 of 2 bound"."""
    phrase = f"{bound} of {required} bound"
    return f"{phrase}; {sets_phrase(short)}" if short else phrase

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

def gang_said(gang: GangStatus) -> bool:
    """True when the gang object's status said anything (a decision, a reason, a message or a time): only then may
    an entry name it as its source."""
    return gang.admitted is not None or bool(gang.reason or gang.message) or gang.at is not None

def placed_unseen(bound: list[PodFacts], required: int) -> tuple[str, str, str]:
    """(reason, message, source) of the Queued entry of a gang first seen with `required` of its pods bound.

    The pods that made the gang whole are the first `required` by bind time; each waited from its creation to
    its `PodScheduled` time. All within NO_WAIT_SECONDS: `PlacedWithoutWait`; else `PlacedAfterWait` naming the
    longest wait (seconds, whole) and that pod; `PlacedUnseen` when one of their bind times is not the cluster's."""
    ordered = sorted(bound, key=lambda p: (p.scheduled_at is None,
                                           p.scheduled_at.timestamp() if p.scheduled_at else 0))[:max(required, 1)]
    if any(p.scheduled_inferred or p.scheduled_at is None or p.created_at is None for p in ordered):
        return REASON_UNSEEN, "already placed when first observed; the cluster gives no bind time", ordered[0].ref
    waits = [((p.scheduled_at - p.created_at).total_seconds(), p) for p in ordered]
    longest, pod = max(waits, key=lambda w: w[0])
    if longest <= NO_WAIT_SECONDS:
        return REASON_NO_WAIT, "placed as soon as it was queued", ordered[0].ref
    return REASON_WAITED, f"placed after waiting {int(round(longest))} s unbound", pod.ref

def admitted_unseen(ev: Evidence) -> tuple[str, str, str]:
    """(reason, message, source) of the Queued entry of a gang first seen admitted by its gang object with fewer
    than minMember pods bound: the same queue-side reasons as `placed_unseen`, judged from the earliest pod
    creation to the gang object's statement time, never the admission's own reason ("Scheduled": the Scheduled
    entry's). No pod or no statement time: `PlacedUnseen`."""
    gang = ev.gang
    created = gang.queued_at or _earliest(*[p.created_at for p in ev.live_pods])
    if created is None or gang.at is None:
        return REASON_UNSEEN, "already admitted when first observed; the cluster gives no time to tell how long it " \
                              "waited", gang.source
    waited = (gang.at - created).total_seconds()
    if waited <= NO_WAIT_SECONDS:
        return REASON_NO_WAIT, "admitted as soon as it was queued", gang.source
    return REASON_WAITED, f"admitted after waiting {int(round(waited))} s", gang.source

def _dispatched(ev: Evidence) -> Entry | None:
    """Dispatched: a live gang object or owner Job exists, and the whole gang object set of the current generation
    exists (`JobShape.gang_gone` empty) unless owner Jobs do; at the earliest creationTimestamp among them."""
    if not (ev.live_gang or ev.live_owners):
        return None
    if ev.shape.gang_gone and not ev.live_owners:
        return None  # a Workload without its PodGroup (its create throttled): not dispatched yet
    at = _earliest(*[o.created_at(g) for g in ev.live_gang], *[w.created_at for w in ev.live_owners])
    if at is None:
        return None
    source = o.ref(ev.live_gang[0]) if ev.live_gang else ev.live_owners[0].ref
    # In creation order: by creationTimestamp; within its one-second precision, the gang objects before the Jobs
    # (gangweb creates them first), each group in the order observed.
    made = [(o.created_at(g), 0, i, o.ref(g)) for i, g in enumerate(ev.live_gang)] + [
        (w.created_at, 1, i, w.ref) for i, w in enumerate(ev.live_owners)]
    never = datetime.max.replace(tzinfo=at.tzinfo)
    names = ", ".join(ref for _, _, _, ref in sorted(made, key=lambda m: (m[0] or never, m[1], m[2])))
    return Entry(GangPhase.DISPATCHED, at, source, REASON_OBJECTS_CREATED, f"created {names}")

def _queued_said(ev: Evidence) -> tuple[str, str, str]:
    """(reason, message, source) of the Queued entry: whoever spoke about the waiting gang."""
    gang, bound, required = ev.gang, ev.bound, ev.shape.min_member
    waiting = [p for p in ev.live_pods if p.waiting_reason]
    if gang.admitted is False:
        return gang.reason or "Unschedulable", gang.message, gang.source
    if gang.unknown and gang.admitted is None:  # said as it is, never as a reason gangweb knows
        return gang.reason or "Unknown", gang.unknown, gang.source
    if gang.admitted and gang.queued_at is not None:  # its queue's own times (Kueue): admitted, then placed
        return admitted_unseen(ev)
    if waiting:
        return waiting[0].waiting_reason, waiting[0].waiting_message, waiting[0].ref
    if len(bound) >= required and bound:  # never seen waiting: not "Pending" next to "2 of 2 bound"
        return placed_unseen(bound, required)
    if gang.admitted:  # never seen waiting either, and the admission's reason is the Scheduled entry's
        return admitted_unseen(ev)
    if bound and not gang.reason:
        # Seen while its pods were being bound, no pod waiting and no reason from the gang object: judged from the
        # bound pods' own times, like a gang first seen whole, so one instant placement reads one way
        # (PlacedWithoutWait) however far the binding had got when gangweb looked (issue 33).
        return placed_unseen(bound, len(bound))
    if gang_said(gang):
        return gang.reason or REASON_PENDING, gang.message, gang.source
    return REASON_PENDING, "", ""

def _queued(ev: Evidence) -> Entry | None:
    """Queued: the scheduler has taken the gang up, once it said anything about it or about a pod (a SchedulingGated
    pod was only held back by the API server, not looked at by a scheduler), or bound a pod. At the time the
    scheduler's queue took the gang (`GangStatus.queued_at`: Kueue's Workload creation), else the earliest pod
    creationTimestamp, else the gang's statement time, else the earliest time a pod was seen waiting."""
    live_pods, gang = ev.live_pods, ev.gang
    acknowledged = gang.admitted is not None or bool(gang.unknown) or bool(ev.bound) or any(
        p.waiting_reason and p.waiting_reason != GATED for p in live_pods)
    if not acknowledged:
        return None
    at = (gang.queued_at or _earliest(*[p.created_at for p in live_pods]) or gang.at
          or _earliest(*[p.waiting_since for p in live_pods]))
    if at is None:
        return None
    reason, message, source = _queued_said(ev)
    tail = bound_of(len(ev.bound), ev.shape.min_member, ev.short_sets)
    return Entry(GangPhase.QUEUED, at, source, reason, f"{message} ({tail})" if message else tail)

def _scheduled(ev: Evidence, pods_only: bool) -> Entry | None:
    """Scheduled: the gang object says admitted at the scheduling time (`scheduled_at_admission`, unless
    `pods_only`), else minMember pods are bound (at the minMember-th PodScheduled time), else the gang object says
    admitted. Never while a scheduling gate holds pods the gang still needs (kueue #9482)."""
    gang, bound, required = ev.gang, ev.bound, ev.shape.min_member
    gated = any(p.gated for p in ev.live_pods) and len(bound) < required
    # A pod set below its own minimum keeps the gang from being whole, whatever the gang object says: a backend
    # with one count (k8s-workload's minCount) admits "5 of 3 bound" with 0 of 2 GPU workers (issue 30). A gang
    # admitted under a minimum someone lowered by hand is not the job's gang either: only its pods can say so.
    edited = ev.shape.min_edited and len(bound) < required
    # A queue manager's admission (`quota_only`, Kueue) reserves quota; only the pods say the gang is placed.
    said = gang.admitted is True and gang.at is not None and not gated and not ev.short_sets and not edited \
        and not gang.quota_only
    if said and gang.scheduled_at_admission and not pods_only:
        return Entry(GangPhase.SCHEDULED, gang.at, gang.source, gang.reason or "Scheduled",
                     gang.message or bound_of(len(bound), required))
    if ev.whole:
        at = _kth([p.scheduled_at for p in bound], required)
        if at is None:
            return None
        ordered = sorted((p for p in bound if p.scheduled_at is not None), key=lambda p: p.scheduled_at)
        whole = ordered[min(required, len(ordered)) - 1]
        return Entry(GangPhase.SCHEDULED, at, whole.ref, "Scheduled", bound_of(len(bound), required),
                     inferred=whole.scheduled_inferred)
    if said:
        return Entry(GangPhase.SCHEDULED, gang.at, gang.source, gang.reason or "Scheduled",
                     gang.message or bound_of(len(bound), required))
    return None

def _running(ev: Evidence) -> Entry | None:
    """Running: every pod of the job has started (an optional pod set's pods only once bound), every pod set at its
    minimum; at the latest container start among them."""
    started = [p for p in ev.live_pods if p.started]
    # An optional pod set's (minimum 0) pods that no node took do not hold the job back; once bound they must start.
    optional = {s.name: s.replicas for s in ev.shape.sets if s.minimum == 0}
    unplaced = sum(max(n - sum(1 for p in ev.bound if p.pod_set == name), 0) for name, n in optional.items())
    total = ev.shape.total - unplaced
    if not total or len(started) < total or ev.short_sets:
        return None
    at = _latest(p.started_at for p in started)
    if at is None:
        return None
    last = max((p for p in started if p.started_at is not None), key=lambda p: p.started_at)
    return Entry(GangPhase.RUNNING, at, last.ref, REASON_RUNNING, f"{len(started)} of {total} pods running",
                 inferred=last.started_inferred)

def _failed(ev: Evidence) -> Entry | None:
    """Failed: an owner Job has Failed=True (its condition's time), or, without owners, a pod Failed (its finish
    time, else `now`, inferred)."""
    failed_owner = next((w for w in ev.live_owners if w.failed_at is not None), None)
    if failed_owner is not None:
        return Entry(GangPhase.FAILED, failed_owner.failed_at, failed_owner.ref,
                     failed_owner.failed_reason or "Failed", failed_owner.failed_message)
    failed_pod = next((p for p in ev.live_pods if p.phase == POD_FAILED), None)
    if failed_pod is not None and not ev.live_owners:
        return Entry(GangPhase.FAILED, failed_pod.finished_at or ev.now, failed_pod.ref, REASON_POD_FAILED,
                     f"pod {failed_pod.name} failed", inferred=failed_pod.finished_at is None)
    return None

def _succeeded(ev: Evidence) -> Entry | None:
    """Succeeded: every owner Job is Complete (the latest completionTime), or, without owners, every pod Succeeded
    (the latest container finish)."""
    owners = ev.live_owners
    if owners:
        if not all(w.complete_at is not None for w in owners):
            return None
        last = max(owners, key=lambda w: w.complete_at)
        return Entry(GangPhase.SUCCEEDED, last.complete_at, last.ref, REASON_COMPLETED,
                     f"{len(owners)} of {len(owners)} Jobs complete")
    done = [p for p in ev.live_pods if p.phase == POD_SUCCEEDED]
    if not ev.shape.total or len(done) < ev.shape.total:
        return None
    at = _latest(p.finished_at for p in done)
    if at is None:
        return None
    last = max((p for p in done if p.finished_at is not None), key=lambda p: p.finished_at)
    return Entry(GangPhase.SUCCEEDED, at, last.ref, REASON_COMPLETED, f"{len(done)} of {ev.shape.total} pods succeeded")

def candidates(ev: Evidence, pods_only: bool = False) -> dict[str, Entry]:
    """Every phase the evidence shows the job has reached, each with its own cluster time, source and reason: one
    rule per phase (`_dispatched`, `_queued`, `_scheduled`, `_running`, then one terminal phase, Failed before
    Succeeded: a Job can fail after others completed).

    Pure; `ev.now` is used only for a Failed pod's missing finish time. Terminating objects and pods do not count as
    live. Cancelled is never among them (only a reconcile pass decides it). Scheduled comes from the gang object
    when its backend says the admission time is the scheduling time (`GangStatus.scheduled_at_admission`, v1beta1
    `PodGroupInitiallyScheduled`), unless `pods_only` (a re-queued attempt: that condition never reverts, so only
    the pods tell whether the gang is whole again).
    """
    # Never Cancelled from an observation: that is gangweb's decision (reconcile/jobs/cleanup.py `cancel`), made
    # only by a pass whose own LIST found nothing of the job left, pods included, and recorded with `cleaned_up_at`.
    # A watch cache (or a resync's snapshot) may lag behind what exists; a cancelling job keeps its phase, reason
    # Cancelling.
    found = (_dispatched(ev), _queued(ev), _scheduled(ev, pods_only), _running(ev), _failed(ev) or _succeeded(ev))
    return {entry.phase: entry for entry in found if entry is not None}
