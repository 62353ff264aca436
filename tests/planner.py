"""PostgreSQL planner statistics in tests (issue 14).

A test's rows live inside its own transaction, which is rolled back: autovacuum never sees them, and the tables'
statistics stay those of whatever it last analysed, often an empty table over the dead pages of earlier tests'
rows. PostgreSQL then estimates 1 row for every scan however many the test inserted (`reltuples` 0 over N pages
gives a density of 0), and a plan that is fine for 1 row can take minutes for 1,000. `analyze` gives the planner the
test's real numbers; `stale_statistics` recreates the bad case on purpose. Both are no-ops on SQLite, whose planner
keeps no such statistics unless asked (`ANALYZE` there writes sqlite_stat1, which gangweb never does).
"""
from __future__ import annotations

from django.apps import apps
from django.db import connection, transaction


def _tables(models) -> list[str]:
    models = models or [m for m in apps.get_models(include_auto_created=True) if m._meta.managed]
    return sorted({m._meta.db_table for m in models})


def analyze(*models) -> None:
    """ANALYZE the tables of `models` (Django model classes; none: every table gangweb's apps manage), inside the
    current transaction, which PostgreSQL allows: ANALYZE counts the rows this transaction inserted as live, so the
    statistics describe what the test loaded. PostgreSQL only; a no-op on other databases."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cur:
        cur.execute("ANALYZE " + ", ".join(connection.ops.quote_name(t) for t in _tables(models)))


class _Rollback(Exception):
    pass


def stale_statistics(fill, *models) -> None:
    """Leave the tables of `models` (none: every managed table) with the statistics CI met: call `fill()` inside a
    savepoint that is rolled back (earlier tests' rows: dead pages, no live rows), then ANALYZE. PostgreSQL now
    records 0 live rows over the pages `fill` left (`reltuples` 0, `relpages` > 0): it scales 0 rows per page to the
    file's size and estimates 1 row for every scan, whatever the test inserts next. On SQLite, `fill` still runs
    and is rolled back; nothing else happens."""
    try:
        with transaction.atomic():
            fill()
            raise _Rollback
    except _Rollback:
        pass
    analyze(*models)
