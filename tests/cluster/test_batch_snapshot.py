"""A bulk-reconcile batch reads only its own jobs' objects, however many other jobs the cluster holds, and none of the
objects of its jobs never dispatched before (nothing of them can exist yet); a create meeting one all the same is read
and compared."""
from __future__ import annotations

import uuid

import pytest

from scheduling.backends import registry
from scheduling.backends.kai_v2alpha2 import POD_GROUP
from scheduling.choices import GangPhase
from scheduling.constants import LABEL_JOB_UID
from scheduling.kube import objects
from scheduling.kube.objects import JOB, SERVICE
from scheduling.models import GangJob
from scheduling.reconcile import resync
from scheduling.reconcile.jobs import reconcile_many

from .reconcile_support import wait_for
from .test_reconcile import stale_copy

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
    # New jobs only: the batch records their backends and lists nothing (the LimitRanges are the first batch's)
    assert gang_lists() == 0
    assert set(GangJob.objects.filter(pk__in=[j.pk for j in batch]).values_list("phase", flat=True)) == {
        GangPhase.DISPATCHED}
    assert set(resync.snapshot(world.api, served, [str(j.uid) for j in batch]).by_uid) == {
        str(j.uid) for j in batch}


def gang_lists() -> int:
    """LISTs sent since the last reset, the namespace's LimitRanges not counted (kept a minute per namespace)."""
    return sum(n for verb, n in objects.requests.counts.items()
               if verb.startswith("LIST ") and verb != "LIST core/limitranges")


def snapshots_taken(monkeypatch) -> list[list[str]]:
    """The job UIDs of every batch snapshot taken from now on (one list per snapshot)."""
    from scheduling.reconcile.jobs import batch as batch_module

    taken, real = [], batch_module.snapshot

    def spy(api, served, uids=None):
        taken.append(sorted(uids or []))
        return real(api, served, uids)

    monkeypatch.setattr(batch_module, "snapshot", spy)
    return taken


def test_a_batch_lists_only_its_jobs_dispatched_before_and_makes_again_what_they_lost(world, monkeypatch):
    earlier = world.submit(backend="kai", replicas=1)
    assert reconcile_many([earlier.pk]) == {"ok": 1, "failed": 0, "requeued": 0}
    [lost] = world.gang(earlier, SERVICE)
    objects.delete(world.api, SERVICE, world.namespace, lost["metadata"]["name"], uid=lost["metadata"]["uid"])
    wait_for(lambda: not world.gang(earlier, SERVICE), 60, "the Service to be gone")
    new = [world.submit(backend="kai", replicas=1) for _ in range(2)]
    taken = snapshots_taken(monkeypatch)

    objects.requests.reset()
    assert reconcile_many([earlier.pk, *(j.pk for j in new)]) == {"ok": 3, "failed": 0, "requeued": 0}

    # One snapshot, of the job that had a backend already: a LIST per gang kind, Jobs, Services, pods.
    assert taken == [[str(earlier.uid)]]
    assert gang_lists() == len(registry.gang_kinds(set(world.cluster.served_apis))) + 3
    [again] = world.gang(earlier, SERVICE)
    assert again["metadata"]["uid"] != lost["metadata"]["uid"]
    assert objects.requests.counts["CREATE batch/jobs"] == 2  # the new jobs' only: the earlier one's was listed
    assert objects.requests.counts["CREATE core/services"] == 3
    assert set(GangJob.objects.filter(pk__in=[j.pk for j in new]).values_list("phase", flat=True)) == {
        GangPhase.DISPATCHED}


def test_a_new_job_that_meets_an_object_under_its_name_reads_and_compares_it(world, monkeypatch):
    theirs, ours = world.submit(backend="kai", replicas=3), world.submit(backend="kai", replicas=3)
    backend = registry.select("kai", set(world.cluster.served_apis))()
    spec_theirs, spec_ours = world.names(theirs), world.names(ours)
    [want_theirs], [want_ours] = backend.build_gang_objects(spec_theirs), backend.build_gang_objects(spec_ours)
    # Under the first job's name, another job's PodGroup; under the second's, one gangweb made for it (its labels
    # and creation mark) whose UID was never recorded, with a stale minMember.
    foreign = objects.create(world.api, POD_GROUP, stale_copy(want_theirs, {
        **spec_theirs.labels, LABEL_JOB_UID: str(uuid.uuid4())}))
    left = objects.create(world.api, POD_GROUP, stale_copy(want_ours, spec_ours.labels, minMember=4))
    taken = snapshots_taken(monkeypatch)

    objects.requests.reset()
    assert reconcile_many([theirs.pk, ours.pk]) == {"ok": 1, "failed": 1, "requeued": 0}

    assert taken == [] and gang_lists() == 0  # new jobs: no snapshot; each create's 409 was read (GET) instead
    assert objects.requests.counts["GET scheduling.run.ai/podgroups"] == 2
    theirs.refresh_from_db()
    assert theirs.phase_reason == "NameConflict" and "not adopted" in theirs.phase_message
    assert world.get(POD_GROUP, spec_theirs.gang_name)["metadata"]["resourceVersion"] == \
        foreign["metadata"]["resourceVersion"]
    assert world.gang(theirs, JOB) == []
    ours.refresh_from_db()
    pod_group = world.get(POD_GROUP, spec_ours.gang_name)
    assert pod_group["metadata"]["uid"] == left["metadata"]["uid"] and pod_group["spec"]["minMember"] == 3
    assert left["metadata"]["uid"] in ours.owner_uids.values()
    assert ours.phase == GangPhase.DISPATCHED and len(world.gang(ours, JOB)) == 1


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
