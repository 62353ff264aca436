"""apply_observation writes the phase, reason, why-pending and timeline once; record_error keeps the phase."""
import pytest
from prometheus_client import REGISTRY

from scheduling.backends.base import GangStatus
from scheduling.choices import GangPhase as P
from scheduling.models import GangJob, PhaseTransition
from scheduling.observe.evidence import JobObjects
from scheduling.reconcile import derive, ownership, status
from tests import builders
from tests.kube_objects import T0, batch_job, kai_over_limit, kai_podgroup, pod, t, v1alpha2_podgroup

pytestmark = pytest.mark.django_db


class StubBackend:
    """Stands in for a backend plugin: reads nothing, returns the GangStatus the test gives."""

    scheduler_name = "default-scheduler"

    def __init__(self, gang: GangStatus):
        self.gang = gang

    def read_status(self, objects):
        return self.gang


@pytest.fixture(autouse=True)
def gang_named_j_pg(monkeypatch):
    """The recorded gang objects of these tests are named "j-pg" (tests/kube_objects.py): let that be the job's
    current gang name (tests/reconcile/test_current_gang.py covers the real names)."""
    monkeypatch.setattr(derive, "current_gang_name", lambda job: "j-pg")


@pytest.fixture
def job(setup):
    template, queue, cluster = setup
    spec = builders.template_spec(pod_sets=[builders.pod_set(replicas=3, containers=[builders.container(gpu=8)])])
    job = GangJob.objects.create(name="gang3", template_version=template, queue=queue, cluster=cluster,
                                 resolved_spec=spec)
    PhaseTransition.objects.create(job=job, phase=P.SUBMITTED, at=T0, source="gangweb", reason="Submitted")
    return job


def histogram_count(name, **labels):
    return REGISTRY.get_sample_value(f"{name}_count", labels) or 0


UNSCHEDULABLE = GangStatus(admitted=False, reason="Unschedulable", message="0/2 nodes fit the gang", at=t(3),
                           source="PodGroup default/j-pg")


def test_an_unschedulable_gang_is_recorded_queued_with_0_of_3_bound(job):
    status.apply_observation(job, StubBackend(UNSCHEDULABLE), [v1alpha2_podgroup()],
                             [pod(name=f"p-{i}", unschedulable="0/4 nodes are available") for i in range(3)],
                             [batch_job()])
    job.refresh_from_db()
    assert (job.phase, job.phase_reason) == (P.QUEUED, "Unschedulable")
    assert job.phase_message == "0/2 nodes fit the gang (0 of 3 bound)"
    assert [(x.phase, x.at, x.reason) for x in job.transitions.order_by("at", "id")] == [
        (P.SUBMITTED, T0, "Submitted"), (P.DISPATCHED, t(1), "ObjectsCreated"), (P.QUEUED, t(2), "Unschedulable")]
    assert job.why_pending["pods"] == {"bound": 0, "required": 3, "total": 3, "created": 3}
    assert job.why_pending["job_requests"]["nvidia.com/gpu"] == 24
    pg = job.observed["objects"][0]
    assert (pg["kind"], pg["metadata"]["name"], pg["metadata"]["uid"]) == ("PodGroup", "j-pg", "uid-j-pg")
    assert pg["spec"] == {"schedulingPolicy": {"gang": {"minCount": 3}}} and "status" not in pg
    assert job.observed["pods"][0] == {"name": "p-0", "node": "", "phase": "Pending", "reason": "Unschedulable"}
    assert job.observed["pod_counts"] == {"created": 3, "bound": 0, "running": 0, "succeeded": 0, "failed": 0}


def test_observing_the_same_world_twice_changes_nothing(job):
    args = ([v1alpha2_podgroup()], [pod(name=f"p-{i}", unschedulable="x") for i in range(3)], [batch_job()])
    status.apply_observation(job, StubBackend(UNSCHEDULABLE), *args)
    job.refresh_from_db()
    first = job.updated_at
    status.apply_observation(job, StubBackend(UNSCHEDULABLE), *args)
    job.refresh_from_db()
    assert job.updated_at == first
    assert job.transitions.count() == 3


def recorded_of(job) -> list:
    return list(job.transitions.values_list("phase", "at", "attempt"))


