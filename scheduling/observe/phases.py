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

from datetime import datetime

from ..backends.base import GangStatus
from ..choices import PHASE_ORDER, TERMINAL_PHASES, GangPhase
from . import leftovers
from .evidence import Evidence, JobShape
from .phase_entries import (
    REASON_CANCELLING,
    REASON_MEMBER_DELETED,
    REASON_MEMBERS_LOST,
    REASON_OBJECTS_MISSING,
    REASON_PARTIAL_GANG,
    REASON_PENDING,
    REASON_REPLACING,
    REASON_REQUEUED,
    REASON_RUNNING,
    REASON_STARTING,
    REASON_WAITING_FOR_GANG_OBJECT,
    REASON_WAITING_FOR_PODS,
    REASON_WAITING_FOR_SCHEDULER,
    Entry,
    Observation,
    bound_of,
    candidates,
)
from .pods import POD_FAILED, POD_SUCCEEDED, PodFacts


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
    entry = requeue_entry(ev.shape, since, ev.pods, obs.attempt + 1, ev.gang, owners=ev.owners, now=ev.now)
    if entry is None:
        return
    if last_at is not None and entry.at < last_at:
        entry = Entry(entry.phase, last_at, entry.source, entry.reason, entry.message, entry.attempt, entry.inferred)
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


def requeue_entry(shape: JobShape, since: datetime | None, pods: list[PodFacts], attempt: int,
                  gang: GangStatus | None = None, *, owners: list | None = None,
                  now: datetime | None = None) -> Entry | None:
    """The Queued entry that starts attempt `attempt` when a gang scheduled at `since` (the Scheduled entry of its
    current attempt) was taken apart: fewer than minMember of the pods it was scheduled with (live pods created no
    later than `since`) are left, and the cluster says when, in this order:

    - the gang object says its scheduler disrupted the gang since (`gang.disruption_reason` with
      `gang.disrupted_at`, e.g. Kueue's Workload `Evicted=True` reason `Preempted`): at that time, source the gang
      object, reason its own, message its words (for Kueue's preemption, who preempted: reconcile/kueue_preemptors);

    - a member disrupted since (`DisruptionTarget=True`, e.g. `PreemptionByScheduler`, `EvictionByEvictionAPI`):
      at its lastTransitionTime, source that pod, reason the condition's, message who did it;
    - else a live pod created after `since` (a replacement: waiting for the scheduler, or already bound when
      the observation comes late, e.g. a resync after the disrupted pod is gone, or after the job's objects were
      recreated): at its creationTimestamp, source that pod, reason `Requeued`;
    - else, while gangweb itself is not taking the gang down (no gang object missing or terminating, no owner Job
      terminating, no owner Job newer than `since`: a replacement or a cancel has its own entries), a member of a
      live owner Job deleted (no DisruptionTarget: a plain DELETE): at the time its deletion was asked, source
      that pod, reason `MemberDeleted`; with no such pod visible (gone before gangweb looked), its Job controller
      no longer counting it either, and `now` given: at `now`, `inferred`, source gangweb, reason
      `MembersLost`. A gang short of members is never left Running: the first rule (never call a gang Running
      that is not whole) outranks the wish for a cluster time.

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
    return (_gang_disrupted_entry(gang, since, tail, attempt) or _disrupted_entry(pods, since, tail, attempt)
            or _replacement_entry(live, since, tail, attempt)
            or _lost_entry(shape, pods, owners, since, tail, attempt, now))


def _lost_entry(shape: JobShape, pods: list[PodFacts], owners: list | None, since: datetime | None, tail: str,
                attempt: int, now: datetime | None) -> Entry | None:
    """`requeue_entry`'s last case: members deleted without a DisruptionTarget, or gone without a trace, while
    nothing of gangweb's own takes the gang down."""
    if shape.gang_gone or not owners or any(w.terminating for w in owners):
        return None
    if since is not None and any(w.created_at is not None and w.created_at > since for w in owners):
        return None  # Jobs made after the gang was scheduled: gangweb recreated or replaced them (`note_restart`)
    live_owner_uids = {w.uid for w in owners if w.uid}
    deleted = sorted((p for p in pods if p.terminating and p.deleted_at is not None and p.owner_uid in live_owner_uids
                      and (since is None or p.created_at is None or p.created_at <= since)),
                     key=lambda p: p.deleted_at)
    if deleted:
        first = deleted[0]
        at = first.deleted_at if since is None else max(first.deleted_at, since)
        return Entry(GangPhase.QUEUED, at, first.ref, REASON_MEMBER_DELETED,
                     f"gang taken apart: {tail}; {first.ref} was deleted", attempt)
    reported = [w.reported for w in owners]
    if now is None or not owners or any(r is None for r in reported) or \
            sum(r["active"] + r["succeeded"] for r in reported) >= shape.min_member:
        return None  # the Job controller still counts the members (its report may lag the pods, or lead them)
    return Entry(GangPhase.QUEUED, now, "gangweb", REASON_MEMBERS_LOST,
                 f"gang taken apart: {tail}; members are gone and the cluster says neither when nor why", attempt,
                 True)


