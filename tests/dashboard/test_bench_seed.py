"""The bench's seeding (bench/seed.py: raw INSERT ... SELECT for 100,000 jobs) must keep up with the models: a
column added without a database default made every `make bench` fail at its first insert. PostgreSQL only
(the seed uses gen_random_uuid and make_interval), like the stale-statistics tests."""
from __future__ import annotations

import os

import pytest

from bench import seed
from scheduling.models import Cluster, GangJob, PhaseTransition, QueuePolicy, RuntimeTemplate, RuntimeTemplateVersion
from tests import builders

ON_POSTGRESQL = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(not ON_POSTGRESQL, reason="the bench seed is PostgreSQL SQL (DATABASE_URL=postgres://)")]


def test_the_seed_fills_every_column_of_jobs_and_their_history(admin_user):
    cluster = Cluster.objects.create(name="seeded")
    queue = QueuePolicy.objects.create(name="seeded-q", gpu_quota=8)
    template = RuntimeTemplate.objects.create(name="seeded-t")
    version = RuntimeTemplateVersion.objects.create(template=template, version=1, spec=builders.template_spec())
    first, last = seed.insert_jobs(20, version, [queue], cluster, admin_user, prefix="seeded")
    jobs = GangJob.objects.filter(pk__range=(first, last))
    assert (last - first + 1, jobs.count()) == (20, 20)
    history = PhaseTransition.objects.filter(job__id__range=(first, last))
    assert history.count() >= 20 * 2  # at least Submitted and the phase each reached
    assert history.filter(inferred=False).count() == history.count()  # the cluster's times, not inferred ones
    assert jobs.filter(finished_at__isnull=False).count() == 20  # the first 70 of each 100 are Succeeded


def _index_definitions(*tables):
    from django.db import connection
    with connection.cursor() as cur:
        # Names and columns: a rebuilt predicate reads back with other casts, but means the same.
        cur.execute("SELECT indexname, regexp_replace(indexdef, ' WHERE .*', '') FROM pg_indexes "
                    "WHERE tablename = ANY(%s) ORDER BY indexname", [list(tables)])
        return cur.fetchall()


def test_a_year_of_history_has_the_newest_jobs_active_and_the_indexes_rebuilt_as_they_were(admin_user):
    cluster = Cluster.objects.create(name="seeded")
    queues = [QueuePolicy.objects.create(name=f"seeded-{i}", gpu_quota=8) for i in range(3)]
    template = RuntimeTemplate.objects.create(name="seeded-t")
    version = RuntimeTemplateVersion.objects.create(template=template, version=1, spec=builders.template_spec())
    before = _index_definitions(GangJob._meta.db_table, PhaseTransition._meta.db_table)
    first, last = seed.insert_jobs(300, version, queues, cluster, admin_user, prefix="year", active=30,
                                   rebuild_indexes=True)
    assert _index_definitions(GangJob._meta.db_table, PhaseTransition._meta.db_table) == before
    jobs = GangJob.objects.filter(pk__range=(first, last))
    newest = jobs.order_by("-created_at", "-id")
    assert {j.phase for j in newest[:30]} <= {"Running", "Queued", "Scheduled", "Dispatched", "Submitted"}
    assert jobs.filter(finished_at__isnull=True).count() == 30
    assert jobs.filter(objects_removed_at__isnull=False).count() == 270  # finished, cluster objects gone
    assert {p for p in jobs[30:].values_list("phase", flat=True)} <= {"Succeeded", "Failed", "Cancelled"}
