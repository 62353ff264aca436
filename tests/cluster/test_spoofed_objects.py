"""Objects are read only where gangweb put them (issue 15, H4), on the real control plane.

Anyone who may create a Job anywhere in the cluster can label it with another team's job UID (shown to every viewer)
and give it the name of that job's Indexed Job. Before, the resync and the watch selected by label across namespaces
and keyed owners by name only: such a Job in the attacker's own namespace, whose two pods Succeeded, made gangweb mark
the victim's job Succeeded and then delete its real PodGroup and Service.
"""
from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from scheduling.choices import GangPhase
from scheduling.constants import LABEL_INSTANCE, LABEL_JOB, LABEL_JOB_UID, LABEL_MANAGED_BY
from scheduling.kube import objects
from scheduling.kube.objects import JOB, POD, SERVICE
from scheduling.models import GangJob
from scheduling.reconcile import desired, resync, watching

from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]  # the watcher reads from its threads



@pytest.fixture
def attacker_namespace(kube_api):
    """A namespace of someone else's; named to be listed after the test's namespace (a name-keyed merge of a
    cluster-wide LIST kept the last object of a name)."""
    core = client.CoreV1Api(kube_api)
    name = f"zz-attacker-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    wait_for(lambda: _has_default_sa(core, name), 30, "the default ServiceAccount")
    yield name
    core.delete_namespace(name)


def _has_default_sa(core, ns) -> bool:
    return any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(ns).items)


def spoof(api, namespace: str, victim: GangJob, owner_name: str) -> dict:
    """In `namespace`: a Job named like the victim's Indexed Job, labelled with the victim's job UID, whose 2 pods
    (labelled the same) Succeed at once (the local cluster's simulated pods finish on `gangweb.io/sim-exit`)."""
    labels = {LABEL_MANAGED_BY: "gangweb", LABEL_INSTANCE: desired.instance_label(), LABEL_JOB: victim.name,
              LABEL_JOB_UID: str(victim.uid)}
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": owner_name, "namespace": namespace, "labels": labels},
            "spec": {"completions": 2, "parallelism": 2, "completionMode": "Indexed", "backoffLimit": 0,
                     "template": {"metadata": {"labels": labels, "annotations": {"gangweb.io/sim-exit": "0"}},
                                  "spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "x", "image": "registry.example/x:1"}]}}}}
    return objects.create(api, JOB, body)


def test_a_look_alike_job_elsewhere_neither_finishes_the_job_nor_deletes_its_objects(world, attacker_namespace,
                                                                                       watcher):
    victim = world.submit(backend="k8s-workload", replicas=2)
    assert world.reconcile(victim).error is None
    names = world.names(victim)
    owner_name = names.pod_sets[0].owner_name
    wait_for(lambda: GangJob.objects.get(pk=victim.pk).phase == GangPhase.RUNNING, 90, "the victim Running")

    fake = spoof(world.api, attacker_namespace, victim, owner_name)
    selector = f"{LABEL_JOB_UID}={victim.uid}"

    def fake_pods_succeeded():
        pods = objects.list_objects(world.api, POD, attacker_namespace, selector)
        return len(pods) == 2 and all(p["status"].get("phase") == "Succeeded" for p in pods)

    wait_for(fake_pods_succeeded, 90, "the look-alike's 2 pods Succeeded")
    watcher.interrupt()  # the watch lists everything again too

    for _ in range(2):
        stats = resync.resync_cluster(world.cluster)
        assert stats["failed"] == 0

    victim.refresh_from_db()
    assert victim.phase == GangPhase.RUNNING and victim.cleaned_up_at is None
    # The Job gangweb created, by name, and (issue 30) every other object it created, by apiVersion/Kind/name.
    recorded_jobs = {k: v for k, v in victim.owner_uids.items() if "/" not in k}
    assert recorded_jobs == {owner_name: world.gang(victim, JOB)[0]["metadata"]["uid"]}
    assert victim.owner_uids[f"v1/Service/{names.service_name}"] == world.get(SERVICE, names.service_name)[
        "metadata"]["uid"]
    assert victim.observed["pod_counts"]["succeeded"] == 0 and victim.observed["pod_counts"]["running"] == 2
    assert world.get(world.k8s.POD_GROUP, names.gang_name) is not None  # the version discovery chose
    assert world.get(world.k8s.WORKLOAD, names.gang_name) is not None
    assert world.get(SERVICE, names.service_name) is not None
    # ... and nothing of the attacker's was touched either: gangweb acts only in the job's namespace.
    assert objects.get(world.api, JOB, attacker_namespace, owner_name)["metadata"]["uid"] == fake["metadata"]["uid"]

    # The watch's observation of the victim (its cache holds the look-alikes) selects the same objects.
    selected = watching.select(watcher.objects_of(str(victim.uid)), world.k8s(), victim)
    assert {o["metadata"]["namespace"] for o in [*selected.gang, *selected.owners, *selected.pods]} == {world.namespace}
    assert len(selected.pods) == 2 and len(selected.owners) == 1


def test_a_job_of_the_jobs_name_that_gangweb_did_not_create_is_not_adopted(world):
    job = world.submit(backend="k8s-workload", replicas=1)
    assert world.reconcile(job).error is None
    names = world.names(job)
    (mine,) = world.gang(job, JOB)
    objects.delete(world.api, JOB, world.namespace, mine["metadata"]["name"], uid=mine["metadata"]["uid"],
                   propagation="Background")
    wait_for(lambda: world.get(JOB, names.pod_sets[0].owner_name) is None, 60, "the Job gone")
    # Someone with rights in the namespace puts their own Job, labelled as the job's, under the job's Job name.
    spoof(world.api, world.namespace, job, names.pod_sets[0].owner_name)

    result = world.reconcile(job)

    assert result.reason == "NameConflict", result.message
    assert "not adopted" in result.message
