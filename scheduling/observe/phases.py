"""From what the cluster says (gang status, pods, owner Jobs) to a job's phase and the timeline entries to append.

Phases (scheduling.choices.GangPhase), each reached when:
- **Dispatched**: a gang object or an owner Job exists. Time: the earliest creationTimestamp among them.
- **Queued**: the scheduler has taken the gang up: it said something about it (the gang object's status or a
  pod's `PodScheduled` condition) or bound a pod. Time: the earliest pod creationTimestamp (when the pods entered
  the scheduler's queue), else the scheduler's statement time. Before that the job stays Dispatched with reason
  `WaitingForScheduler` (no scheduler has looked at the pods yet) or `WaitingForPods` (no pod exists yet).
- **Scheduled**: at least minMember pods are bound (or the gang object says admitted), and every pod set that
  states its own minimum has that many bound (`JobShape.sets`; a gang object's admission does not count while one
  is short). Time: the minMember-th pod's `PodScheduled` time (when the gang became whole), else the gang
  object's condition time.
- **Running**: every pod of the job has started (an optional pod set's, minimum 0, only once bound). Time: the latest
  container start among them.
- **Succeeded**: every owner Job has `Complete=True` (time: `completionTime`), or without owners every pod
  Succeeded (time: the latest container finish).
- **Failed**: an owner Job has `Failed=True` (time: that condition's lastTransitionTime), or without owners a
  pod Failed.
- **Cancelled** is not observed here: the reconcile pass records it (reconcile/jobs/cleanup.py `cancel`) once its
  own LIST finds nothing of the job left, pods included; until then an observation says `Cancelling`.

Queued entry of a gang first seen already placed: `PlacedWithoutWait` only when every pod that made the gang whole
was bound within `NO_WAIT_SECONDS` of its creation (both cluster times); otherwise `PlacedAfterWait` with the
longest such wait in seconds, or `PlacedUnseen` when a bind time is not the cluster's (see Inferred). A gang first
seen admitted by its gang object before minMember pods are bound gets the same reasons, from the gang object's
statement time (`admitted_unseen`), never the admission's own reason ("Scheduled"). An entry names
a `source` only when that object said something: a gang object whose status is empty (coscheduling's PodGroup
before its controller wrote `status.phase`) is never named.

Scheduling gates: a pod held by a scheduling gate (any gate, gangweb's or another controller's) is not bound and
not looked at by a scheduler, so the job is not Scheduled while gates hold it, whatever a gang object says.

Inferred: an entry whose time is not the cluster's own timestamp for that event (a bound pod without a
`PodScheduled` time, a running pod without a container `startedAt`, a failed pod without `finishedAt`: gangweb
falls back to the pod's startTime, creation or its own clock) carries `inferred=True`; the API and the job page say
so and the latency histograms leave it out (docs/observability.md, "Inferred times").

Rules: phases only move forward within an attempt; each phase gets one entry per attempt, in lifecycle order, and
an entry is never invented without a timestamp from the cluster (gangweb's own clock is used only for Cancelled). A
phase passed quickly (Scheduled and Running seen in the same pass) still gets its own entry with its own cluster
time. Cluster times have one-second precision and come from another clock than gangweb's, so each entry's time is
clamped to be no earlier than the previous entry's: the timeline always reads in order.

Attempts: a Scheduled or Running gang that falls below minMember bound again because members were disrupted
(preempted, evicted: `DisruptionTarget`) or replaced (new pods waiting for the scheduler) is **re-queued**: a new
attempt starts with a Queued entry (`requeue_entry`) and goes on to Scheduled and Running again when the gang is
whole. Attempt 0 is the first pass through the lifecycle; `observe` is given the current attempt's entries only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..backends.base import GangStatus
from ..choices import PHASE_ORDER, TERMINAL_PHASES, GangPhase
from . import leftovers
from . import objects as o
from .evidence import Evidence, JobShape, sets_phrase
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
    created = _earliest(*[p.created_at for p in ev.live_pods])
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
    pod was only held back by the API server, not looked at by a scheduler), or bound a pod. At the earliest pod
    creationTimestamp, else the gang's statement time, else the earliest time a pod was seen waiting."""
    live_pods, gang = ev.live_pods, ev.gang
    acknowledged = gang.admitted is not None or bool(gang.unknown) or bool(ev.bound) or any(
        p.waiting_reason and p.waiting_reason != GATED for p in live_pods)
    if not acknowledged:
        return None
    at = _earliest(*[p.created_at for p in live_pods]) or gang.at or _earliest(*[p.waiting_since for p in live_pods])
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
    said = gang.admitted is True and gang.at is not None and not gated and not ev.short_sets and not edited
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


