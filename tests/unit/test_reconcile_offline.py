"""Reconcile passes that need no working cluster: cancel before dispatch, an unreachable cluster, a bulk batch
against an unreachable cluster. The unreachable cluster is a real closed port (127.0.0.1:1), not a mock."""
import pytest
import yaml

from scheduling.choices import GangPhase, ReconcileOutcome
from scheduling.kube import errors
from scheduling.models import GangJob
from scheduling.reconcile import jobs
from scheduling.services.jobs import lifecycle as job_service
from tests import builders

DEAD = yaml.safe_dump({
    "apiVersion": "v1", "kind": "Config", "current-context": "dead",
    "clusters": [{"name": "dead", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}}],
})


@pytest.fixture
def dead_cluster(setup):
    template, queue, cluster = setup
    cluster.kubeconfig = DEAD
    cluster.served_apis = ["v1", "scheduling.k8s.io/v1alpha2"]
    cluster.save()
    return template, queue, cluster


def submit(api, template, queue, cluster, name):
    response = api.post("/api/v1/jobs/", builders.submit_body(template, queue, cluster, name=name), format="json")
    assert response.status_code == 201, response.content
    return GangJob.objects.select_related("cluster", "queue").get(pk=response.json()["id"])


def test_a_job_cancelled_before_dispatch_ends_cancelled_without_touching_the_cluster(api, admin_user, dead_cluster):
    job = submit(api, *dead_cluster, "early")
    job_service.cancel(admin_user, job)
    result = jobs.run_pass(GangJob.objects.select_related("cluster", "queue").get(pk=job.pk))
    job.refresh_from_db()
    assert result.error is None
    assert job.phase == GangPhase.CANCELLED and job.cleaned_up_at is not None
    assert list(job.transitions.values_list("phase", flat=True)) == [GangPhase.SUBMITTED, GangPhase.CANCELLED]
    assert job.attempts.get().outcome == ReconcileOutcome.OK


def test_an_unreachable_cluster_is_recorded_on_the_job_and_raised_for_retry(api, dead_cluster):
    job = submit(api, *dead_cluster, "down")
    with pytest.raises(errors.TransientKubeError) as failure:
        jobs.run_pass(job)
    assert failure.value.reason == "ClusterUnreachable"
    job.refresh_from_db()
    assert (job.phase, job.phase_reason) == (GangPhase.SUBMITTED, "ClusterUnreachable")
    attempt = job.attempts.get()
    assert (attempt.outcome, attempt.reason) == (ReconcileOutcome.TRANSIENT_ERROR, "ClusterUnreachable")


def test_a_bulk_batch_against_an_unreachable_cluster_tries_once_and_records_every_job(api, dead_cluster):
    batch = [submit(api, *dead_cluster, f"bulk-{i}") for i in range(4)]
    counts = jobs.reconcile_many([j.pk for j in batch])
    assert counts == {"ok": 0, "failed": 4, "requeued": 0}
    for job in GangJob.objects.filter(pk__in=[j.pk for j in batch]):
        assert job.phase_reason == "ClusterUnreachable"
        assert job.attempts.get().outcome == ReconcileOutcome.TRANSIENT_ERROR


def test_the_task_raises_a_transient_error_for_its_autoretry_and_leaves_the_last_one_to_the_resync(api, dead_cluster):
    from scheduling import tasks

    job = submit(api, *dead_cluster, "retried")
    with pytest.raises(errors.TransientKubeError) as failure:  # called directly: the autoretry raises it as is
        tasks.reconcile_job(job.pk)
    assert failure.value.reason == "ClusterUnreachable"
    tasks.reconcile_job.push_request(retries=tasks.reconcile_job.max_retries, id="last-try")
    try:
        tasks.reconcile_job.run(job.pk)  # the last allowed retry: recorded, not raised
    finally:
        tasks.reconcile_job.pop_request()
    assert list(job.attempts.order_by("pk").values_list("outcome", "retry", "task_id")) == [
        (ReconcileOutcome.TRANSIENT_ERROR, 0, ""), (ReconcileOutcome.TRANSIENT_ERROR, 8, "last-try")]
    assert tasks.reconcile_job(10 ** 9) is None  # a job that no longer exists: logged and ignored


def test_a_batch_records_the_backends_it_decides_and_says_which_jobs_it_decided(api, admin_user, dead_cluster):
    from django.core.cache import cache

    from scheduling.kube import limit_ranges

    new, decided, cancelled = (submit(api, *dead_cluster, name) for name in ("new", "decided", "cancelled"))
    GangJob.objects.filter(pk=decided.pk).update(backend_plugin="k8s-workload-v1alpha2")
    job_service.cancel(admin_user, cancelled)
    batch = list(GangJob.objects.select_related("cluster").filter(pk__in=[new.pk, decided.pk, cancelled.pk]))
    # Only `new` had no backend and is not being cancelled: nothing of it can be in the cluster, so a batch reads
    # no snapshot for it (reconcile/jobs/batch.py). `decided` may have objects from an earlier pass.
    assert jobs.record_backends(batch, api=None) == {new.pk}
    assert dict(GangJob.objects.filter(pk__in=[j.pk for j in batch]).values_list("pk", "backend_plugin")) == {
        new.pk: "k8s-workload-v1alpha2", decided.pk: "k8s-workload-v1alpha2", cancelled.pk: ""}
    assert jobs.record_backends(batch, api=None) == set()  # decided now: the next batch lists it

    # The batch then sends no snapshot LIST for it: its first request is its namespace's LimitRanges, which an
    # unreachable cluster fails without leaving "no defaults" cached for when it is back.
    counts = jobs.reconcile_many([new.pk])
    assert counts == {"ok": 0, "failed": 1, "requeued": 0}
    assert GangJob.objects.get(pk=new.pk).phase_reason == "ClusterUnreachable"
    assert cache.get(limit_ranges.cache_key(new.cluster_id, new.namespace)) is None
