"""Issue 15 row H3 on the real control plane: a submitter (with a queue admin's template) tries to get a Job into
`kube-system` running as a controller's service account on a chosen node, tolerating every taint, reading Secrets.
Each way in is a 400 naming the field; nothing reaches the cluster. A job row that got there anyway (written before
the fix) is refused again by the reconciler before it creates anything (defense in depth)."""
from __future__ import annotations

import uuid

import pytest
from kubernetes import client
from rest_framework.test import APIClient

from scheduling.choices import GangPhase
from scheduling.kube.errors import CREATE_REFUSED
from scheduling.kube.objects import JOB
from scheduling.models import GangJob, QueuePolicy, RuntimeTemplate
from tests import builders

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]

AT = "spec.podSets[worker].template.spec"


@pytest.fixture
def team(world):
    """team-a's queue admin and a submitter, as API clients; team-a allows the test namespace only."""
    queue = QueuePolicy.objects.get(name="team-a")
    queue.clusters.set([world.cluster])
    admin, sub = builders.make_user("qadmin"), builders.make_user("sub")
    builders.grant(queue, "admin", user=admin)
    builders.grant(queue, "submitter", user=sub)
    clients = {}
    for name, user in (("admin", admin), ("sub", sub)):
        clients[name] = APIClient()
        clients[name].force_authenticate(user)
    return clients


def pod_spec(**pod):
    container = builders.container(env=[{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "x", "key": "k"}}}])
    ps = builders.pod_set(replicas=1, containers=[container])
    ps["template"]["spec"].update(pod)
    return builders.template_spec(pod_sets=[ps])


def gangweb_jobs_in_kube_system(kube_api) -> list[str]:
    jobs = client.BatchV1Api(kube_api).list_namespaced_job("kube-system", label_selector="gangweb.io/job-uid")
    return [j.metadata.name for j in jobs.items]


@pytest.mark.parametrize("pod,field", [
    ({"serviceAccountName": "clusterrole-aggregation-controller"}, f"{AT}.serviceAccountName"),
    ({"nodeName": "control-plane"}, f"{AT}.nodeName"),
    ({"tolerations": [{"operator": "Exists"}]}, f"{AT}.tolerations[0]"),
    ({"automountServiceAccountToken": True}, f"{AT}.automountServiceAccountToken"),
])
def test_the_template_half_of_the_attack_is_400_naming_the_field(world, team, pod, field):
    r = team["admin"].post("/api/v1/templates/", {"name": "evil", "queue": "team-a", "spec": pod_spec(**pod)},
                           format="json")
    assert r.status_code == 400, r.data
    assert field in r.data
    assert not RuntimeTemplate.objects.filter(name="evil").exists()


def test_the_namespace_half_of_the_attack_is_400_and_nothing_reaches_the_cluster(world, team, kube_api):
    secrets = pod_spec(volumes=[{"name": "creds", "secret": {"secretName": "bootstrap-token-abcdef"}}])
    assert team["admin"].post("/api/v1/templates/", {"name": "reader", "queue": "team-a", "spec": secrets},
                              format="json").status_code == 201
    body = {"name": f"evil-{uuid.uuid4().hex[:4]}", "template": "reader", "queue": "team-a", "cluster": "local"}
    r = team["sub"].post("/api/v1/jobs/", {**body, "namespace": "kube-system"}, format="json")
    assert r.status_code == 400
    assert "reserved" in r.data["namespace"][0]
    r = team["sub"].post("/api/v1/jobs/", {**body, "namespace": "default"}, format="json")
    assert r.status_code == 400
    assert r.data["namespace"] == [f"queue 'team-a' allows namespaces {world.namespace}, not 'default'"]
    assert GangJob.objects.count() == 0
    assert gangweb_jobs_in_kube_system(kube_api) == []
    r = team["sub"].post("/api/v1/jobs/", {**body, "namespace": world.namespace}, format="json")
    assert r.status_code == 201, r.data  # the same template in the team's own namespace is fine


def test_a_job_row_in_kube_system_is_refused_by_the_reconciler_before_it_creates_anything(world, kube_api):
    job = world.submit(replicas=1)
    GangJob.objects.filter(pk=job.pk).update(namespace="kube-system")  # a row written before the fix
    result = world.reconcile(job)
    job.refresh_from_db()
    assert (job.phase, job.phase_reason) == (GangPhase.FAILED, CREATE_REFUSED)
    assert "gangweb's pod-spec policy refused" in job.phase_message and "reserved" in job.phase_message
    assert result.error is not None and result.error.api_reason == "PolicyRefused"
    assert gangweb_jobs_in_kube_system(kube_api) == []


def test_a_queue_tightened_after_submit_stops_the_reconciler_too(world, kube_api):
    job = world.submit(replicas=1)
    QueuePolicy.objects.filter(name="team-a").update(pod_security_level="restricted")
    world.reconcile(job)
    job.refresh_from_db()
    assert (job.phase, job.phase_reason) == (GangPhase.FAILED, CREATE_REFUSED)
    assert "Pod Security restricted control" in job.phase_message
    assert world.gang(job, JOB) == []
