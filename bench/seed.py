"""Fill PostgreSQL fast with realistic volumes: queue hierarchies, and jobs with their phase history.

Jobs are inserted with one ``INSERT ... SELECT FROM generate_series`` statement: the columns that vary per job
(id, name, uid, queue, phase, times) are SQL expressions, every other column takes the value Django would store for
a model instance built with its defaults. New model fields therefore need no change here. The rows are made inside
the server: nothing is built in Python nor sent over the socket, which is what COPY would still do per row (the
bulk submit's COPY, db/copy_rows.py, writes rows that exist in Python already). What costs at a million rows
is maintaining indexes and foreign keys row by row (a queued trigger per row and key, ~10 million at a year of
history): `insert_jobs(..., rebuild_indexes=True)` drops the two tables' secondary indexes, unique constraints
and foreign keys first and makes them again afterwards (an index by one sort, a key by one join), as pg_restore
does. bench/README.md ("A year of history") has the seconds measured.
"""
from __future__ import annotations

from contextlib import contextmanager

from django.db import connection, transaction

from scheduling.choices import GangPhase
from scheduling.models import GangJob, PhaseTransition, QueuePolicy
from scheduling.models.jobs import fill_requested_totals

LIFECYCLE = [GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED, GangPhase.SCHEDULED, GangPhase.RUNNING]
# Out of every 100 jobs: 70 succeeded, 6 failed, 4 cancelled, 8 running, 7 queued, 2 scheduled, 2 dispatched,
# 1 submitted: a cluster that has been busy for a while.
PHASE_MIX = ([GangPhase.SUCCEEDED] * 70 + [GangPhase.FAILED] * 6 + [GangPhase.CANCELLED] * 4
             + [GangPhase.RUNNING] * 8 + [GangPhase.QUEUED] * 7 + [GangPhase.SCHEDULED] * 2
             + [GangPhase.DISPATCHED] * 2 + [GangPhase.SUBMITTED] * 1)
# A year of history (`insert_jobs(active=N)`): the newest N jobs active in ACTIVE_MIX, the rest finished in this mix.
FINISHED_MIX = [GangPhase.SUCCEEDED] * 88 + [GangPhase.FAILED] * 7 + [GangPhase.CANCELLED] * 5
ACTIVE_MIX = ([GangPhase.RUNNING] * 40 + [GangPhase.QUEUED] * 40 + [GangPhase.SCHEDULED] * 10
              + [GangPhase.DISPATCHED] * 5 + [GangPhase.SUBMITTED] * 5)


def make_queues(count: int, prefix: str = "q", clusters=()) -> list[QueuePolicy]:
    """Create `count` queues: sqrt-ish departments at the top, the rest leaves spread under them.

    Returns the leaf queues (the ones jobs may use).
    """
    parents_n = max(1, round(count ** 0.5 / 3))
    parents = QueuePolicy.objects.bulk_create([
        QueuePolicy(name=f"{prefix}-dept-{i}", display_name=f"Department {i}", gpu_quota=64)
        for i in range(parents_n)])
    leaves = QueuePolicy.objects.bulk_create([
        QueuePolicy(name=f"{prefix}-team-{i}", parent=parents[i % parents_n], gpu_quota=4, priority=100 + i % 3)
        for i in range(count - parents_n)])
    if clusters:
        through = QueuePolicy.clusters.through
        through.objects.bulk_create([through(queuepolicy_id=q.id, cluster_id=c.id)
                                     for q in [*parents, *leaves] for c in clusters])
    analyze_tables(QueuePolicy, QueuePolicy.clusters.through)
    return leaves


def _prepped(instance, field):
    return field.get_db_prep_save(field.pre_save(instance, add=True), connection)


