"""A pass whose job row is older than the job's end creates nothing (issue 31): built before the job ended, was
cancelled or was cleaned up, and run after, it reads the row again before its first create and stops there.

The interleaving is fixed by the test, not by timing: the pass is built first (its row and its objects, a resync's
snapshot slice holding nothing of the job: the clean-up deleted it all), then the row changes, then the pass runs.
No cluster is needed: an API client that sends nothing stands in, and every request a pass would make is counted
(`kube.objects.requests`), so a create that slips through is seen as a counted CREATE. tests/cluster/test_left_behind.py
plays the same interleaving on the real control plane."""
from __future__ import annotations

import time

import pytest
from django.utils import timezone

from scheduling.backends.k8s_workload_v1alpha2 import K8sWorkloadV1alpha2
from scheduling.choices import DesiredState, GangPhase
from scheduling.kube import objects
from scheduling.models import GangJob
from scheduling.reconcile import jobs, names
from scheduling.reconcile.observed import Observed
from tests import builders

pytestmark = pytest.mark.django_db


class SendsNothing:
    """An ApiClient that fails any request it is asked to send (the pass records that as an unexpected error)."""

    def __getattr__(self, name):
        raise AssertionError(f"the pass sent a request ({name})")


@pytest.fixture
def job(setup):
    template, queue, cluster = setup
    spec = builders.template_spec(pod_sets=[builders.pod_set(replicas=2)])
    return GangJob.objects.create(name="late", template_version=template, queue=queue, cluster=cluster,
                                  resolved_spec=spec, backend_plugin=K8sWorkloadV1alpha2.name,
                                  phase=GangPhase.RUNNING)


def stale_pass(job: GangJob) -> jobs.JobReconciler:
    """A pass over `job` as a resync builds it: the row as loaded now, the job's slice of a snapshot that holds
    nothing of it (its clean-up deleted the gang), listed a moment ago."""
    row = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)
    snapshot = Observed(listed_at=time.time(), limit_defaults={row.namespace: {}})
    return jobs.JobReconciler(row, SendsNothing(), snapshot)


def ended_succeeded(job):
    now = timezone.now()
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.SUCCEEDED, finished_at=now, cleaned_up_at=now)


def ended_failed(job):
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.FAILED, finished_at=timezone.now())


def cancelled(job):
    now = timezone.now()
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.CANCELLED, desired_state=DesiredState.CANCEL,
                                             cleaned_up_at=now, objects_removed_at=now)


def cancel_asked(job):
    GangJob.objects.filter(pk=job.pk).update(desired_state=DesiredState.CANCEL)


def cleaned_only(job):
    GangJob.objects.filter(pk=job.pk).update(cleaned_up_at=timezone.now())


@pytest.mark.parametrize(("change", "said"), [
    (ended_succeeded, "the job is Succeeded"),
    (ended_failed, "the job is Failed"),
    (cancelled, "the job is Cancelled"),
    (cancel_asked, "the job's cancel was asked for"),
    (cleaned_only, "the job was cleaned up"),
], ids=["succeeded-and-cleaned", "failed", "cancelled", "cancel-asked", "cleaned-up"])
def test_a_pass_built_before_the_job_ended_creates_nothing_after_it(job, change, said):
    late = stale_pass(job)  # built before: its row says Running, its snapshot slice holds nothing
    change(job)  # the job ends and its clean-up runs, between the pass's load and its create step
    before = GangJob.objects.values("phase", "cleaned_up_at", "objects_removed_at").get(pk=job.pk)
    objects.requests.reset()

    result = jobs.run_pass(late.job, api=late.api, observed=late.observed)

    assert objects.requests.total() == 0  # not a create, nor any other request
    assert result.error is None and result.reason == ""
    root = names.gang_name(job.name, job.uid, job.gang_generation)
    assert f"{said} since this pass loaded it: Workload default/{root} not created" in result.actions
    # The row keeps what the end and the clean-up wrote: nothing was made that would need cleaning up again.
    assert GangJob.objects.values("phase", "cleaned_up_at", "objects_removed_at").get(pk=job.pk) == before


def test_a_pass_whose_job_still_runs_goes_on_to_create(job):
    late = stale_pass(job)
    objects.requests.reset()

    result = jobs.run_pass(late.job, api=late.api, observed=late.observed)

    # The row was read again and let it through: it tried the root (and the stand-in refused to send it).
    assert objects.requests.counts["CREATE scheduling.k8s.io/workloads"] == 1
    assert result.reason == "UnexpectedError"
    assert not any("not created" in a for a in result.actions)
