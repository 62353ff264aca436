"""A queue's allocation and decayed usage over a window (24 h, 7 d, 30 d), in buckets: the queue page's chart and
`GET /api/v1/queues/<name>/usage-history/` (the same function, the same numbers).

From what gangweb itself knows on every backend (KAI, Volcano, coscheduling, the Kubernetes Workload API), so a
cluster whose scheduler reports no per-queue use still has a history: each job held its requested totals
(`GangJob.requested_*`) over its Running attempts (`decayed_usage.held`, the jobs' timeline entries). Per bucket
of the window and resource:

- `allocated`: the time-average of what the queue's jobs (its subtree's) held over the bucket, in devices
  (GPU), cores (CPU) and bytes (memory): `used` / the bucket's length;
- `used`: what they held over the bucket, undecayed, in device-, core- and byte-seconds (so the window's total
  is the sum of its buckets);
- `decayed`: the decayed usage at the bucket's end (`decayed_usage`: each resource-second weighed
  0.5^(age / half-life)), in device-, core- and byte-seconds; the last bucket ends now, so its value is the
  queue's decayed usage now.

Computed exactly, bucket by bucket: D(t + Δ) = D(t)·0.5^(Δ / half-life) + the bucket's own decayed integral, each
attempt contributing to the buckets it overlaps only. Two queries (those of `decayed_usage.held`) whatever the
window; none when the caller passes the attempts it read.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from ...amounts import for_api
from ...db import clock
from . import decayed_usage as du


@dataclass(frozen=True)
class Window:
    """A chart window: its `length` and its `step` (each bucket's length); `buckets` = length / step."""

    key: str
    length: timedelta
    step: timedelta

    @property
    def buckets(self) -> int:
        return int(self.length / self.step)


WINDOWS = {w.key: w for w in (Window("24h", timedelta(hours=24), timedelta(minutes=15)),
                              Window("7d", timedelta(days=7), timedelta(hours=1)),
                              Window("30d", timedelta(days=30), timedelta(hours=6)))}
DEFAULT_WINDOW = "7d"
UNITS = {"allocated": {"gpu": "devices", "cpu": "cores", "memory": "bytes"},
         "used": {"gpu": "device-seconds", "cpu": "core-seconds", "memory": "byte-seconds"},
         "decayed": {"gpu": "device-seconds", "cpu": "core-seconds", "memory": "byte-seconds"}}


def window_of(key: str | None) -> Window:
    """The Window named `key` ("24h", "7d", "30d"). Raises KeyError for any other."""
    return WINDOWS[key or DEFAULT_WINDOW]


def since_for(window: Window, now: datetime, half_life: float) -> datetime:
    """The oldest job end that still counts in `window`'s decayed usage at its start (`decayed_usage.horizon`)."""
    return du.horizon(now - window.length, half_life)


def series(members, window: Window, *, now: datetime, half_life: float, attempts: list[du.Held]) -> list[dict]:
    """The buckets of `window` ending at `now` for the jobs of queues `members` (ids: a queue and its
    descendants) among `attempts` (`decayed_usage.held` since at most `since_for(window, now, half_life)`)::

        [{"start": datetime, "end": datetime, "allocated": {"gpu", "cpu", "memory"}, "used": {...},
          "decayed": {...}}, ...]

    oldest first (see the module docstring for the units)."""
    n, step = window.buckets, window.step.total_seconds()
    start = now - window.length
    wanted = set(members)
    used = [dict.fromkeys(du.RESOURCES, 0.0) for _ in range(n)]
    own = [dict.fromkeys(du.RESOURCES, 0.0) for _ in range(n)]  # each bucket's integral decayed to its end
    level = dict.fromkeys(du.RESOURCES, 0.0)  # decayed usage at the window's start
    edges = [start + k * window.step for k in range(n + 1)]
    for h in attempts:
        if h.queue_id not in wanted:
            continue
        end = min(now, h.end or now)
        if end <= h.start:
            continue
        if h.start < start:  # what it held before the window: the decayed level at its start
            for r in du.RESOURCES:
                level[r] += du.decayed_integral(getattr(h, r), h.start, min(end, start), start, half_life)
        if end <= start:
            continue
        first = max(0, int((h.start - start).total_seconds() // step))
        last = min(n - 1, math.ceil((end - start).total_seconds() / step) - 1)
        for k in range(first, last + 1):
            a, b = max(h.start, edges[k]), min(end, edges[k + 1])
            if b <= a:
                continue
            seconds = (b - a).total_seconds()
            for r in du.RESOURCES:
                rate = getattr(h, r)
                used[k][r] += rate * seconds
                own[k][r] += du.decayed_integral(rate, a, b, edges[k + 1], half_life)
    keep = 0.5 ** (step / half_life)
    out = []
    for k in range(n):
        level = {r: level[r] * keep + own[k][r] for r in du.RESOURCES}
        out.append({"start": edges[k], "end": edges[k + 1], "used": used[k],
                    "allocated": {r: used[k][r] / step for r in du.RESOURCES}, "decayed": level})
    return out


def usage_history(policy_id: int, tree, window_key: str | None = None, *, cluster_ids=None,
                  now: datetime | None = None, half_life: float | None = None) -> dict:
    """The queue's (and its subtree's) buckets over the window `window_key` (default DEFAULT_WINDOW), of
    `cluster_ids` only when given::

        {"window": "7d", "start": datetime, "end": datetime, "bucket_seconds": 3600, "half_life_seconds": 604800,
         "units": UNITS, "buckets": series(...)}

    Two queries. Raises KeyError for an unknown window."""
    window = window_of(window_key)
    half_life = half_life if half_life is not None else du.half_life_seconds()
    now = now or clock.now()
    members = du.subtrees([policy_id], tree)[policy_id]
    attempts = du.held(members, since_for(window, now, half_life), cluster_ids)
    return answer(members, window, now=now, half_life=half_life, attempts=attempts)


def answer(members, window: Window, *, now: datetime, half_life: float, attempts: list[du.Held]) -> dict:
    """`usage_history`'s answer from attempts already read (no query)."""
    return {"window": window.key, "start": now - window.length, "end": now,
            "bucket_seconds": int(window.step.total_seconds()), "half_life_seconds": half_life, "units": UNITS,
            "buckets": series(members, window, now=now, half_life=half_life, attempts=attempts)}


def for_api_answer(got: dict) -> dict:
    """`usage_history`'s answer as JSON: times in ISO 8601, amounts through amounts.for_api (whole amounts as
    integers, fractions to 6 decimals)."""
    def amounts(d):
        return {r: for_api(v) for r, v in d.items()}
    return {"window": got["window"], "start": got["start"].isoformat(), "end": got["end"].isoformat(),
            "bucket_seconds": got["bucket_seconds"], "half_life_seconds": for_api(got["half_life_seconds"]),
            "units": got["units"],
            "buckets": [{"start": b["start"].isoformat(), "end": b["end"].isoformat(),
                         "allocated": amounts(b["allocated"]), "used": amounts(b["used"]),
                         "decayed": amounts(b["decayed"])} for b in got["buckets"]]}