def insert_jobs(count: int, template_version, queues: list[QueuePolicy], cluster, user, *, prefix: str = "job",
                phases: list[str] = PHASE_MIX, spacing_seconds: float = 30.0, active: int | None = None,
                rebuild_indexes: bool = False) -> tuple[int, int]:
    """Insert `count` jobs spread round-robin over `queues`, phases cycling through `phases` (or, with `active`,
    the newest `active` jobs through ACTIVE_MIX and the rest through FINISHED_MIX), created `spacing_seconds` apart
    going back from now, each with its phase history. A finished job's cluster objects are recorded as removed an
    hour after it ended, as the retention leaves them (reconcile/retention.py). `rebuild_indexes`: drop the two
    tables' secondary indexes, unique constraints and foreign keys for the load and make them after (faster from
    about 100,000 rows; `_indexes_dropped`). Returns (first id, last id)."""
    from scheduling.services.templates import specs as template_service

    resolved = template_service.render(template_version.spec, {})
    proto = GangJob(name="x", namespace="default", template_version=template_version, queue=queues[0],
                    cluster=cluster, resolved_spec=resolved, submitted_by=user)
    fill_requested_totals([proto])  # the usage estimate's columns, as a submit fills them
    table = GangJob._meta.db_table
    with connection.cursor() as cur:
        cur.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}")
        offset = cur.fetchone()[0]
    phase_order = {p: i for i, p in enumerate(LIFECYCLE)}
    terminal_sql = "ARRAY[" + ",".join(f"'{p}'" for p in (GangPhase.SUCCEEDED, GangPhase.FAILED,
                                                          GangPhase.CANCELLED)) + "]"
    varying = {
        "id": "g + %(offset)s",
        "uid": "gen_random_uuid()",
        "name": "%(prefix)s || '-' || g",
        "queue_id": "(%(queues)s::bigint[])[1 + (g %% %(nqueues)s)]",
        "phase": PHASE_SQL,
        "created_at": "now() - make_interval(secs => g * %(spacing)s)",
        "updated_at": "now() - make_interval(secs => g * %(spacing)s) + interval '20 minutes'",
        "phase_changed_at": "now() - make_interval(secs => g * %(spacing)s) + interval '10 minutes'",
        "finished_at": f"CASE WHEN {PHASE_SQL} = ANY({terminal_sql}) THEN {ENDED_SQL} END",
        "cleaned_up_at": f"CASE WHEN {PHASE_SQL} = ANY({terminal_sql}) THEN {ENDED_SQL} END",
        "remove_after": f"CASE WHEN {PHASE_SQL} = ANY({terminal_sql}) THEN {ENDED_SQL} + interval '1 hour' END",
        "objects_removed_at": f"CASE WHEN {PHASE_SQL} = ANY({terminal_sql}) "
                              f"THEN {ENDED_SQL} + interval '1 hour' END",
    }
    if active is None:
        active, phases = 0, list(phases)
        later = phases
    else:
        phases, later = ACTIVE_MIX, FINISHED_MIX
    columns, exprs, params = [], [], {
        "offset": offset, "prefix": prefix, "queues": [q.id for q in queues], "nqueues": len(queues),
        "phases": [str(p) for p in phases], "nphases": len(phases), "spacing": spacing_seconds,
        "later": [str(p) for p in later], "nlater": len(later), "active": active,
    }
    for field in GangJob._meta.concrete_fields:
        columns.append(f'"{field.column}"')
        if field.column in varying:
            exprs.append(varying[field.column])
        else:
            key = f"f_{field.column}"
            params[key] = _prepped(proto, field)
            exprs.append(f"%({key})s")
    with transaction.atomic(), connection.cursor() as cur, _indexes_dropped(cur, rebuild_indexes):
        cur.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(exprs)} "
                    f"FROM generate_series(1, %(count)s) AS g", {**params, "count": count})
        cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))")
        _insert_history(cur, offset + 1, offset + count, phase_order)
    analyze_tables(GangJob, PhaseTransition)
    return offset + 1, offset + count


# The phase of job g: with `active`, the first `active` (newest) cycle through `phases`, the rest through `later`.
PHASE_SQL = ("(CASE WHEN g <= %(active)s THEN (%(phases)s::text[])[1 + (g %% %(nphases)s)] "
             "ELSE (%(later)s::text[])[1 + (g %% %(nlater)s)] END)")
ENDED_SQL = "(now() - make_interval(secs => g * %(spacing)s) + interval '20 minutes')"


@contextmanager
def _indexes_dropped(cur, drop: bool):
    """Inside: the jobs' and history's foreign keys, unique constraints and secondary indexes dropped (not the
    primary keys); on the way out each is made again from its saved definition, indexes first, with more sort
    memory: an index is then built by one sort, and a foreign key checked by one join, instead of row by row (a
    queued trigger per row and key, millions at a year of history). What pg_restore does."""
    if not drop:
        yield
        return
    tables = [GangJob._meta.db_table, PhaseTransition._meta.db_table]
    cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # a key cannot be dropped while checks of earlier rows wait
    cur.execute("""
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
        WHERE conrelid = ANY(%s::regclass[]) AND contype IN ('f', 'u') ORDER BY contype DESC""", [tables])
    constraints = cur.fetchall()  # unique ones first: a foreign key may need the unique index it references
    for table, name, _ in reversed(constraints):
        cur.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    cur.execute("""
        SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i
        WHERE i.indrelid = ANY(%s::regclass[]) AND NOT i.indisprimary""", [tables])
    indexes = cur.fetchall()
    for name, _ in indexes:
        cur.execute(f"DROP INDEX {name}")
    yield
    cur.execute("SET LOCAL maintenance_work_mem = '256MB'")
    for _, definition in indexes:
        cur.execute(definition)
    for table, name, definition in constraints:
        cur.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')


