"""A job's timeline and the durations derived from it (seconds, floats).

Two readings of the same entries:
- `durations(transitions)`: finished spans only (None while a span is not complete, and None when one of its ends
  is an inferred time: `PhaseTransition.inferred`): what the metrics histograms observe when a phase is recorded.
- `spans(transitions, now)` and `annotate(transitions, now)`: what the API and the job page show. A span that has
  started but not ended counts up to `now` and says so with `ongoing: true`, so a queued job shows how long it has
  waited so far instead of a blank.
"""
from __future__ import annotations

from datetime import datetime

from ..choices import PHASE_ORDER, TERMINAL_PHASES, GangPhase

DURATION_NAMES = ("time_in_queue", "time_to_schedule", "time_to_running", "run_time")


def ordered(transitions) -> list:
    """Transitions in lifecycle order: by attempt, then time, then phase order for equal times."""
    return sorted(transitions, key=lambda t: (getattr(t, "attempt", 0) or 0, t.at, PHASE_ORDER.get(t.phase, 99),
                                              t.id or 0))


def current_attempt(rows) -> tuple[int, dict]:
    """(attempt, {phase: at}) of a job's latest attempt, from its recorded `(phase, at, attempt)` rows in any
    order: what `observe.phases.observe` is given. (0, {}) for no rows."""
    rows = list(rows)
    attempt = max((a for _, _, a in rows), default=0)
    return attempt, {phase: at for phase, at, a in rows if a == attempt}


def requeues(transitions) -> int:
    """How many times the gang started again (re-queued after a disruption, or recreated/replaced): its latest
    attempt number, 0 when never."""
    return max((getattr(t, "attempt", 0) or 0 for t in transitions), default=0)


def _bounds_marked(transitions) -> dict[str, tuple[datetime | None, datetime | None, bool, bool]]:
    """{name: (start, end, may_go_on, inferred)} of each derived span; `may_go_on` is False once the job finished;
    `inferred` is True when one of its ends is an inferred time (`PhaseTransition.inferred`).

    `time_in_queue` and `run_time` read the latest attempt (the current wait, the current run: a re-queue starts
    them again); `time_to_schedule` and `time_to_running` run from Submitted to the first Scheduled and Running
    (how long the job took to get going at all; a later re-queue does not change that)."""
    items = ordered(transitions)
    last = max((getattr(t, "attempt", 0) or 0 for t in items), default=0)
    first = {}
    for t in items:
        first.setdefault(t.phase, t)
    mine = {t.phase: t for t in items if (getattr(t, "attempt", 0) or 0) == last}
    end = next((mine[p] for p in (GangPhase.SUCCEEDED, GangPhase.FAILED, GangPhase.CANCELLED) if p in mine), None)
    live = end is None
    queued = mine.get(GangPhase.QUEUED) or mine.get(GangPhase.DISPATCHED)
    scheduled = mine.get(GangPhase.SCHEDULED)
    pairs = {
        # A job that finished without being scheduled (cancelled while queued) waited until it finished.
        "time_in_queue": (queued, scheduled or end, live and scheduled is None),
        "time_to_schedule": (first.get(GangPhase.SUBMITTED), first.get(GangPhase.SCHEDULED), live),
        "time_to_running": (first.get(GangPhase.SUBMITTED), first.get(GangPhase.RUNNING), live),
        "run_time": (mine.get(GangPhase.RUNNING), end, live),
    }
    return {name: (a.at if a is not None else None, b.at if b is not None else None, go_on,
                   any(getattr(x, "inferred", False) for x in (a, b) if x is not None))
            for name, (a, b, go_on) in pairs.items()}


def durations(transitions) -> dict[str, float | None]:
    """Derived durations in seconds, None while not complete (the metrics use these).

    - time_in_queue: Queued (else Dispatched) until Scheduled (or until the job finished unscheduled), of the
      latest attempt;
    - time_to_schedule: Submitted until the first Scheduled;
    - time_to_running: Submitted until the first Running;
    - run_time: Running until Succeeded/Failed/Cancelled, of the latest attempt.
    """
    bounds = _bounds_marked(transitions)
    return {name: (b - a).total_seconds() if a is not None and b is not None and not guessed else None
            for name, (a, b, _, guessed) in bounds.items()}


