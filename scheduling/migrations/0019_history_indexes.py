"""Indexes for a year of history (issue 23): each job list's order as (key, id), for keyset pages (time in phase
as COALESCE(phase_changed_at, created_at), not phase_changed_at alone: under empty-table statistics the planner
took a bare (phase_changed_at, id) index for the overview's phase-filtered lists, losing their index condition on
phase, tests/dashboard/test_stale_statistics.py); a queue's jobs
newest first; active jobs newest first (partial); on PostgreSQL a trigram index for the name search
(`?name=` / `?q=`, `UPPER(name) LIKE '%…%'`). bench/README.md shows the plans at 1,000,000 jobs.

Not atomic, so that on PostgreSQL each index is built with CREATE INDEX CONCURRENTLY: a live jobs table keeps
taking submits and status writes while they build (minutes at a million rows). created_at's own index goes last,
once (created_at, id) serves its queries. pg_trgm is a trusted extension since PostgreSQL 13: the database's owner
may create it.
"""
from django.db import migrations, models
from django.db.models.functions import Coalesce
from django.db.migrations.operations.base import Operation


class AddIndexConcurrentlyOnPostgreSQL(migrations.AddIndex):
    """AddIndex, built CONCURRENTLY on PostgreSQL (django.contrib.postgres's AddIndexConcurrently fails on
    SQLite, whose schema editor has no `concurrently`)."""

    atomic = False

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.add_index(model, self.index, concurrently=True)
        else:
            schema_editor.add_index(model, self.index)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.remove_index(model, self.index, concurrently=True)
        else:
            schema_editor.remove_index(model, self.index)


class PostgreSQLOnly(Operation):
    """SQL run on PostgreSQL only (no model state: Django has no portable form of it)."""

    reduces_to_sql = True
    reversible = True

    def __init__(self, sql: list[str], reverse_sql: list[str]):
        self.sql, self.reverse_sql = sql, reverse_sql

    def state_forwards(self, app_label, state):
        pass

    def _run(self, schema_editor, statements):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        self._run(schema_editor, self.sql)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        self._run(schema_editor, self.reverse_sql)

    def describe(self):
        return "PostgreSQL only: " + "; ".join(self.sql)


ACTIVE = ["Dispatched", "Queued", "Running", "Scheduled", "Submitted"]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("scheduling", "0018_cluster_isolation"),
    ]

    operations = [
        AddIndexConcurrentlyOnPostgreSQL(
            model_name="gangjob", index=models.Index(fields=["created_at", "id"], name="job_created_id")),
        AddIndexConcurrentlyOnPostgreSQL(
            model_name="gangjob", index=models.Index(fields=["name", "id"], name="job_name_id")),
        AddIndexConcurrentlyOnPostgreSQL(
            model_name="gangjob", index=models.Index(fields=["phase", "id"], name="job_phase_id")),
        AddIndexConcurrentlyOnPostgreSQL(
            model_name="gangjob",
            index=models.Index(Coalesce("phase_changed_at", "created_at"), models.F("id"), name="job_in_phase_since")),
        AddIndexConcurrentlyOnPostgreSQL(
            model_name="gangjob", index=models.Index(fields=["queue", "created_at", "id"], name="job_queue_created")),
        AddIndexConcurrentlyOnPostgreSQL(
            model_name="gangjob",
            index=models.Index(condition=models.Q(("phase__in", ACTIVE)), fields=["phase", "created_at", "id"],
                               name="job_active_created")),
        PostgreSQLOnly(
            ["CREATE EXTENSION IF NOT EXISTS pg_trgm",
             "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_name_trgm ON scheduling_gangjob "
             "USING gin (UPPER(name::text) gin_trgm_ops)"],
            ["DROP INDEX CONCURRENTLY IF EXISTS job_name_trgm"]),
        migrations.AlterField(
            model_name="gangjob",
            name="created_at",
            field=models.DateTimeField(auto_now_add=True),
        ),
    ]
