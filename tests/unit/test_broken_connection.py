"""A time limit that lands inside a psycopg call leaves the connection with a command in flight; nothing may use that
connection again (issue 16: 128 resync passes failed in 0.1 s each, "another command is already in progress", while
the task was logged as succeeded). Against the real PostgreSQL (DATABASE_URL=postgres://...); the broken state is
psycopg's, so SQLite runs skip."""
from __future__ import annotations

import signal
from contextlib import contextmanager

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.db import connection

from scheduling.db import connections as dbconn

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the connection is closed and opened again: no test transaction
    pytest.mark.skipif(connection.vendor != "postgresql", reason="psycopg's in-flight state needs PostgreSQL "
                                                                 "(run with DATABASE_URL=postgres://...)"),
]


@contextmanager
def soft_limit_after(seconds: float):
    """Raise SoftTimeLimitExceeded from a signal handler after `seconds`, as billiard does in a pool process."""
    def handler(_signum, _frame):
        raise SoftTimeLimitExceeded()

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def interrupt_a_query() -> None:
    with soft_limit_after(0.2), pytest.raises(SoftTimeLimitExceeded), connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(3)")


def select_one() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone()[0]


def test_a_soft_limit_inside_a_query_breaks_the_connection_and_it_is_discarded():
    select_one()
    interrupt_a_query()
    assert not connection.errors_occurred  # Django saw no database error: its own clean-up would keep it
    with pytest.raises(Exception, match="another command is already in progress"):
        select_one()

    assert dbconn.discard_if_broken(force=True) == ["default"]
    assert select_one() == 1  # a new connection


def test_a_healthy_connection_is_kept():
    select_one()
    before = connection.connection
    assert dbconn.discard_if_broken(force=True) == []
    assert connection.connection is before


def test_a_task_that_failed_inside_a_query_leaves_no_broken_connection_to_the_next_task(monkeypatch):
    from scheduling import tasks
    from scheduling.reconcile import resync

    def resync_cluster_id(_cluster_id, **_kwargs):  # the soft limit lands while the resync waits on PostgreSQL
        with soft_limit_after(0.2), connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(3)")

    monkeypatch.setattr(resync, "resync_cluster_id", resync_cluster_id)
    result = tasks.resync_cluster.apply((1,))  # runs the task with its signals, here, as a pool process would

    assert result.failed() and isinstance(result.result, SoftTimeLimitExceeded)  # failed, not "succeeded"
    assert select_one() == 1  # gangweb.celery's task_failure handler replaced the connection
