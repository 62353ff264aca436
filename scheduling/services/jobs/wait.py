"""Long-poll wait on named jobs: answer as soon as any of them changes phase, or at a bounded timeout.

The API's `GET /api/v1/jobs/wait/` (and so the `gangweb` CLI's `--wait`) uses this instead of a client polling
every job's detail every second. What a waiter is told is always the *current* state of every job it named, never
a history of events: armada's `watch` judged its event stream and exited at the first historical idle moment
(armada #4467), so a wait here is judged on the jobs' rows as they are now.

How a change is seen, cheaply and without one database connection per waiter:

- A job's **fingerprint** is (id, phase, number of timeline entries). The timeline is append-only and a phase
  change always appends an entry (`reconcile/status.py`), so the count only grows; a count cannot miss an entry
  committed late with a lower id, as a "highest id seen" cursor would.
- The **cursor** a client sends back is a short digest of the fingerprints of the jobs it waits on; a different
  digest now means something changed since.
- While requests wait, one **watcher thread per web process** reads the fingerprints of every job any of them
  waits on in one query per `GANGWEB_WAIT_POLL_SECONDS` (default 1 s) and wakes the waiters whose digest moved.
  A waiting request holds a thread (gunicorn `gthread`, or runserver's threads) but no database connection: it
  closes its own before it sleeps. So N waiters in one process cost one small query per tick, not N.
"""
from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable
from contextlib import contextmanager

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Count

from ...models import GangJob

log = logging.getLogger(__name__)

MAX_IDS = 500  # ids per request: ~4 KB of query string at most, under gunicorn's 4094-byte request line
MAX_TIMEOUT_SECONDS = 25.0  # under gunicorn's default 30 s worker timeout and most proxies' idle timeouts
DEFAULT_TIMEOUT_SECONDS = 25.0
_QUERY_CHUNK = 2000  # ids per watcher query (SQLite's variable limit is 32766; PostgreSQL has none that matters)


def poll_seconds() -> float:
    """Seconds between two watcher reads (`GANGWEB_WAIT_POLL_SECONDS`, default 1.0, at least 0.05)."""
    return max(0.05, float(getattr(settings, "GANGWEB_WAIT_POLL_SECONDS", 1.0)))


def cursor_of(fingerprints: Iterable[tuple[int, str, int]]) -> str:
    """The cursor of a set of job fingerprints (id, phase, timeline entries): 16 hex digits of a SHA-256 of them
    in id order. Equal sets give equal cursors; a missing job changes it."""
    digest = hashlib.sha256()
    for job_id, phase, entries in sorted(fingerprints):
        digest.update(f"{job_id}:{phase}:{entries};".encode())
    return digest.hexdigest()[:16]


def fingerprints(ids: Iterable[int]) -> dict[int, tuple[int, str, int]]:
    """{id: (id, phase, timeline entries)} of the jobs with these ids that exist, read in one query per 2,000 ids
    (no visibility check: callers pass ids they already checked)."""
    ids = sorted(set(ids))
    out: dict[int, tuple[int, str, int]] = {}
    for start in range(0, len(ids), _QUERY_CHUNK):
        rows = (GangJob.objects.filter(pk__in=ids[start:start + _QUERY_CHUNK]).order_by()
                .annotate(entries=Count("transitions")).values_list("pk", "phase", "entries"))
        out.update({pk: (pk, phase, entries) for pk, phase, entries in rows})
    return out


class _Waiter:
    """One waiting request: its ids and the cursor it started from; `woken` is set by the watcher."""

    __slots__ = ("ids", "cursor", "woken")

    def __init__(self, ids: frozenset[int], cursor: str):
        self.ids, self.cursor, self.woken = ids, cursor, threading.Event()


class Watcher:
    """The process's reader of waited-on jobs: a daemon thread that runs only while someone waits.

    Each tick reads `fingerprints()` of the union of every waiter's ids and sets the `woken` event of each waiter
    whose cursor differs from its jobs' cursor now. A failed read (database down) is logged and retried next
    tick; the waiters then run to their timeout and their request answers from its own read.
    """

    def __init__(self, interval: float | None = None):
        self._interval = interval
        self._lock = threading.Lock()
        self._waiters: set[_Waiter] = set()
        self._has_waiters = threading.Event()
        self._thread: threading.Thread | None = None

    def wait(self, ids: Iterable[int], cursor: str, timeout: float) -> bool:
        """Block up to `timeout` seconds until the jobs `ids` no longer have cursor `cursor`. Returns True when
        woken by a change, False at the timeout."""
        waiter = _Waiter(frozenset(ids), cursor)
        with self._lock:
            self._waiters.add(waiter)
            self._has_waiters.set()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="gangweb-job-wait", daemon=True)
                self._thread.start()
        try:
            return waiter.woken.wait(timeout)
        finally:
            with self._lock:
                self._waiters.discard(waiter)
                if not self._waiters:
                    self._has_waiters.clear()

    def tick(self) -> None:
        """One read: wake every waiter whose jobs changed. Public for tests; the thread calls it."""
        with self._lock:
            waiters = list(self._waiters)
        if not waiters:
            return
        current = fingerprints(set().union(*(w.ids for w in waiters)))
        for waiter in waiters:
            if cursor_of(current[i] for i in waiter.ids if i in current) != waiter.cursor:
                waiter.woken.set()

    def _run(self) -> None:
        while True:
            if not self._has_waiters.is_set():
                connection.close()  # an idle process keeps no connection for this thread
            self._has_waiters.wait()
            time.sleep(self._interval or poll_seconds())
            try:
                close_old_connections()  # past CONN_MAX_AGE or broken: reconnect, as a request would
                self.tick()
            except Exception:  # noqa: BLE001 - a database error must not end the thread; waiters time out instead
                log.exception("job wait: reading the waited jobs failed; retrying next tick")
                close_old_connections()
                connection.close()


