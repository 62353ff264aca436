"""Write what was observed of a job into its row and timeline: phase, reason, why-pending, appended transitions.

Called by the job reconcile after it acted (`apply_observation`), by the cluster watcher on every relevant event
(`scheduling.kube.watches`), and by the reconcile's error path (`record_error`). The logic is pure and lives in
`scheduling.observe`; this module only reads the job's recorded timeline, calls it, and writes once per pass,
only when something changed (house rule 7). Phase history is append-only: one entry per phase and attempt, in
order (a re-queued gang starts a new attempt: `observe.phases.requeue_entry`).

Concurrency: the watcher and a Celery worker may observe the same job at once. Every writer here runs under
`locked_row` (the job's row only; the rule is written there), re-reads the recorded phases under the lock, and
appends only what is still missing, so no phase is recorded twice.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ..backends.base import GangStatus
from ..choices import PHASE_ORDER, TERMINAL_PHASES, DesiredState, GangPhase
from ..constants import LABEL_POD_SET
from ..kube import runtime_classes
from ..kube.errors import NAMESPACE_NOT_FOUND
from ..models import GangJob, PhaseTransition
from ..observe import capacity, causes, metrics, phases, why_pending
from ..observe import objects as o
from ..observe.evidence import Evidence
from ..observe.pods import owner_facts, pod_facts
from ..services import cluster_usage, timeline
from . import names

log = logging.getLogger(__name__)

REASON_MAX = 128


@contextmanager
def locked_row(job: GangJob) -> Iterator[GangJob]:
    """Open a transaction and yield `job`'s row as it is now, locked until the transaction ends (cluster and queue
    read with it). The one way a status writer locks a job: `apply_observation`, `record_error`, `record_failure`
    and `record_restart` all write under it.

    - What is locked: the job's row only (`SELECT ... FOR NO KEY UPDATE OF` the job's table). With the cluster and
      queue joined, a plain FOR UPDATE also locked their rows, so every status write of a cluster's jobs queued
      behind the others' (two worker processes, the watcher), and so did every submit into the queue (its
      foreign-key check). NO KEY UPDATE: the key is not changed, so inserting rows that reference the job (its
      timeline entries) is not blocked either; two writers of the same job still exclude each other.
    - In what order: the job row first, then (under it) the job's timeline is read and appended to and the row
      written; no other row is locked in the same transaction, so two writers never wait on each other in a
      circle.
    - Why: the watcher and Celery workers may observe the same job at once; each re-reads the row and the recorded
      phases under the lock and appends only what is still missing, so no phase is recorded twice or lost, and a
      slower writer never overwrites a newer phase.

    SQLite ignores row locks; its IMMEDIATE transactions serialize writers instead. Raises GangJob.DoesNotExist
    when the row is gone.
    """
    with transaction.atomic():
        yield (GangJob.objects.select_for_update(of=("self",), no_key=True).select_related("cluster", "queue")
               .get(pk=job.pk))


def job_shape(job: GangJob) -> phases.JobShape:
    """minMember (template `gang.minMember`, else the sum of replicas) and total pods, from the resolved spec."""
    spec = job.resolved_spec or {}
    total = sum(int(ps.get("replicas") or 0) for ps in spec.get("podSets") or [])
    min_member = (spec.get("gang") or {}).get("minMember") or total
    return phases.JobShape(min_member=int(min_member), total=total,
                           cancelling=job.desired_state == DesiredState.CANCEL)


def scheduler_of(job: GangJob, backend) -> str:
    """The scheduler the job's pods wait for, for why-pending: the cluster's name for the backend's scheduler
    (`Cluster.scheduler_names`), else the plugin's default; "default-scheduler" for a backend that names none."""
    if not getattr(backend, "scheduler_name", ""):
        return "default-scheduler"
    if job.cluster_id:
        return job.cluster.scheduler_name_for(getattr(backend, "family", "")) or backend.scheduler_name
    return backend.scheduler_name


def current_gang_name(job: GangJob) -> str:
    """The name of the job's gang object(s) at its current `gang_generation` (reconcile/names.py)."""
    return names.gang_name(job.name, job.uid, job.gang_generation)


def current_gang_objects(job: GangJob, gang_objects: list[dict]) -> list[dict]:
    """The job's gang objects of its current generation that are not terminating: the only ones whose status is
    the job's now. After a replacement the list can still hold the previous generation's objects (terminating
    while a finalizer holds them, or not yet deleted); what they say is history, and an entry must never name them
    as its source."""
    name = current_gang_name(job)
    return [g for g in gang_objects if o.meta(g).get("name") == name and not o.is_terminating(g)]


