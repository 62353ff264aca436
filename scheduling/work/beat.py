"""Celery beat that sends periodic tasks only while it holds the install's beat lease (scheduling/work/election.py).

Set as `CELERY_BEAT_SCHEDULER`, so every `celery -A gangweb beat` uses it: run two beats and one sends, the other
stands by and takes over within GANGWEB_BEAT_LEASE_SECONDS plus one tick (`CELERY_BEAT_MAX_LOOP_INTERVAL`) after
the holder dies. A beat that could not renew its lease within the renew deadline (database unreachable) sends
nothing until a renewal succeeds; one whose lease was taken over goes back to standing by.
"""
from __future__ import annotations

import logging

from celery.beat import PersistentScheduler

log = logging.getLogger(__name__)

LEASE_NAME = "beat"


class LeasedScheduler(PersistentScheduler):
    """`PersistentScheduler` (the schedule file of `--schedule`) whose `tick` sends only under the lease."""

    def __init__(self, *args, **kwargs):
        import django
        from django.apps import apps

        if not apps.ready:  # beat imports no task module before its first tick
            django.setup()
        from django.conf import settings

        from .election import Claims

        self.claims = Claims(settings.GANGWEB_BEAT_LEASE_SECONDS)
        self._next_try = 0.0
        super().__init__(*args, **kwargs)

    def tick(self, *args, **kwargs) -> float:
        """Seconds until the next tick. While leading: renew the lease when due, then Celery's own tick (sends
        what is due). While standing by or fenced: try to lead, send nothing, and look again in `claims.retry`."""
        if self.leading():
            return min(super().tick(*args, **kwargs), self.claims.retry)
        return self.claims.retry

    def leading(self) -> bool:
        """Renew or take the lease when due (at most every `claims.retry` seconds); True when it is held and
        confirmed within the renew deadline."""
        from django.db import close_old_connections, connection, connections

        now = self.claims.clock()
        if now >= self._next_try:
            self._next_try = now + self.claims.retry
            if not connection.in_atomic_block:  # a test's transaction holds the connection it needs
                close_old_connections()
            try:
                if self.claims.held:
                    if self.claims.renew():
                        log.warning("beat: the lease went to another beat; standing by")
                elif self.claims.acquire([LEASE_NAME]):
                    log.info("beat: holding the lease; sending periodic tasks")
            except Exception as exc:  # noqa: BLE001 - the database is away: fenced until a renewal succeeds
                log.warning("beat: lease not confirmed (%s: %s); sending nothing until it is", type(exc).__name__,
                            exc)
                if not connection.in_atomic_block:
                    connections.close_all()
        return self.claims.valid(LEASE_NAME)

    def close(self) -> None:
        """Persist the schedule and give the lease back, so a standby takes over at once."""
        super().close()
        self.claims.release()
