"""Write what a pass (or the watch) found and decided about a job into its row and timeline, once.

A job's pass collects what it has to record in a `StatusUpdate` while it runs (the sighting of the job's
objects, a restart, gangweb's own decision such as Cancelled or Failed, an error, the cleanup fields, the UIDs of
the Jobs it created) and calls `write` once at its end; the cluster watcher writes a sighting alone
(`observe_objects`). `write` locks the job's row (`locked_row`, the one lock helper for it; the rule is written
there), re-derives against the row as it is then, appends the missing timeline entries and saves the changed
fields in one UPDATE, and writes nothing when nothing changed (house rule 7). The derivation is
`reconcile/derive.py`, over the pure rules in `scheduling.observe`. Phase history is append-only: one entry per
phase and attempt, in order (a re-queued gang starts a new attempt: `observe.phases.requeue_entry`).

Besides this write, a pass changes its job's row only where the change must be in the database before the pass
goes on acting: the backend it chose and the next gang generation, claimed before anything is created under them
(`jobs/backend.py`, `JobReconciler.replace`; a cancel must know which kinds to delete even if the pass dies
half-way), and `cleaned_up_at` with `objects_removed_at` cleared when a cancel, an end or a clean-up raced with its
creates (`JobReconciler.hand_back`, so the resync finishes the cleanup if this pass dies; the resync clears the same
two when it finds a finished job's objects after its clean-up, reconcile/left_behind.py). Each is one UPDATE; none
of them locks the row or touches the timeline.
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace

from django.db import router, transaction
from django.utils import timezone

from ..choices import PHASE_ORDER, TERMINAL_PHASES, GangPhase
from ..db import cluster_usage
from ..db.statements import fetch, joined, joined_instance
from ..db.statements import update as update_row
from ..db.storable import storable
from ..kube.errors import NAME_CONFLICT, NAMESPACE_NOT_FOUND
from ..models import GangJob, PhaseTransition
from ..observe import metrics, timeline, why_pending
from ..observe.evidence import JobObjects
from .derive import (  # noqa: F401 - re-exported: what callers and tests read of a job's derivation
    REASON_MAX,
    Sighting,
    current_gang_name,
    current_gang_objects,
    derive,
    job_shape,
    merged_owner_uids,
    queue_name,
    read_gang_status,
    scheduler_of,
)
from .timeline_reads import read_timeline

log = logging.getLogger(__name__)

# A Volcano job's PodGroup waits because its Volcano Queue does not exist yet (reconcile/volcano_queues.py).
VOLCANO_QUEUE_MISSING = "VolcanoQueueMissing"
# Fields a pass sets itself (cleanup and retention, a backend switch, a repair's backoff: jobs/repairs.py),
# written with the rest when they changed.
PLAIN_FIELDS = ("cleaned_up_at", "remove_after", "objects_removed_at", "backend_plugin", "repairs")
# Everything `write` may change on the row, compared with the row as read to tell whether anything changed.
WRITTEN_FIELDS = ("phase", "phase_reason", "phase_message", "phase_changed_at", "finished_at", "why_pending",
                  "observed", "owner_uids", *PLAIN_FIELDS)


RELATED = ("cluster", "queue")  # what a locked row comes with
# Fields that may hold the cluster's own words (made storable before a write: `_storable`).
CLUSTER_TEXT_FIELDS = ("phase_reason", "phase_message", "why_pending", "observed")


@contextmanager
def locked_row(job: GangJob) -> Iterator[GangJob]:
    """Yield `job`'s row as it is now (cluster and queue read with it), locked until the enclosing transaction
    ends: one is opened here unless the caller already has one (then no savepoint either). The one way anything
    locks a job's row: `write` runs under it.

    - What is locked: the job's row only (`SELECT ... FOR NO KEY UPDATE OF` the job's table). With the cluster and
      queue joined, a plain FOR UPDATE also locked their rows, so every status write of a cluster's jobs queued
      behind the others' (two worker processes, the watcher), and so did every submit into the queue (its
      foreign-key check). NO KEY UPDATE: the key is not changed, so inserting rows that reference the job (its
      timeline entries, the pass's ReconcileAttempt) is not blocked either; two writers of the same job still
      exclude each other.
    - In what order: the job row first; then, under it, the job's timeline is read (unless it was read no earlier
      than the row the caller holds and the row's `updated_at` is still the one read: every timeline append
      saves `updated_at` in the same transaction, so an unchanged `updated_at` means an unchanged timeline),
      appended to, and the row written once. No other row is locked in the same transaction, so two writers
      never wait on each other in a circle.
    - Why: the watcher and Celery workers may observe the same job at once; each re-derives against the row and
      the recorded phases as they are under the lock and appends only what is still missing, so no phase is
      recorded twice or lost, and a slower writer never overwrites a newer phase.

    SQLite ignores row locks; its IMMEDIATE transactions serialize writers instead. Raises GangJob.DoesNotExist
    when the row is gone.

    The read is one statement of fixed text (`_locked_statement`, `scheduling/db/statements.py`), the instances as
    `select_for_update(of=("self",), no_key=True).select_related("cluster", "queue").get(pk=...)` returns them:
    compiling that queryset was most of a watch observation's CPU (bench/README.md, "Watch under churn").
    """
    with transaction.atomic(savepoint=False):
        alias = router.db_for_write(GangJob)
        sql, cols = _locked_statement(alias)
        rows = fetch(alias, sql, [job.pk], cols)
        if not rows:
            raise GangJob.DoesNotExist(f"GangJob {job.pk} does not exist")
        yield joined_instance(alias, GangJob, RELATED, rows[0])


@functools.lru_cache(maxsize=8)
def _locked_statement(alias: str) -> tuple[str, tuple]:
    """(SQL, columns) reading the job with a given primary key joined with its cluster and queue, locking the job's
    row alone where the database locks rows (`statements.joined`)."""
    return joined(alias, GangJob, RELATED, "id", lock=True)


def _entries(recorded: list) -> list[tuple]:
    """[(phase, at, attempt)] of recorded entries given with or without their `inferred` flag."""
    return [tuple(r[:3]) for r in recorded]


@dataclass
class Decision:
    """A phase gangweb decides by itself (Cancelled once the objects are gone, Failed on a refusal), `at` its time."""

    phase: str
    at: datetime
    source: str
    reason: str
    message: str


@dataclass
class StatusUpdate:
    """What one pass has to record on its job, collected while it runs and written once (`write`).

    Made at the start of the pass (`begin`), from the row as the pass holds it: `before` keeps the written fields
    as read, `row_read_at` its `updated_at`, `recorded` the job's timeline when it was read with or after the row
    (the resync's chunk; else read by `observe` when the pass needs it). Each note also changes the caller's job
    in memory, so the rest of the pass sees it (a job observed finished is cleaned up in the same pass); `write`
    derives everything again under the row lock.
    """

    before: dict
    row_read_at: datetime | None
    recorded: list | None = None
    sighting: Sighting | None = None
    derived: tuple | None = None  # (Observation, changes) of `sighting` against the row as read
    restart: Decision | None = None
    decision: Decision | None = None
    error: tuple | None = None  # (reason, message, HTTP status or None)
    note: tuple | None = None  # (phase_reason, phase_message) without a phase change (a cancel in progress)
    new_owner_uids: dict = field(default_factory=dict)
    clear_errors: frozenset = frozenset()  # error reasons a successful pass replaces by its phase's own

    @classmethod
    def begin(cls, job: GangJob, recorded: list | None = None) -> StatusUpdate:
        """A new, empty update of `job` as read now; `recorded`: its timeline, read no earlier than the row."""
        return cls(before={f: getattr(job, f) for f in WRITTEN_FIELDS}, row_read_at=job.updated_at,
                   recorded=list(recorded) if recorded is not None else None)

    # ---- notes, each applied to `job` in memory as well -------------------------------------------------------
    def observe(self, job: GangJob, sighting: Sighting) -> None:
        """Record what the cluster holds of the job (`sighting`). Reads the job's timeline (one query) unless the
        update has it. A finished job is left alone."""
        if job.phase in TERMINAL_PHASES:
            return
        if self.recorded is None:
            self.recorded = read_timeline(job)
        self.sighting = sighting
        recorded = _entries(self.recorded)
        if self.restart:  # the restart's entry opens the next attempt (or joins the current one): see `_restart`
            recorded = _planned_restart(recorded, self.restart)[0]
        self.derived = derive(job, sighting, recorded, backend_plugin=job.backend_plugin,
                              new_owner_uids=self.new_owner_uids)
        for name, value in self.derived[1].items():
            setattr(job, name, value)

    def restart_at(self, job: GangJob, restart: Decision) -> None:
        """Record that the job starts again from Dispatched: the pass created its owner Job anew at `restart.at`
        (see `_restart`). Reads the job's timeline (one query) unless the update has it."""
        if job.phase in TERMINAL_PHASES:
            return
        if self.recorded is None:
            self.recorded = read_timeline(job)
        self.restart = restart
        _, _, joins, at = _planned_restart(_entries(self.recorded), restart)
        if not joins:
            job.phase, job.phase_reason, job.phase_message = GangPhase.DISPATCHED, restart.reason[:REASON_MAX], \
                restart.message
            job.phase_changed_at = at

    def decide(self, job: GangJob, decision: Decision) -> bool:
        """Move the job forward to `decision.phase` by gangweb's own decision. Never backwards or out of a
        terminal phase. Returns True when it moves (in memory; `write` checks again against the locked row)."""
        if job.phase in TERMINAL_PHASES or PHASE_ORDER[decision.phase] <= PHASE_ORDER.get(job.phase, 0):
            return False
        self.decision = decision
        job.phase, job.phase_reason, job.phase_message = decision.phase, decision.reason[:REASON_MAX], \
            decision.message
        job.phase_changed_at = decision.at
        if decision.phase in TERMINAL_PHASES:
            job.finished_at, job.why_pending = decision.at, None
        return True

    def fail(self, job: GangJob, reason: str, message: str) -> bool:
        """End the job Failed by gangweb's own finding, at gangweb's clock (a refusal has no cluster timestamp)."""
        return self.decide(job, Decision(GangPhase.FAILED, timezone.now(), "gangweb", reason, message))

    def fail_with_error(self, job: GangJob, reason: str, message: str, status: int | None = None) -> None:
        """Record that the cluster could not be reached or answered an error (see `_error`). The phase stays."""
        self.error = (reason, message, status)
        if job.phase not in TERMINAL_PHASES:
            job.phase_reason, job.phase_message = reason[:REASON_MAX], message

    def say(self, job: GangJob, reason: str, message: str) -> None:
        """Set the reason and message of the job's current phase (a cancel deleting the job's objects)."""
        self.note = (reason, message)
        job.phase_reason, job.phase_message = reason, message

    def owner_uids(self, job: GangJob, new: dict) -> None:
        """Keep the UIDs of owner Jobs this pass created or adopted ({name: uid}), written merged with the row's."""
        if new:
            self.new_owner_uids.update(new)
            job.owner_uids = merged_owner_uids(job.owner_uids, new)

    # ---- what to write -----------------------------------------------------------------------------------------
    def plain_changes(self, job: GangJob) -> dict:
        """PLAIN_FIELDS the pass changed in memory: {field: value}."""
        return {f: getattr(job, f) for f in PLAIN_FIELDS if getattr(job, f) != self.before[f]}

    def needs_writing(self, job: GangJob) -> bool:
        """False when nothing would change: no note but a sighting that, derived against the row as read with
        its timeline, changes no field and appends no entry. Then `write` neither locks nor writes."""
        if self.restart or self.decision or self.error or self.note or self.new_owner_uids or self.plain_changes(job):
            return True
        if self.clear_errors and self.before["phase_reason"] in self.clear_errors:
            return True
        if self.sighting is None:
            return False
        if self.derived is None:
            return True  # observed without its timeline (the watch): only the locked row can tell
        obs, changes = self.derived
        return bool(obs.entries) or any(self.before[name] != value for name, value in changes.items())


def write(job: GangJob, update: StatusUpdate) -> list[str]:
    """Write `update` on `job`'s row and timeline, once, under `locked_row`, in this order against the locked row:
    a restart's entry, the sighting's entries and fields, gangweb's decision, an error, the note; then the UIDs of
    the pass's new Jobs and its PLAIN_FIELDS (a backend switch only over the plugin the pass read), and the reason
    of the phase in place of an error the pass recovered from. A finished row takes only the last three. Appends
    the new entries in one INSERT, saves the changed fields (with `updated_at`) in one UPDATE, copies what the row
    holds then back onto `job`, and observes the duration histograms of the phases just recorded. Returns the
    fields written ([] when nothing changed: then nothing is locked either). A write that moves the job into or out of
    Scheduled/Running drops the cluster's remembered usage once it commits (`cluster_usage.forget`)."""
    if not update.needs_writing(job):
        return []
    with locked_row(job) as locked:
        if locked.cluster_id != job.cluster_id:  # moved to another cluster since (reconcile/moves.py): not ours
            log.info("job %s: moved to cluster %s meanwhile; what was seen in %s is not written", locked.pk,
                     locked.cluster_id, job.cluster_id)
            return []
        as_read = {f: getattr(locked, f) for f in WRITTEN_FIELDS}
        timeline_rows = _timeline_under_lock(locked, update)
        recorded = _entries(timeline_rows)
        inferred = {(r[0], r[2]) for r in timeline_rows if len(r) > 3 and r[3]}
        entries, observed = _record_phases(locked, job, update, recorded)
        _record_fields(locked, job, update, entries)
        _storable(locked, as_read, entries)
        changed = [f for f in WRITTEN_FIELDS if getattr(locked, f) != as_read[f]]
        if "phase" in changed and cluster_usage.moves_usage(as_read["phase"], locked.phase):
            # what the cluster's placed jobs hold changed: the ClusterBusy and NodesFragmented facts of the
            # cluster's pending jobs must not be computed from the sums remembered before (once committed)
            transaction.on_commit(functools.partial(cluster_usage.forget, locked.cluster_id), using=locked._state.db)
        if entries:
            PhaseTransition.objects.bulk_create(entries)
        if changed or entries:
            update_row(locked._state.db, locked, [*changed, "updated_at"])  # `save(update_fields=...)`, uncompiled
        _copy_back(job, locked)
    if observed:
        _observe_durations(locked, recorded, inferred, entries, observed)
    if entries:
        log.info("job %s: %s", locked.pk, " -> ".join(f"{e.phase}#{e.attempt}" if e.attempt else e.phase
                                                       for e in entries))
    return changed


def _storable(locked: GangJob, as_read: dict, entries: list) -> None:
    """The fields that carry the cluster's words (CLUSTER_TEXT_FIELDS, the new entries' source, reason and
    message) made storable (`db.storable`: a NUL, which PostgreSQL refuses, replaced), so a hostile condition
    message or annotation never makes the job's status write fail. Only values set by this write are looked at."""
    for name in CLUSTER_TEXT_FIELDS:
        value = getattr(locked, name)
        if value is not as_read[name]:
            setattr(locked, name, storable(value))
    for entry in entries:
        entry.source, entry.reason, entry.message = (storable(entry.source), storable(entry.reason),
                                                     storable(entry.message))


def _timeline_under_lock(locked: GangJob, update: StatusUpdate) -> list[tuple]:
    """The job's timeline as it is under the lock: the one the update read, when it was read no earlier than the
    row and the locked row's `updated_at` is still the one read (every timeline append saves `updated_at`, see
    `locked_row`); else read now. Not read at all ([]) when nothing in the update appends to it (an error, the
    cleanup fields) or the row is finished."""
    if locked.phase in TERMINAL_PHASES or not (update.restart or update.sighting or update.decision):
        return []
    if update.recorded is not None and update.row_read_at is not None and locked.updated_at == update.row_read_at:
        return update.recorded
    return read_timeline(locked)


def _record_phases(locked: GangJob, job: GangJob, update: StatusUpdate, recorded: list) -> tuple[list, set]:
    """Apply the update's restart, sighting, decision, error and note to the `locked` row (in memory); a finished
    row takes none of them. Returns (new PhaseTransition rows, the phases whose durations the metrics observe)."""
    entries, observed = [], set()
    if locked.phase in TERMINAL_PHASES:
        return entries, observed
    if update.restart is not None:
        recorded, entry = _restart(locked, update.restart, recorded)
        entries.append(entry)
    if update.sighting is not None:
        obs, changes = derive(locked, update.sighting, recorded, backend_plugin=job.backend_plugin,
                              new_owner_uids=update.new_owner_uids)
        entries += [PhaseTransition(job=locked, phase=e.phase, at=e.at, attempt=e.attempt, source=e.source[:300],
                                    reason=e.reason[:REASON_MAX], message=e.message, inferred=e.inferred)
                    for e in obs.entries]
        # Metrics observe the spans the new entries end; time_to_running once, at the first Running.
        observed |= {e.phase for e in obs.entries if e.phase != GangPhase.RUNNING or e.attempt == 0}
        recorded = recorded + [(e.phase, e.at, e.attempt) for e in obs.entries]
        _set(locked, changes)
    if update.decision is not None:
        entry = _decide(locked, update.decision, recorded)
        if entry is not None:
            entries.append(entry)
            observed.add(entry.phase)
    if update.error is not None:
        _error(locked, *update.error)
    if update.note is not None and locked.phase not in TERMINAL_PHASES:
        _set(locked, {"phase_reason": update.note[0], "phase_message": update.note[1]})
    return entries, observed


def _record_fields(locked: GangJob, job: GangJob, update: StatusUpdate, entries: list) -> None:
    """The fields written whatever the phase: the pass's new owner-Job UIDs, its PLAIN_FIELDS, and the current
    phase's own reason in place of an error the pass recovered from."""
    _set(locked, {"owner_uids": merged_owner_uids(locked.owner_uids, update.new_owner_uids)})
    plain = update.plain_changes(job)
    if "backend_plugin" in plain and locked.backend_plugin != update.before["backend_plugin"]:
        del plain["backend_plugin"]  # switched by another pass meanwhile: its choice stands
    _set(locked, plain)
    if update.error is None and locked.phase_reason in update.clear_errors:
        last = next((e for e in reversed(entries) if e.phase == locked.phase), None) or (
            PhaseTransition.objects.filter(job_id=locked.pk, phase=locked.phase).order_by("-attempt", "-at").first())
        _set(locked, {"phase_reason": last.reason if last else "", "phase_message": last.message if last else ""})


def _set(locked: GangJob, changes: dict) -> None:
    for name, value in changes.items():
        setattr(locked, name, value)


def _planned_restart(recorded: list, restart: Decision) -> tuple[list, int, bool, datetime]:
    """Where a restart's Dispatched entry goes in `recorded`: (recorded with it, its attempt, whether it joins the
    current attempt, its time)."""
    attempt, current = timeline.current_attempt(recorded)
    joins = attempt > 0 and current and GangPhase.DISPATCHED not in current and min(current.values()) >= restart.at
    at = restart.at
    if not joins:
        attempt += 1
        at = max([at, *(r[1] for r in recorded)])
    return [*recorded, (GangPhase.DISPATCHED, at, attempt)], attempt, bool(joins), at


def _restart(locked: GangJob, restart: Decision, recorded: list) -> tuple[list, PhaseTransition]:
    """The job starts again from Dispatched because the pass created its owner Job anew at `restart.at` (the new
    objects' creationTimestamp): a Dispatched entry of a new attempt (reason `Recreated`, `Replaced` or
    `APIVersionChanged`, the message naming the objects), and the phase Dispatched. When the watch already started
    an attempt from the new Job's pods (its first entry is no earlier than `restart.at`: Queued, `Requeued`), the
    entry joins that attempt instead of starting another, and the phase stays."""
    recorded, attempt, joins, at = _planned_restart(recorded, restart)
    if not joins:
        _set(locked, {"phase": GangPhase.DISPATCHED, "phase_reason": restart.reason[:REASON_MAX],
                      "phase_message": restart.message, "phase_changed_at": at})
    log.info("job %s: %s#%s (%s)", locked.pk, GangPhase.DISPATCHED, attempt, restart.reason)
    return recorded, PhaseTransition(job=locked, phase=GangPhase.DISPATCHED, at=at, attempt=attempt,
                                     source=restart.source[:300], reason=restart.reason[:REASON_MAX],
                                     message=restart.message)


def _decide(locked: GangJob, decision: Decision, recorded: list) -> PhaseTransition | None:
    """Move the locked row forward to `decision.phase` (never backwards, never out of a terminal phase), at no
    earlier than the latest entry of the current attempt; its entry, unless one is recorded for that phase and
    attempt already. None when it does not move."""
    if locked.phase in TERMINAL_PHASES or PHASE_ORDER[decision.phase] <= PHASE_ORDER.get(locked.phase, 0):
        return None
    attempt = max((a for _, _, a in recorded), default=0)
    at = max([decision.at, *(at for _, at, a in recorded if a == attempt)])
    _set(locked, {"phase": decision.phase, "phase_reason": decision.reason[:REASON_MAX],
                  "phase_message": decision.message, "phase_changed_at": at})
    if decision.phase in TERMINAL_PHASES:
        _set(locked, {"finished_at": at, "why_pending": None})
    if any(p == decision.phase and a == attempt for p, _, a in recorded):
        return None
    return PhaseTransition(job=locked, phase=decision.phase, at=at, attempt=attempt, source=decision.source[:300],
                           reason=decision.reason[:REASON_MAX], message=decision.message)


def _error_summary(cluster: str, reason: str, message: str, status: int | None) -> str:
    """The why-pending sentence for a reconcile error: a refusal (an HTTP status) is not an unreachable cluster."""
    if reason in (NAMESPACE_NOT_FOUND, VOLCANO_QUEUE_MISSING, NAME_CONFLICT):
        return message  # names what is missing (or whose the object in the way is), the cluster and the fix
    if status:
        return f"Cluster {cluster} refused the job's objects (HTTP {status}, {reason}): {message}"
    return f"gangweb cannot reach cluster {cluster}: {message}"


def _error(locked: GangJob, reason: str, message: str, status: int | None) -> None:
    """The cluster could not be reached or answered an error (4xx/5xx) while reconciling the job: the phase stays;
    `phase_reason` / `phase_message` say what went wrong, and while the job is pending its why-pending becomes
    {"reason": <reason>, "message": ..., "http_status": ...}. Examples of `reason`: "ClusterUnreachable",
    "Forbidden", "ApiError". Cleared by the next successful observation."""
    changes = {"phase_reason": reason[:REASON_MAX], "phase_message": message}
    if locked.phase in why_pending.PENDING_PHASES:
        before = locked.why_pending or {}
        same = before.get("reason") == reason and before.get("since")
        name = queue_name(locked)
        changes["why_pending"] = {
            "reason": reason, "message": message, "http_status": status, "source": locked.cluster.name,
            "since": before["since"] if same else timezone.now().isoformat(), "pods": before.get("pods"),
            "queue": None, "job_requests": {}, "reasons": [], "pod_conditions": [], "queue_name": name,
            "summary": why_pending.naming_queue(_error_summary(locked.cluster.name, reason, message, status), name),
        }
    _set(locked, changes)


def _copy_back(job: GangJob, fresh: GangJob) -> None:
    """Copy what the row holds now onto the caller's instance, so the rest of its work sees what was recorded."""
    for name in (*WRITTEN_FIELDS, "updated_at"):
        setattr(job, name, getattr(fresh, name))


def _observe_durations(locked: GangJob, recorded: list, inferred: set, entries: list, phases: set) -> None:
    """Observe the duration histograms of `phases`, from the timeline as read under the lock plus the entries just
    appended (no re-read)."""
    spans = timeline.durations(
        [SimpleNamespace(phase=phase, at=at, attempt=attempt, id=None, inferred=(phase, attempt) in inferred)
         for phase, at, attempt in recorded]
        + [SimpleNamespace(phase=e.phase, at=e.at, attempt=e.attempt, id=None, inferred=e.inferred) for e in entries])
    metrics.observe_durations(locked.cluster.name, locked.queue.name, phases, spans)


# ---- one-shot writers: a single note written at once (the watch; a batch's job that was not attempted) -----------
def observe_objects(job: GangJob, backend, objects: JobObjects, refusals: list[dict] | None = None,
                    recorded: list | None = None, raw: JobObjects | None = None) -> None:
    """Record what the cluster says about `job` now (a `Sighting`: see there for the arguments), written at once.

    `recorded`: the job's recorded entries [(phase, at, attempt)], when the caller read them with or after `job`'s
    row (the resync does, per chunk of rows). Then an observation that changes nothing in the row as read returns
    at once, without locking: most jobs of a resync are in sync (bench/: resync). Without it (the watch) the row
    is locked and the observation derived against it. Appends the new timeline entries (cluster timestamps), sets
    phase / phase_reason / phase_message / phase_changed_at / why_pending / observed / finished_at when they
    changed, and observes the duration histograms for the phases just recorded. A finished job is left alone.
    `raw` (the watch): the objects before selection, selected again against the row as written (`Sighting.raw`).
    Raises nothing for odd objects."""
    update = StatusUpdate.begin(job, recorded)
    sighting = Sighting(backend, objects, refusals, raw=raw)
    if recorded is not None:
        update.observe(job, sighting)
    elif job.phase not in TERMINAL_PHASES:
        update.sighting = sighting
    write(job, update)


def apply_observation(job: GangJob, backend, gang_objects: list[dict], pods: list[dict], owners: list[dict],
                      recorded: list | None = None, refusals: list[dict] | None = None) -> None:
    """`observe_objects` of the job's gang objects, pods and owner Jobs given one by one (the tests' recorded
    objects)."""
    observe_objects(job, backend, JobObjects(gang_objects, owners, pods), refusals, recorded)


def record_error(job: GangJob, reason: str, message: str, status: int | None = None) -> None:
    """Record an error on `job` at once (`StatusUpdate.fail_with_error`, `_error`); a finished job is left alone."""
    update = StatusUpdate.begin(job)
    update.fail_with_error(job, reason, message, status)
    write(job, update)


def record_restart(job: GangJob, at, source: str, reason: str, message: str) -> bool:
    """Record at once that `job` starts again from Dispatched at `at` (`_restart`). A finished job is left alone.
    Returns True when an entry was appended."""
    update = StatusUpdate.begin(job)
    update.restart_at(job, Decision(GangPhase.DISPATCHED, at, source, reason, message))
    if update.restart is None:
        return False
    write(job, update)
    return job.phase not in TERMINAL_PHASES
