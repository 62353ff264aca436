"""What a job's objects in its cluster say, derived against its row: the phase entries, reason, why-pending and the
`GangJob.observed` summary a status write records (reconcile/status.py). Reads no timeline and writes nothing:
the writer gives it the row and the recorded entries (under its lock, or as read with the row). The phase and
why-pending rules themselves are pure and live in `scheduling.observe`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from django.conf import settings
from django.utils import timezone

from ..backends.base import GangStatus, gang_minimum
from ..choices import TERMINAL_PHASES, DesiredState, GangPhase
from ..constants import ANNOTATION_MIN_EDITED, LABEL_POD_SET
from ..db import cluster_usage
from ..kube import runtime_classes
from ..models import GangJob
from ..observe import capacity, causes, failure, phase_entries, phases, presence, timeline, why_pending
from ..observe import objects as o
from ..observe.evidence import Evidence, JobObjects, SetShape
from . import kueue_preemptors, names, ownership
from .ownership import LOOK_ALIKE

REASON_MAX = 128


@dataclass
class Sighting:
    """What a pass or the watch saw of one job's objects, to be recorded: its `backend` (a SchedulerBackend class
    or instance; None when it has none yet), its `objects` (every one of the job's that exists, terminating ones
    included), `refusals`, the owner Jobs' FailedCreate event rows (`reconcile.refusals.read`; None when not
    read), and `said`, the folded Warning Events of its gang objects and a waiting pod
    (`reconcile.waiting_events.read`; None when not read)."""

    backend: object
    objects: JobObjects
    refusals: list[dict] | None = None
    # foreign objects found with the job's (reconcile/ownership.py `foreign_entry`), None when not looked for (the
    # watch); `foreign_complete` False when only the labelled look-alikes were looked for (a snapshot's slice)
    foreign: list[dict] | None = None
    foreign_complete: bool = False
    # the watch cache's objects of the job before selection: selected again against the row being written
    # (`ownership.select`), whose recorded UIDs may be newer than those `objects` was selected with
    raw: JobObjects | None = None
    said: list[dict] | None = None


def job_shape(job: GangJob, backend=None, objects: JobObjects | None = None) -> phases.JobShape:
    """minMember (`backends.base.gang_minimum`: template `gang.minMember`, else the sum of the pod sets' minimums),
    total pods and the pod sets that state their own minimum (`JobShape.sets`), from the resolved spec; with the
    job's `backend` and its `objects` (every one read, gang objects of any generation), also what of its current
    generation's gang is broken (`gang_gone`) and whether its minimum was edited (`min_edited`): JobShape."""
    spec = job.resolved_spec or {}
    sets = [ps for ps in spec.get("podSets") or [] if isinstance(ps, dict)]
    total = sum(int(ps.get("replicas") or 0) for ps in sets)
    stated = tuple(SetShape(str(ps.get("name") or ""), int(ps.get("replicas") or 0), int(ps["minMember"]))
                   for ps in sets if isinstance(ps.get("minMember"), int))
    min_member = gang_minimum(spec)
    objects = objects if objects is not None else JobObjects()
    current = current_gang_objects(job, objects.gang)
    declared = declared_minimum(current)
    grace = getattr(settings, "GANGWEB_PARTIAL_GANG_GRACE_SECONDS", None)
    return phases.JobShape(min_member=min_member, total=total, cancelling=job.desired_state == DesiredState.CANCEL,
                           sets=stated, gang_gone=gang_gone(job, backend, objects),
                           min_edited=(declared is not None and declared < min_member)
                           or any(ANNOTATION_MIN_EDITED in (o.meta(g).get("annotations") or {}) for g in current),
                           partial_release_s=grace if grace is not None and grace >= 0 else None)


def gang_gone(job: GangJob, backend, objects: JobObjects) -> tuple[str, ...]:
    """What of the job's gang at its current generation is not there: one phrase per gang kind of its `backend`
    whose object under the current name is missing ("PodGroup ns/x is missing") or terminating ("... is being
    deleted"). () without a backend, and for a job of which nothing of the current generation exists (no gang
    object under the current name, no live owner Job: not dispatched yet, or everything gone)."""
    kinds = getattr(backend, "gang_kinds", ()) or ()
    if not kinds:
        return ()
    name = current_gang_name(job)
    mine = {(g.get("apiVersion"), g.get("kind")): g for g in objects.gang if o.meta(g).get("name") == name}
    suffix = "-" + name.rsplit("-", 1)[-1]  # the generation's hash: its owner Jobs' names end with it too
    if not mine and not any(not o.is_terminating(w) and str(o.meta(w).get("name", "")).endswith(suffix)
                            for w in objects.owners):
        return ()
    # A missing root (the Workload) is not read as gone by itself: the garbage collector then sets a deletionTimestamp
    # on everything it owns, which is. Objects made from the root (a PodGroup) missing beside it are.
    root = kinds[0] if isinstance(backend, type) else getattr(backend, "root_ref", kinds[0])
    out = []
    for ref in kinds:
        have = mine.get((ref.api_version, ref.kind))
        if have is None and ref != root:
            out.append(f"{ref.kind} {job.namespace}/{name} is missing")
        elif have is not None and o.is_terminating(have):
            out.append(f"{ref.kind} {job.namespace}/{name} is being deleted")
    return tuple(out)


def declared_minimum(gang_objects: list[dict]) -> int | None:
    """The lowest gang minimum the gang objects declare (`spec.minMember`: KAI, Volcano, coscheduling;
    `spec.schedulingPolicy.gang.minCount`: a Kubernetes PodGroup; each `spec.podGroupTemplates[].schedulingPolicy.
    gang.minCount`: a Workload), or None when none declares an integer one."""
    found = []
    for g in gang_objects:
        spec = g.get("spec") if isinstance(g.get("spec"), dict) else {}
        policies = [spec.get("schedulingPolicy")] + [t.get("schedulingPolicy") for t in spec.get("podGroupTemplates")
                                                     or [] if isinstance(t, dict)]
        values = [spec.get("minMember")] + [((p or {}).get("gang") or {}).get("minCount") for p in policies
                                            if isinstance(p, dict)]
        found += [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return min(found) if found else None


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


def _observed(evidence: Evidence, obs: phase_entries.Observation) -> dict:
    """The `GangJob.observed` summary the job page and the events API read::

        {"objects": [<gang objects and owner Jobs: apiVersion, kind, metadata (name, namespace, uid, labels,
                      annotations, creationTimestamp), spec>],
         "pods": [{"name", "node", "phase", "reason", "pod_set"}] (first MAX_PODS_LISTED by name; pod_set when
                  the pod carries the label),
         "pod_counts": {"created", "bound", "running", "succeeded", "failed",
                        "sets": [{"name", "replicas", "minimum", "bound"}] (only when a pod set states a minimum),
                        "controller": {"active", "ready", "succeeded", "failed"} (what the owner Jobs' status
                                      reports, summed; absent before any reported), "uncounted": [pod names],
                        "note": "" (where the pods seen and that report disagree; `observe.pods.cross_check`)},
         "gang": {"admitted", "reason", "message", "source", "at"},
         "failure": {...} (only when a container, pod or owner Job failed: `observe.failure.first_failure`)}
    """
    objects, gang = evidence.objects, evidence.gang
    rows = sorted((_pod_row(p, f) for p, f in zip(objects.pods, evidence.pods, strict=True) if not f.terminating),
                  key=lambda r: r["name"])
    out = {
        "objects": [_object_body(x) for x in [*objects.gang, *objects.owners]],
        "pods": rows[:MAX_PODS_LISTED],
        "pod_counts": {"created": obs.pods, "bound": obs.bound, "running": obs.running, "succeeded": obs.succeeded,
                       "failed": obs.failed, **({"sets": evidence.set_counts} if evidence.shape.sets else {}),
                       **_controller_report(evidence)},
        "gang": {"admitted": gang.admitted, "reason": gang.reason, "message": gang.message, "source": gang.source,
                 "at": gang.at.isoformat() if gang.at else None},
    }
    failed = failure.first_failure(objects.pods, objects.owners)
    if failed is not None:
        out["failure"] = failed
    return out


def _controller_report(evidence: Evidence) -> dict:
    """The owner Jobs' own counts (`OwnerFacts.reported`, summed over the live ones that reported) and the pods
    the cross-check left out, for `pod_counts`; {} when no Job reported and nothing was left out."""
    said = [w.reported for w in evidence.live_owners if w.reported is not None]
    out = {}
    if said:
        out["controller"] = {k: sum(r[k] for r in said) for k in said[0]}
    if evidence.uncounted:
        out["uncounted"] = evidence.uncounted[:MAX_PODS_LISTED]
        out["note"] = evidence.count_note
    return out


def foreign_objects(row: GangJob, sighting: Sighting) -> list[dict]:
    """The foreign objects to record (`observed["foreign"]`): the sighting's when it looked for them all; the
    row's when it did not look (the watch); with only the labelled look-alikes looked for (a snapshot's slice),
    those and the row's others (objects naming the job's, which only a whole LIST of the namespace finds)."""
    before = [f for f in ((row.observed or {}).get("foreign") or []) if isinstance(f, dict)]
    if sighting.foreign is None:
        return before
    if sighting.foreign_complete:
        return list(sighting.foreign)
    return [*sighting.foreign, *(f for f in before if f.get("reason") != LOOK_ALIKE)]


def queue_name(job: GangJob) -> str:
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




def _queue_manager_absent(row: GangJob, backend, now) -> list[dict]:
    """The QueueManagerNotSeen fact for a job whose backend's queue manager admits the gang before any pod exists
    (`holds_pods_until_admitted`: Kueue) while the cluster probe saw it not acting (observe/presence.py, from the
    row's cluster as read: no query); [] otherwise, or when that is unknown."""
    if backend is None or not getattr(backend, "holds_pods_until_admitted", False):
        return []
    seen = presence.presence(row.cluster, backend.family, now)
    if not seen.silent:
        return []
    return causes.queue_manager_absent(backend.family, seen.by, seen.seen_at, row.cluster.name, now)


def _said_before(row: GangJob) -> list[dict] | None:
    """The Events the row's why-pending answer carries (`said`), for an observation that did not read them (the
    watch, a read that failed, reading turned off): kept, so the answer does not flip between reads; None when none."""
    why = row.why_pending if isinstance(row.why_pending, dict) else {}
    said = why.get("said")
    return said if isinstance(said, list) else None


def derive(row: GangJob, sighting: Sighting, recorded: list, *, backend_plugin: str = "",
           new_owner_uids: dict | None = None) -> tuple[phase_entries.Observation, dict]:
    """The observation of `row` (the job's row as read, locked or not) from `sighting`, given its recorded entries
    `recorded` [(phase, at, attempt)], and the field values it implies. `backend_plugin`: the plugin the calling
    pass chose (written with the phase when the row has none); `new_owner_uids`: UIDs of Jobs the calling pass
    created (reconcile/ownership.py), merged with the row's. Returns (phase_entries.Observation, {field: value})."""
    seen = ownership.select(sighting.raw, sighting.backend, row) if sighting.raw is not None else sighting.objects
    gang = kueue_preemptors.named(read_gang_status(sighting.backend, current_gang_objects(row, seen.gang)),
                                  row.cluster_id)
    evidence = Evidence.of(job_shape(row, sighting.backend, seen), gang, seen, timezone.now(), sighting.refusals,
                           said=sighting.said if sighting.said is not None else _said_before(row))
    attempt, current = timeline.current_attempt(recorded)
    obs = phases.observe(evidence, row.phase, current, attempt=attempt)
    if seen.unlisted:
        obs.entries = unlisted_marked(obs.entries, seen.unlisted)
    overheads = runtime_classes.for_spec(row.cluster, row.resolved_spec)
    per_pod = capacity.pod_requests(row.resolved_spec, overheads)
    why = why_pending.explain(obs.phase, evidence, why_pending.job_requests(row.resolved_spec, overheads),
                              scheduler_of(row, sighting.backend), capacity=row.cluster.capacity, per_pod=per_pod,
                              in_use=lambda: cluster_usage.in_use(row.cluster_id), queue_name=queue_name(row),
                              template_gates=causes.template_gates(row.resolved_spec),
                              waiting=_waiting(row.resolved_spec, per_pod, evidence.shape),
                              nodes=lambda: cluster_usage.nodes_and_use(row.cluster_id),
                              silence_s=settings.GANGWEB_SCHEDULER_SILENCE_SECONDS,
                              absent=_queue_manager_absent(row, sighting.backend, evidence.now))
    changes = {
        "phase": obs.phase,
        "phase_reason": obs.reason[:REASON_MAX],
        "phase_message": obs.message,
        "why_pending": why,
        "observed": _observed(evidence, obs),
    }
    kept = (row.observed or {}).get("failure") if isinstance(row.observed, dict) else None
    if "failure" not in changes["observed"] and obs.phase == GangPhase.FAILED and isinstance(kept, dict):
        # A failed job keeps its failure when its pods go (deleted at the end of the retention): said once, kept
        changes["observed"]["failure"] = kept
    foreign = foreign_objects(row, sighting)
    if foreign:
        changes["observed"]["foreign"] = foreign
    if backend_plugin and not row.backend_plugin:
        changes["backend_plugin"] = backend_plugin
    merged = merged_owner_uids(row.owner_uids, new_owner_uids)
    if merged != row.owner_uids:
        changes["owner_uids"] = merged
    if obs.entries:
        changes["phase_changed_at"] = obs.entries[-1].at
        if obs.phase in TERMINAL_PHASES:
            changes["finished_at"] = obs.entries[-1].at
    return obs, changes


def unlisted_marked(entries: list[phase_entries.Entry], unlisted: tuple[str, ...]) -> list[phase_entries.Entry]:
    """`entries` of an observation the watch made before every watched kind was listed (`JobObjects.unlisted`,
    after `kube/watch_dispatch.SYNC_WAIT_SECONDS`): each marked inferred, its message naming the kinds not yet
    listed. Its time may come from weaker evidence than the missing kind held (a pod's bind instead of the PodGroup's
    own condition), and an entry is never rewritten: a reader must know, and the latency histograms leave it out."""
    note = f"watch had not yet listed {', '.join(sorted(unlisted))}: time may be inferred"
    return [replace(e, inferred=True, message=f"{e.message} ({note})" if e.message else note)
            for e in entries]


def merged_owner_uids(row_uids: dict | None, new: dict | None) -> dict | None:
    """The row's recorded owner-Job UIDs with a pass's own new ones (`new`, {name: uid}) on top: only what a pass
    created itself is written over the row, never a stale copy of it (the watch's)."""
    if not new or all((row_uids or {}).get(name) == uid for name, uid in new.items()):
        return row_uids
    return {**(row_uids or {}), **new}