def test_with_its_timeline_read_beforehand_an_unchanged_job_costs_no_query(job, django_assert_num_queries):
    args = ([v1alpha2_podgroup()], [pod(name=f"p-{i}", unschedulable="x") for i in range(3)], [batch_job()])
    status.apply_observation(job, StubBackend(UNSCHEDULABLE), *args)
    job = GangJob.objects.select_related("cluster").get(pk=job.pk)  # as a resync has it: row and cluster in hand
    recorded = recorded_of(job)
    with django_assert_num_queries(0):
        status.apply_observation(job, StubBackend(UNSCHEDULABLE), *args, recorded=recorded)


def test_with_its_timeline_read_beforehand_a_change_is_written_as_without(job):
    queued = ([v1alpha2_podgroup()], [pod(name=f"p-{i}", unschedulable="x") for i in range(3)], [batch_job()])
    status.apply_observation(job, StubBackend(UNSCHEDULABLE), *queued)
    job.refresh_from_db()
    bound = ([v1alpha2_podgroup()], [pod(name=f"p-{i}", bound=4) for i in range(3)],
             [batch_job()])
    status.apply_observation(job, StubBackend(GangStatus(admitted=True, at=t(4))), *bound,
                             recorded=recorded_of(job))
    job.refresh_from_db()
    assert job.phase == P.SCHEDULED
    assert [x.phase for x in job.transitions.order_by("at", "id")] == [P.SUBMITTED, P.DISPATCHED, P.QUEUED,
                                                                       P.SCHEDULED]


def test_the_gang_runs_and_succeeds_and_the_histograms_see_it(job):
    before_queue = histogram_count("gangweb_job_time_in_queue_seconds", cluster="local", queue="team-a")
    before_running = histogram_count("gangweb_job_time_to_running_seconds", cluster="local", queue="team-a")
    status.apply_observation(job, StubBackend(UNSCHEDULABLE), [v1alpha2_podgroup()],
                             [pod(name=f"p-{i}", unschedulable="x") for i in range(3)], [batch_job()])
    running = [pod(name=f"p-{i}", bound=10, started=12 + i) for i in range(3)]
    status.apply_observation(job, StubBackend(GangStatus(admitted=True, at=t(10))), [v1alpha2_podgroup()], running,
                             [batch_job()])
    job.refresh_from_db()
    assert job.phase == P.RUNNING and job.why_pending is None
    done = [pod(name=f"p-{i}", bound=10, started=12 + i, finished=30) for i in range(3)]
    status.apply_observation(job, StubBackend(GangStatus(admitted=True, at=t(10))), [v1alpha2_podgroup()], done,
                             [batch_job(complete=31)])
    job.refresh_from_db()
    assert [(x.phase, x.at) for x in job.transitions.order_by("at", "id")] == [
        (P.SUBMITTED, T0), (P.DISPATCHED, t(1)), (P.QUEUED, t(2)), (P.SCHEDULED, t(10)), (P.RUNNING, t(14)),
        (P.SUCCEEDED, t(31))]
    assert (job.phase, job.finished_at, job.phase_changed_at) == (P.SUCCEEDED, t(31), t(31))
    assert histogram_count("gangweb_job_time_in_queue_seconds", cluster="local", queue="team-a") == before_queue + 1
    assert histogram_count("gangweb_job_time_to_running_seconds", cluster="local", queue="team-a") == \
        before_running + 1
    # A finished job is never changed again.
    status.apply_observation(job, StubBackend(UNSCHEDULABLE), [], [], [])
    job.refresh_from_db()
    assert job.phase == P.SUCCEEDED and job.transitions.count() == 6


def test_kai_over_limit_numbers_reach_the_job_and_disappear_when_cleared(job):
    over = kai_podgroup(reasons=[kai_over_limit(limit="8", allocated="6", requested="4")])
    condition = over["status"]["schedulingConditions"][0]
    reason = condition["reasons"][0]
    gang = GangStatus(admitted=False, reason="OverLimit", message=reason["message"], at=t(3),
                      source="PodGroup default/j-pg", queue_details=reason["details"]["queueDetails"],
                      conditions=[condition], reasons=condition["reasons"])
    status.apply_observation(job, StubBackend(gang), [over], [pod(name=f"p-{i}") for i in range(3)], [batch_job()])
    job.refresh_from_db()
    gpu = job.why_pending["queue"]["resources"]["nvidia.com/gpu"]
    assert (job.why_pending["reason"], gpu["limit"], gpu["allocated"]) == ("OverLimit", 8, 6)
    assert job.why_pending["job_requests"]["nvidia.com/gpu"] == 4
    status.apply_observation(job, StubBackend(GangStatus(source="PodGroup default/j-pg")), [kai_podgroup()],
                             [pod(name=f"p-{i}", bound=9) for i in range(3)], [batch_job()])
    job.refresh_from_db()
    assert job.why_pending is None
    assert job.phase == P.SCHEDULED