def observe(ev: Evidence, current_phase: str, recorded: dict[str, datetime], attempt: int = 0) -> Observation:
    """The job's phase after this observation of `ev` and the timeline entries to append (in order).

    - `current_phase`: the job's phase before; `attempt`: the attempt it is in (0 until its first re-queue);
      `recorded`: {phase: at} of the entries of that attempt already in its timeline.
    - Returns an Observation whose `entries` holds only phases not yet recorded in the attempt and later than the
      latest recorded one, then possibly the Queued entry of a new attempt (`requeue_entry`); a finished job
      (terminal phase) is never changed.
    """
    shape, live_pods = ev.shape, ev.live_pods
    obs = Observation(
        phase=current_phase, attempt=attempt, pods=len(live_pods), bound=len(ev.bound),
        running=sum(1 for p in live_pods if p.phase == "Running"),
        succeeded=sum(1 for p in live_pods if p.phase == POD_SUCCEEDED),
        failed=sum(1 for p in live_pods if p.phase == POD_FAILED),
    )
    if current_phase in TERMINAL_PHASES:
        return obs
    found = candidates(ev, pods_only=attempt > 0)
    by_pods = found if attempt > 0 or not ev.gang.scheduled_at_admission else candidates(ev, pods_only=True)
    # A re-queued attempt is scheduled again only by its pods: a gang object's admitted condition may still hold
    # from before the disruption (it is not reset when a member is evicted; v1beta1's never reverts).
    again = {p: e for p, e in by_pods.items() if p != GangPhase.SCHEDULED or (
        obs.bound >= shape.min_member and not ev.short_sets)}
    last_at = _advance(obs, found if attempt == 0 else again, recorded, attempt)
    if obs.phase in (GangPhase.SCHEDULED, GangPhase.RUNNING) and not shape.cancelling:
        _maybe_requeue(obs, ev, recorded, again, last_at)
    obs.reason, obs.message = _reason(obs, ev, found)
    return obs


def _maybe_requeue(obs: Observation, ev: Evidence, recorded: dict[str, datetime], again: dict[str, Entry],
                   last_at: datetime | None) -> None:
    """When the Scheduled/Running gang of `obs` was taken apart (`requeue_entry`), append the Queued entry of a new
    attempt (no earlier than `last_at`) and whatever of `again` (the pods' own evidence) moves that attempt on."""
    since = recorded.get(GangPhase.SCHEDULED) or next(
        (e.at for e in obs.entries if e.phase == GangPhase.SCHEDULED), None) or last_at
    entry = requeue_entry(ev.shape, since, ev.pods, obs.attempt + 1)
    if entry is None:
        return
    if last_at is not None and entry.at < last_at:
        entry = Entry(entry.phase, last_at, entry.source, entry.reason, entry.message, entry.attempt)
    obs.entries.append(entry)
    obs.phase, obs.attempt = GangPhase.QUEUED, entry.attempt
    # The same evidence may show the new attempt already whole again (a resync that only sees the
    # replacement running): its Scheduled and Running follow from the pods' own times.
    _advance(obs, again, {GangPhase.QUEUED: entry.at}, entry.attempt)


def _advance(obs: Observation, found: dict[str, Entry], recorded: dict[str, datetime], attempt: int):
    """Append to `obs` the entries of `found` that move attempt `attempt` forward from its `recorded` {phase: at}
    and from `obs.phase`, in lifecycle order, each clamped to be no earlier than the one before. Returns the
    time of the latest entry (recorded or appended), or None."""
    high = max([PHASE_ORDER[p] for p in recorded] + [PHASE_ORDER.get(obs.phase, 0)])
    last_at = max(recorded.values()) if recorded else None
    for phase in GangPhase:
        entry = found.get(phase)
        if entry is None or phase in recorded or PHASE_ORDER[phase] <= high:
            continue
        at = max(entry.at, last_at) if last_at is not None else entry.at
        obs.entries.append(Entry(entry.phase, at, entry.source, entry.reason, entry.message, attempt, entry.inferred))
        last_at, high, obs.phase = at, PHASE_ORDER[phase], phase
    return last_at


