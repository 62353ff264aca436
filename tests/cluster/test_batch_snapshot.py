"""A bulk-reconcile batch reads only its own jobs' objects, however many other jobs the cluster holds."""
from __future__ import annotations

import uuid

import pytest

from scheduling.backends import registry
from scheduling.choices import GangPhase
from scheduling.kube import objects
from scheduling.models import GangJob
from scheduling.reconcile import resync
from scheduling.reconcile.jobs import reconcile_many

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]


def test_a_batch_snapshot_holds_only_the_batch_and_the_batch_is_dispatched(world):
    earlier = [world.submit(backend="kai", replicas=1) for _ in range(3)]
    assert reconcile_many([j.pk for j in earlier]) == {"ok": 3, "failed": 0, "requeued": 0}
    batch = [world.submit(backend="kai", replicas=1) for _ in range(2)]
    served = set(world.cluster.served_apis)

    snap = resync.snapshot(world.api, served, [str(j.uid) for j in batch])
    everything = resync.snapshot(world.api, served)
    assert set(snap.by_uid) == set()  # nothing created for the new batch yet
    assert {str(j.uid) for j in earlier} <= set(everything.by_uid)

    objects.requests.reset()
    assert reconcile_many([j.pk for j in batch]) == {"ok": 2, "failed": 0, "requeued": 0}
    lists = sum(n for verb, n in objects.requests.counts.items() if verb.startswith("LIST "))
    assert lists == len(registry.gang_kinds(served)) + 3
    assert set(GangJob.objects.filter(pk__in=[j.pk for j in batch]).values_list("phase", flat=True)) == {
        GangPhase.DISPATCHED}
    assert set(resync.snapshot(world.api, served, [str(j.uid) for j in batch]).by_uid) == {
        str(j.uid) for j in batch}


def test_listed_objects_come_without_managed_fields(world):
    from scheduling.kube.objects import JOB

    job = world.submit(backend="kai", replicas=1)
    reconcile_many([job.pk])
    listed = objects.list_objects(world.api, JOB, world.namespace, f"gangweb.io/job-uid={job.uid}")
    assert len(listed) == 1
    assert "managedFields" not in listed[0]["metadata"] and listed[0]["metadata"]["name"]


def same_template(world, count: int) -> list[GangJob]:
    """`count` jobs of one KAI template (one pod each) submitted into the test namespace, not reconciled."""
    from scheduling.models import QueuePolicy
    from scheduling.services.jobs import lifecycle as job_service
    from tests import builders

    version = builders.make_template(name=f"t-{uuid.uuid4().hex[:8]}", backend="kai", pod_sets=[
        builders.pod_set("worker", replicas=1, containers=[builders.container(cpu="1", memory="1Gi")])])
    queue = QueuePolicy.objects.get(name="team-a")
    return [job_service.submit(world.user, builders.submit_body(version, queue, world.cluster,
                                                                name=f"job-{uuid.uuid4().hex[:6]}",
                                                                namespace=world.namespace))[0]
            for _ in range(count)]


def test_a_batch_dispatch_costs_a_fixed_number_of_sql_statements_per_job(world):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    per_size = {}
    for size in (2, 5):
        batch = same_template(world, size)  # as a bulk submit's batch: one template
        with CaptureQueriesContext(connection) as queries:
            assert reconcile_many([j.pk for j in batch]) == {"ok": size, "failed": 0, "requeued": 0}
        # Savepoints are the test's transaction around each atomic block; outside tests BEGIN/COMMIT instead.
        per_size[size] = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    # The batch's rows, one UPDATE recording the backend of all of them, and the template's pod-security level and
    # exceptions, read once for the batch before its first owner Job is created (reconcile/jobs/reconciler.py
    # check_pod_policy; was once per job). Then per job: the row read again before its first create (it may have
    # ended since the batch loaded it: JobReconciler.refuse_when_over), the cancel check after its creates together
    # with the timeline its observation derives from (one statement, timeline_reads.read_row_and_timeline), its
    # row locked (on PostgreSQL), the Dispatched entry, the row's update and the attempt row. (Before issue 36: 8
    # per job; before issue 9: 10.)
    assert len(per_size[5]) - len(per_size[2]) == 3 * 6
    assert len(per_size[2]) == 3 + 2 * 6
    assert sum(q.startswith("UPDATE") and "backend_plugin" in q and '"phase"' not in q for q in per_size[5]) == 1
    assert sum("FROM \"scheduling_runtimetemplate\"" in q for q in per_size[5]) == 1
