"""Repairs that do not hold: a bounded exponential backoff per job for drift that something in the cluster keeps
putting back (hostile pass F5).

A pass puts a gang object's drifted mutable fields back with a merge patch (`JobReconciler.patch`). When something
in the cluster rewrites them at once (a mutating admission policy or webhook that changes gangweb's object on every
write, another controller), every repair is a write, every write a watch event, every event a pass: measured ~4
passes a second for one job, for ever. So each job remembers its latest repair (`GangJob.repairs`, times on the
database's clock, scheduling/db/clock.py):

- `what`: the objects and fields repaired ("PodGroup ns/x schedulingPolicy.gang.minCount"), `said` the same with
  what gangweb set them to, `count` how many times in a row the same drift was found again after gangweb had
  repaired it, since `first`; `last` the latest repair; `hold_until` and `delay` the backoff.
- The same drift found again within REPAIR_WINDOW_SECONDS (plus the current delay) of the latest repair counts one
  more; anything else starts the count again at 0.
- From `GANGWEB_REPAIR_LIMIT` (3) repairs that did not hold on, the next repair waits: `delay` =
  `settings.GANGWEB_REPAIR_BACKOFF_SECONDS` (1) x 2^(count - limit), capped at the resync period
  (`GANGWEB_RESYNC_SECONDS`): 1 s, 2 s, 4 s, ... 30 s. Celery's own backoff arithmetic computes it
  (`celery.utils.time.get_exponential_backoff_interval`, the one behind the tasks' `retry_backoff`).
- While `hold_until` is ahead, a pass does not patch that drift again (no write, so no watch event either), and the
  pass ends with a countdown to `hold_until`, reason `RepairNotHolding`, whose message says what, how often, and
  when gangweb tries again; it is the pass's ReconcileAttempt reason, and the watch queues no pass for a partial
  gang meanwhile (reconcile/watching.py). A deletion, a termination or an immutable change is not a repair: the
  gang is replaced as ever. A pass that finds the gang objects in sync ends the hold (`held_off`), keeping the
  count.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta

from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.utils.dateparse import parse_datetime

from ...db import clock as dbclock

REPAIR_NOT_HOLDING = "RepairNotHolding"
REPAIR_WINDOW_SECONDS = 60  # the same drift found again within this long of the last repair: the repair did not hold


def limit() -> int:
    """Repairs of the same drift that may not hold before gangweb backs off (`GANGWEB_REPAIR_LIMIT`, default 3)."""
    return max(1, int(getattr(settings, "GANGWEB_REPAIR_LIMIT", 3)))


def cap() -> int:
    """The longest wait between two repairs, seconds: the resync period (`GANGWEB_RESYNC_SECONDS`)."""
    return max(1, int(getattr(settings, "GANGWEB_RESYNC_SECONDS", 30)))


def delay_for(count: int) -> int:
    """Seconds to wait before repairing again after `count` repairs of one drift that did not hold: 0 below
    `limit()`, then `GANGWEB_REPAIR_BACKOFF_SECONDS` x 2^(count - limit()), at most `cap()`."""
    if count < limit():
        return 0
    first = max(1, int(getattr(settings, "GANGWEB_REPAIR_BACKOFF_SECONDS", 1)))
    return get_exponential_backoff_interval(factor=first, retries=count - limit(), maximum=cap(), full_jitter=False)


def describe(kind: str, ns: str, name: str, fields: list[str]) -> str:
    """The `what` of a drift: "PodGroup ns/x schedulingPolicy.gang.minCount" (fields sorted, comma-separated)."""
    return f"{kind} {ns}/{name} {', '.join(sorted(fields))}"


def wanted_values(want: dict, fields: list[str]) -> str:
    """What gangweb sets `fields` (dotted paths under `spec`) to in the desired object `want`: "3", or
    "minCount=3, minResources={...}" for several; a value that is not a scalar is compact JSON, cut to 60 characters."""
    out = []
    for path in sorted(fields):
        value = want.get("spec")
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=True)
        text = text if len(text) <= 60 else text[:59] + "…"
        out.append((path.rsplit(".", 1)[-1], text))
    return out[0][1] if len(out) == 1 else ", ".join(f"{k}={v}" for k, v in out)


def _when(value) -> datetime | None:
    return parse_datetime(value) if isinstance(value, str) else None


def held(job, what: str, now: datetime | None = None) -> float | None:
    """Seconds left of the backoff on repairing `what` (> 0), or None when gangweb may repair it now."""
    state = job.repairs if isinstance(job.repairs, dict) else {}
    until = _when(state.get("hold_until"))
    if state.get("what") != what or until is None:
        return None
    left = (until - (now or dbclock.now())).total_seconds()
    return left if left > 0 else None


def holding(job, now: datetime | None = None) -> bool:
    """True while any repair of `job` is held back (the watch queues no pass for a partial gang then)."""
    state = job.repairs if isinstance(job.repairs, dict) else {}
    until = _when(state.get("hold_until"))
    return until is not None and until > (now or dbclock.now())


def what_of(items: list[tuple[str, str]]) -> str:
    """The `what` of one pass's repairs `items` [(`describe`, `wanted_values`)]: their descriptions joined by "; "
    (two objects drifted together, a Workload and its PodGroup, are one repair: counted together)."""
    return "; ".join(w for w, _ in items)


def repaired(job, items: list[tuple[str, str]], now: datetime | None = None) -> dict:
    """Note on `job` (in memory; written with the pass's status, `status.PLAIN_FIELDS`) that the pass repaired
    `items` [(`describe`, `wanted_values`)] at `now` (the database's clock). Returns the new state (module
    docstring)."""
    now = now or dbclock.now()
    what = what_of(items)
    values = " and ".join(f"{w} set to {v}" for w, v in items)
    state = job.repairs if isinstance(job.repairs, dict) else {}
    last, delay = _when(state.get("last")), int(state.get("delay") or 0)
    again = (state.get("what") == what and last is not None
             and (now - last).total_seconds() <= REPAIR_WINDOW_SECONDS + delay)
    count = int(state.get("count") or 0) + 1 if again else 0
    first = _when(state.get("first")) if again else now
    delay = delay_for(count)
    job.repairs = {"what": what, "said": values, "count": count, "first": (first or now).isoformat(),
                   "last": now.isoformat(), "delay": delay,
                   "hold_until": (now + timedelta(seconds=delay)).isoformat() if delay else None}
    return job.repairs


def held_off(job) -> None:
    """A pass found the job's gang objects in sync: the hold ends (in memory, written with the pass's status), so
    the watch queues passes for the job again. The count stays: the same drift found again within the window goes
    on from it, and waits longer."""
    state = job.repairs if isinstance(job.repairs, dict) else {}
    if state.get("hold_until"):
        job.repairs = {**state, "hold_until": None}


def message(job, now: datetime | None = None) -> str:
    """What a user reads while a repair is held back: "PodGroup ns/x schedulingPolicy.gang.minCount set to 3 was
    changed back 5 times in 12 s by something in the cluster (an admission policy or another controller); gangweb
    sets it again in 8 s, then backs off up to every 30 s". "" when nothing is held."""
    state = job.repairs if isinstance(job.repairs, dict) else {}
    now = now or dbclock.now()
    until, first = _when(state.get("hold_until")), _when(state.get("first"))
    if until is None or first is None:
        return ""
    span = max(0, round((now - first).total_seconds()))
    left = max(0, round((until - now).total_seconds()))
    return (f"{state.get('said')} was changed back {state.get('count')} times in "
            f"{span} s by something in the cluster (an admission policy or another controller); gangweb sets it "
            f"again in {left} s, then backs off up to every {cap()} s")
