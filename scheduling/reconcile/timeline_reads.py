"""Reads of a job's timeline in one statement of fixed text each (`scheduling/db/statements.py`): its recorded
entries alone (`read_timeline`, what `status.write` re-reads under the row lock), or with the row's phase,
desired state and clean-up time (`read_row_and_timeline`, a pass's check for a cancel that came meanwhile)."""
from __future__ import annotations

import functools

from django.db import connections, router

from ..db.statements import columns, fetch, select_list
from ..models import GangJob, PhaseTransition


@functools.lru_cache(maxsize=8)
def _timeline_statement(alias: str) -> tuple[str, tuple]:
    """(SQL, columns) of a job's recorded entries: phase, at, attempt, inferred."""
    qn = connections[alias].ops.quote_name
    cols = tuple(columns(PhaseTransition, "t", ["phase", "at", "attempt", "inferred"]))
    return (f"SELECT {select_list(alias, list(cols))} FROM {qn(PhaseTransition._meta.db_table)} t "
            f"WHERE t.{qn(PhaseTransition._meta.get_field('job').column)} = %s"), cols


def read_timeline(job: GangJob) -> list[tuple]:
    """The job's recorded entries [(phase, at, attempt, inferred)], any order: one statement of fixed text
    (`_timeline_statement`), the values as `values_list("phase", "at", "attempt", "inferred")` gives them."""
    alias = router.db_for_read(PhaseTransition)
    sql, cols = _timeline_statement(alias)
    return [tuple(r) for r in fetch(alias, sql, [job.pk], cols)]


@functools.lru_cache(maxsize=8)
def _row_and_timeline_statement(alias: str) -> tuple[str, tuple]:
    """(SQL, columns) of a job's phase, desired_state and cleaned_up_at with its recorded entries (phase, at,
    attempt, inferred), one result row per entry (a LEFT JOIN: one row of NULL entry columns when it has none)."""
    qn = connections[alias].ops.quote_name
    cols = tuple(columns(GangJob, "j", ["phase", "desired_state", "cleaned_up_at", "cluster"])
                 + columns(PhaseTransition, "t", ["phase", "at", "attempt", "inferred"]))
    job_fk = qn(PhaseTransition._meta.get_field("job").column)
    return (f"SELECT {select_list(alias, list(cols))} FROM {qn(GangJob._meta.db_table)} j "
            f"LEFT JOIN {qn(PhaseTransition._meta.db_table)} t ON t.{job_fk} = j.{qn(GangJob._meta.pk.column)} "
            f"WHERE j.{qn(GangJob._meta.pk.column)} = %s"), cols


def read_row_and_timeline(job: GangJob) -> tuple[dict | None, list[tuple]]:
    """({"phase", "desired_state", "cleaned_up_at", "cluster_id"} of the job's row as it is now, its recorded
    entries [(phase, at, attempt, inferred)] as `read_timeline` gives them), in one statement: a pass's check for a
    cancel, an end or a move that came while its creates were in flight, and the timeline its observation reads
    next (`JobReconciler.cancelled_meanwhile`). (None, []) when the row is gone."""
    alias = router.db_for_read(GangJob)
    sql, cols = _row_and_timeline_statement(alias)
    rows = fetch(alias, sql, [job.pk], cols)
    if not rows:
        return None, []
    row = dict(zip(("phase", "desired_state", "cleaned_up_at", "cluster_id"), rows[0][:4], strict=True))
    return row, [tuple(r[4:8]) for r in rows if r[4] is not None]
