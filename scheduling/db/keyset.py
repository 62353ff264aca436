"""Keyset (cursor) pagination for the job lists (GET /api/v1/jobs/ and the dashboard's /jobs/): a page is "the
`size` rows after this row in the list's order", found by a range condition on the order's columns, never by
``OFFSET``. Page 5,000 costs what page 1 costs (bench/pages.py measures both at 1,000,000 jobs), where an OFFSET
reads and discards every row before the page (armada #3902 found the same on Lookout).

- The order is the list's ORDER BY (names of columns or annotations, ``-`` for descending) with ``id`` appended
  in the direction of the last key when it is not there, so every row has one place (a stable tie-breaker).
- A cursor is opaque to clients: URL-safe base64 of ``{"k": [the boundary row's key values], "d": "next"|"prev"}``
  ("next": the rows after it; "prev": the rows before it, found by reading the reversed order). "last" (no key
  values) is the list's last page, the first page of the reversed order.
- The condition "after (v1, …, vn)" is ``k1 ≥ v1 AND (k1 > v1 OR (k1 = v1 AND k2 > v2) OR …)`` (≤ / < for
  descending keys): the leading bound is one plain comparison, where an index scan on (k1, …) starts (bench/README.md
  shows the plans); the OR only drops the ties.
  NULLs sort where the database puts them (PostgreSQL: after every value; SQLite: before), so a nullable column's
  comparisons name NULL explicitly. An annotation used as a key must never be NULL (the lists' are a name through
  a required foreign key, a rank, COALESCE(phase_changed_at, created_at)): its bound stays one plain range.
- A cursor that does not decode, or does not fit the order (another number of keys), is a ValueError; the callers
  answer it as a 400 naming `cursor`.
"""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

NEXT, PREV, LAST = "next", "prev", "last"


@dataclass(frozen=True)
class Key:
    """One ORDER BY term: `name` (a column's attname or an annotation), descending or not, nullable or not."""

    name: str
    descending: bool
    nullable: bool = False
    is_datetime: bool = False


def keys_of(qs: QuerySet, order: tuple | list | None = None) -> list[Key]:
    """The keys of `order` (default: `qs`'s ORDER BY, else its model's ordering), ``id`` appended when absent.
    Raises ValueError for a term that is not a plain name (an expression)."""
    order = list(order or qs.query.order_by or qs.model._meta.ordering or ["-id"])
    keys = []
    for term in order:
        if not isinstance(term, str):
            raise ValueError(f"keyset order needs names, not {term!r}")
        name = term.lstrip("-")
        name = "id" if name == "pk" else name
        field = _field(qs.model, name)
        if field is None and name in qs.query.annotations:  # an annotation (never NULL here): its output's type
            annotated = qs.query.annotations[name].output_field
            keys.append(Key(name, term.startswith("-"), False, annotated.get_internal_type() == "DateTimeField"))
            continue
        keys.append(Key(name, term.startswith("-"), bool(field and field.null),
                        bool(field and field.get_internal_type() == "DateTimeField")))
    if not any(k.name == "id" for k in keys):
        keys.append(Key("id", keys[-1].descending if keys else True))
    return keys


def _field(model, name: str):
    for field in model._meta.concrete_fields:
        if name in (field.name, field.attname):
            return field
    return None  # an annotation


def order_by(keys: list[Key], reverse: bool = False) -> list[str]:
    """ORDER BY terms of `keys` (reversed for reading backwards)."""
    return [("-" if k.descending != reverse else "") + k.name for k in keys]


def _nulls_largest() -> bool:
    return connection.vendor == "postgresql"  # SQLite (and MySQL) sort NULL before every value


def _beyond(key: Key, value, forward: bool) -> Q:
    """Rows whose `key` comes strictly after `value` in the direction read (`forward`: the list's own order)."""
    larger = key.descending != forward  # reading towards larger values
    op = "gt" if larger else "lt"
    if value is None:
        if not key.nullable:
            return Q(pk__in=[])
        return Q(pk__in=[]) if _nulls_largest() == larger else Q(**{f"{key.name}__isnull": False})
    q = Q(**{f"{key.name}__{op}": value})
    if key.nullable and _nulls_largest() == larger:
        q |= Q(**{f"{key.name}__isnull": True})
    return q


def _equal(key: Key, value) -> Q:
    return Q(**{f"{key.name}__isnull": True}) if value is None else Q(**{key.name: value})


