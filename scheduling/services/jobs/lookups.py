"""What a submit names, loaded once per request: template versions, queues with their ancestors, clusters.

Two statements whatever the number of bodies (a bulk of 5,000 costs what a single submit does):

1. the versions of the named templates, with their templates (the specs come from the process cache in
   `templates.version_specs`: versions are immutable);
2. the named queues, each with three levels of parents, whether it has children, whether it names clusters at
   all, and for each named cluster (up to FOLDED_CLUSTERS) that cluster's submit-warning view
   (`cluster_warnings.VIEW_FIELDS`: id, name, capacity, class lists, health; never credentials), whether the queue
   targets it, and its KAI and Volcano queue objects' sync problems there (the `queue_not_in_sync` warning).
   A submit's warnings thus cost no statement of their own; a request naming more clusters reads the views and
   the sync problems in one statement each, on first use.

What a queue holds in a cluster (`queue_allocation.Allocations`: the KAI or Volcano Queue status, else gangweb's
count of its running jobs) is read only when the queue or an ancestor has a finite limit, on first use, one
statement per source: `queue_limits.check_job_limits` reads it for nothing else.

Why SQL text rather than querysets: submit is CPU-bound on the web workers (bench/README.md). Building and
compiling the equivalent querysets (three `select_related` levels, four subquery annotations) cost ~5 ms of Python
per submit, ten times the statements' own cost. The text is built from the models' metadata (tables, columns,
quoting) and cached per shape; rows are converted by Django's own converters and built with `Model.from_db`, so
the instances are what the ORM would have returned. Standard SQL only (EXISTS, scalar subqueries, LEFT JOIN): the
same text runs on PostgreSQL and SQLite.
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import connections, router

from ...choices import SyncState
from ...constants import GPU_RESOURCE
from ...db.statements import columns, fetch, select_list
from ...kube import resources
from ...kube.kai_units import RESOURCES
from ...models import Cluster, QueueClusterState, QueuePolicy, RuntimeTemplate, RuntimeTemplateVersion
from ...models.jobs import requested_totals
from ...podspec import rules as pod_rules
from ..clusters import warnings as cluster_warnings
from ..clusters.warnings import VIEW_FIELDS
from ..queues import limits as queue_limits
from ..queues import policies as queue_service
from ..queues.allocation import Allocations
from ..templates import specs as template_service

# A request naming at most this many distinct clusters looks them up (and the queues' links to them) inside the
# queue statement; more (a bulk spread over many clusters) costs two more queries instead.
FOLDED_CLUSTERS = 8
PARENT_LEVELS = 3  # parents that come with a queue; deeper trees cost one query per further level
_VERSION_FIELDS = ("id", "template_id", "version", "created_at", "retired_at")  # spec from the cache
# The submit-warning view of a cluster, in the model's field order (`Model.from_db` reads values in that order).
_VIEW_FIELDS = tuple(f.attname for f in Cluster._meta.concrete_fields if f.attname in VIEW_FIELDS)


@dataclass
class Lookups:
    """Templates, queues and clusters by name (see the module docstring for what is loaded and how)."""

    versions: dict[tuple[str, int], RuntimeTemplateVersion] = field(default_factory=dict)
    latest: dict[str, RuntimeTemplateVersion] = field(default_factory=dict)
    queues: dict[str, QueuePolicy] = field(default_factory=dict)
    parents: set[int] = field(default_factory=set)  # queues with children (they take no jobs)
    clusters: dict[str, Cluster] = field(default_factory=dict)  # only id and name loaded (no credentials)
    targeting: set[int] = field(default_factory=set)  # queues that name clusters (the others take every cluster)
    queue_clusters: dict[int, set[int]] = field(default_factory=dict)  # queue id -> ids of named clusters it targets
    tree: queue_service.QueueTree | None = None  # the named queues and their ancestors, for the limit checks
    allocations: Allocations = field(default_factory=lambda: Allocations(set(), set()))  # for the limit checks
    rendered: dict[tuple[int, str], dict] = field(default_factory=dict)
    limits: dict[tuple, list[dict]] = field(default_factory=dict)
    sync_problems: dict[tuple[str, int, int], tuple[str, str]] | None = None  # (family, queue, cluster) -> state
    views: dict[int, Cluster] | None = None  # cluster id -> cluster_warnings view, loaded at first use
    placing: bool = False  # some body names no cluster, or several: every cluster and the queues' links are loaded
    numbers: object | None = None  # placement.numbers.Numbers, at the first placement (placing.place)

    def placement_numbers(self):
        """The placement numbers of every cluster loaded (one statement, at the first placement of the request)."""
        if self.numbers is None:
            from .placing import load_numbers

            self.numbers = load_numbers(list(self.clusters.values()))
        return self.numbers

    def render(self, version: RuntimeTemplateVersion, overrides) -> dict:
        """The resolved spec of `version` with `overrides`, rendered once per distinct pair (the pod-spec policy
        depends on the queue too: `check_limits` applies it).

        Bulk submits usually repeat the same overrides; jobs that do share one resolved-spec dict, which nothing
        mutates before it is saved. Raises what `templates.render` raises.
        """
        return self._render(version, overrides)[0]

    def _render(self, version, overrides) -> tuple[dict, tuple | None]:
        try:
            key = (version.id, json.dumps(overrides, sort_keys=True))
        except (TypeError, ValueError):  # not JSON: let render name the field
            key = None
        if key is not None and key in self.rendered:
            return self.rendered[key], key
        resolved = template_service.render(version.spec, overrides)
        check_storable_totals(resolved, overrides)
        if key is not None:
            self.rendered[key] = resolved
        return resolved, key

    def check_limits(self, queue: QueuePolicy, cluster: Cluster, version, overrides) -> tuple[dict, list[dict]]:
        """(resolved spec, limit warnings) of one job: `render`, the pod-spec policy of the template in `queue`
        (`pod_rules.check_job_spec`) and `queue_limits.check_job_limits`, each computed once per distinct (version,
        overrides, queue, cluster) in a request. Raises what they raise."""
        resolved, key = self._render(version, overrides)
        limit_key = (key, queue.id, cluster.id) if key is not None else None
        if limit_key is not None and limit_key in self.limits:
            return resolved, [dict(w) for w in self.limits[limit_key]]
        pod_rules.check_job_spec(resolved, version.template, queue, self.tree)
        warnings = queue_limits.check_job_limits(queue, cluster, resolved, self.tree, self.allocations)
        if limit_key is not None:
            self.limits[limit_key] = warnings
        return resolved, [dict(w) for w in warnings]

    def queue_sync_warnings(self, queue: QueuePolicy, cluster: Cluster, family: str) -> list[dict]:
        """The submit warning when the job's queue object is not in sync in its cluster: the KAI Queue for the
        "kai" family, the Volcano Queue for "volcano", the Kueue ClusterQueue for "kueue" (QueueClusterState rows of
        that family), in state Error or Pending; other families have no queue object.
        ``[{"code": "queue_not_in_sync", "field": "queue", "queue", "cluster", "state", "message"}]`` or []. The job
        is accepted (the sync retries, the job waits for the queue): a warning, not a refusal. One statement per
        request, on first use."""
        if family not in QUEUE_STATE_FAMILIES:
            return []
        if self.sync_problems is None:
            self.sync_problems = load_sync_problems([q.id for q in self.queues.values()],
                                                    [c.id for c in self.clusters.values()])
        problem = self.sync_problems.get((family, queue.id, cluster.id))
        if problem is None:
            return []
        state, detail = problem
        kind = QUEUE_OBJECT_WORDS[family]
        why = f": {detail[:300]}" if detail else ""
        return [{"code": QUEUE_NOT_IN_SYNC, "field": "queue", "queue": queue.name, "cluster": cluster.name,
                 "state": state,
                 "message": f"queue '{queue.name}' is not in sync in cluster {cluster.name}: its {kind} is {state}"
                            f"{why}. The job is accepted and waits until the queue sync puts the queue in place "
                            f"(see the queue's sync state)."}]

    def cluster_view(self, cluster: Cluster) -> Cluster | None:
        """What gangweb knows of `cluster` for the submit warnings (`cluster_warnings.views`), loaded once for all
        the clusters of these lookups."""
        if self.views is None:
            self.views = cluster_warnings.views([c.id for c in self.clusters.values()] or [cluster.id])
        return self.views.get(cluster.id)

    def takes(self, queue: QueuePolicy, cluster: Cluster) -> bool:
        """True when `queue` takes jobs on `cluster` (one of the clusters these lookups were loaded for): it names
        that cluster, or names none (every cluster)."""
        return queue.id not in self.targeting or cluster.id in self.queue_clusters.get(queue.id, ())

    @classmethod
    def load(cls, items: list[dict]) -> Lookups:
        """Load everything the submit bodies name (`items`: decoded bodies; anything not a dict is skipped)."""
        def names(key):
            return sorted({i.get(key) for i in items if isinstance(i, dict) and isinstance(i.get(key), str)})

        lk = cls()
        lk._load_versions(items, names("template"))
        lk._load_queues(names("queue"), names("cluster"))
        if any(isinstance(i, dict) and not isinstance(i.get("cluster"), str) for i in items):
            lk._load_placement()
        lk.tree = queue_service.QueueTree.load(with_ancestors(lk.queues.values()))
        # Usage only matters against a finite limit (check_job_limits skips unlimited ones): read it for those.
        limited = {a.id for q in lk.queues.values() for a in [q, *lk.tree.ancestors(lk.tree.by_id.get(q.id, q))]
                   if any(not queue_service.unlimited(getattr(a, f"{r}_limit")) for r in RESOURCES)}
        if limited and lk.clusters:
            lk.allocations = Allocations(limited, {c.id for c in lk.clusters.values()},
                                         parents={q.id: q.parent_id for q in lk.tree.by_id.values()})
        return lk

    def _load_placement(self) -> None:
        """For bodies that leave the cluster to gangweb: every cluster (the submit-warning view and what placement
        reads; never credentials) and every cluster link of the named queues. Two statements."""
        self.placing = True
        from ...placement.numbers import FIELDS

        fields = sorted(set(_VIEW_FIELDS) | set(FIELDS))
        self.views = {} if self.views is None else self.views
        for cluster in Cluster.objects.only(*fields).order_by("name"):
            self.clusters[cluster.name] = cluster  # with every field placement reads
            self.views[cluster.id] = cluster
        if self.queues:
            for qid, cid in QueuePolicy.clusters.through.objects.filter(
                    queuepolicy_id__in=[q.id for q in self.queues.values()]).values_list("queuepolicy_id",
                                                                                        "cluster_id"):
                self.queue_clusters.setdefault(qid, set()).add(cid)

    def _load_versions(self, items: list[dict], template_names: list[str]) -> None:
        if not template_names:
            return
        db = router.db_for_read(RuntimeTemplateVersion)
        sql, tables = _versions_sql(db, len(template_names))
        rows = fetch(db, sql, template_names, tables)
        template_attnames = [f.attname for f in RuntimeTemplate._meta.concrete_fields]
        version_cache = RuntimeTemplateVersion._meta.get_field("template")
        templates: dict[int, RuntimeTemplate] = {}
        n = len(_VERSION_FIELDS)
        for row in rows:
            ver = RuntimeTemplateVersion.from_db(db, _VERSION_FIELDS, row[:n])
            template = templates.get(row[n])
            if template is None:
                template = templates[row[n]] = RuntimeTemplate.from_db(db, template_attnames, row[n:])
            version_cache.set_cached_value(ver, template)
            self.versions[(template.name, ver.version)] = ver
            if template.name not in self.latest or ver.version > self.latest[template.name].version:
                self.latest[template.name] = ver
        used = {id(v): v for v in self.latest.values()}
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("template_version"), int):
                ver = self.versions.get((item.get("template"), item["template_version"]))
                if ver is not None:
                    used[id(ver)] = ver
        specs = template_service.version_specs((v.id, v.created_at) for v in used.values())
        for ver in used.values():
            if (ver.id, ver.created_at) in specs:
                ver.spec = specs[(ver.id, ver.created_at)]

    def _load_queues(self, queue_names: list[str], cluster_names: list[str]) -> None:
        if not queue_names:
            return
        db = router.db_for_read(QueuePolicy)
        folded = cluster_names if len(cluster_names) <= FOLDED_CLUSTERS else []
        sql, tables = _queues_sql(db, len(queue_names), len(folded))
        bad = [SyncState.ERROR, SyncState.PENDING]
        params = [*bad * len(QUEUE_STATE_FAMILIES) * len(folded), *folded, *queue_names]
        attnames = [f.attname for f in QueuePolicy._meta.concrete_fields]
        n = len(attnames)
        parent_field = QueuePolicy._meta.get_field("parent")
        for row in fetch(db, sql, params, tables):
            chain = [QueuePolicy.from_db(db, attnames, row[i * n:(i + 1) * n])
                     for i in range(PARENT_LEVELS + 1) if row[i * n] is not None]
            for child, parent in zip(chain, chain[1:], strict=False):
                parent_field.set_cached_value(child, parent)
            queue = chain[0]
            self.queues[queue.name] = queue
            at = (PARENT_LEVELS + 1) * n
            width = len(_VIEW_FIELDS)
            views = [row[at + i * width:at + (i + 1) * width] for i in range(len(folded))]
            has_children, has_targets, *per_cluster = row[at + len(folded) * width:]
            if has_children:
                self.parents.add(queue.id)
            if has_targets:
                self.targeting.add(queue.id)
            # Every row carries the same clusters. With no queue found there are none, and no cluster is needed:
            # each body is refused for its queue before its cluster is looked at.
            if folded:  # the views and sync problems of every named cluster came with this statement
                self.sync_problems = {} if self.sync_problems is None else self.sync_problems
                self.views = {} if self.views is None else self.views
            per_view = zip(*[iter(per_cluster)] * (1 + len(QUEUE_STATE_FAMILIES)), strict=True)
            for view, (linked, *problems) in zip(views, per_view, strict=True):
                cid = view[_VIEW_FIELDS.index("id")]
                if cid is None:
                    continue
                if cid not in self.views:
                    self.views[cid] = Cluster.from_db(db, _VIEW_FIELDS, view)
                    self.clusters[self.views[cid].name] = self.views[cid]
                if linked:
                    self.queue_clusters.setdefault(queue.id, set()).add(cid)
                for family, problem in zip(QUEUE_STATE_FAMILIES, problems, strict=True):
                    if problem:
                        state, _, detail = problem.partition(":")
                        self.sync_problems[(family, queue.id, cid)] = (state, detail)
        if cluster_names and not folded:
            self.clusters = {c.name: c for c in Cluster.objects.filter(name__in=cluster_names).order_by().only(
                "id", "name")}
            for qid, cid in QueuePolicy.clusters.through.objects.filter(
                    queuepolicy_id__in=[q.id for q in self.queues.values()],
                    cluster_id__in=[c.id for c in self.clusters.values()]).values_list("queuepolicy_id", "cluster_id"):
                self.queue_clusters.setdefault(qid, set()).add(cid)


QUEUE_NOT_IN_SYNC = "queue_not_in_sync"
# Backend families whose scheduler needs a queue object in the cluster (each is also a QueueFamily value).
QUEUE_STATE_FAMILIES = ("kai", "volcano", "kueue")
QUEUE_OBJECT_WORDS = {"kai": "KAI Queue", "volcano": "Volcano Queue", "kueue": "Kueue ClusterQueue"}


def load_sync_problems(queue_ids: list[int], cluster_ids: list[int]) -> dict[tuple[str, int, int], tuple[str, str]]:
    """{(family, queue id, cluster id): (state, message)} for the KAI and Volcano queue objects of those queues in
    those clusters whose sync state is Error or Pending (one statement)."""
    if not queue_ids or not cluster_ids:
        return {}
    bad = [SyncState.ERROR, SyncState.PENDING]
    rows = QueueClusterState.objects.filter(policy_id__in=queue_ids, cluster_id__in=cluster_ids, state__in=bad,
                                            family__in=QUEUE_STATE_FAMILIES).values_list(
        "family", "policy_id", "cluster_id", "state", "message").order_by()
    return {(family, pid, cid): (state, message or "") for family, pid, cid, state, message in rows}


# The requested-total columns (GangJob.requested_*): BigIntegerField is a signed 64-bit integer in every database.
BIGINT_MAX = 2**63 - 1
TOTAL_COLUMNS = (("cpu", "CPU millicores", 1), ("memory", "memory bytes", 2))


def check_storable_totals(resolved: dict, overrides, field: str = "overrides") -> None:
    """Raise ValidationError naming the field when the gang's requested totals (`models.jobs.requested_totals`:
    CPU millicores, memory bytes; GPUs must be finite) do not fit the job's 64-bit columns, e.g. cpu
    "9000000000000000" × 3 replicas or memory "8Pi" × 1,200: the insert would fail with a 500 (issue 15). The
    field is the override that set the amount (`overrides.podSets.worker.resources.cpu`), else the pod set's
    `replicas` override, else `template` (the template's own amounts)."""
    totals = requested_totals(resolved)
    if math.isfinite(totals[0]) and all(totals[i] <= BIGINT_MAX for _r, _u, i in TOTAL_COLUMNS):
        return
    over = [(r, unit) for r, unit, i in TOTAL_COLUMNS if totals[i] > BIGINT_MAX] or [(GPU_RESOURCE, "GPUs")]
    resource, unit = over[0]
    # The pod set that asks for the most of it is the one to name.
    biggest, amount = None, Decimal(-1)
    for ps, one in zip(resolved.get("podSets") or [], resources.per_pod(resolved.get("podSets") or []), strict=True):
        share = one.get(resource, Decimal(0)) * ps.get("replicas", 0)
        if share > amount:
            biggest, amount = ps.get("name"), share
    given = ((overrides or {}).get("podSets") or {}).get(biggest) if isinstance(overrides, dict) else None
    given = given if isinstance(given, dict) else {}
    if resource in (given.get("resources") or {}):
        where = f"{field}.podSets.{biggest}.resources.{resource}"
    elif "replicas" in given:
        where = f"{field}.podSets.{biggest}.replicas"
    else:
        where = "template"
    raise ValidationError({where: f"the gang would request more {unit} in all than gangweb can record (at most "
                                  f"{BIGINT_MAX}); ask for less"})


def with_ancestors(queues) -> list[QueuePolicy]:
    """`queues` plus every ancestor: those already loaded with them, then one query per further tree level
    (never every queue: a submit must not cost more as the number of queues grows)."""
    by_id = {q.id: q for q in queues}
    parent_field = QueuePolicy._meta.get_field("parent")
    todo = list(by_id.values())
    while todo:  # parents loaded with the queue
        q = todo.pop()
        if q.parent_id is not None and parent_field.is_cached(q) and q.parent_id not in by_id:
            by_id[q.parent_id] = q.parent
            todo.append(q.parent)
    missing = {q.parent_id for q in by_id.values()} - set(by_id) - {None}
    while missing:
        for parent in QueuePolicy.objects.filter(id__in=missing).order_by():
            by_id[parent.id] = parent
        missing = {q.parent_id for q in by_id.values()} - set(by_id) - {None}
    return list(by_id.values())


# --- statements ---------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _versions_sql(db: str, n_templates: int) -> tuple[str, tuple]:
    """(SQL, columns) of the versions of `n_templates` named templates: version fields, then template fields."""
    qn = connections[db].ops.quote_name
    v, t = RuntimeTemplateVersion._meta, RuntimeTemplate._meta
    cols = columns(RuntimeTemplateVersion, "v", _VERSION_FIELDS) + columns(RuntimeTemplate, "t")
    sql = (f"SELECT {select_list(db, cols)} FROM {qn(v.db_table)} v INNER JOIN {qn(t.db_table)} t "
           f"ON t.{qn(t.pk.column)} = v.{qn(v.get_field('template').column)} "
           f"WHERE t.{qn(t.get_field('name').column)} IN ({', '.join(['%s'] * n_templates)})")
    return sql, tuple(cols)


@functools.lru_cache(maxsize=64)
def _queues_sql(db: str, n_queues: int, n_clusters: int) -> tuple[str, tuple]:
    """(SQL, columns) of `n_queues` named queues: the queue's fields and those of PARENT_LEVELS parents (NULLs
    where the chain ends), per named cluster its `cluster_warnings.VIEW_FIELDS` (NULLs when no such cluster),
    has-children, has-targets, then per named cluster whether the queue targets it and its KAI and Volcano queue
    objects' sync problem there ("<state>:<message>" when Error or Pending, else NULL). Parameters: the two bad
    states per family per cluster, the cluster names, then the queue names."""
    qn = connections[db].ops.quote_name
    q, c = QueuePolicy._meta, Cluster._meta
    link = QueuePolicy.clusters.through._meta
    pk, parent, name = qn(q.pk.column), qn(q.get_field("parent").column), qn(q.get_field("name").column)
    link_queue, link_cluster = qn(link.get_field("queuepolicy").column), qn(link.get_field("cluster").column)
    aliases = ["q", *(f"p{i}" for i in range(1, PARENT_LEVELS + 1))]
    cols = [col for a in aliases for col in columns(QueuePolicy, a)]
    cols += [col for i in range(n_clusters) for col in columns(Cluster, f"c{i}", _VIEW_FIELDS)]
    joins = " ".join(f"LEFT OUTER JOIN {qn(q.db_table)} {a} ON {a}.{pk} = {prev}.{parent}"
                     for prev, a in zip(aliases, aliases[1:], strict=False))
    joins += "".join(f" LEFT OUTER JOIN {qn(c.db_table)} c{i} ON c{i}.{qn(c.get_field('name').column)} = %s"
                     for i in range(n_clusters))
    extra = [f"EXISTS (SELECT 1 FROM {qn(q.db_table)} ch WHERE ch.{parent} = q.{pk})",
             f"EXISTS (SELECT 1 FROM {qn(link.db_table)} l WHERE l.{link_queue} = q.{pk})"]
    for i in range(n_clusters):
        extra.append(f"EXISTS (SELECT 1 FROM {qn(link.db_table)} l WHERE l.{link_queue} = q.{pk} "
                     f"AND l.{link_cluster} = c{i}.{qn(c.pk.column)})")
        m = QueueClusterState._meta
        for family in QUEUE_STATE_FAMILIES:  # our own constants, not input: written into the statement
            extra.append(f"(SELECT s.{qn(m.get_field('state').column)} || ':' || s.{qn(m.get_field('message').column)} "
                         f"FROM {qn(m.db_table)} s WHERE s.{qn(m.get_field('policy').column)} = q.{pk} "
                         f"AND s.{qn(m.get_field('cluster').column)} = c{i}.{qn(c.pk.column)} "
                         f"AND s.{qn(m.get_field('family').column)} = '{family}' "
                         f"AND s.{qn(m.get_field('state').column)} IN (%s, %s))")
    sql = (f"SELECT {select_list(db, cols)}, {', '.join(extra)} FROM {qn(q.db_table)} q {joins} "
           f"WHERE q.{name} IN ({', '.join(['%s'] * n_queues)})")
    return sql, tuple(cols)
