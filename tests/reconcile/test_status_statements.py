"""What one watch observation costs in statements, and that its fixed statements read what the ORM reads.

The watcher observes every job whose objects changed (bench/README.md, "Watch under churn"), so an observation's
statements, and whether each one is a compiled queryset, are its CPU: one of a running job whose pod changed is
the job's read, the locked row, the timeline and one UPDATE of the changed columns, none of them compiled.
"""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.models.sql import compiler
from django.test.utils import CaptureQueriesContext

from scheduling.backends.k8s_workload_v1alpha2 import K8sWorkloadV1alpha2
from scheduling.choices import GangPhase as P
from scheduling.models import GangJob, PhaseTransition
from scheduling.observe.evidence import JobObjects
from scheduling.reconcile import status, watching
from tests import builders
from tests.kube_objects import T0, batch_job, pod, v1alpha2_podgroup

pytestmark = pytest.mark.django_db
PODS = 8
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK")


@pytest.fixture
def job(setup):
    template, queue, cluster = setup
    spec = builders.template_spec(pod_sets=[builders.pod_set(replicas=PODS)])
    job = GangJob.objects.create(name="gang8", template_version=template, queue=queue, cluster=cluster,
                                 resolved_spec=spec, backend_plugin=K8sWorkloadV1alpha2.name,
                                 owner_uids={"j-worker": "uid-j-worker"})
    PhaseTransition.objects.create(job=job, phase=P.SUBMITTED, at=T0, source="gangweb", reason="Submitted")
    return job


def running_world(job) -> JobObjects:
    """The job's PodGroup (scheduled), its Job and 8 Running pods it owns, as the watch cache holds them."""
    group = v1alpha2_podgroup(name=status.current_gang_name(job), min_count=PODS,
                              scheduled=("True", "Scheduled", "", 3))
    owner = batch_job()
    pods = [pod(name=f"w-{i}", bound=3, started=4) for i in range(PODS)]
    for p in pods:
        p["spec"]["schedulingGroup"] = {"podGroupName": group["metadata"]["name"]}
        p["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "controller": True,
                                             "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]
    return JobObjects([group], [owner], pods)


def crash(world: JobObjects, index: int) -> None:
    world.pods[index]["status"]["containerStatuses"] = [
        {"name": "main", "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]


@pytest.fixture
def compiled(monkeypatch):
    """The kinds of querysets compiled meanwhile (names of Django's SQL compiler classes, one per compilation)."""
    kinds = []
    for cls in (compiler.SQLCompiler, compiler.SQLUpdateCompiler, compiler.SQLInsertCompiler):
        monkeypatch.setattr(cls, "as_sql", _counting(cls.as_sql, kinds))
    return kinds


def _counting(as_sql, kinds):
    def counted(self, *args, **kwargs):
        kinds.append(type(self).__name__)
        return as_sql(self, *args, **kwargs)
    return counted


def statements(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(TRANSACTION_CONTROL)]


def test_one_observation_of_a_changed_pod_is_three_fixed_reads_and_one_update_of_the_changed_column(job, compiled):
    world = running_world(job)
    watching._observe(str(job.uid), world)
    job.refresh_from_db()
    assert job.phase == P.RUNNING
    crash(world, 5)
    compiled.clear()
    with CaptureQueriesContext(connection) as queries:
        watching._observe(str(job.uid), world)
    sql = statements(queries)
    assert [s.split()[0] for s in sql] == ["SELECT", "SELECT", "SELECT", "UPDATE"]  # job, locked row, timeline
    assert compiled == []  # no queryset built: every statement above is of fixed text
    quote = connection.ops.quote_name
    assert sql[3].startswith(f'UPDATE {quote("scheduling_gangjob")} SET {quote("observed")} = ')
    assert sql[3].count(" = ") == 3  # observed, updated_at, and the primary key: nothing else rewritten
    job.refresh_from_db()
    assert [p["reason"] for p in job.observed["pods"]] == [""] * 5 + ["CrashLoopBackOff"] + [""] * 2
    assert job.phase == P.RUNNING


def test_an_observation_that_changes_nothing_reads_and_writes_nothing_more(job, compiled):
    world = running_world(job)
    watching._observe(str(job.uid), world)
    job.refresh_from_db()
    written = job.updated_at
    compiled.clear()
    with CaptureQueriesContext(connection) as queries:
        watching._observe(str(job.uid), world)
    assert [s.split()[0] for s in statements(queries)] == ["SELECT", "SELECT", "SELECT"]
    assert compiled == []
    job.refresh_from_db()
    assert job.updated_at == written


def test_the_locked_row_is_the_job_with_its_cluster_and_queue_as_the_orm_reads_them(job):
    GangJob.objects.filter(pk=job.pk).update(owner_uids={"gang8-worker": "u-1"}, observed={"pods": [{"name": "p"}]},
                                             why_pending={"reason": "Unschedulable"})
    orm = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)
    with CaptureQueriesContext(connection) as queries, status.locked_row(job) as locked:
        pass
    for model_of in (lambda j: j, lambda j: j.cluster, lambda j: j.queue):
        fields = [f.attname for f in type(model_of(orm))._meta.concrete_fields]
        assert {f: getattr(model_of(locked), f) for f in fields} == {f: getattr(model_of(orm), f) for f in fields}
    assert locked.owner_uids == {"gang8-worker": "u-1"} and not locked._state.adding
    assert locked._state.fields_cache.keys() >= {"cluster", "queue"}  # no query for either later
    (read,) = statements(queries)
    if connection.vendor == "postgresql":
        assert read.endswith("FOR NO KEY UPDATE OF j")  # the job's row alone, as `locked_row` says
    with pytest.raises(GangJob.DoesNotExist):
        GangJob.objects.filter(pk=job.pk).delete()
        with status.locked_row(job):
            pass


def test_the_timeline_is_read_as_the_orm_reads_it(job):
    PhaseTransition.objects.create(job=job, phase=P.QUEUED, at=T0, attempt=1, source="x", inferred=True)
    orm = list(PhaseTransition.objects.filter(job_id=job.pk).values_list("phase", "at", "attempt", "inferred"))
    assert sorted(status.read_timeline(job)) == sorted(orm)
    assert {type(r[3]) for r in status.read_timeline(job)} == {bool}
