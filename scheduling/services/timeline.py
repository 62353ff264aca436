"""A job's timeline and the durations derived from it (seconds, floats)."""
from __future__ import annotations

from ..choices import PHASE_ORDER, TERMINAL_PHASES, GangPhase


def ordered(transitions) -> list:
    """Transitions in lifecycle order (time first, then phase order for equal times)."""
    return sorted(transitions, key=lambda t: (t.at, PHASE_ORDER.get(t.phase, 99), t.id or 0))


def durations(transitions) -> dict[str, float | None]:
    """Derived durations in seconds, None while not reached.

    - time_in_queue: Dispatched (or Queued) until Scheduled;
    - time_to_schedule: Submitted until Scheduled;
    - time_to_running: Submitted until Running;
    - run_time: Running until Succeeded/Failed/Cancelled.
    """
    at = {t.phase: t.at for t in transitions}
    end = next((at[p] for p in (GangPhase.SUCCEEDED, GangPhase.FAILED, GangPhase.CANCELLED) if p in at), None)

    def span(a, b):
        return (b - a).total_seconds() if a is not None and b is not None else None

    queued = at.get(GangPhase.QUEUED) or at.get(GangPhase.DISPATCHED)
    return {
        "time_in_queue": span(queued, at.get(GangPhase.SCHEDULED)),
        "time_to_schedule": span(at.get(GangPhase.SUBMITTED), at.get(GangPhase.SCHEDULED)),
        "time_to_running": span(at.get(GangPhase.SUBMITTED), at.get(GangPhase.RUNNING)),
        "run_time": span(at.get(GangPhase.RUNNING), end),
    }


def is_terminal(phase: str) -> bool:
    """True for Succeeded, Failed and Cancelled."""
    return phase in TERMINAL_PHASES