def read_gang_status(backend, gang_objects: list[dict]) -> GangStatus:
    """The backend's reading of its gang objects (`read_status`), or an empty GangStatus without a backend."""
    if backend is None or not gang_objects or not hasattr(backend, "read_status"):
        return GangStatus()
    reader = backend() if isinstance(backend, type) else backend
    return reader.read_status(gang_objects)


MAX_PODS_LISTED = 200  # pods kept in `observed["pods"]`; counts always cover all of them


def _object_body(obj: dict) -> dict:
    """An object as sent to and kept by the cluster, without its runtime status and server bookkeeping."""
    m = o.meta(obj)
    meta = {k: m[k] for k in ("name", "namespace", "uid", "labels", "annotations", "creationTimestamp") if k in m}
    return {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "metadata": meta,
            "spec": obj.get("spec") or {}}


def _pod_row(pod: dict, facts) -> dict:
    reason = facts.waiting_reason
    for cs in o.status(pod).get("containerStatuses") or []:
        state = cs.get("state") or {}
        reason = reason or (state.get("waiting") or {}).get("reason") or (state.get("terminated") or {}).get("reason")
    row = {"name": facts.name, "node": facts.node_name, "phase": facts.phase, "reason": reason or ""}
    pod_set = (o.meta(pod).get("labels") or {}).get(LABEL_POD_SET)
    if isinstance(pod_set, str) and pod_set:
        row["pod_set"] = pod_set[:63]  # which pod set's requests the pod holds on its node (cluster_usage.by_node)
    return row


def _observed(gang: GangStatus, gang_objects, owners, pods, pod_list, obs: phases.Observation) -> dict:
    """The `GangJob.observed` summary the job page and the events API read::

        {"objects": [<gang objects and owner Jobs: apiVersion, kind, metadata (name, namespace, uid, labels,
                      annotations, creationTimestamp), spec>],
         "pods": [{"name", "node", "phase", "reason", "pod_set"}] (first MAX_PODS_LISTED by name; pod_set when
                  the pod carries the label),
         "pod_counts": {"created", "bound", "running", "succeeded", "failed"},
         "gang": {"admitted", "reason", "message", "source", "at"}}
    """
    rows = sorted((_pod_row(p, f) for p, f in zip(pods, pod_list, strict=True) if not f.terminating),
                  key=lambda r: r["name"])
    return {
        "objects": [_object_body(x) for x in [*gang_objects, *owners]],
        "pods": rows[:MAX_PODS_LISTED],
        "pod_counts": {"created": obs.pods, "bound": obs.bound, "running": obs.running, "succeeded": obs.succeeded,
                       "failed": obs.failed},
        "gang": {"admitted": gang.admitted, "reason": gang.reason, "message": gang.message, "source": gang.source,
                 "at": gang.at.isoformat() if gang.at else None},
    }


