"""Kubernetes Events of a job's objects, reduced to rows the API and the dashboard show.

Input: core/v1 Event dicts (camelCase). Events written through events.k8s.io/v1 (kube-scheduler, KAI) appear in
core/v1 with `eventTime` and `series` instead of `firstTimestamp` / `lastTimestamp` / `count`; both forms are read.

Row shape::

    {"type": "Warning", "reason": "FailedScheduling", "message": "0/4 nodes are available: ...",
     "object": "Pod ns/train-worker-0-abcde", "kind": "Pod", "count": 3,
     "first_at": "2026-11-29T14:00:02+00:00", "last_at": "2026-11-29T14:00:09+00:00", "component": "default-scheduler"}
"""
from __future__ import annotations

from datetime import datetime

from . import objects as o
from .causes import quote

MAX_COUNT = 2**31 - 1  # Event count and series.count are int32 upstream; anything else is garbage, capped
MAX_MESSAGE = 1024  # characters of an Event's message kept (kube-apiserver allows 1 KiB for events.k8s.io notes)
MAX_SAID = 3  # folded Events kept on a why-pending answer (`said`)


def _time(value) -> datetime | None:
    return o.parse_time(value)


def _first_last(event: dict, series: dict) -> tuple:
    """When the event was first and last seen: core/v1 first/lastTimestamp, else events.k8s.io/v1's eventTime and
    series.lastObservedTime, else its creation."""
    first = _time(event.get("firstTimestamp")) or _time(event.get("eventTime")) or o.created_at(event)
    last = (_time(event.get("lastTimestamp")) or _time(series.get("lastObservedTime")) or _time(event.get("eventTime"))
            or first)
    return first, last


def _count(value) -> int:
    """A count from a cluster (hostile): a non-negative int capped at MAX_COUNT; 0 for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return 0
    try:
        return max(0, min(int(value), MAX_COUNT))
    except ValueError:
        return 0


def row(event: dict) -> dict:
    """One Event as a row (see the module docstring). `count` is the larger of core/v1 `count` and
    events.k8s.io/v1 `series.count` (an Event written through events.k8s.io carries only the series; one seen once
    carries neither: 1). Text is cut and cleaned (`causes.quote`): Events are hostile input."""
    inv = event.get("involvedObject") or event.get("regarding") or {}
    inv = inv if isinstance(inv, dict) else {}
    series = event.get("series") if isinstance(event.get("series"), dict) else {}
    first, last = _first_last(event, series)
    name = f"{inv.get('namespace')}/{inv.get('name', '')}" if inv.get("namespace") else inv.get("name", "")
    return {
        "type": quote(event.get("type") or "Normal", 32),
        "reason": quote(event.get("reason") or "", 128),
        "message": quote(event.get("message") or event.get("note") or "", MAX_MESSAGE),
        "object": quote(f"{inv.get('kind', '')} {name}".strip(), 512),
        "kind": quote(inv.get("kind", ""), 64),
        "count": max(_count(event.get("count")), _count(series.get("count")), 1),
        "first_at": first.isoformat() if first else None,
        "last_at": last.isoformat() if last else None,
        "component": quote((event.get("source") if isinstance(event.get("source"), dict) else {}).get("component")
                           or event.get("reportingComponent") or event.get("reportingController") or "", 128),
    }


def select(events: list[dict], uids: set[str]) -> list[dict]:
    """Rows of the events whose involved object's UID is in `uids`, oldest last-seen first (ties by first seen)."""
    rows = []
    for event in events:
        if not isinstance(event, dict):
            continue
        inv = event.get("involvedObject") or event.get("regarding") or {}
        if isinstance(inv, dict) and inv.get("uid") in uids:
            rows.append(row(event))
    return sorted(rows, key=lambda r: (r["last_at"] or "", r["first_at"] or ""))


def fold(rows: list[dict]) -> list[dict]:
    """`rows` with those of the same (reason, object) merged into one entry (issue 33 item 5: 6,667 identical
    FailedScheduling events were 2,000 rows): `count` summed, `first_at` the earliest, `last_at` the latest, and the
    type, message and component of the latest-seen one (the scheduler's newest words). Ordered as `select` orders,
    oldest last-seen first."""
    merged: dict[tuple, dict] = {}
    for r in rows:
        key = (r["reason"], r["object"])
        m = merged.get(key)
        if m is None:
            merged[key] = dict(r)
            continue
        latest = r if (r["last_at"] or "") >= (m["last_at"] or "") else m
        m.update(type=latest["type"], message=latest["message"], component=latest["component"],
                 count=min(m["count"] + r["count"], MAX_COUNT),
                 last_at=max(m["last_at"] or "", r["last_at"] or "") or None,
                 first_at=min(x for x in (m["first_at"], r["first_at"]) if x) if (m["first_at"] or r["first_at"])
                 else None)
    return sorted(merged.values(), key=lambda r: (r["last_at"] or "", r["first_at"] or ""))


def said(rows: list[dict], limit: int = MAX_SAID) -> list[dict]:
    """What the cluster keeps saying about a waiting job, for its why-pending answer: the Warning rows of `rows`
    folded by (reason, object) (`fold`), newest last-seen first, at most `limit`; each keeps its `count` and
    `first_at` / `last_at` (issue 33: 5,000 identical FailedScheduling Events are one entry, ×5,000)."""
    warned = [r for r in rows if r.get("type") == "Warning"]
    return list(reversed(fold(warned)))[:limit]
