"""Leases: named, expiring claims in the database, so that only one process at a time does a piece of work."""
from __future__ import annotations

import logging
import threading
import uuid
from datetime import timedelta

from django.db import IntegrityError, connection, connections, models, transaction
from django.db.models import Q
from django.utils import timezone

log = logging.getLogger(__name__)


class Lease(models.Model):
    """One named claim, e.g. "resync:cluster:3". `holder` is a random token of the claimant, `expires_at` when the
    claim lapses even if its holder never releases it (a worker killed with SIGKILL). `cursor` is free state for the
    holder's work that outlives one holder (the resync keeps the last job id it looked at, to go on from there).

    A database row rather than a PostgreSQL advisory lock or a Redis lock: it works the same on SQLite (`make run`)
    and PostgreSQL, needs no broker, and a holder that dies simply lets it expire.
    """

    name = models.CharField(max_length=100, unique=True)
    holder = models.CharField(max_length=64, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    cursor = models.BigIntegerField(default=0)

    def __str__(self):
        return self.name


def acquire(name: str, seconds: float) -> str | None:
    """Claim lease `name` for `seconds` unless someone else holds it unexpired. Returns the holder token to pass to
    `release`, or None when it is held. One UPDATE (plus one INSERT the first time): atomic on every database."""
    token = uuid.uuid4().hex
    now = timezone.now()
    until = now + timedelta(seconds=seconds)
    free = Q(expires_at__isnull=True) | Q(expires_at__lt=now)
    if Lease.objects.filter(free, name=name).update(holder=token, expires_at=until):
        return token
    if Lease.objects.filter(name=name).exists():
        return None
    try:
        with transaction.atomic():
            Lease.objects.create(name=name, holder=token, expires_at=until)
    except IntegrityError:  # created by a concurrent claimant first: theirs
        return None
    return token


def release(name: str, token: str, cursor: int | None = None) -> bool:
    """Give lease `name` back if `token` still holds it (optionally saving `cursor`). Returns True when released;
    False when it had expired and someone else took it meanwhile."""
    values = {"holder": "", "expires_at": None}
    if cursor is not None:
        values["cursor"] = cursor
    return bool(Lease.objects.filter(name=name, holder=token).update(**values))


def cursor_of(name: str) -> int:
    """The lease's saved cursor (0 when it never was)."""
    return Lease.objects.filter(name=name).values_list("cursor", flat=True).first() or 0


def renew(name: str, token: str, seconds: float) -> bool:
    """Push lease `name`'s expiry to now + `seconds` if `token` still holds it. Returns False when it does not
    (it lapsed and someone else took it)."""
    until = timezone.now() + timedelta(seconds=seconds)
    return bool(Lease.objects.filter(name=name, holder=token).update(expires_at=until))


class Heartbeat:
    """Keeps a held lease alive while its holder works: a thread renews it for `seconds` every `every` seconds, so
    the lease can be short (a holder killed with SIGKILL blocks the work for at most `seconds`) however long the
    work runs. A context manager; `lost` is set when a renewal found the lease taken by someone else.

    Inside a transaction (tests) the lease row is not visible to another connection and renewing it from one could
    wait on the holder's own row lock, so then nothing is renewed: the lease is the transaction's anyway."""

    def __init__(self, name: str, token: str, seconds: float, every: float):
        self.name, self.token, self.seconds, self.every = name, token, seconds, every
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self) -> Heartbeat:
        if not connection.in_atomic_block:
            self._thread = threading.Thread(target=self._run, name=f"lease-heartbeat:{self.name}", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.every + 30)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.every):
                try:
                    if not renew(self.name, self.token, self.seconds):
                        log.warning("lease %s was lost (it lapsed and another holder took it)", self.name)
                        self.lost.set()
                        return
                except Exception:  # noqa: BLE001 - a database outage: try again next beat; the lease may lapse
                    log.warning("lease %s: renewing failed; trying again in %s s", self.name, self.every,
                                exc_info=True)
                    connections.close_all()
        finally:
            connections.close_all()  # this thread's own connections only
