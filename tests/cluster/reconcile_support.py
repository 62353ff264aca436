"""Helpers for the reconcile tests against the real control plane: a gangweb world (Cluster row pointing at the
session's cluster, queues, an admin), job submission through the real service, and object lookups."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from kubernetes.client.rest import ApiException

from scheduling.backends import registry
from scheduling.constants import LABEL_JOB_UID
from scheduling.kube import client as kube_client
from scheduling.kube import objects
from scheduling.models import Cluster, GangJob, QueuePolicy
from scheduling.reconcile import desired, jobs, probe
from scheduling.services.jobs import lifecycle as job_service
from tests import builders


def wait_for(predicate, timeout: float = 60, what="condition", interval: float = 0.5):
    """Poll `predicate` until it returns something truthy; return it. AssertionError after `timeout` seconds, naming
    `what` (a string, or a callable returning one: e.g. the last value seen)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what() if callable(what) else what}")
        time.sleep(interval)


@dataclass
class World:
    """The gangweb side of a cluster test: Cluster row, queues, admin user, the test's namespace, an ApiClient."""

    cluster: Cluster
    user: object
    namespace: str
    api: object

    def submit(self, backend="k8s-workload", replicas=3, name=None, containers=None, annotations=None,
               node_selector=None, queue="team-a", **template_extra) -> GangJob:
        """Create a one-pod-set template and submit a job from it into the test namespace (not reconciled)."""
        pod_set = builders.pod_set("worker", replicas=replicas,
                                   containers=containers or [builders.container(cpu="1", memory="1Gi")])
        if annotations:
            pod_set["template"]["metadata"]["annotations"] = annotations
        if node_selector:
            pod_set["template"]["spec"]["nodeSelector"] = node_selector
        version = builders.make_template(name=f"t-{uuid.uuid4().hex[:8]}", backend=backend, pod_sets=[pod_set],
                                         **template_extra)
        body = builders.submit_body(version, QueuePolicy.objects.get(name=queue), self.cluster,
                                    name=name or f"job-{uuid.uuid4().hex[:6]}", namespace=self.namespace)
        job, _ = job_service.submit(self.user, body)
        return GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)

    def reconcile(self, job: GangJob) -> jobs.PassResult:
        """One pass over the job (fresh from the database, as a task would load it)."""
        fresh = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)
        return jobs.run_pass(fresh)

    @property
    def k8s(self):
        """The k8s-workload plugin class discovery picks for this cluster: v1beta1 on 1.37, v1alpha2 on 1.36 (its
        refs WORKLOAD and POD_GROUP, condition SCHEDULED, name and api_version)."""
        return k8s_workload(self.cluster)

    def backend(self, job: GangJob):
        """The plugin instance the job uses (chosen at its first pass)."""
        job.refresh_from_db()
        return registry.by_name(job.backend_plugin)()

    def gang(self, job: GangJob, ref) -> list[dict]:
        """Objects of kind `ref` labelled with the job's UID, in the test namespace."""
        return objects.list_objects(self.api, ref, self.namespace, f"{LABEL_JOB_UID}={job.uid}")

    def get(self, ref, name: str) -> dict | None:
        """One object by name, or None."""
        try:
            return objects.get(self.api, ref, self.namespace, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def names(self, job: GangJob):
        """The GangSpec (names) of the job at its current generation."""
        job.refresh_from_db()
        return desired.gang_spec(GangJob.objects.select_related("queue").get(pk=job.pk))


def k8s_workload(cluster: Cluster):
    """The k8s-workload plugin class `registry.select` picks for `cluster`'s served APIs (probed)."""
    cls = registry.select("k8s-workload", set(cluster.served_apis or []))
    assert cls is not None, f"cluster {cluster.name} serves no scheduling.k8s.io Workload API"
    return cls


def make_world(kube_cluster, kube_namespace, admin_user) -> World:
    """Register the session's cluster as Cluster "local" (probed), queues team-a and team-b."""
    cluster = Cluster.objects.create(name="local", kubeconfig=Path(kube_cluster.kubeconfig).read_text())
    probe.probe_cluster(cluster)
    cluster.refresh_from_db()
    assert cluster.health == "Healthy", cluster.health_message
    builders.make_queue("team-a", allowed_namespaces=[kube_namespace])
    builders.make_queue("team-b", allowed_namespaces=[kube_namespace])
    return World(cluster=cluster, user=admin_user, namespace=kube_namespace, api=kube_client.api_client(cluster))


def reconciled_until(world, job, phase: str, attempt: int = 0, timeout: float = 120) -> GangJob:
    """Reconcile passes (as the resync runs them) until the job is in `phase` in `attempt`; returns the fresh row."""
    def there():
        result = world.reconcile(job)
        assert result.error is None, result.message
        fresh = GangJob.objects.get(pk=job.pk)
        return fresh.phase == phase and fresh.transitions.filter(phase=phase, attempt=attempt).exists() and fresh
    return wait_for(there, timeout=timeout, what=f"{phase} in attempt {attempt}", interval=1)