def apply_observation(job: GangJob, backend, gang_objects: list[dict], pods: list[dict], owners: list[dict],
                      recorded: list | None = None, refusals: list[dict] | None = None) -> None:
    """Record what the cluster says about `job` now.

    - `backend`: the job's SchedulerBackend (class or instance; None when the job has none yet);
    - `gang_objects`, `pods`, `owners`: the job's gang objects, pods and owner Jobs as camelCase dicts (the API
      server's JSON or `ApiClient.sanitize_for_serialization`); pass every object of the job that exists;
    - `recorded`: the job's recorded entries [(phase, at, attempt)], when the caller read them with `job`'s row (the
      resync does, per chunk of rows). Then an observation that changes nothing in the row as read returns at once,
      without locking and re-reading the row: most jobs of a resync are in sync, and the lock, the re-read and the
      commit were nearly all of a resync's time per job (bench/: resync). Anything that would change is derived
      again under the lock from the row and phases as they are then, exactly as without `recorded`;
    - `refusals`: the owner Jobs' FailedCreate event rows (`reconcile.refusals.read`, read by the caller before
      any lock), for why-pending; None when not read.

    Appends the new timeline entries (cluster timestamps), sets phase / phase_reason / phase_message /
    phase_changed_at / why_pending / observed / finished_at when they changed, and observes the duration
    histograms for the phases just recorded. A finished job is left alone. Raises nothing for odd objects.
    """
    gang = read_gang_status(backend, current_gang_objects(job, gang_objects))
    pod_list = [pod_facts(p) for p in pods]
    owner_list = [owner_facts(w) for w in owners]
    scheduler = scheduler_of(job, backend)
    facts = (gang, gang_objects, pods, owners, pod_list, owner_list, scheduler, refusals)
    if recorded is not None and job.phase not in TERMINAL_PHASES:
        obs, changes = _derive(job, job, recorded, *facts)
        if not obs.entries and all(getattr(job, name) == value for name, value in changes.items()):
            return
    new_phases: set[str] = set()
    with locked_row(job) as locked:
        if locked.phase in TERMINAL_PHASES:
            _refresh(job, locked)
            return
        rows = list(locked.transitions.values_list("phase", "at", "attempt", "inferred"))
        recorded = [(phase, at, attempt) for phase, at, attempt, _ in rows]
        inferred = {(phase, attempt) for phase, _, attempt, guessed in rows if guessed}
        if locked.gang_generation != job.gang_generation:  # replaced meanwhile: read the new generation's objects
            facts = (read_gang_status(backend, current_gang_objects(locked, gang_objects)), *facts[1:])
        obs, changes = _derive(locked, job, recorded, *facts)
        if obs.entries:
            PhaseTransition.objects.bulk_create([
                PhaseTransition(job=locked, phase=e.phase, at=e.at, attempt=e.attempt, source=e.source[:300],
                                reason=e.reason[:REASON_MAX], message=e.message, inferred=e.inferred)
                for e in obs.entries])
            # Metrics observe the spans the new entries end; time_to_running once, at the first Running.
            new_phases = {e.phase for e in obs.entries if e.phase != GangPhase.RUNNING or e.attempt == 0}
        _save_changed(locked, changes)
        _refresh(job, locked)
    if new_phases:
        # The timeline as read under the lock plus the entries just appended: no re-read.
        spans = timeline.durations([SimpleNamespace(phase=phase, at=at, attempt=attempt, id=None,
                                                    inferred=(phase, attempt) in inferred)
                                    for phase, at, attempt in recorded]
                                   + [SimpleNamespace(phase=e.phase, at=e.at, attempt=e.attempt, id=None,
                                                      inferred=e.inferred) for e in obs.entries])
        metrics.observe_durations(locked.cluster.name, locked.queue.name, new_phases, spans)
        log.info("job %s: %s", locked.pk, " -> ".join(f"{e.phase}#{e.attempt}" if e.attempt else e.phase
                                                       for e in obs.entries))


# A Volcano job's PodGroup waits because its Volcano Queue does not exist yet (reconcile/volcano_queues.py).
VOLCANO_QUEUE_MISSING = "VolcanoQueueMissing"


def _error_summary(cluster: str, reason: str, message: str, status: int | None) -> str:
    """The why-pending sentence for a reconcile error: a refusal (an HTTP status) is not an unreachable cluster."""
    if reason in (NAMESPACE_NOT_FOUND, VOLCANO_QUEUE_MISSING):
        return message  # names what is missing, the cluster and the fix
    if status:
        return f"Cluster {cluster} refused the job's objects (HTTP {status}, {reason}): {message}"
    return f"gangweb cannot reach cluster {cluster}: {message}"


def record_error(job: GangJob, reason: str, message: str, status: int | None = None) -> None:
    """Record that the cluster could not be reached or answered an error (4xx/5xx) while reconciling `job`.

    The phase stays (the job did not move); `phase_reason` / `phase_message` say what went wrong, and while the job
    is pending its why-pending becomes {"reason": <reason>, "message": ..., "http_status": ...}. Examples of
    `reason`: "ClusterUnreachable", "Forbidden", "ApiError". Cleared by the next successful observation.
    """
    with locked_row(job) as locked:
        if locked.phase in TERMINAL_PHASES:
            return
        changes = {"phase_reason": reason[:REASON_MAX], "phase_message": message}
        if locked.phase in why_pending.PENDING_PHASES:
            before = locked.why_pending or {}
            same = before.get("reason") == reason and before.get("since")
            changes["why_pending"] = {
                "reason": reason, "message": message, "http_status": status, "source": locked.cluster.name,
                "since": before["since"] if same else timezone.now().isoformat(), "pods": before.get("pods"),
                "queue": None, "job_requests": {}, "reasons": [], "pod_conditions": [],
                "queue_name": _queue_name(job),
                "summary": why_pending.naming_queue(_error_summary(locked.cluster.name, reason, message, status),
                                                    _queue_name(job)),
            }
        _save_changed(locked, changes)
        _refresh(job, locked)