def _insert_history(cur, first: int, last: int, phase_order: dict) -> None:
    """Every job in [first, last] gets the lifecycle phases up to its own (Running for finished jobs), plus its
    terminal phase, a few minutes apart, as the reconciler would have recorded them (all in the first pass:
    attempt 0, the model's default, which the table itself does not fill in; times the cluster's, not inferred)."""
    jobs, history = GangJob._meta.db_table, PhaseTransition._meta.db_table
    lifecycle = ", ".join(f"('{p}', {i})" for p, i in phase_order.items())
    reached = ("CASE WHEN j.phase IN (SELECT phase FROM lc) THEN (SELECT ord FROM lc WHERE lc.phase = j.phase) "
               f"ELSE {len(LIFECYCLE) - 1} END")
    cur.execute(f"""
        WITH lc(phase, ord) AS (VALUES {lifecycle})
        INSERT INTO {history} (job_id, phase, at, recorded_at, source, reason, message, attempt, inferred)
        SELECT j.id, lc.phase, j.created_at + make_interval(secs => lc.ord * 120),
               j.created_at + make_interval(secs => lc.ord * 120 + 1), 'PodGroup default/' || j.name,
               'Seeded', '', 0, false
        FROM {jobs} j JOIN lc ON lc.ord <= {reached}
        WHERE j.id BETWEEN %s AND %s
        UNION ALL
        SELECT j.id, j.phase, j.finished_at, j.finished_at, 'gangweb', 'Seeded', '', 0, false
        FROM {jobs} j WHERE j.id BETWEEN %s AND %s AND j.finished_at IS NOT NULL
    """, [first, last, first, last])


def analyze_tables(*models) -> None:
    """ANALYZE the tables of `models` right after a bulk load (issue 14): until autovacuum gets to them, PostgreSQL
    plans from the statistics of the table before the load, possibly an empty one, and estimates 1 row for every
    scan. Plain ANALYZE (no VACUUM), so it also works inside a caller's transaction. PostgreSQL only."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cur:
        cur.execute("ANALYZE " + ", ".join(connection.ops.quote_name(m._meta.db_table) for m in models))


def analyze() -> None:
    """VACUUM ANALYZE after a bulk load: planner statistics and the visibility map, as autovacuum leaves a table
    that has been in use for a while."""
    with connection.cursor() as cur:
        cur.execute(f"VACUUM ANALYZE {GangJob._meta.db_table}, {PhaseTransition._meta.db_table}, "
                    f"{QueuePolicy._meta.db_table}")


# Ageing (issue 36): a table that has been in use is not the seed's. Rows are picked by a fixed hash of their id
# (`picked`), the same in SQL and in Python, so a test can count what an ageing must have touched.
AGE_UPDATE_SALT = 17
AGE_DELETE_SALT = 71
AGE_UPDATED_PERMILLE = 300  # 30 % of the jobs updated (status writes, clean-up records) after the indexes exist
AGE_DELETED_PERMILLE = 100  # 10 % of the finished jobs deleted (by hand, by retention) scattered over the table
_PICKED_SQL = "((id * 7919 + %s) %% 1000) < %s"  # parameters: salt, permille


def picked(job_id: int, permille: int, salt: int) -> bool:
    """Whether `age_jobs` picks job `job_id` for the ageing step of this `salt`: the hash its SQL computes,
    ((id * 7919 + salt) mod 1000) < permille, i.e. about permille / 1000 of any run of consecutive ids."""
    return (job_id * 7919 + salt) % 1000 < permille


def age_jobs(now, updated_permille: int = AGE_UPDATED_PERMILLE, deleted_permille: int = AGE_DELETED_PERMILLE) -> dict:
    """Age the jobs table after a seed, as months of use leave it: run after `insert_jobs` built the indexes and
    after `analyze` (so the statistics and visibility map are the seed's, then go stale as in production).

    - UPDATE every job `picked` with AGE_UPDATE_SALT (about `updated_permille`/1000 of them): `updated_at = now`
      (a datetime). The seed's heap pages are full (fillfactor 100), so every new row version goes to another page
      (no HOT update): the table loses its `created_at` order and every index of the table gets a dead entry per row.
    - DELETE the finished jobs `picked` with AGE_DELETE_SALT (about `deleted_permille`/1000), their phase history
      first: holes scattered over the heap and the indexes.

    No VACUUM and no ANALYZE here: what cleans up after it is autovacuum as the server is configured (the caller
    records `pg_stat_user_tables`). Works on SQLite too (tests). Returns {"updated", "deleted",
    "history_deleted"} (rows)."""
    jobs, history = GangJob._meta.db_table, PhaseTransition._meta.db_table
    doomed = f"SELECT id FROM {jobs} WHERE finished_at IS NOT NULL AND {_PICKED_SQL}"
    delete_params = [AGE_DELETE_SALT, int(deleted_permille)]
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(f"UPDATE {jobs} SET updated_at = %s WHERE {_PICKED_SQL}",
                    [now, AGE_UPDATE_SALT, int(updated_permille)])
        updated = cur.rowcount
        cur.execute(f"DELETE FROM {history} WHERE job_id IN ({doomed})", delete_params)
        history_deleted = cur.rowcount
        cur.execute(f"DELETE FROM {jobs} WHERE id IN ({doomed})", delete_params)
        deleted = cur.rowcount
    return {"updated": updated, "deleted": deleted, "history_deleted": history_deleted}
