"""A job's objects after its root are created in two rounds of requests sent at once (reconcile/jobs/reconciler.py
`create_members`): the PodGroup with the Service, then the Indexed Job, whose pods need the PodGroup. Every object
names the root; a create that fails in a round is recorded on the job, and so is one failing beside it."""
from __future__ import annotations

import threading
import time

import pytest
from kubernetes import client

from scheduling.choices import ReconcileOutcome
from scheduling.constants import LABEL_JOB_UID
from scheduling.kube import objects
from scheduling.kube.objects import JOB, POD, SERVICE
from scheduling.models import GangJob
from scheduling.reconcile import owner_refs

from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]


def foreign_service(world, name: str) -> dict:
    """A Service under `name` that is not gangweb's (no job-uid label): a name the job's Service cannot take."""
    return client.CoreV1Api(world.api).create_namespaced_service(world.namespace, {
        "metadata": {"name": name}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}).to_dict()


def test_every_object_names_the_root_and_the_job_is_created_after_its_podgroup(world, monkeypatch):
    job = world.submit(backend="k8s-workload", replicas=2)
    spec = world.names(job)
    sent, create = [], objects.create

    def recording(api, ref, body):  # the real create, noting when and from which thread it ran
        began = time.monotonic()
        try:
            return create(api, ref, body)
        finally:
            sent.append((ref.kind, threading.current_thread().name, began, time.monotonic()))

    monkeypatch.setattr(objects, "create", recording)
    result = world.reconcile(job)

    assert result.error is None, result.message
    ns = world.namespace
    owner = spec.pod_sets[0].owner_name
    assert result.actions == [f"create Workload {ns}/{spec.gang_name}", f"create PodGroup {ns}/{spec.gang_name}",
                              f"create Service {ns}/{spec.service_name}", f"create Job {ns}/{owner}"]
    [workload] = world.gang(job, world.k8s.WORKLOAD)
    root = owner_refs.reference(workload)
    assert workload["metadata"].get("ownerReferences") is None
    for ref in (world.k8s.POD_GROUP, JOB, SERVICE):
        [obj] = world.gang(job, ref)
        assert obj["metadata"]["ownerReferences"] == [root], ref.kind
    when = {kind: (thread, began, ended) for kind, thread, began, ended in sent}
    assert set(when) == {"Workload", "PodGroup", "Service", "Job"}
    assert when["Workload"][2] <= min(when["PodGroup"][1], when["Service"][1])  # both need the root's UID
    assert when["PodGroup"][2] <= when["Job"][1]  # Workload -> PodGroup -> pods
    assert when["Service"][0].startswith("reconcile-fanout")  # sent beside the PodGroup, from the pass's pool
    pods = wait_for(lambda: len(p := world.gang(job, POD)) == 2 and p, 60, "2 pods")
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {spec.gang_name}


def test_a_failing_create_beside_the_podgroup_is_recorded_and_the_job_is_not_created(world):
    job = world.submit(backend="k8s-workload", replicas=2)
    spec = world.names(job)
    foreign = foreign_service(world, spec.service_name)

    result = world.reconcile(job)

    assert result.outcome == ReconcileOutcome.TERMINAL_ERROR and result.reason == "NameConflict"
    job = GangJob.objects.get(pk=job.pk)
    assert job.phase_reason == "NameConflict"
    assert job.phase_message.startswith(f"Service {world.namespace}/{spec.service_name} already exists and "
                                        "belongs to something other than gangweb")
    attempt = job.attempts.latest("pk")
    assert (attempt.outcome, attempt.reason) == (ReconcileOutcome.TERMINAL_ERROR, "NameConflict")
    assert attempt.actions == [f"create Workload {world.namespace}/{spec.gang_name}",
                               f"create PodGroup {world.namespace}/{spec.gang_name}"]
    [workload] = world.gang(job, world.k8s.WORKLOAD)
    [pod_group] = world.gang(job, world.k8s.POD_GROUP)  # created in the same round, recorded, owned by the root
    assert pod_group["metadata"]["ownerReferences"] == [owner_refs.reference(workload)]
    assert world.gang(job, JOB) == []  # the second round is never sent
    left = world.get(SERVICE, spec.service_name)
    assert left["metadata"]["uid"] == foreign["metadata"]["uid"]
    assert LABEL_JOB_UID not in (left["metadata"].get("labels") or {})


def test_two_failing_creates_of_one_round_are_both_recorded(world):
    job = world.submit(backend="k8s-workload", replicas=2)
    spec = world.names(job)
    _, pod_group = world.k8s().build_gang_objects(spec)
    pod_group["metadata"]["labels"] = {}  # the same PodGroup, but nobody's: not adopted
    objects.create(world.api, world.k8s.POD_GROUP, pod_group)
    foreign_service(world, spec.service_name)

    result = world.reconcile(job)

    # The first of the round (the PodGroup) ends the pass and is recorded on the job; the other is in its actions.
    assert result.reason == "NameConflict"
    job = GangJob.objects.get(pk=job.pk)
    assert job.phase_message.startswith(f"PodGroup {world.namespace}/{spec.gang_name} already exists")
    attempt = job.attempts.latest("pk")
    assert attempt.actions[0] == f"create Workload {world.namespace}/{spec.gang_name}"
    assert attempt.actions[1].startswith(f"create Service {world.namespace}/{spec.service_name} failed too: "
                                         f"NameConflict: Service {world.namespace}/{spec.service_name} already "
                                         "exists and belongs to something other than gangweb")
    assert len(attempt.actions) == 2
    assert world.gang(job, JOB) == [] and world.gang(job, SERVICE) == []