def requeue_entry(shape: JobShape, since: datetime | None, pods: list[PodFacts], attempt: int) -> Entry | None:
    """The Queued entry that starts attempt `attempt` when a gang scheduled at `since` (the Scheduled entry of its
    current attempt) was taken apart: fewer than minMember of the pods it was scheduled with (live pods created no
    later than `since`) are left, and the cluster says when, in this order:

    - a member disrupted since (`DisruptionTarget=True`, e.g. `PreemptionByScheduler`, `EvictionByEvictionAPI`):
      at its lastTransitionTime, source that pod, reason the condition's, message who did it;
    - else a live pod created after `since` (a replacement: waiting for the scheduler, or already bound when
      the observation comes late, e.g. a resync after the disrupted pod is gone, or after the job's objects were
      recreated): at its creationTimestamp, source that pod, reason `Requeued`.

    None while the gang as scheduled is whole, or when nothing with a cluster time says it was taken apart.
    Pods created after `since` while the original ones still make minMember (a Job creating a large gang's pods
    in batches, minMember < replicas) are no re-queue.
    """
    live = [p for p in pods if not p.terminating]
    # Cluster times are whole seconds, `since` may carry a fraction (clamped to gangweb's own Submitted time):
    # compared at the cluster's precision, a member evicted within the second the gang was scheduled counts.
    since = since.replace(microsecond=0) if since is not None else None
    kept = [p for p in live if p.created_at is None or since is None or p.created_at <= since]
    if len(kept) >= shape.min_member:
        return None
    tail = bound_of(sum(1 for p in live if p.bound), shape.min_member)
    return _disrupted_entry(pods, since, tail, attempt) or _replacement_entry(live, since, tail, attempt)


def _disrupted_entry(pods: list[PodFacts], since: datetime | None, tail: str, attempt: int) -> Entry | None:
    """`requeue_entry`'s first case: the first member disrupted since `since`, at its condition's time."""
    disrupted = sorted((p for p in pods if p.disruption_reason and p.disrupted_at is not None
                        and (since is None or p.disrupted_at >= since)), key=lambda p: p.disrupted_at)
    if not disrupted:
        return None
    first = disrupted[0]
    said = f"; {first.ref}: {first.disruption_message}" if first.disruption_message else ""
    return Entry(GangPhase.QUEUED, first.disrupted_at, first.ref, first.disruption_reason,
                 f"gang disrupted: {tail}{said}", attempt)


def _replacement_entry(live: list[PodFacts], since: datetime | None, tail: str, attempt: int) -> Entry | None:
    """`requeue_entry`'s second case: the first live pod created after `since`, at its creationTimestamp."""
    waiting = sorted((p for p in live if p.created_at is not None and since is not None and p.created_at > since),
                     key=lambda p: p.created_at)
    if not waiting:
        return None
    first = waiting[0]
    said = f"; {first.waiting_message}" if first.waiting_message else ""
    return Entry(GangPhase.QUEUED, first.created_at, first.ref, REASON_REQUEUED, f"requeued: {tail}{said}", attempt)


def _requeued(obs: Observation, ev: Evidence) -> tuple[str, str] | None:
    """(reason, message) when a gang that was scheduled has fewer than minMember pods bound again and its pods are
    being disrupted (preempted, evicted) or wait for the scheduler again (recreated after a loss): the job's
    reason while its re-queued attempt waits (phase Queued, attempt > 0), and while a Scheduled/Running gang is
    short of members without a timed cause for a new attempt (`requeue_entry`).

    The reason is the pods' own DisruptionTarget reason while a disrupted pod is still visible (e.g.
    `PreemptionByScheduler`, with who preempted in the message), else `Requeued` (see docs/observability.md,
    "Re-queued gangs").
    """
    if obs.bound >= ev.shape.min_member:
        return None
    tail = bound_of(obs.bound, ev.shape.min_member)
    disrupted = next((p for p in ev.pods if p.disruption_reason), None)
    if disrupted is not None:
        said = f"; {disrupted.ref}: {disrupted.disruption_message}" if disrupted.disruption_message else ""
        # While the disrupted pod is visible its own reason is the more precise one; its replacement (owner Jobs
        # ignore DisruptionTarget failures, reconcile/desired.py) then makes the gang say Requeued.
        return disrupted.disruption_reason, f"gang disrupted: {tail}{said}"
    waiting = next((p for p in ev.live_pods if not p.bound), None)
    if waiting is None:
        return None  # no pod waits: nothing says the gang is back in the queue (objects missing, or finishing)
    said = f"; {waiting.waiting_message}" if waiting.waiting_message else ""
    return REASON_REQUEUED, f"requeued: {tail}{said}"


