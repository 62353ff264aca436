"""Statements of fixed text whose rows become model instances as the ORM would build them.

For hot paths where building and compiling a queryset costs several times the statement itself (submit's lookups,
`services/lookups.py`; the watch's read of a changed job, `reconcile/watching.py`): the SQL text is built once from
the models' metadata (tables, columns, quoting) and cached by the caller; rows are converted by Django's own
converters (JSON, booleans, dates, encrypted fields) and turned into instances with `Model.from_db`. Standard SQL
only: the same text runs on PostgreSQL and SQLite.
"""
from __future__ import annotations

from django.db import connections
from django.db.models.expressions import Col
from django.db.models.sql import Query


def columns(model, alias: str, names=None) -> list[Col]:
    """Columns of `model`'s fields `names` (default: every concrete field, in the model's order, which
    `Model.from_db` expects) under table alias `alias`."""
    fields = [model._meta.get_field(n) for n in names] if names else model._meta.concrete_fields
    return [Col(alias, f) for f in fields]


def select_list(db: str, cols: list[Col]) -> str:
    """The SELECT list of `cols` (`"alias"."column", ...`), quoted for database alias `db`."""
    qn = connections[db].ops.quote_name
    return ", ".join(f"{qn(c.alias)}.{qn(c.target.column)}" for c in cols)


def fetch(db: str, sql: str, params: list, cols: tuple) -> list[list]:
    """Run `sql`; return its rows with the leading `cols` converted as the ORM would (JSON, booleans, dates)."""
    connection = connections[db]
    compiler = Query(None).get_compiler(connection=connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    converters = compiler.get_converters(list(cols))
    return list(compiler.apply_converters(rows, converters)) if converters else [list(r) for r in rows]