_watcher = Watcher()


class TooManyWaits(Exception):
    """The caller already holds GANGWEB_WAITS_PER_USER long-polls in this process, or the process holds
    GANGWEB_WAITS_PER_PROCESS (API: 429 with Retry-After)."""


_slots: Counter = Counter()
_slots_lock = threading.Lock()


def limits() -> tuple[int, int]:
    """(waits per user, waits per process) in one web process: settings.GANGWEB_WAITS_PER_USER (4) and
    GANGWEB_WAITS_PER_PROCESS (8, half of the chart's 16 gunicorn threads). The per-user cap never exceeds the
    per-process one."""
    per_process = max(1, int(getattr(settings, "GANGWEB_WAITS_PER_PROCESS", 8)))
    return min(per_process, max(1, int(getattr(settings, "GANGWEB_WAITS_PER_USER", 4)))), per_process


@contextmanager
def wait_slot(user_id: int):
    """Hold one long-poll slot of user `user_id` in this process for the duration of the block.

    A waiting request holds a web thread (gunicorn gthread: `--threads` per process, 16 in the chart), so two caps
    keep waits from starving everything else (issue 32 row 3): per user (all their API tokens and sessions
    together: a cap per token let one user with 4 tokens hold all 32 threads), and per process (whoever waits,
    the rest of the process's threads stay free for ordinary requests and health checks). Raises TooManyWaits
    naming the cap that was reached."""
    per_user, per_process = limits()
    with _slots_lock:
        if _slots[user_id] >= per_user:
            raise TooManyWaits(f"at most {per_user} waits at a time per user (GANGWEB_WAITS_PER_USER), all your "
                               "tokens together; name several jobs in one wait")
        if sum(_slots.values()) >= per_process:
            raise TooManyWaits(f"this web process already holds {per_process} waits (GANGWEB_WAITS_PER_PROCESS), "
                               "its share of threads for long-polls; retry shortly")
        _slots[user_id] += 1
    try:
        yield
    finally:
        with _slots_lock:
            _slots[user_id] -= 1
            if _slots[user_id] <= 0:
                del _slots[user_id]


def wait_for_change(ids: Iterable[int], cursor: str, timeout: float) -> bool:
    """Wait (in the calling request's thread) up to `timeout` seconds for the jobs `ids` to leave cursor `cursor`,
    through the process's shared Watcher. The caller's database connection is closed first, so a waiter holds
    none while it sleeps (not inside a transaction: there, as in tests, the connection is kept). Returns True on
    a change, False at the timeout."""
    if not connection.in_atomic_block:
        connection.close()
    return _watcher.wait(ids, cursor, timeout)


def parse_ids(raw: str | None) -> list[int]:
    """The `ids` parameter: comma-separated positive job ids, 1 to MAX_IDS of them, duplicates dropped, order kept.
    Raises django's ValidationError({"ids": message}) for anything else."""
    from django.core.exceptions import ValidationError

    parts = [p.strip() for p in (raw or "").split(",") if p.strip()]
    if not parts:
        raise ValidationError({"ids": "give the job ids to wait on, comma-separated, e.g. ids=12,13"})
    if len(parts) > MAX_IDS:
        raise ValidationError({"ids": f"at most {MAX_IDS} job ids per request; got {len(parts)} (split them)"})
    ids: list[int] = []
    for part in parts:
        if not (part.isascii() and part.isdigit()) or not 0 < int(part) < 2**63:
            raise ValidationError({"ids": f"'{part[:20]}' is not a job id (a positive whole number)"})
        if int(part) not in ids:
            ids.append(int(part))
    return ids


def parse_timeout(raw: str | None) -> float:
    """The `timeout` parameter: seconds from 0 to MAX_TIMEOUT_SECONDS (default DEFAULT_TIMEOUT_SECONDS).
    Raises django's ValidationError({"timeout": message}) otherwise."""
    from django.core.exceptions import ValidationError

    if raw in (None, ""):
        return DEFAULT_TIMEOUT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= MAX_TIMEOUT_SECONDS:  # also refuses nan and inf
        raise ValidationError({"timeout": f"'{str(raw)[:20]}' is not a number of seconds from 0 to "
                                          f"{MAX_TIMEOUT_SECONDS:g}"})
    return value
