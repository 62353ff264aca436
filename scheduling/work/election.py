"""Leader election for gangweb's singletons: one active watcher per cluster, one active Celery beat per install.

Any number of replicas may run; each holds the leases it won (rows of `models.Lease`, one random token per
process) and works only while it holds them. The rules, after Kubernetes' own leader election
(client-go `tools/leaderelection`: leaseDuration, renewDeadline, retryPeriod):

- **Renewal.** The holder renews all its leases every `retry` seconds (one UPDATE), which writes a new
  `expires_at` each time.
- **Fencing.** A holder that has not renewed successfully for `renew_deadline` seconds (database unreachable) stops
  writing (`valid()` is False) until a renewal succeeds again; a renewal that finds the lease held by another token
  means the lease was lost, and the caller stops that work for good. `renew_deadline` < `seconds`, so a holder cut
  off from the database has stopped writing before anyone else can take over.
- **Take-over without trusting clocks.** A candidate takes a held lease only after it has seen the same
  (holder, expires_at) unchanged for `seconds` on its own monotonic clock, as client-go does: a live holder changes
  `expires_at` at every renewal, so clock skew between hosts cannot make a live lease look expired. A lease with no
  holder (released at a clean shutdown) is taken at once.

So a replica killed with SIGKILL is replaced within `seconds` + `retry` (+ the caller's own polling period); the
figures per singleton are in docs/architecture.md ("Singletons"). The resync's per-cluster lease
(`models.leases.acquire`) is a different thing: a mutex around one pass, not a role held for the life of a process.
"""
from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.db.models.functions import Now

from ..models.leases import Lease

log = logging.getLogger(__name__)


class Claims:
    """The leases one process holds, under one token.

    - `seconds`: how long a lease stays valid after its last renewal (the take-over bound's main term);
    - `renew_deadline`: how long the holder may go without a successful renewal before it stops writing
      (default 2/3 of `seconds`);
    - `retry`: how often the caller should call `renew()` and `acquire()` (default `seconds` / 6);
    - `clock`: a monotonic clock in seconds (tests pass their own).

    Not thread-safe: one thread (the command's loop, beat's tick) calls it; other threads only call `valid`.
    """

    def __init__(self, seconds: float = 30.0, renew_deadline: float | None = None, retry: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        if renew_deadline is None:
            renew_deadline = seconds * 2 / 3
        if not 0 < renew_deadline < seconds:
            raise ValueError(f"renew_deadline {renew_deadline} must be above 0 and below the lease's {seconds} s")
        self.seconds, self.renew_deadline = float(seconds), float(renew_deadline)
        self.retry = float(retry if retry is not None else seconds / 6)
        self.clock = clock
        self.token = uuid.uuid4().hex
        self.renewed_at: dict[str, float] = {}  # lease name -> clock() before its last successful write
        # lease name -> ((holder, expires_at) last seen, clock() when first seen so): the take-over timer
        self._seen: dict[str, tuple[tuple, float]] = {}

    @property
    def held(self) -> set[str]:
        """Names of the leases this process holds (valid or fenced)."""
        return set(self.renewed_at)

    def valid(self, name: str) -> bool:
        """True while this process holds `name` and renewed it within `renew_deadline`: it may write."""
        at = self.renewed_at.get(name)
        return at is not None and self.clock() - at < self.renew_deadline

    def acquire(self, names: Iterable[str], limit: int | None = None) -> list[str]:
        """Try to take each of `names` not held yet, at most `limit` in all held (None: no limit). Returns the
        names taken now. One SELECT, then one UPDATE or INSERT per lease taken. Raises the database's errors."""
        wanted = [n for n in names if n not in self.renewed_at]
        room = None if limit is None else max(limit - len(self.renewed_at), 0)
        if not wanted or room == 0:
            return []
        rows = {name: (holder, expires) for name, holder, expires in
                Lease.objects.filter(name__in=wanted).values_list("name", "holder", "expires_at")}
        taken = []
        for name in wanted:
            if room is not None and len(taken) >= room:
                break
            started = self.clock()
            if name not in rows:
                if self._insert(name):
                    taken.append(name)
                    self.renewed_at[name] = started
                continue
            holder, expires = rows[name]
            if holder and not self._stale(name, (holder, expires), started):
                continue
            old = Q(holder=holder, expires_at=expires) if holder else Q(holder="") | Q(holder__isnull=True)
            if Lease.objects.filter(old, name=name).update(holder=self.token, expires_at=self._until()):
                taken.append(name)
                self.renewed_at[name] = started
                self._seen.pop(name, None)
                if holder:
                    log.info("lease %s: taken over from a holder silent for %.0f s", name, self.seconds)
        return taken

    def renew(self) -> set[str]:
        """Renew every held lease (one UPDATE; one SELECT more when some were lost). Returns the names lost (now
        held by another token): the caller stops their work. A database error is raised and nothing is lost yet:
        the leases stay fenced until a renewal succeeds again or another process takes them."""
        names = list(self.renewed_at)
        if not names:
            return set()
        started = self.clock()
        done = Lease.objects.filter(name__in=names, holder=self.token).update(expires_at=self._until())
        kept = set(names)
        if done < len(names):
            kept = set(Lease.objects.filter(name__in=names, holder=self.token).values_list("name", flat=True))
        lost = set(names) - kept
        for name in names:
            if name in kept:
                self.renewed_at[name] = started
            else:
                self.renewed_at.pop(name, None)
                log.warning("lease %s: lost to another holder; stopping its work", name)
        return lost

    def release(self, names: Iterable[str] | None = None) -> None:
        """Give back `names` (all held when None) so a standby takes them at once. Errors are logged only: an
        unreleased lease simply lapses after `seconds`."""
        names = list(self.renewed_at if names is None else names)
        for name in names:
            self.renewed_at.pop(name, None)
        if not names:
            return
        try:
            Lease.objects.filter(name__in=names, holder=self.token).update(holder="", expires_at=None)
        except Exception as exc:  # noqa: BLE001 - shutting down; the lease lapses on its own
            log.warning("leases %s not released (%s); they lapse in %.0f s", names, exc, self.seconds)

    def _stale(self, name: str, seen: tuple, now: float) -> bool:
        """True when another holder's (holder, expires_at) has been the same for `seconds` of our clock."""
        before = self._seen.get(name)
        if before is None or before[0] != seen:
            self._seen[name] = (seen, now)
            return False
        return now - before[1] >= self.seconds

    def _insert(self, name: str) -> bool:
        try:
            with transaction.atomic():
                Lease.objects.create(name=name, holder=self.token, expires_at=self._until())
            return True
        except IntegrityError:  # another candidate created it first: theirs
            return False

    def _until(self):
        # The database's clock, in the statement: only the holder's own renewals change it, and a take-over never
        # compares it with a clock (`_stale`); written on one clock anyway, as every lease (models/leases.py).
        return Now() + timedelta(seconds=self.seconds)
