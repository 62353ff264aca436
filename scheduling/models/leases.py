"""Leases: named, expiring claims in the database, so that only one process at a time does a piece of work."""
from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta

from django.db import IntegrityError, connection, connections, models, transaction
from django.db.models import Q
from django.db.models.functions import Now

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
    `release`, or None when it is held. One UPDATE (plus one INSERT the first time): atomic on every database.

    Expiry is decided on the database's clock alone (`now()` inside the statement): the holder's `expires_at` and
    the acquirer's "now" come from one clock, so a host whose clock runs ahead cannot see a live lease as lapsed."""
    token = uuid.uuid4().hex
    free = Q(expires_at__isnull=True) | Q(expires_at__lt=Now())
    if Lease.objects.filter(free, name=name).update(holder=token, expires_at=_until(seconds)):
        return token
    if Lease.objects.filter(name=name).exists():
        return None
    try:
        with transaction.atomic():
            Lease.objects.create(name=name, holder=token, expires_at=_until(seconds))
    except IntegrityError:  # created by a concurrent claimant first: theirs
        return None
    return token


def _until(seconds: float):
    """The SQL expression of the database's now() + `seconds`."""
    return Now() + timedelta(seconds=seconds)


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
    return bool(Lease.objects.filter(name=name, holder=token).update(expires_at=_until(seconds)))


class Heartbeat:
    """Keeps something held alive while its holder works: a thread calls `renew()` every `every` seconds, so a lease
    or claim can be short (a holder killed with SIGKILL blocks the work for at most its length) however long the
    work runs. `renew` returns False when what it renews was lost (taken by someone else): `lost` is then set and
    the thread stops. A context manager; `what` names it in logs and in the thread's name.

    Inside a transaction (tests) the rows are not visible to another connection and renewing them from one could
    wait on the holder's own row lock, so then nothing is renewed: they are the transaction's anyway."""

    def __init__(self, what: str, renew: Callable[[], bool], every: float):
        self.what, self.renew, self.every = what, renew, every
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = None

    @classmethod
    def of_lease(cls, name: str, token: str, seconds: float, every: float) -> Heartbeat:
        """A heartbeat renewing lease `name` held by `token` for `seconds` every `every` seconds (`renew`)."""
        return cls(f"lease {name}", lambda: renew(name, token, seconds), every)

    def __enter__(self) -> Heartbeat:
        if not connection.in_atomic_block:
            self._thread = threading.Thread(target=self._run, name=f"heartbeat:{self.what}", daemon=True)
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
                    if not self.renew():
                        log.warning("%s was lost (it lapsed and another holder took it)", self.what)
                        self.lost.set()
                        return
                except Exception:  # noqa: BLE001 - a database outage: try again next beat; it may lapse
                    log.warning("%s: renewing failed; trying again in %s s", self.what, self.every, exc_info=True)
                    connections.close_all()
        finally:
            connections.close_all()  # this thread's own connections only