def spans(transitions, now: datetime) -> dict[str, dict | None]:
    """The same durations for people: {name: {"duration_s": float, "ongoing": bool} | None}.

    None while the span has not started (or never will: a job that finished without running has no run time);
    `ongoing: true` with the seconds from its start until `now` while it has started and the job is still in it;
    `inferred: true` when one of its ends is a time gangweb inferred (the figure is then an estimate).
    """
    out: dict[str, dict | None] = {}
    for name, (start, end, may_go_on, guessed) in _bounds_marked(transitions).items():
        if start is None or (end is None and not may_go_on):
            out[name] = None
        elif end is None:
            out[name] = {"duration_s": round(max((now - start).total_seconds(), 0.0), 3), "ongoing": True,
                         "inferred": guessed}
        else:
            out[name] = {"duration_s": (end - start).total_seconds(), "ongoing": False, "inferred": guessed}
    return out


def annotate(transitions, now: datetime) -> list:
    """The transitions in order, each given `duration_s` (seconds in that phase) and `ongoing` attributes.

    An entry lasts until the next entry; the last one lasts until `now` and is ongoing, unless it is terminal
    (Succeeded/Failed/Cancelled: `duration_s` None). Returns the same objects, sorted as `ordered`.
    """
    items = ordered(transitions)
    for i, t in enumerate(items):
        if i + 1 < len(items):
            t.duration_s, t.ongoing = max((items[i + 1].at - t.at).total_seconds(), 0.0), False
        elif t.phase in TERMINAL_PHASES:
            t.duration_s, t.ongoing = None, False
        else:
            t.duration_s, t.ongoing = round(max((now - t.at).total_seconds(), 0.0), 3), True
    return items


def is_terminal(phase: str) -> bool:
    """True for Succeeded, Failed and Cancelled."""
    return phase in TERMINAL_PHASES


# The job answer and page show a bounded timeline (issue 33 item 5): a job whose pods crash-loop or are evicted for
# days records thousands of entries. The first SHOWN_HEAD and the last SHOWN_TAIL entries, after folding, are shown;
# GET /api/v1/jobs/<id>/timeline/?offset=&limit= pages every entry.
SHOWN_HEAD = 5
SHOWN_TAIL = 45
FOLD_KEY = ("phase", "reason", "message", "source")


def fold(items: list) -> list:
    """`annotate`d entries with consecutive identical ones (same phase, reason, message and source, whatever the
    attempt) folded into the first of them, which gets `count` (entries folded, 1 when alone), `first_at` (its own
    `at`), `last_at` (the last folded entry's `at`) and the total `duration_s` (None if any was None; ongoing if the
    last was). Returns new list of the same objects (the folded-away ones dropped)."""
    out = []
    for t in items:
        prev = out[-1] if out else None
        if prev is not None and all(getattr(prev, k) == getattr(t, k) for k in FOLD_KEY):
            prev.count += 1
            prev.last_at = t.at
            d = getattr(t, "duration_s", None)
            prev.duration_s = None if prev.duration_s is None or d is None else prev.duration_s + d
            prev.ongoing = getattr(t, "ongoing", False)
            prev.attempt_last = t.attempt
            continue
        t.count, t.first_at, t.last_at, t.attempt_last = 1, t.at, t.at, t.attempt
        out.append(t)
    return out


def bounded(items: list, head: int = SHOWN_HEAD, tail: int = SHOWN_TAIL) -> tuple[list, int]:
    """(shown, omitted): the first `head` and last `tail` of `items` (e.g. `fold`ed entries), and how many in
    between are left out (0 when all fit)."""
    if len(items) <= head + tail:
        return list(items), 0
    return [*items[:head], *items[-tail:]], len(items) - head - tail
