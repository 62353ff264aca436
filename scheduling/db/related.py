"""Columns of related rows read by correlated scalar subqueries instead of joins: a stand-in for
`select_related(...).only(...)` whose plan does not depend on the planner's row estimates (issue 14).

With statistics that say a table is empty (an ANALYZE before a bulk load or restore, or a test's rows inside its own
transaction), PostgreSQL estimates 1 row for every scan, an index scan without conditions costs it as little as an
index lookup, and it joins a list's relations by nested loops that scan the whole inner table for every outer row
(a join *filter*): quadratic, 1.5 s for the 1,001-job list of tests/dashboard/test_query_budgets.py, minutes when
such loops nest. A scalar subquery ``(SELECT name FROM queue WHERE id = job.queue_id)`` leaves it no such choice:
it is planned on its own as a lookup of one key (an ``Index Cond`` on the primary key), run once per row returned,
and cheap whatever the estimates. Standard SQL, the same on SQLite.

`annotate(qs, spec)` adds the subqueries; `attach(objects, spec)` turns their values into the related instances
Django would have built, with every other field deferred (reading one costs a query, as after `.only()`), cached
on the objects, so templates and serializers read ``job.queue.name`` as before.

`spec` maps relation paths from the queryset's model to the fields wanted on that relation, parents before
children: ``{"queue": ["name"], "template_version": ["version"], "template_version__template": ["name"]}``.
"""
from __future__ import annotations

from collections.abc import Iterable

from django.db import models
from django.db.models import OuterRef, Subquery

ALIAS_PREFIX = "rel_"
# What the job lists (dashboard and API) show of a job's relations.
JOB_LIST_RELATED = {"queue": ["name"], "cluster": ["name"], "template_version": ["version"],
                    "template_version__template": ["name"], "submitted_by": ["username"]}


def alias(path: str, field: str) -> str:
    """The annotation holding `field` of the relation at `path`: ``rel_template_version_template_name``."""
    return f"{ALIAS_PREFIX}{path.replace('__', '_')}_{field}"


def _hops(model, spec: dict[str, list[str]]):
    """[(path, parent path or None, the ForeignKey, related model, attnames wanted)] in spec order; a relation's
    attnames include the foreign keys its children in `spec` follow."""
    out = []
    targets = {}
    for path in spec:
        parent, _, name = path.rpartition("__")
        owner = targets[parent] if parent else model
        fk = owner._meta.get_field(name)
        if not isinstance(fk, models.ForeignKey):
            raise ValueError(f"{path}: not a foreign key of {owner.__name__}")
        targets[path] = fk.related_model
        out.append([path, parent or None, fk, fk.related_model, [fk.related_model._meta.get_field(f).attname
                                                               for f in spec[path]]])
    for hop in out:
        for child in out:
            if child[1] == hop[0] and child[2].attname not in hop[4]:
                hop[4].append(child[2].attname)
    return out


def annotate(qs: models.QuerySet, spec: dict[str, list[str]]) -> models.QuerySet:
    """`qs` with one scalar subquery per field in `spec`, named by `alias`. Each looks up one row of the related
    table by primary key, from the outer row's foreign key or from its parent's subquery for deeper paths."""
    for path, parent, fk, related, attnames in _hops(qs.model, spec):
        key = OuterRef(fk.attname) if parent is None else OuterRef(alias(parent, fk.attname))
        rows = related._base_manager.filter(pk=key).order_by()
        qs = qs.annotate(**{alias(path, a): Subquery(rows.values(a)[:1]) for a in attnames})
    return qs


def key_of(model, **unique) -> Subquery:
    """The primary key of the `model` row matching a unique lookup (``name="local"``), as a scalar subquery:
    PostgreSQL runs it once (an InitPlan) and filters by the key it returns, where a join on the lookup could be a
    nested loop over the whole table; NULL, which matches nothing, when there is no such row."""
    return Subquery(model._base_manager.filter(**unique).order_by().values("pk")[:1])


def attach(objects: Iterable[models.Model], spec: dict[str, list[str]]) -> list[models.Model]:
    """Build the related instances of every object from `annotate`'s values and cache them on the foreign keys
    (``job.queue``, ``job.template_version.template``); a null foreign key caches None. Returns the objects as a
    list. No queries."""
    objects = list(objects)
    hops = _hops(type(objects[0]), spec) if objects else []
    for obj in objects:
        built = {}
        for path, parent, fk, related, attnames in hops:
            owner = obj if parent is None else built[parent]
            key = fk.value_from_object(owner) if parent is None else getattr(obj, alias(parent, fk.attname))
            if owner is None or key is None:
                built[path] = None
                if owner is not None:
                    fk.set_cached_value(owner, None)
                continue
            pk = related._meta.pk.attname
            given = {pk: key, **{a: getattr(obj, alias(path, a)) for a in attnames if a != pk}}
            # Model.from_db fills a partial row in the model's field order, whatever the order of the names given.
            names = [f.attname for f in related._meta.concrete_fields if f.attname in given]
            instance = related.from_db(obj._state.db, names, [given[n] for n in names])
            fk.set_cached_value(owner, instance)
            built[path] = instance
    return objects