def record_phase(job: GangJob, phase: str, at, source: str, reason: str = "", message: str = "") -> bool:
    """Move `job` forward to `phase` by gangweb's own decision (e.g. Cancelled once its objects are deleted) and
    append the timeline entry. Never moves backwards or out of a terminal phase; `at` None means now. The job's
    fields change in memory (the caller saves them); the entry is written at once. Returns True when it moved.
    """
    if job.phase in TERMINAL_PHASES or PHASE_ORDER[phase] <= PHASE_ORDER.get(job.phase, 0):
        return False
    at = at or timezone.now()
    last = job.transitions.order_by("-attempt", "-at").values_list("at", "attempt").first()
    attempt = last[1] if last else 0
    at = max(at, last[0]) if last else at
    job.phase, job.phase_reason, job.phase_message, job.phase_changed_at = phase, reason[:REASON_MAX], message, at
    if phase in TERMINAL_PHASES:
        job.finished_at = at
        if job.why_pending is not None:  # not among the caller's status fields: cleared here at once
            job.why_pending = None
            GangJob.objects.filter(pk=job.pk).update(why_pending=None)
    _, created = PhaseTransition.objects.get_or_create(
        job=job, phase=phase, attempt=attempt,
        defaults={"at": at, "source": source[:300], "reason": reason[:REASON_MAX], "message": message})
    if created:
        spans = timeline.durations(job.transitions.all())
        metrics.observe_durations(job.cluster.name, job.queue.name, {phase}, spans)
    return True


def record_failure(job: GangJob, reason: str, message: str) -> bool:
    """End `job` Failed by gangweb's own finding (the API server refused one of its objects for good), with an
    entry at gangweb's clock, source "gangweb" (the refusal has no cluster timestamp). Written at once under the
    row lock, so an observation racing with it (the watch saw the first objects created: Dispatched) is neither
    overwritten nor lost: the entry follows it. A job already finished is left alone; `job` is refreshed from the
    row either way. Returns True when the job moved to Failed."""
    with locked_row(job) as locked:
        moved = record_phase(locked, GangPhase.FAILED, timezone.now(), "gangweb", reason, message)
        if moved:
            locked.save(update_fields=["phase", "phase_reason", "phase_message", "phase_changed_at", "finished_at",
                                       "updated_at"])
        _refresh(job, locked)
    return moved


def record_restart(job: GangJob, at, source: str, reason: str, message: str) -> bool:
    """Record that `job` starts again from Dispatched because the reconciler created its owner Job anew at `at`
    (the new objects' creationTimestamp): a Dispatched entry of a new attempt (reason `Recreated` or `Replaced`,
    `message` naming the objects), and the job's phase Dispatched. Under the row lock; when the watch already
    started an attempt from the new Job's pods (its first entry is no earlier than `at`: Queued, `Requeued`), the
    Dispatched entry joins that attempt instead of starting another, and the phase stays. A finished job is left
    alone. `job` is refreshed from the row. Returns True when an entry was appended."""
    with locked_row(job) as locked:
        if locked.phase in TERMINAL_PHASES:
            _refresh(job, locked)
            return False
        rows = list(locked.transitions.values_list("phase", "at", "attempt"))
        attempt, current = timeline.current_attempt(rows)
        joins = attempt > 0 and current and GangPhase.DISPATCHED not in current and min(current.values()) >= at
        if not joins:
            attempt += 1
            at = max([at, *(r[1] for r in rows)])
        PhaseTransition.objects.create(job=locked, phase=GangPhase.DISPATCHED, at=at, attempt=attempt,
                                       source=source[:300], reason=reason[:REASON_MAX], message=message)
        if not joins:
            _save_changed(locked, {"phase": GangPhase.DISPATCHED, "phase_reason": reason[:REASON_MAX],
                                   "phase_message": message, "phase_changed_at": at})
        _refresh(job, locked)
    log.info("job %s: %s#%s (%s)", job.pk, GangPhase.DISPATCHED, attempt, reason)
    return True


def _queue_name(job: GangJob) -> str:
    """The job's queue name without a query when possible: a queue's name never changes, so the one stored with
    the last why-pending answer is as good as the row's (read only when neither is at hand)."""
    if GangJob._meta.get_field("queue").is_cached(job):
        return job.queue.name
    return (job.why_pending or {}).get("queue_name") or job.queue.name