def _gang_gone(obs: Observation, ev: Evidence) -> tuple[str, str] | None:
    """(reason, message) while part of the job's current gang object set is missing or terminating
    (`JobShape.gang_gone`): `Replacing` when the job got as far as its Jobs (or was Scheduled or Running: the
    reconciler replaces the gang under new names, and nothing of it may be called running meanwhile), else
    `WaitingForGangObject` (the set is being created: a create throttled or refused for now). None otherwise."""
    gone = ev.shape.gang_gone
    if not gone:
        return None
    what = "; ".join(gone)
    if ev.live_owners or obs.phase in (GangPhase.SCHEDULED, GangPhase.RUNNING) or obs.attempt:
        return REASON_REPLACING, (f"{what}: gangweb replaces the gang under new names "
                                  f"({obs.running} of {ev.shape.total} pods running)")
    return REASON_WAITING_FOR_GANG_OBJECT, f"waiting for the gang object set: {what}"


def _partial(obs: Observation, ev: Evidence) -> tuple[str, str] | None:
    """(reason, message) of a partial gang gangweb did not cause: some but fewer than minMember pods bound after
    the gang's minimum was edited by hand (`JobShape.min_edited`), no member disrupted. None otherwise."""
    shape = ev.shape
    if not shape.min_edited or not 0 < obs.bound < shape.min_member or any(p.disruption_reason for p in ev.pods):
        return None
    if obs.phase in (GangPhase.SCHEDULED, GangPhase.RUNNING):
        return None  # was whole in this attempt: members lost since are a re-queue (`_requeued`), not a partial gang
    if shape.partial_release_s is None:
        then = "releasing partial gangs is turned off (GANGWEB_PARTIAL_GANG_GRACE_SECONDS)"
    else:
        then = (f"gangweb deletes its bound pods {int(shape.partial_release_s)} s after they were bound, so the "
                "gang waits whole again")
    return REASON_PARTIAL_GANG, f"{bound_of(obs.bound, shape.min_member)} after minCount was edited; {then}"


def _reason(obs: Observation, ev: Evidence, found: dict[str, Entry]) -> tuple[str, str]:
    """phase_reason and phase_message for the job's phase now (they may change while the phase stays)."""
    phase, shape, gang, live_pods = obs.phase, ev.shape, ev.gang, ev.live_pods
    if phase in TERMINAL_PHASES:
        entry = found.get(phase) or next((e for e in obs.entries if e.phase == phase), None)
        return (entry.reason, entry.message) if entry else ("", "")
    tail = bound_of(obs.bound, shape.min_member, ev.short_sets)
    if shape.cancelling:  # what keeps the cancel from ending, named (observe/leftovers.py)
        left = [*ev.gang_objects, *(ev.objects.owners if ev.objects else []), *(ev.objects.pods if ev.objects else [])]
        return REASON_CANCELLING, leftovers.waiting_for(left)
    gone = _gang_gone(obs, ev)
    if gone is not None:
        return gone
    partial = _partial(obs, ev)
    if partial is not None:
        return partial
    if gang.disruption_reason and phase in (GangPhase.SCHEDULED, GangPhase.RUNNING):
        # The scheduler says it is disrupting the gang (its plugin read it, e.g. a PodGroup's DisruptionTarget):
        # say so while the pods still run.
        return gang.disruption_reason, gang.disruption_message
    in_requeue = phase in (GangPhase.SCHEDULED, GangPhase.RUNNING) or (phase == GangPhase.QUEUED and obs.attempt)
    requeued = _requeued(obs, ev) if in_requeue else None
    if requeued is not None:
        return requeued
    if phase == GangPhase.RUNNING:
        return REASON_RUNNING, f"{obs.running} of {shape.total} pods running"
    if phase == GangPhase.SCHEDULED:
        started = sum(1 for p in live_pods if p.started)
        return REASON_STARTING, f"{tail}; {started} of {shape.total} pods started"
    return _waiting_reason(obs, ev, tail)


def _waiting_reason(obs: Observation, ev: Evidence, tail: str) -> tuple[str, str]:
    """phase_reason and phase_message of a job that waits (Dispatched or Queued, or Submitted): its objects
    missing, its pods starting, the gang's or a waiting pod's own words, or what it waits for. `tail` is "N of M
    bound"."""
    phase, shape, gang, live_pods = obs.phase, ev.shape, ev.gang, ev.live_pods
    if phase in (GangPhase.DISPATCHED, GangPhase.QUEUED) and not ev.live_gang and not ev.live_owners \
            and not live_pods:
        return REASON_OBJECTS_MISSING, "the job's objects are not in the cluster (yet); the reconciler recreates them"
    waiting = [p for p in live_pods if p.waiting_reason]
    if ev.whole:
        return REASON_STARTING, tail
    if gang.admitted is False:
        return gang.reason or "Unschedulable", f"{gang.message} ({tail})" if gang.message else tail
    if gang.unknown and gang.admitted is None:
        return gang.reason or "Unknown", f"{gang.unknown} ({tail})"
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