def test_an_unreachable_cluster_keeps_the_phase_and_says_why(job):
    status.apply_observation(job, StubBackend(UNSCHEDULABLE), [v1alpha2_podgroup()],
                             [pod(name=f"p-{i}", unschedulable="x") for i in range(3)], [batch_job()])
    status.record_error(job, "ClusterUnreachable", "connection refused", None)
    job.refresh_from_db()
    assert (job.phase, job.phase_reason, job.phase_message) == (P.QUEUED, "ClusterUnreachable", "connection refused")
    assert job.why_pending["reason"] == "ClusterUnreachable"
    assert job.why_pending["pods"]["required"] == 3


def test_error_summaries_tell_a_refusal_from_an_unreachable_cluster():
    from scheduling.reconcile.status import _error_summary

    assert _error_summary("local", "ClusterUnreachable", "connection refused", None) == (
        "gangweb cannot reach cluster local: connection refused")
    assert _error_summary("local", "Invalid", "spec.x: must be an integer", 422) == (
        "Cluster local refused the job's objects (HTTP 422, Invalid): spec.x: must be an integer")
    assert _error_summary("local", "NamespaceNotFound", 'namespace "x" does not exist in cluster local', 404) == (
        'namespace "x" does not exist in cluster local')


def ran(job):
    for phase, sec in ((P.DISPATCHED, 1), (P.QUEUED, 2), (P.SCHEDULED, 5), (P.RUNNING, 6)):
        PhaseTransition.objects.create(job=job, phase=phase, at=t(sec))
    GangJob.objects.filter(pk=job.pk).update(phase=P.RUNNING)
    job.refresh_from_db()


def attempts(job) -> list[tuple]:
    return list(job.transitions.order_by("attempt", "at", "id").values_list("phase", "attempt", "reason"))


def test_a_recreated_owner_job_starts_a_new_attempt_at_its_creation_time(job):
    ran(job)
    assert status.record_restart(job, t(60), "Job default/w-0", "Recreated", "recreated what was missing: Job ...")
    assert attempts(job)[-1] == (P.DISPATCHED, 1, "Recreated")
    assert job.transitions.get(attempt=1).at == t(60)
    job.refresh_from_db()
    assert (job.phase, job.phase_reason, job.phase_changed_at) == (P.DISPATCHED, "Recreated", t(60))


def test_when_the_watch_already_started_the_attempt_from_the_new_pods_the_restart_joins_it(job):
    ran(job)
    PhaseTransition.objects.create(job=job, phase=P.QUEUED, at=t(61), attempt=1, reason="Requeued")
    GangJob.objects.filter(pk=job.pk).update(phase=P.QUEUED)
    job.refresh_from_db()
    assert status.record_restart(job, t(60), "Job default/w-0", "Recreated", "recreated ...")
    assert [(p, a) for p, a, _ in attempts(job)][-2:] == [(P.DISPATCHED, 1), (P.QUEUED, 1)]
    job.refresh_from_db()
    assert job.phase == P.QUEUED  # the phase does not step back within the attempt


def queued_world():
    """A gang the scheduler cannot place yet, as a pass or the watch sees it."""
    return JobObjects([v1alpha2_podgroup()], [batch_job()],
                      [pod(name=f"p-{i}", unschedulable="0/4 nodes are available") for i in range(3)])


def test_a_passs_restart_error_and_sighting_are_one_update_of_the_row(job):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    ran(job)
    update = status.StatusUpdate.begin(job)
    update.restart_at(job, status.Decision(P.DISPATCHED, t(60), "Job default/w-0", "Recreated", "recreated ..."))
    update.observe(job, status.Sighting(StubBackend(UNSCHEDULABLE), queued_world()))
    update.fail_with_error(job, "ClusterUnreachable", "connection refused")
    with CaptureQueriesContext(connection) as queries:
        status.write(job, update)
    sql = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert sum(s.startswith("UPDATE") for s in sql) == 1
    assert sum(s.startswith("INSERT") for s in sql) == 1  # every new entry in one statement
    assert attempts(job)[-2:] == [(P.DISPATCHED, 1, "Recreated"), (P.QUEUED, 1, "Unschedulable")]
    job.refresh_from_db()
    assert (job.phase_reason, job.phase_message) == ("ClusterUnreachable", "connection refused")


