"""The failing sample template `make run` installs (`sample-fails`, the README's second job) fails on the real
control plane as the README says: the gang runs, kwok ends each container with exit code 3 after 20 s
(localcluster's sim-exit stage), and the job reads Failed naming the pod set, index and container (the
mechanics of a failure's report: test_failure_and_logs.py)."""
import pytest

from scheduling.models import GangJob, QueuePolicy
from scheduling.services.clusters import local as local_cluster
from scheduling.services.jobs import lifecycle as job_service
from scheduling.services.templates import versions as template_versions
from tests import builders
from tests.cluster.reconcile_support import make_world, reconciled_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def test_the_sample_fails_template_ends_failed_with_its_exit_code_named(kube_cluster, kube_namespace, admin_user):
    world = make_world(kube_cluster, kube_namespace, admin_user)
    version = template_versions.create_template(None, local_cluster.SAMPLE_FAIL_TEMPLATE, "fails",
                                                local_cluster.SAMPLE_FAIL_SPEC)
    body = builders.submit_body(version, QueuePolicy.objects.get(name="team-a"), world.cluster, name="oops",
                                namespace=world.namespace)
    job, _ = job_service.submit(world.user, body)

    failed = reconciled_until(world, GangJob.objects.get(pk=job.pk), "Failed", timeout=240)
    failure = failed.observed["failure"]
    assert (failure["pod_set"], failure["container"], failure["exit_code"], failure["reason"]) == (
        "worker", "main", 3, "Error")
    assert failure["summary"] == f"worker[{failure['index']}] container main exited with code 3 (Error)"
