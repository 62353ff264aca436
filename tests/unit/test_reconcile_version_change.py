"""A job pinned to a backend version its cluster no longer serves, when the family has no other served version: the
pass ends it Failed with a reason naming the version it had and those it could use (no traceback, an attempt row).
Needs no cluster: the decision is made from the probed `served_apis` before any request."""
from scheduling.choices import GangPhase, ReconcileOutcome
from scheduling.models import GangJob
from scheduling.reconcile import jobs
from tests.unit.test_reconcile_offline import DEAD, submit


def test_a_job_whose_family_has_no_served_version_left_fails_naming_both_versions(api, setup):
    template, queue, cluster = setup
    cluster.kubeconfig = DEAD
    cluster.served_apis = ["v1", "batch/v1", "scheduling.k8s.io/v1"]  # neither v1alpha2 nor v1beta1
    cluster.save()
    job = submit(api, template, queue, cluster, "stranded")
    GangJob.objects.filter(pk=job.pk).update(backend_plugin="k8s-workload-v1alpha2", phase=GangPhase.QUEUED)

    result = jobs.run_pass(GangJob.objects.select_related("cluster", "queue").get(pk=job.pk))

    assert (result.outcome, result.reason) == (ReconcileOutcome.TERMINAL_ERROR, "APIVersionRemoved")
    job.refresh_from_db()
    assert (job.phase, job.phase_reason) == (GangPhase.FAILED, "APIVersionRemoved")
    assert "no longer serves scheduling.k8s.io/v1alpha2" in job.phase_message
    assert "scheduling.k8s.io/v1beta1" in job.phase_message
    attempt = job.attempts.order_by("-id").first()
    assert (attempt.outcome, attempt.reason) == (ReconcileOutcome.TERMINAL_ERROR, "APIVersionRemoved")
    assert job.transitions.order_by("-at").first().reason == "APIVersionRemoved"


def test_a_failed_job_of_a_removed_version_is_not_failed_again_at_every_pass(api, setup):
    template, queue, cluster = setup
    cluster.kubeconfig = DEAD
    cluster.served_apis = ["v1", "batch/v1"]
    cluster.save()
    job = submit(api, template, queue, cluster, "stranded")
    GangJob.objects.filter(pk=job.pk).update(backend_plugin="k8s-workload-v1alpha2", phase=GangPhase.QUEUED)
    jobs.run_pass(GangJob.objects.select_related("cluster", "queue").get(pk=job.pk))
    attempts = GangJob.objects.get(pk=job.pk).attempts.count()

    again = jobs.run_pass(GangJob.objects.select_related("cluster", "queue").get(pk=job.pk), record_idle=False)

    job.refresh_from_db()
    assert again.error is None and again.outcome == ReconcileOutcome.OK
    assert job.phase == GangPhase.FAILED and job.cleaned_up_at is not None
    assert job.attempts.count() == attempts + 1  # the cleanup is recorded once (cleaned_up_at changed), then quiet
    assert jobs.run_pass(GangJob.objects.select_related("cluster", "queue").get(pk=job.pk),
                         record_idle=False).actions == []
    assert job.attempts.count() == attempts + 1
