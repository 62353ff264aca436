"""Derive a job's phase from what the cluster shows: the seam between reconcile and observability.

`apply_observation(job, backend, gang_objects, pods, owners)` is called once per reconcile pass, after acting.
It changes the job in memory (phase, phase_reason, phase_message, phase_changed_at, finished_at, observed) and
appends PhaseTransition rows with the cluster's own timestamps; the caller saves the job once.

This first version knows Dispatched (gang objects and owners exist; at = the gang object's creationTimestamp),
Running (every pod of the current generation Running; at = the latest container start), Succeeded (every
Indexed Job Complete; at = the latest completionTime) and Failed (an Indexed Job Failed; at = that condition's
lastTransitionTime). The observability engineer replaces the internals (Queued/Scheduled, why_pending), keeping
the signature.
"""
from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from ..backends.base import SchedulerBackend, object_source, parse_time
from ..choices import PHASE_ORDER, TERMINAL_PHASES, GangPhase
from ..models import PhaseTransition


def _condition(obj: dict, ctype: str) -> dict | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype and cond.get("status") == "True":
            return cond
    return None


def _started_at(pod: dict) -> datetime | None:
    status = pod.get("status") or {}
    starts = [parse_time(((cs.get("state") or {}).get("running") or {}).get("startedAt"))
              for cs in status.get("containerStatuses") or []]
    starts = [s for s in starts if s]
    return max(starts) if starts else parse_time(status.get("startTime"))


def pod_counts(pods: list[dict]) -> dict[str, int]:
    """Pods by status.phase, e.g. {"Pending": 1, "Running": 2}."""
    counts: dict[str, int] = {}
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        counts[phase] = counts.get(phase, 0) + 1
    return counts


def derive(gang_objects: list[dict], pods: list[dict], owners: list[dict], expected_pods: int):
    """(phase, at, source, reason, message) the objects show, or None when they show nothing new."""
    failed = [(o, c) for o in owners if (c := _condition(o, "Failed"))]
    if failed:
        owner, cond = failed[0]
        return (GangPhase.FAILED, parse_time(cond.get("lastTransitionTime")), object_source(owner),
                cond.get("reason", "Failed"), cond.get("message", ""))
    if owners and all(_condition(o, "Complete") for o in owners):
        times = [parse_time((o.get("status") or {}).get("completionTime")) for o in owners]
        times = [t for t in times if t]
        return (GangPhase.SUCCEEDED, max(times) if times else None, object_source(owners[0]), "Completed", "")
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    if expected_pods and len(running) >= expected_pods:
        starts = [s for p in running if (s := _started_at(p))]
        return (GangPhase.RUNNING, max(starts) if starts else None, f"{len(running)} pods", "AllPodsRunning", "")
    if gang_objects and owners:
        gang = gang_objects[-1]
        return (GangPhase.DISPATCHED, parse_time(gang["metadata"].get("creationTimestamp")), object_source(gang),
                "Created", "")
    return None


def record_phase(job, phase: str, at: datetime | None, source: str, reason: str = "", message: str = "") -> bool:
    """Move `job` forward to `phase` (never backwards, never out of a terminal phase) and append its timeline
    entry. Returns True when the phase changed. The job is changed in memory only."""
    if job.phase in TERMINAL_PHASES or PHASE_ORDER[phase] <= PHASE_ORDER[job.phase]:
        return False
    at = at or timezone.now()
    job.phase, job.phase_reason, job.phase_message, job.phase_changed_at = phase, reason, message, at
    if phase in TERMINAL_PHASES:
        job.finished_at = at
    if not PhaseTransition.objects.filter(job=job, phase=phase).exists():
        PhaseTransition.objects.create(job=job, phase=phase, at=at, source=source, reason=reason, message=message)
    return True


def apply_observation(job, backend: SchedulerBackend, gang_objects: list[dict], pods: list[dict],
                      owners: list[dict]) -> None:
    """Derive phase changes of `job` from its gang objects, its current pods and its Indexed Jobs (dicts as the
    API returns them). Updates `job.observed` with a summary: gang status, pod counts by phase, owner names."""
    expected = sum(ps["replicas"] for ps in job.resolved_spec.get("podSets", []))
    gang = backend.read_status(gang_objects) if gang_objects else None
    job.observed = {
        "gang": ({"admitted": gang.admitted, "reason": gang.reason, "message": gang.message, "source": gang.source}
                 if gang else None),
        "gang_objects": [object_source(o) for o in gang_objects],
        "owners": [o["metadata"]["name"] for o in owners],
        "pods": pod_counts(pods),
    }
    found = derive(gang_objects, pods, owners, expected)
    if found is not None:
        record_phase(job, *found)


def record_error(job, reason: str, message: str, status: int | None = None) -> None:
    """Record on `job` (in memory; the pass saves it) that the cluster could not be reached or refused: the phase
    stays, `phase_reason` / `phase_message` say why (e.g. "ClusterUnreachable", "Forbidden"). `status` is the HTTP
    code when there was one. Cleared by the next successful pass."""
    job.phase_reason, job.phase_message = reason[:128], message
