"""A Volcano queue at its capability warns at submit from Volcano's own Queue status, read back from the real
control plane. Volcano does not run here; its Queue CRD is served, and the test writes the status subresource by
hand, as Volcano's scheduler would (`status.allocated`, a resource list)."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client

from scheduling.models import Cluster, QueueClusterState, QueuePolicy
from scheduling.reconcile import probe
from scheduling.reconcile import volcano_desired as vd
from scheduling.reconcile import volcano_queues as volcano_sync
from tests import builders

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
G, V, P = vd.GROUP, vd.VERSION, vd.PLURAL
INSTANCE = "gangweb-volcano-limit-tests"  # its own owner label value: never touches other tests' Queues
NAME = "vq-capped"


def _delete(custom):
    try:
        custom.delete_cluster_custom_object(G, V, P, NAME)
    except client.ApiException as exc:
        assert exc.status == 404


@pytest.fixture
def west(kube_cluster, settings, queue_syncs):
    """The session's control plane as cluster "vq-west" (probed: it serves Volcano); no Queue NAME before or after."""
    settings.GANGWEB_INSTANCE = INSTANCE
    custom = client.CustomObjectsApi(kube_cluster.api_client())
    _delete(custom)
    cluster = Cluster.objects.create(name="vq-west", kubeconfig=Path(kube_cluster.kubeconfig).read_text())
    probe.probe_cluster(cluster)
    cluster.refresh_from_db()
    assert f"{G}/{V}" in cluster.served_apis
    yield cluster, custom
    _delete(custom)


def test_a_volcano_queue_at_capacity_warns_from_volcanos_status(api, west):
    cluster, custom = west
    r = api.post("/api/v1/queues/", {"name": NAME, "gpu_limit": 8, "clusters": ["vq-west"],
                                     "allowed_namespaces": ["default"]}, format="json")
    assert r.status_code == 201, r.data
    volcano_sync.sync_cluster(cluster)
    assert custom.get_cluster_custom_object(G, V, P, NAME)["spec"]["capability"] == {"nvidia.com/gpu": "8"}

    # What Volcano's scheduler would write: 4 of the queue's 8 GPUs (and 6 cores) allocated.
    custom.patch_cluster_custom_object_status(G, V, P, NAME, {"status": {
        "state": "Open", "allocated": {"nvidia.com/gpu": "4", "cpu": "6", "memory": "8Gi"}, "running": 2}})
    volcano_sync.sync_cluster(cluster)
    stored = QueueClusterState.objects.get(policy__name=NAME, cluster=cluster, family="volcano").status
    assert stored["allocated"]["gpu"] == 4 and stored["allocated"]["cpu"] == 6000

    template = builders.make_template(f"t-{uuid.uuid4().hex[:6]}", backend="volcano", pod_sets=[
        builders.pod_set("worker", replicas=3, containers=[builders.container(gpu=2, cpu="500m")])])
    r = api.post("/api/v1/jobs/", builders.submit_body(template, QueuePolicy.objects.get(name=NAME), cluster),
                 format="json")
    assert r.status_code == 201, r.data
    (warning,) = [w for w in r.data["warnings"] if w["code"] == "OverQueueLimit"]
    assert (warning["resource"], warning["limit"], warning["allocated"], warning["requested"], warning["source"]) == \
        ("gpu", 8, 4, 6, "volcano")
    assert warning["message"] == (f"queue '{NAME}' in cluster 'vq-west': Volcano's Queue status says 4 of 8 GPUs "
                                  "allocated (gpu_limit); this job's 6 GPUs wait until enough is freed")

    # Volcano frees the GPUs: the next read of its status lets the same job through without a warning.
    custom.patch_cluster_custom_object_status(G, V, P, NAME, {"status": {"allocated": {"nvidia.com/gpu": "0"}}})
    volcano_sync.sync_cluster(cluster)
    r = api.post("/api/v1/jobs/", builders.submit_body(template, QueuePolicy.objects.get(name=NAME), cluster),
                 format="json")
    assert r.status_code == 201, r.data
    assert [w for w in r.data["warnings"] if w["code"] == "OverQueueLimit"] == []
