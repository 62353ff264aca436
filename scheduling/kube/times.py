"""Kubernetes timestamps (RFC 3339, metav1.Time and MicroTime) as aware UTC datetimes, for every reader of
objects: the observe rules and the cluster-side readers (kube/scheduler_presence.py) alike."""
from __future__ import annotations

from datetime import UTC, datetime


def parse_time(value) -> datetime | None:
    """An RFC 3339 timestamp (or datetime) as an aware UTC datetime; None for None, "" or garbage."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.endswith("Z") or text.endswith("z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
