"""Insert many new rows of one model with PostgreSQL's COPY (binary), elsewhere with ``bulk_create``.

Why: Django 5.2's ``bulk_create`` on PostgreSQL sends one ``INSERT ... SELECT * FROM UNNEST(...)`` whose arrays
psycopg writes as *text* literals, escaping every JSON value's quotes with a regex; for a 500-job bulk submit that
was a third of the request's CPU (bench/README.md). ``COPY ... FROM STDIN (FORMAT BINARY)`` with the column types
set (psycopg 3 ``Copy.set_types``) sends each value in its binary form: JSON goes as jsonb with no escaping.

Semantics follow ``bulk_create`` (https://docs.djangoproject.com/en/5.2/ref/models/querysets/#bulk-create):

- every concrete field is written (``Model._meta.concrete_fields``, so a column added later is included
  without touching this module), its value prepared by ``field.pre_save(obj, add=True)`` (``auto_now`` /
  ``auto_now_add`` are set on the object, as ``save()`` would) and ``field.get_db_prep_save``;
- with ``need_pk`` (the default) primary keys are allocated first with one
  ``SELECT nextval(<the pk's sequence>) FROM generate_series(1, n)`` and set on the objects; without it the pk
  column is left to its default and the objects keep ``pk=None`` (for rows nobody reads back in this request);
- a constraint violation raises ``django.db.IntegrityError`` (psycopg's error is translated like any query's),
  inside the caller's transaction, so ``transaction.atomic`` rolls everything back;
- no signals are sent and ``save()`` is not called, as with ``bulk_create``.

The COPY is logged in ``connection.queries`` like a query (so query budgets in tests count it).
"""
from __future__ import annotations

import time
import uuid
from datetime import datetime

from django.db import connections, models, router


def insert_rows(model, objs: list, *, need_pk: bool = True, using: str | None = None) -> list:
    """Insert `objs` (unsaved instances of `model`) and return them. PostgreSQL: COPY; other databases:
    ``bulk_create``. Raises django.db.IntegrityError on a constraint violation (nothing of this call is kept
    once the caller's transaction rolls back)."""
    if not objs:
        return objs
    alias = using or router.db_for_write(model)
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return model.objects.using(alias).bulk_create(objs)
    fields = copy_fields(model, need_pk)
    if need_pk:
        _allocate_pks(connection, model, objs)
    rows = _rows(objs, fields, connection)
    _copy(connection, model, fields, rows)
    for obj in objs:
        obj._state.adding = False
        obj._state.db = alias
    return objs


def new_instances(model, rows: list[dict]) -> list:
    """Unsaved instances of `model` from {attname: value} dicts, built positionally (the path ``Model.from_db``
    takes: ~7 us instead of ~60 us each for keyword init). A field missing from a dict gets its default, as keyword
    init gives it. Raises TypeError naming an attname that is not a concrete field's."""
    fields = model._meta.concrete_fields
    attnames = {f.attname for f in fields}
    objs = []
    for values in rows:
        if not values.keys() <= attnames:
            raise TypeError(f"{model.__name__} has no field(s) {sorted(values.keys() - attnames)}")
        objs.append(model(*[values[f.attname] if f.attname in values else f.get_default() for f in fields]))
    return objs


def copy_fields(model, need_pk: bool = True) -> list:
    """The fields written by the COPY: every concrete field of `model`, the pk too when `need_pk`."""
    return [f for f in model._meta.concrete_fields if need_pk or not f.primary_key]


# Field classes (exact: a subclass such as an encrypted text field may transform its value) whose
# get_db_prep_save returns a value of these exact types unchanged on PostgreSQL; preparing 30 fields x 500 rows
# through Django's generic path was most of this module's CPU. Any other value takes the generic path.
_NONE = type(None)
_INTS = (int, _NONE)
_PASS_THROUGH = {
    models.CharField: (str, _NONE), models.TextField: (str, _NONE), models.BooleanField: (bool, _NONE),
    models.UUIDField: (uuid.UUID, _NONE),
    **dict.fromkeys((models.IntegerField, models.BigIntegerField, models.SmallIntegerField,
                     models.PositiveIntegerField, models.PositiveBigIntegerField, models.PositiveSmallIntegerField,
                     models.AutoField, models.BigAutoField, models.SmallAutoField), _INTS),
}


def _pass_through(field) -> tuple:
    """The exact value types `field` writes unchanged (empty: always prepare). A foreign key: its target's."""
    if type(field) is models.ForeignKey:
        return _pass_through(field.target_field)
    if type(field) is models.DateTimeField:
        return (_NONE,)  # an aware datetime also passes: checked in _rows (a naive one gets Django's warning)
    return _PASS_THROUGH.get(type(field), ())


def _rows(objs: list, fields: list, connection) -> list[list]:
    """Each object's values in `fields` order, as get_db_prep_save(pre_save(obj, add=True)) would give them."""
    plan = [(f, f.attname, type(f).pre_save is not models.Field.pre_save, _pass_through(f),
             type(f) is models.DateTimeField) for f in fields]
    rows = []
    for obj in objs:
        row = []
        for field, attname, pre_save, fast, is_datetime in plan:
            value = field.pre_save(obj, True) if pre_save else getattr(obj, attname)
            if type(value) in fast or (is_datetime and type(value) is datetime and value.tzinfo is not None):
                row.append(value)
            else:
                row.append(field.get_db_prep_save(value, connection))
        rows.append(row)
    return rows


def _allocate_pks(connection, model, objs: list) -> None:
    pk = model._meta.pk
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                       [connection.ops.quote_name(model._meta.db_table), pk.column, len(objs)])
        ids = sorted(row[0] for row in cursor.fetchall())
    for obj, pk_value in zip(objs, ids, strict=True):
        setattr(obj, pk.attname, pk_value)


def _copy(connection, model, fields: list, rows: list[list]) -> None:
    quote = connection.ops.quote_name
    statement = (f"COPY {quote(model._meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
                 "FROM STDIN (FORMAT BINARY)")
    types = [_type_name(f, connection) for f in fields]
    start = time.monotonic()
    with connection.cursor() as cursor, connection.wrap_database_errors:
        with cursor.cursor.copy(statement) as copy:
            copy.set_types(types)
            for row in rows:
                copy.write_row(row)
    if connection.queries_logged:
        connection.queries_log.append({"sql": f"{statement} -- {len(rows)} rows",
                                       "time": f"{time.monotonic() - start:.3f}"})


def _type_name(field, connection) -> str:
    """The PostgreSQL type name psycopg knows for `field`'s column: its db_type without a length or precision
    ("varchar(63)" -> "varchar", "timestamp with time zone" as is; a foreign key has its target's type)."""
    db_type = field.db_type(connection)
    return db_type.split("(", 1)[0].strip()
