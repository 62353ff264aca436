"""A create the API server refuses for good (422 Invalid, 403 from admission) fails the job and deletes what was
created for it: no job left Dispatched holding gang objects that can never run."""
from __future__ import annotations

import pytest
from kubernetes import client

from scheduling.choices import DesiredState, ReconcileOutcome
from scheduling.choices import GangPhase as P
from scheduling.kube.errors import TransientKubeError
from scheduling.kube.objects import JOB, SERVICE
from scheduling.models import GangJob, ReconcileAttempt
from tests import builders

from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]


def no_jobs_quota(world) -> None:
    """A ResourceQuota allowing no batch Job in the namespace, once the quota controller has counted it (until then
    admission answers 'status unknown for quota', a different refusal)."""
    core = client.CoreV1Api(world.api)
    core.create_namespaced_resource_quota(world.namespace, {"metadata": {"name": "no-jobs"},
                                                            "spec": {"hard": {"count/jobs.batch": "0"}}})
    wait_for(lambda: (core.read_namespaced_resource_quota("no-jobs", world.namespace).status.hard or {}),
             timeout=30, what="quota no-jobs counted")


# (case, how the namespace or the template makes the owner Job unacceptable, HTTP status, server reason, words)
REFUSALS = [
    # Passes gangweb's template checks (they do not know every enum of a container); the API server's validation
    # refuses the Job after the Workload and PodGroup were created.
    ("invalid", None, {"imagePullPolicy": "Sometimes"}, 422, "Invalid", 'Unsupported value: "Sometimes"'),
    ("quota", no_jobs_quota, {}, 403, "Forbidden", "exceeded quota: no-jobs"),
]


@pytest.mark.parametrize("case, prepare, container_extra, http, api_reason, words", REFUSALS,
                         ids=[r[0] for r in REFUSALS])
def test_a_refused_owner_job_fails_the_job_and_deletes_its_gang_objects(world, case, prepare, container_extra,
                                                                         http, api_reason, words):
    if prepare is not None:
        prepare(world)
    job = world.submit(backend="k8s-workload", replicas=2,
                       containers=[builders.container(cpu="100m", memory="64Mi", **container_extra)])
    owner = world.names(job).pod_sets[0].owner_name

    result = world.reconcile(job)

    assert result.outcome == ReconcileOutcome.TERMINAL_ERROR and result.reason == "CreateRefused"
    assert result.requeue_after == 5  # as a cancel: the pass that finds nothing left marks the cleanup done
    job = GangJob.objects.get(pk=job.pk)
    assert job.phase == P.FAILED
    assert job.phase_reason == "CreateRefused"
    assert job.phase_message.startswith(
        f"the API server refused to create Job {world.namespace}/{owner} (HTTP {http} {api_reason}): ")
    assert words in job.phase_message
    assert job.why_pending is None and job.finished_at is not None and job.cleaned_up_at is None
    timeline = list(job.transitions.order_by("at", "id").values_list("phase", "source", "reason"))
    assert [t[0] for t in timeline][0] == P.SUBMITTED
    assert timeline[-1] == (P.FAILED, "gangweb", "CreateRefused")
    failed = job.transitions.get(phase=P.FAILED)
    assert failed.message == job.phase_message and failed.at == job.finished_at
    attempt = ReconcileAttempt.objects.filter(job=job).latest("pk")
    assert attempt.outcome == ReconcileOutcome.TERMINAL_ERROR and attempt.reason == "CreateRefused"
    assert attempt.actions[:2] == [f"create Workload {world.namespace}/{world.names(job).gang_name}",
                                   f"create PodGroup {world.namespace}/{world.names(job).gang_name}"]
    assert f"delete PodGroup {world.namespace}/{world.names(job).gang_name}" in attempt.actions

    def nothing_left():
        return not any(world.gang(job, ref) for ref in (world.k8s.WORKLOAD, world.k8s.POD_GROUP, JOB, SERVICE))

    wait_for(nothing_left, timeout=30, what="the refused job's objects deleted")

    # Level-triggered: the next pass neither recreates anything nor moves the job; it marks the cleanup done.
    again = world.reconcile(job)
    assert again.error is None and again.actions == [] and again.requeue_after is None
    job = GangJob.objects.get(pk=job.pk)
    assert job.phase == P.FAILED and job.phase_reason == "CreateRefused" and job.cleaned_up_at is not None
    assert not any(world.gang(job, ref) for ref in (world.k8s.WORKLOAD, world.k8s.POD_GROUP, JOB, SERVICE))


def quota_of_none(world, resource: str) -> None:
    """A ResourceQuota allowing no object of `resource` (`<plural>.<group>`) in the namespace, once counted."""
    core = client.CoreV1Api(world.api)
    core.create_namespaced_resource_quota(world.namespace, {"metadata": {"name": "none"},
                                                            "spec": {"hard": {f"count/{resource}": "0"}}})
    wait_for(lambda: (core.read_namespaced_resource_quota("none", world.namespace).status.hard or {}),
             timeout=30, what="quota none counted")


@pytest.mark.parametrize("resource, kind", [("workloads.scheduling.k8s.io", "Workload"),
                                            ("podgroups.scheduling.k8s.io", "PodGroup")])