def after(keys: list[Key], values: list, forward: bool = True) -> Q:
    """The rows strictly after the row whose key values are `values`, in the list's order (`forward`) or in the
    reversed order."""
    ties = Q()
    either = Q(pk__in=[])
    for key, value in zip(keys, values, strict=True):
        either |= ties & _beyond(key, value, forward)
        ties &= _equal(key, value)
    first, value = keys[0], values[0]
    if value is None:
        return either
    # The leading range bound, one comparison (PostgreSQL takes `k < v OR k = v` as a filter, not as where the
    # index scan starts): what an index on the first key starts its scan from.
    larger = first.descending != forward
    bound = Q(**{f"{first.name}__{'gte' if larger else 'lte'}": value})
    if first.nullable and _nulls_largest() == larger:
        bound |= Q(**{f"{first.name}__isnull": True})
    return bound & either


def values_of(row, keys: list[Key]) -> list:
    """The key values of a fetched row (model instance with the annotations), JSON-ready."""
    out = []
    for key in keys:
        value = getattr(row, key.name) if key.name != "id" else row.pk
        out.append(value.isoformat() if isinstance(value, datetime) else value)
    return out


def encode(values: list | None, direction: str) -> str:
    raw = json.dumps({"k": values, "d": direction}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def parse(cursor: str) -> dict:
    """The {"k": values, "d": direction} a cursor made by `encode` holds, checked for its shape only (any sort
    order): what the API checks with the other query parameters, before the list is read. Raises ValueError."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise ValueError("not a cursor this list made") from exc
    if not isinstance(data, dict) or data.get("d") not in (NEXT, PREV, LAST):
        raise ValueError("not a cursor this list made")
    return data


def decode(cursor: str, keys: list[Key]) -> tuple[list | None, str]:
    """(key values or None for "last", direction) of a cursor made by `encode` for the same order.
    Raises ValueError when it is not one."""
    data = parse(cursor)
    if data["d"] == LAST:
        return None, LAST
    values = data.get("k")
    if not isinstance(values, list) or len(values) != len(keys):
        raise ValueError("the cursor belongs to another sort order")
    return [_value(key, value) for key, value in zip(keys, values, strict=True)], data["d"]


def _value(key: Key, value):
    """A cursor's value for `key`, checked: a datetime for a datetime key (UTC when it names no zone), else a
    string or a number a 64-bit column holds. Raises ValueError."""
    if value is None:
        return None
    if key.is_datetime:
        parsed = parse_datetime(str(value))  # ValueError for a well-formed but impossible date
        if parsed is None:
            raise ValueError("not a cursor this list made")
        return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError("not a cursor this list made")
    if isinstance(value, (int, float)) and not -(2**63) < value < 2**63:
        raise ValueError("not a cursor this list made")
    if key.name == "id" and not isinstance(value, int):
        raise ValueError("not a cursor this list made")
    return value


@dataclass
class Page:
    """One page: its rows in the list's order, and the cursors of its neighbours (None where there are none)."""

    rows: list
    next: str | None
    previous: str | None
    last: str | None


def page(qs: QuerySet, size: int, cursor: str | None, order: tuple | list | None = None) -> Page:
    """The page of `qs` (ordered by `order` or its own ORDER BY) that `cursor` points at (None: the first page).
    One query: `size` + 1 rows, the extra one only telling whether there is more. Raises ValueError for a bad
    cursor (see `decode`)."""
    keys = keys_of(qs, order)
    values, direction = decode(cursor, keys) if cursor else (None, NEXT)
    forward = direction == NEXT
    if values is not None:
        qs = qs.filter(after(keys, values, forward))
    rows = list(qs.order_by(*order_by(keys, reverse=not forward))[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    if not forward:
        rows.reverse()
    if not rows:
        return Page(rows, None, encode(None, LAST) if cursor else None, None)
    first, final = values_of(rows[0], keys), values_of(rows[-1], keys)
    has_next = more if forward else direction == PREV
    has_prev = (values is not None) if forward else more
    return Page(rows, encode(final, NEXT) if has_next else None, encode(first, PREV) if has_prev else None,
                encode(None, LAST) if has_next else None)


def capped_count(qs: QuerySet, cap: int) -> tuple[int, bool]:
    """(how many rows `qs` has, at most `cap`; whether there are more): ``SELECT COUNT(*) FROM (… LIMIT cap + 1)``,
    the matching ids only, unsorted. An exact COUNT(*) reads every matching row: its cost grows with the history."""
    n = qs.order_by().values("pk")[: cap + 1].count()
    return min(n, cap), n > cap
