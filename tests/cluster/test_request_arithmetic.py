"""Issue 19 on the real control plane: the overhead a RuntimeClass adds is counted before the pods exist, as the
API server's admission then writes it into them; a job with the longest name and several pod sets gets one
Indexed Job per pod set."""
from __future__ import annotations

import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from scheduling.backends import coscheduling_v1alpha1
from scheduling.kube import resources
from scheduling.kube.objects import JOB, POD
from scheduling.models import GangJob, QueuePolicy
from scheduling.reconcile import probe
from scheduling.services.jobs import lifecycle as job_service
from scheduling.services.templates import versions as template_versions
from tests import builders

from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]


@pytest.fixture
def runtime_class(world):
    """A RuntimeClass with overhead.podFixed 250m / 128Mi (cluster-scoped: deleted after the test)."""
    name = f"gw-kata-{uuid.uuid4().hex[:6]}"
    node = client.NodeV1Api(world.api)
    node.create_runtime_class({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
                               "handler": "runc", "overhead": {"podFixed": {"cpu": "250m", "memory": "128Mi"}}})
    yield name
    try:
        node.delete_runtime_class(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _submit(world, pod_sets, backend, name, exceptions=()) -> GangJob:
    version = template_versions.create_template(world.user, f"t-{uuid.uuid4().hex[:8]}", "",
                                               builders.template_spec(backend=backend, pod_sets=pod_sets),
                                               policy_exceptions=list(exceptions))
    body = builders.submit_body(version, QueuePolicy.objects.get(name="team-a"), world.cluster, name=name,
                                namespace=world.namespace)
    job, _ = job_service.submit(world.user, body)
    return GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)


def test_a_runtime_class_overhead_is_counted_as_admission_then_adds_it_to_the_pods(world, runtime_class):
    probe.probe_cluster(world.cluster)  # the probe reads the RuntimeClasses into the cluster's row
    world.cluster.refresh_from_db()
    assert world.cluster.runtime_classes[runtime_class] == {"cpu": "250m", "memory": "128Mi"}

    pod_set = builders.pod_set("worker", replicas=2, containers=[builders.container(cpu="1", memory="1Gi")])
    pod_set["template"]["spec"]["runtimeClassName"] = runtime_class
    job = _submit(world, [pod_set], "coscheduling", f"rc-{uuid.uuid4().hex[:6]}", exceptions=["runtimeClassName"])
    # Stored at submit: 2 × (1 core + 250m), 2 × (1Gi + 128Mi).
    assert (job.requested_cpu_millicores, job.requested_memory_bytes) == (2500, 2 * 1152 * 2**20)

    result = world.reconcile(job)
    assert result.error is None, result.message
    [pod_group] = world.gang(job, coscheduling_v1alpha1.POD_GROUP)
    assert pod_group["spec"]["minResources"] == {"cpu": "2500m", "memory": str(2 * 1152 * 2**20)}

    pods = wait_for(lambda: len(p := world.gang(job, POD)) == 2 and p, 60, "the job's 2 pods")
    for pod in pods:
        # The API server's RuntimeClass admission wrote the overhead into the pod; counted from the pod as the
        # cluster holds it, the pod asks exactly what gangweb counted before it existed.
        assert pod["spec"]["overhead"] == {"cpu": "250m", "memory": "128Mi"}
        assert resources.as_numbers(resources.pod_requests(pod["spec"])) == {"cpu": 1.25, "memory": 1152 * 2**20}
    job.refresh_from_db()
    if job.why_pending:
        assert job.why_pending["job_requests"] == {"cpu": 2.5, "memory": 2 * 1152 * 2**20}


def test_the_longest_job_name_with_three_pod_sets_creates_three_indexed_jobs(world):
    """Issue 19: a 42+ character job name gave every pod set one Indexed Job name; only one was created."""
    name = "a" * 63
    pod_sets = [builders.pod_set(n, replicas=r, containers=[builders.container(cpu="100m", memory="64Mi")])
                for n, r in [("launcher", 1), ("worker-pool-aaaaaaaa", 2), ("worker-pool-aaaaaaab", 1)]]
    job = _submit(world, pod_sets, "k8s-workload", name)
    result = world.reconcile(job)
    assert result.error is None, result.message

    owners = wait_for(lambda: len(o := world.gang(job, JOB)) == 3 and o, 60, "3 Indexed Jobs")
    by_pod_set = {o["metadata"]["labels"]["gangweb.io/pod-set"]: o for o in owners}
    assert {ps: o["spec"]["parallelism"] for ps, o in by_pod_set.items()} == {
        "launcher": 1, "worker-pool-aaaaaaaa": 2, "worker-pool-aaaaaaab": 1}
    names = [o["metadata"]["name"] for o in owners]
    assert len(set(names)) == 3 and all(len(n) <= 52 for n in names), names
    for pod_set, owner in by_pod_set.items():
        assert pod_set in owner["metadata"]["name"]
    pods = wait_for(lambda: len(p := world.gang(job, POD)) == 4 and p, 60, "the job's 4 pods")
    assert sorted(p["metadata"]["labels"]["batch.kubernetes.io/job-name"] for p in pods) == sorted(
        [by_pod_set["launcher"]["metadata"]["name"], *[by_pod_set["worker-pool-aaaaaaaa"]["metadata"]["name"]] * 2,
         by_pod_set["worker-pool-aaaaaaab"]["metadata"]["name"]])
    # A second pass changes nothing: no Job is patched to another pod set's size (the KAI symptom of the defect).
    again = world.reconcile(job)
    assert again.error is None, again.message
    assert sorted(o["metadata"]["name"] for o in world.gang(job, JOB)) == sorted(names)
    assert {o["metadata"]["labels"]["gangweb.io/pod-set"]: o["spec"]["parallelism"] for o in world.gang(job, JOB)} \
        == {"launcher": 1, "worker-pool-aaaaaaaa": 2, "worker-pool-aaaaaaab": 1}