def test_a_refused_gang_object_fails_the_job_and_leaves_nothing(world, resource, kind):
    quota_of_none(world, resource)
    job = world.submit(backend="k8s-workload", replicas=2)
    gang = world.names(job).gang_name

    result = world.reconcile(job)

    assert result.outcome == ReconcileOutcome.TERMINAL_ERROR and result.reason == "CreateRefused"
    job = GangJob.objects.get(pk=job.pk)
    assert (job.phase, job.phase_reason) == (P.FAILED, "CreateRefused")
    assert job.phase_message.startswith(
        f"the API server refused to create {kind} {world.namespace}/{gang} (HTTP 403 Forbidden): ")
    assert "exceeded quota: none" in job.phase_message
    wait_for(lambda: not any(world.gang(job, ref)
                             for ref in (world.k8s.WORKLOAD, world.k8s.POD_GROUP, JOB, SERVICE)), timeout=30,
             what="nothing left")
    again = world.reconcile(job)
    assert again.error is None and again.actions == []
    job = GangJob.objects.get(pk=job.pk)
    assert (job.phase, job.phase_reason) == (P.FAILED, "CreateRefused") and job.cleaned_up_at is not None
    assert list(job.transitions.values_list("phase", flat=True)).count(P.FAILED) == 1


def test_a_job_cancelled_while_its_refused_create_is_cleaned_up_stays_failed_and_leaves_nothing(world):
    quota_of_none(world, "jobs.batch")
    job = world.submit(backend="k8s-workload", replicas=2)
    world.reconcile(job)
    job = GangJob.objects.get(pk=job.pk)
    assert (job.phase, job.phase_reason) == (P.FAILED, "CreateRefused") and job.cleaned_up_at is None
    # A cancel that raced with the refusal (it was asked while the job was still Dispatched).
    GangJob.objects.filter(pk=job.pk).update(desired_state=DesiredState.CANCEL)
    job = GangJob.objects.get(pk=job.pk)
    wait_for(lambda: not any(world.gang(job, ref)
                             for ref in (world.k8s.WORKLOAD, world.k8s.POD_GROUP, JOB, SERVICE)), timeout=30,
             what="nothing left")
    again = world.reconcile(job)
    assert again.error is None
    job = GangJob.objects.get(pk=job.pk)
    assert (job.phase, job.phase_reason) == (P.FAILED, "CreateRefused") and job.cleaned_up_at is not None
    phases = list(job.transitions.order_by("at", "id").values_list("phase", flat=True))
    assert phases[-1] == P.FAILED and P.CANCELLED not in phases


def test_a_quota_full_of_other_jobs_makes_the_job_wait_not_fail(world):
    """`count/jobs.batch: 1` with another Job in the namespace: the owner Job is refused 'exceeded quota' only
    because of what is there now (used + requested > limited, requested <= limited). That frees up, so the job
    waits (retried, reason QuotaExceeded) and is created once the other Job is gone; only an object that alone
    exceeds the limit (`0` above) is refused for good."""
    core, batch = client.CoreV1Api(world.api), client.BatchV1Api(world.api)
    core.create_namespaced_resource_quota(world.namespace, {"metadata": {"name": "one-job"},
                                                            "spec": {"hard": {"count/jobs.batch": "1"}}})
    # Once the quota has a status, admission itself charges the next Job to it; before that, counting it is left
    # to the quota controller's workers, which pause while it adds monitors for resources an earlier test's quota
    # named (every 30 s discovery), so the wait below could time out depending on the test order.
    wait_for(lambda: (core.read_namespaced_resource_quota("one-job", world.namespace).status.hard or {}),
             timeout=30, what="quota one-job counted")
    other = batch.create_namespaced_job(world.namespace, {
        "metadata": {"name": "someone-elses"},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "registry.example/x:1"}]}}}})
    wait_for(lambda: (core.read_namespaced_resource_quota("one-job", world.namespace).status.used or {}).get(
        "count/jobs.batch") == "1", timeout=30, what="quota one-job counting the other Job")
    job = world.submit(backend="k8s-workload", replicas=2,
                       containers=[builders.container(cpu="100m", memory="64Mi")])

    with pytest.raises(TransientKubeError) as failure:  # raised for the task to retry with backoff
        world.reconcile(job)

    assert failure.value.reason == "QuotaExceeded"
    attempt = ReconcileAttempt.objects.filter(job=job).latest("pk")
    assert (attempt.outcome, attempt.reason) == (ReconcileOutcome.TRANSIENT_ERROR, "QuotaExceeded")
    job = GangJob.objects.get(pk=job.pk)
    assert job.phase not in (P.FAILED, P.CANCELLED) and job.phase_reason == "QuotaExceeded"
    assert "exceeded quota: one-job" in job.phase_message

    batch.delete_namespaced_job(other.metadata.name, world.namespace, propagation_policy="Background")
    wait_for(lambda: (core.read_namespaced_resource_quota("one-job", world.namespace).status.used or {}).get(
        "count/jobs.batch") == "0", timeout=90, what="quota one-job freed")  # the controller's workers (see above)
    again = world.reconcile(job)
    assert again.error is None, again.message
    job = GangJob.objects.get(pk=job.pk)
    assert job.phase not in (P.FAILED, P.CANCELLED)
    assert world.gang(job, JOB)
