"""Whether a backend's scheduler is seen on a cluster, from what the probe recorded (`Cluster.scheduler_presence`,
written by reconcile/probe.py from kube/scheduler_presence.py). Readers never call the cluster.

A scheduler is *seen* when its last sighting is within GANGWEB_SCHEDULER_SEEN_WITHIN_SECONDS of now; *not seen*
when the probe read the cluster and found no sighting that recent; *unknown* when the probe has not read it (never
probed, the backend not served, or Leases and Events could not be listed).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from .objects import parse_time

SEEN, NOT_SEEN, UNKNOWN = "seen", "not_seen", "unknown"


def ago(seconds: float) -> str:
    """How long ago, for people: "42 s ago" under 2 min, "17 min ago" under 2 h, "5 h ago" under 2 days, then
    "3 days ago" (whole units, rounded down; a negative age reads as 0 s)."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    if seconds < 172800:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} days ago"


@dataclass(frozen=True)
class Presence:
    """One backend's scheduler on one cluster: `state` (SEEN, NOT_SEEN, UNKNOWN), `scheduler` (its schedulerName),
    `seen_at` (aware datetime or None), `by` (the evidence), `text` ("scheduler seen 2 min ago",
    "no kai-scheduler seen", "scheduler presence unknown")."""

    state: str
    scheduler: str
    seen_at: datetime | None
    by: str
    text: str

    @property
    def silent(self) -> bool:
        """True when the probe looked and saw no such scheduler acting."""
        return self.state == NOT_SEEN

    def as_dict(self) -> dict:
        """The API shape: {"state", "scheduler", "seen_at" (ISO or None), "by", "text"}."""
        return {"state": self.state, "scheduler": self.scheduler,
                "seen_at": self.seen_at.isoformat() if self.seen_at else None, "by": self.by, "text": self.text}


def presence(cluster, family: str, now: datetime | None = None) -> Presence:
    """The `Presence` of `family`'s scheduler on `cluster` (a Cluster, or an unsaved one holding
    `scheduler_presence`), as of `now`."""
    now = now or timezone.now()
    entry = (getattr(cluster, "scheduler_presence", None) or {}).get(family)
    if not isinstance(entry, dict) or not entry.get("read"):
        name = entry.get("scheduler", "") if isinstance(entry, dict) else ""
        return Presence(UNKNOWN, name, None, "", "scheduler presence unknown")
    name = str(entry.get("scheduler") or "")
    seen_at = parse_time(entry.get("seen_at"))
    if seen_at is not None and now - seen_at <= timedelta(seconds=settings.GANGWEB_SCHEDULER_SEEN_WITHIN_SECONDS):
        return Presence(SEEN, name, seen_at, str(entry.get("by") or ""),
                        f"scheduler seen {ago((now - seen_at).total_seconds())}")
    text = f"no {name} seen" if name else "no scheduler seen"
    if seen_at is not None:
        text += f" (last {ago((now - seen_at).total_seconds())})"
    return Presence(NOT_SEEN, name, seen_at, str(entry.get("by") or ""), text)


def all_presence(cluster, now: datetime | None = None) -> dict[str, Presence]:
    """{family: Presence} for every backend family the probe recorded on `cluster`, sorted by family."""
    return {family: presence(cluster, family, now) for family in sorted(cluster.scheduler_presence or {})}