def _waiting(resolved_spec: dict, per_pod: list[dict], shape: phases.JobShape) -> list[tuple[dict, dict, int]]:
    """Per pod set: (one pod's asks, its nodeSelector, how many of its pods the gang needs placed), for the
    NodesFragmented fact. With one pod set, minMember of its pods; with several, every replica."""
    sets = [ps for ps in (resolved_spec or {}).get("podSets") or [] if isinstance(ps, dict)]
    out = []
    for ps, asks in zip(sets, per_pod, strict=False):
        spec = (ps.get("template") or {}).get("spec") or {}
        selector = spec.get("nodeSelector") if isinstance(spec.get("nodeSelector"), dict) else {}
        count = int(ps.get("replicas") or 0)
        out.append((asks, selector, min(count, shape.min_member) if len(sets) == 1 else count))
    return out


def _derive(row: GangJob, job: GangJob, recorded: list, gang, gang_objects, pods, owners, pod_list, owner_list,
            scheduler: str, refusals: list[dict] | None = None):
    """The observation of `row` (the job's row as read, locked or not) and the field values it implies.
    `job` is the caller's instance (its chosen `backend_plugin`). Returns (phases.Observation, {field: value})."""
    shape = job_shape(row)
    attempt, current = timeline.current_attempt(recorded)
    evidence = Evidence(shape, gang, gang_objects, pod_list, owner_list, timezone.now())
    obs = phases.observe(evidence, row.phase, current, attempt=attempt)
    overheads = runtime_classes.for_spec(row.cluster, row.resolved_spec)
    per_pod = capacity.pod_requests(row.resolved_spec, overheads)
    why = why_pending.explain(obs.phase, shape, gang, pod_list, why_pending.job_requests(row.resolved_spec, overheads),
                              scheduler, capacity=row.cluster.capacity, per_pod=per_pod,
                              in_use=lambda: cluster_usage.in_use(row.cluster_id), queue_name=_queue_name(row),
                              refusals=refusals, template_gates=causes.template_gates(row.resolved_spec),
                              waiting=_waiting(row.resolved_spec, per_pod, shape),
                              nodes=lambda: cluster_usage.nodes_and_use(row.cluster_id),
                              silence_s=settings.GANGWEB_SCHEDULER_SILENCE_SECONDS)
    changes = {
        "phase": obs.phase,
        "phase_reason": obs.reason[:REASON_MAX],
        "phase_message": obs.message,
        "why_pending": why,
        "observed": _observed(gang, gang_objects, owners, pods, pod_list, obs),
    }
    if job.backend_plugin and not row.backend_plugin:
        # Chosen by the reconcile pass that called us; written here so it is saved together with the phase.
        changes["backend_plugin"] = job.backend_plugin
    pending = getattr(job, "new_owner_uids", None)
    if pending and any((row.owner_uids or {}).get(name) != uid for name, uid in pending.items()):
        # UIDs of the Jobs the calling pass just created (reconcile/ownership.py), merged with the row's under its lock.
        changes["owner_uids"] = {**(row.owner_uids or {}), **pending}
    if obs.entries:
        changes["phase_changed_at"] = obs.entries[-1].at
        if obs.phase in TERMINAL_PHASES:
            changes["finished_at"] = obs.entries[-1].at
    return obs, changes


def _save_changed(locked: GangJob, changes: dict) -> None:
    """Set and save (one UPDATE, with updated_at) only the fields of `changes` whose value differs on `locked`."""
    changed = [name for name, value in changes.items() if getattr(locked, name) != value]
    if changed:
        for name in changed:
            setattr(locked, name, changes[name])
        locked.save(update_fields=[*changed, "updated_at"])


def _refresh(job: GangJob, fresh: GangJob) -> None:
    """Copy the written fields back onto the caller's instance, so it sees what was recorded, and keep the row as
    this writer left it in `job.row_as_written` (the reconcile's `save_status` then knows what it holds without
    reading it again)."""
    for name in ("phase", "phase_reason", "phase_message", "phase_changed_at", "why_pending", "observed",
                 "finished_at", "updated_at"):
        setattr(job, name, getattr(fresh, name))
    # The caller may hold UIDs of Jobs it just created that are not written yet: they stay on top.
    pending = getattr(job, "new_owner_uids", None)
    job.owner_uids = {**(fresh.owner_uids or {}), **pending} if pending else fresh.owner_uids
    job.row_as_written = fresh