def test_a_timeline_another_writer_appended_to_after_the_pass_read_it_is_read_again_under_the_lock(job):
    from django.utils import timezone

    ran(job)
    passs_copy = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)
    update = status.StatusUpdate.begin(passs_copy)
    update.restart_at(passs_copy, status.Decision(P.DISPATCHED, t(60), "Job default/w-0", "Recreated", "..."))
    # Meanwhile the watch starts the attempt from the new Job's pods (as every writer does: with `updated_at`).
    PhaseTransition.objects.create(job=job, phase=P.QUEUED, at=t(61), attempt=1, reason="Requeued")
    GangJob.objects.filter(pk=job.pk).update(phase=P.QUEUED, updated_at=timezone.now())
    status.write(passs_copy, update)
    # As when the restart is recorded after the watch (the test above): it joins that attempt; the phase stays.
    assert [(p, a) for p, a, _ in attempts(job)][-2:] == [(P.DISPATCHED, 1), (P.QUEUED, 1)]
    job.refresh_from_db()
    assert job.phase == P.QUEUED


def test_a_watch_observation_is_selected_against_the_row_as_written_not_as_it_read_it(job):
    """Issue 30: the watch read the row before a pass recorded the Job it created; the write (under the row's lock)
    selects the cache's objects against the recorded UIDs then, so the job is never recorded without its Job and
    pods."""
    owner = batch_job()  # uid "uid-j-worker", in namespace "default"
    job.namespace = "default"
    GangJob.objects.filter(pk=job.pk).update(namespace="default", owner_uids={"j-worker": "uid-j-worker"})
    stale = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)
    stale.owner_uids = {}  # as the watch read it, before the pass's write
    pods = [pod(name=f"p-{i}", unschedulable="0/4 nodes are available") for i in range(3)]
    for p in pods:
        p["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j-worker",
                                             "uid": "uid-j-worker", "controller": True}]
    raw = JobObjects([], [owner], pods)
    selected = ownership.select(raw, StubBackend(UNSCHEDULABLE), stale)
    assert selected.owners == [] and selected.pods == []  # what the stale row lets through

    status.observe_objects(stale, StubBackend(UNSCHEDULABLE), selected, raw=raw)

    job.refresh_from_db()
    assert job.observed["pod_counts"]["created"] == 3
    assert [o["kind"] for o in job.observed["objects"]] == ["Job"]


def test_the_dispatched_message_lists_the_objects_in_creation_order(job):
    """Issue 33 item 4: "created ..." names the objects as they were created (creationTimestamp), whatever order
    the cluster lists them in; within the same second the gang object comes first."""
    status.apply_observation(job, StubBackend(UNSCHEDULABLE), [v1alpha2_podgroup()],
                             [pod(name=f"p-{i}", unschedulable="0/4 nodes are available") for i in range(3)],
                             [batch_job(name="j-zeta", created=2), batch_job(name="j-alpha", created=3),
                              batch_job(name="j-beta", created=1)])
    dispatched = job.transitions.get(phase=P.DISPATCHED)
    assert dispatched.message == ("created PodGroup default/j-pg, Job default/j-beta, Job default/j-zeta, "
                                  "Job default/j-alpha")


def test_a_failed_pod_is_recorded_as_the_failure_and_kept_when_the_pods_go(job):
    gang = GangStatus(admitted=True, reason="Scheduled", message="", at=t(3), source="PodGroup default/j-pg")
    pods = [pod(name="p-0", bound=3, started=4, finished=6, phase="Failed"),
            pod(name="p-1", bound=3, started=4, finished=8, phase="Failed"),
            pod(name="p-2", bound=3, started=4, finished=9, phase="Succeeded")]
    status.apply_observation(job, StubBackend(gang), [v1alpha2_podgroup()], pods, [batch_job(failed=9)])
    job.refresh_from_db()
    assert job.phase == P.FAILED
    failure = job.observed["failure"]
    assert (failure["pod"], failure["container"], failure["exit_code"], failure["kind"]) == ("p-0", "main", 1,
                                                                                          "ExitCode")
    assert (failure["failed_pods"], failure["job_reason"]) == (2, "BackoffLimitExceeded")
    # the retention deletes the pods: the failure is said once and kept
    status.apply_observation(job, StubBackend(gang), [v1alpha2_podgroup()], [], [batch_job(failed=9)])
    job.refresh_from_db()
    assert job.observed["failure"] == failure
