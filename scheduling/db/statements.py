"""Statements of fixed text whose rows become model instances as the ORM would build them.

For hot paths where building and compiling a queryset costs several times the statement itself (submit's lookups,
`services/jobs/lookups.py`; the watch's read of a changed job, `reconcile/watching.py`; a status write's read of
the row it locks and of the job's timeline, `reconcile/status.py`): the SQL text is built once from
the models' metadata (tables, columns, quoting) and cached by the caller; rows are converted by Django's own
converters (JSON, booleans, dates, encrypted fields) and turned into instances with `Model.from_db`. Standard SQL
only: the same text runs on PostgreSQL and SQLite.
"""
from __future__ import annotations

import functools

from django.db import DatabaseError, NotSupportedError, connections
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


def instance(db: str, model, values):
    """A `model` instance from `values` of every concrete field in the model's order (`columns(model, ...)`), built
    with `Model.from_db` as the ORM builds the rows of a queryset (not adding; `_state.db` is `db`)."""
    return model.from_db(db, [f.attname for f in model._meta.concrete_fields], values)


def joined(db: str, model, related: tuple[str, ...], key: str, lock: bool = False) -> tuple[str, tuple]:
    """(SQL, columns) of the `model` row whose field `key` equals the one parameter, joined with the rows its
    foreign keys `related` name (every concrete field of each, in `Model.from_db`'s order: `model`'s, then each
    related model's in `related`'s order). With `lock`, the `model` row alone is locked (`FOR NO KEY UPDATE OF`)
    where the database locks rows (PostgreSQL); nothing on SQLite. Raises NotSupportedError on a database that
    locks rows but lacks that clause."""
    connection = connections[db]
    qn = connection.ops.quote_name
    meta = model._meta
    targets = [meta.get_field(fk).related_model for fk in related]
    cols = columns(model, "j")
    joins = []
    for i, (fk, target) in enumerate(zip(related, targets, strict=True)):
        cols += columns(target, f"r{i}")
        joins.append(f"INNER JOIN {qn(target._meta.db_table)} r{i} "
                     f"ON r{i}.{qn(target._meta.pk.column)} = j.{qn(meta.get_field(fk).column)}")
    clause = ""
    if lock and connection.features.has_select_for_update:
        if not (connection.features.has_select_for_no_key_update and connection.features.has_select_for_update_of):
            raise NotSupportedError("a locked read needs FOR NO KEY UPDATE OF (PostgreSQL) or no row locks (SQLite)")
        clause = " FOR NO KEY UPDATE OF j"
    sql = (f"SELECT {select_list(db, cols)} FROM {qn(meta.db_table)} j {' '.join(joins)} "
           f"WHERE j.{qn(meta.get_field(key).column)} = %s{clause}")
    return sql, tuple(cols)


def joined_instance(db: str, model, related: tuple[str, ...], row: list):
    """The `model` instance of a `joined` row, each related instance set on it (`job.cluster`, ...)."""
    end = len(model._meta.concrete_fields)
    obj = instance(db, model, row[:end])
    for fk in related:
        target = model._meta.get_field(fk).related_model
        start, end = end, end + len(target._meta.concrete_fields)
        setattr(obj, fk, instance(db, target, row[start:end]))
    return obj


_CONVERTERS: dict = {}  # (connection, SQL text) -> (compiler, converters); emptied past CONVERTERS_KEPT entries
CONVERTERS_KEPT = 256


def _converters(connection, sql: str, cols: tuple) -> tuple:
    """(compiler, converters) of `cols` on one connection (a thread's): the converters are the ORM's own, bound to
    that connection's operations; working them out costs more than converting a row, so once per connection and
    statement. Keyed by the statement's text, which comes with the same columns every time (its caller builds both
    once): hashing ~80 columns would cost ~0.1 ms a call."""
    key = (connection, sql)
    found = _CONVERTERS.get(key)
    if found is None:
        if len(_CONVERTERS) >= CONVERTERS_KEPT:
            _CONVERTERS.clear()  # connections of ended threads: at most CONVERTERS_KEPT entries are kept
        compiler = Query(None).get_compiler(connection=connection)
        found = _CONVERTERS[key] = (compiler, compiler.get_converters(list(cols)))
    return found


def fetch(db: str, sql: str, params: list, cols: tuple) -> list[list]:
    """Run `sql`; return its rows with the leading `cols` converted as the ORM would (JSON, booleans, dates).
    `cols`: the columns `sql` selects, the same for the same text (their converters are cached by it)."""
    connection = connections[db]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    compiler, converters = _converters(connection, sql, cols)
    return list(compiler.apply_converters(rows, converters)) if converters else [list(r) for r in rows]


@functools.lru_cache(maxsize=256)
def _update_statement(db: str, model, names: tuple) -> tuple[str, tuple]:
    """(SQL, fields) of an UPDATE of `model`'s fields `names` by primary key."""
    qn = connections[db].ops.quote_name
    fields = tuple(model._meta.get_field(n) for n in names)
    sets = ", ".join(f"{qn(f.column)} = %s" for f in fields)
    return f"UPDATE {qn(model._meta.db_table)} SET {sets} WHERE {qn(model._meta.pk.column)} = %s", fields


def update(db: str, obj, names: list[str]) -> None:
    """Save `obj`'s fields `names` (an existing row) as `obj.save(update_fields=names)` does, values prepared the
    same way (`pre_save`: an `auto_now` field is set to now, on `obj` too; `get_db_prep_save`), without building a
    queryset or sending signals (callers: models no receiver listens to). Raises DatabaseError when no row has
    `obj`'s primary key, as `save` does."""
    connection = connections[db]
    sql, fields = _update_statement(db, type(obj), tuple(names))
    params = [f.get_db_prep_save(f.pre_save(obj, False), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, obj.pk])
        if cursor.rowcount == 0:
            raise DatabaseError("Save with update_fields did not affect any rows.")
