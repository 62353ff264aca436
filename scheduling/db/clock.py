"""The database's clock, for times that another host compares: one clock for every process of an install.

Hosts' clocks differ (a worker 200 s ahead took the resync lease from a live holder, and wrote job rows
`updated_at` in the future: issue 31). Times that decide who holds what (leases, claims) are computed inside the
SQL statement with the database's `now()` (django.db.models.functions.Now; reconcile/jobs/claims.py,
models/leases.py). Times this process writes as values (a row's `updated_at`, a task's `task_queued_at`) come
from `now()` here: the host's clock corrected by the database's offset from it, measured with one
`SELECT clock_timestamp()` at most every OFFSET_TTL seconds per process and connection alias, so a write costs no
extra round trip. On SQLite the database runs in this process, on this host's clock: the offset is 0 and nothing
is measured.

The offset's error is half the measuring round trip (milliseconds); clocks drift far slower than OFFSET_TTL.
"""
from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta

from django.db import connections
from django.utils import timezone

OFFSET_TTL = 300.0  # seconds a process trusts a measured offset (clocks drift by far less meanwhile)

_lock = threading.Lock()
_offsets: dict[tuple[int, str], tuple[float, float]] = {}  # (pid, alias) -> (offset seconds, measured at monotonic)


def offset(alias: str = "default") -> float:
    """Seconds to add to this host's clock to get the database's (0.0 on SQLite). Measured with one query when the
    process's last measure is older than OFFSET_TTL. Raises the database's error when it cannot be reached."""
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return 0.0
    key = (os.getpid(), alias)  # a forked worker measures on its own connection
    with _lock:
        known = _offsets.get(key)
    if known is not None and time.monotonic() - known[1] < OFFSET_TTL:
        return known[0]
    with connection.cursor() as cursor:
        before = time.time()
        cursor.execute("SELECT clock_timestamp()")  # now() would be the transaction's start
        db_now = cursor.fetchone()[0]
        after = time.time()
    measured = db_now.timestamp() - (before + after) / 2
    with _lock:
        _offsets[key] = (measured, time.monotonic())
    return measured


def now(alias: str = "default") -> datetime:
    """The database's current time (aware, UTC), from this host's clock and the database's offset."""
    return timezone.now() + timedelta(seconds=offset(alias))


def from_host(epoch_seconds: float, alias: str = "default") -> datetime:
    """This host's `time.time()` value `epoch_seconds` on the database's clock (aware, UTC)."""
    return datetime.fromtimestamp(epoch_seconds + offset(alias), tz=UTC)


def forget() -> None:
    """Drop the measured offsets (tests; a process measures again within OFFSET_TTL anyway)."""
    with _lock:
        _offsets.clear()

