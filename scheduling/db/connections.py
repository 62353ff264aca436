"""Never reuse a database connection that an interrupted or failed call left broken.

Why: Celery raises SoftTimeLimitExceeded from a signal handler, wherever the task is. When it lands inside a
psycopg call outside a transaction, psycopg (3.x: it cancels the query only for KeyboardInterrupt) leaves the
connection with a command in flight, and every later query on it fails at once with "another command is already in
progress". Django closes a connection after a request, and Celery's Django fixup before and after a task, only when
Django saw a database error on it (`errors_occurred`); an exception that is not a database error passes unseen, so a
worker process went on failing each next task in 0.1 s. Inside `transaction.atomic()` Django's own rollback drops
such a connection; this covers the rest. Django reconnects on the next query.
"""
from __future__ import annotations

import logging

from django.db import connections

log = logging.getLogger(__name__)


def discard_if_broken(force: bool = False) -> list[str]:
    """Close every open connection of this thread that no longer answers `SELECT 1` (Django's `is_usable`). Checked
    only when Django recorded a database error on it, or always with `force` (after an exception that may have
    interrupted a database call: a time limit, a bug). Returns the aliases closed. Never raises."""
    closed = []
    for conn in connections.all(initialized_only=True):
        if conn.connection is None or not (force or conn.errors_occurred):
            continue
        try:
            usable = conn.is_usable()
        except Exception:  # is_usable catches the driver's errors; anything else also means unusable
            usable = False
        if usable:
            conn.errors_occurred = False
            continue
        try:
            conn.close()
        except Exception:  # closing a broken connection may fail too; drop it regardless
            conn.connection = None
        log.warning("database connection %r was broken (interrupted or failed call); closed it", conn.alias)
        closed.append(conn.alias)
    return closed