def _gang_disrupted_entry(gang: GangStatus | None, since: datetime | None, tail: str, attempt: int) -> Entry | None:
    """`requeue_entry`'s first case: the gang object's own disruption statement since `since`, at its time."""
    if gang is None or not gang.disruption_reason or gang.disrupted_at is None:
        return None
    if since is not None and gang.disrupted_at < since:
        return None
    said = f"; {gang.source}: {gang.disruption_message}" if gang.disruption_message else ""
    return Entry(GangPhase.QUEUED, gang.disrupted_at, gang.source, gang.disruption_reason,
                 f"gang disrupted: {tail}{said}", attempt)


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
    gang = ev.gang
    if gang.disruption_reason and gang.disrupted_at is not None and not any(p.disruption_reason for p in ev.pods):
        # The scheduler disrupted the gang as a whole (Kueue's eviction): its words, with who preempted.
        said = f"; {gang.source}: {gang.disruption_message}" if gang.disruption_message else ""
        return gang.disruption_reason, f"gang disrupted: {tail}{said}"
    disrupted = next((p for p in ev.pods if p.disruption_reason), None)
    if disrupted is not None:
        said = f"; {disrupted.ref}: {disrupted.disruption_message}" if disrupted.disruption_message else ""
        # While the disrupted pod is visible its own reason is the more precise one; its replacement (owner Jobs
        # ignore DisruptionTarget failures, reconcile/desired.py) then makes the gang say Requeued.
        return disrupted.disruption_reason, f"gang disrupted: {tail}{said}"
    waiting = next((p for p in ev.live_pods if not p.bound), None)
    if waiting is None:
        if gang.admitted is False:
            return None  # the gang object says why it waits (e.g. Kueue's Pending): `_waiting_reason` gives its words
        deleted = next((p for p in ev.pods if p.terminating), None)
        if deleted is not None and obs.phase == GangPhase.QUEUED and obs.attempt:
            return REASON_MEMBER_DELETED, f"gang taken apart: {tail}; {deleted.ref} is being deleted"
        if obs.phase == GangPhase.QUEUED and obs.attempt and ev.live_owners:
            return REASON_MEMBERS_LOST, f"gang taken apart: {tail}; no pod waits in the lost members' place yet"
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
    if gang.admitted and gang.quota_only:  # admitted by its queue manager (Kueue): the pods are being made
        return gang.reason or "Admitted", f"{gang.message}; pods being created ({tail})" if gang.message else tail
    if phase == GangPhase.QUEUED:
        return REASON_PENDING, tail
    if phase == GangPhase.DISPATCHED:
        if not live_pods and gang.quota_only and gang.admitted is None:  # Kueue has not looked at it yet
            return REASON_WAITING_FOR_SCHEDULER, (f"waiting for the queue manager to admit {gang.source}; its Jobs "
                                                  f"are suspended until then (0 of {shape.total} pods created)")
        if not live_pods:
            return REASON_WAITING_FOR_PODS, f"0 of {shape.total} pods created"
        return REASON_WAITING_FOR_SCHEDULER, f"{len(live_pods)} of {shape.total} pods created; {tail}"
    return "", ""
