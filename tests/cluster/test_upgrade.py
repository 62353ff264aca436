"""A 1.36.3 control plane upgraded in place to 1.37.2 under gangweb's jobs (same etcd; the 1.36 components stopped,
the 1.37 ones started): one job Queued (no room) and one Running. Within one resync every job has a reason and an
attempt row; the queued job gets v1beta1 objects under new names and runs once a node is added; the running job's
pods are untouched; nothing logs a traceback. Once with the v1alpha2 objects removed first (as the 1.37 release
note asks), once without: then 1.37 cannot list any Workload or PodGroup (it cannot decode the v1alpha2 ones in
etcd), every job says so with what an admin must run, the running job's pods stay, and once the admin has deleted
them the next resync moves both jobs as above. Needs the 1.36.3 and 1.37.2 binaries; deselected unless
GANGWEB_K8S_UPGRADE_TO=1.37.2 (`make test` sets it in its 1.36.3 pass); it starts its own cluster."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

import localcluster
from localcluster.processes import wait_until
from scheduling.backends.k8s_workload_v1alpha2 import K8sWorkloadV1alpha2
from scheduling.backends.k8s_workload_v1beta1 import K8sWorkloadV1beta1
from scheduling.choices import GangPhase, ReconcileOutcome
from scheduling.kube import client as kube_client
from scheduling.kube import objects
from scheduling.kube.errors import STORED_VERSION_UNREADABLE, KubeError
from scheduling.kube.objects import POD
from scheduling.models import Cluster, GangJob
from scheduling.reconcile import probe, resync
from tests import builders

from .reconcile_support import World, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db, pytest.mark.k8s_version("1.36", upgrade_to="1.37.2")]
POOL = "gangweb.io/test-pool"
NS = "upgrade"


def phase(job) -> str:
    return GangJob.objects.get(pk=job.pk).phase


def live_pods(world, job) -> list[dict]:
    return [p for p in world.gang(job, POD) if not p["metadata"].get("deletionTimestamp")]


def remove_v1alpha2_objects(api) -> list[str]:
    """What the release note asks of an admin: delete every v1alpha2 Workload and PodGroup (finalizers released),
    with `--cascade=orphan` (docs/backends.md: the Workload is each job's root object; a cascading delete would let
    the garbage collector delete the jobs' Indexed Jobs and running pods with it)."""
    removed = []
    for ref in (K8sWorkloadV1alpha2.POD_GROUP, K8sWorkloadV1alpha2.WORKLOAD):
        for obj in objects.list_objects(api, ref, None, ""):
            meta = obj["metadata"]
            if meta.get("finalizers"):
                objects.merge_patch(api, ref, meta["namespace"], meta["name"], {"metadata": {"finalizers": None}})
            objects.delete(api, ref, meta["namespace"], meta["name"], propagation="Orphan")
            removed.append(f"{ref.kind} {meta['name']}")
    # Orphan: each stays until the garbage collector has taken its reference off the dependents; gone before the
    # upgrade, or 1.37 would find them in etcd.
    wait_for(lambda: not any(objects.list_objects(api, ref, None, "")
                             for ref in (K8sWorkloadV1alpha2.POD_GROUP, K8sWorkloadV1alpha2.WORKLOAD)), 60,
             "the v1alpha2 objects gone")
    return removed


@pytest.mark.parametrize("remove_first", [True, False], ids=["v1alpha2-removed-first", "v1alpha2-left-in-etcd"])
def test_upgrade_in_place_under_a_queued_and_a_running_job(tmp_path, admin_user, enqueued, caplog, remove_first):
    state_dir = tmp_path / "state"
    cluster = localcluster.up(localcluster.ClusterConfig(state_dir=state_dir, k8s_version="1.36.3", nodes=1,
                                                         install_crds=False, die_with_parent=True))
    try:
        row = Cluster.objects.create(name="local", kubeconfig=Path(cluster.kubeconfig).read_text())
        probe.probe_cluster(row)
        builders.make_queue("team-a", allowed_namespaces=[NS])
        with cluster.api_client() as admin:
            core = client.CoreV1Api(admin)
            core.create_namespace({"metadata": {"name": NS}})
            wait_until(lambda: _has_sa(core), 30, "default ServiceAccount")
        world = World(cluster=row, user=admin_user, namespace=NS, api=kube_client.api_client(row))
        runs = world.submit(replicas=2, containers=[builders.container(cpu="100m", memory="64Mi")])
        waits = world.submit(replicas=2, containers=[builders.container(cpu="1", memory="1Gi", gpu=8)],
                             node_selector={POOL: "later"})
        for job in (runs, waits):
            assert world.reconcile(job).error is None
        wait_for(lambda: (world.reconcile(runs), phase(runs))[1] == GangPhase.RUNNING, 90, "the small job Running")
        wait_for(lambda: (world.reconcile(waits), phase(waits))[1] == GangPhase.QUEUED, 60, "the big job Queued")
        assert {GangJob.objects.get(pk=j.pk).backend_plugin for j in (runs, waits)} == {K8sWorkloadV1alpha2.name}
        before = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in live_pods(world, runs)}
        old_gang = world.names(waits).gang_name
        if remove_first:
            assert len(remove_v1alpha2_objects(world.api)) == 4

        localcluster.switch_version(state_dir, "1.37.2", die_with_parent=True)
        caplog.clear()
        with caplog.at_level(logging.INFO):
            stats = resync.resync_cluster(Cluster.objects.get(pk=row.pk))
        print("resync after the upgrade:", stats)

        if not remove_first:
            # 1.37 cannot decode the v1alpha2 objects left in etcd: no Workload or PodGroup can be listed in any
            # namespace (kube-scheduler cannot place any gang either). Every job says so and what an admin must do.
            assert stats["jobs"] == 2 and stats["failed"] == 2, stats
            for job in (runs, waits):
                job.refresh_from_db()
                assert job.backend_plugin == K8sWorkloadV1alpha2.name  # the switch waits until it can read
                assert job.phase_reason == STORED_VERSION_UNREADABLE, (job.phase_reason, job.phase_message)
                assert "stored as scheduling.k8s.io/v1alpha2" in job.phase_message
                assert "to scheduling.k8s.io/v1beta1" in job.phase_message
                assert "--ignore-store-read-error-with-cluster-breaking-potential=true" in job.phase_message
                attempt = job.attempts.order_by("-id").first()
                assert (attempt.outcome, attempt.reason) == (ReconcileOutcome.TRANSIENT_ERROR,
                                                             STORED_VERSION_UNREADABLE)
            assert {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in live_pods(world, runs)} == before
            assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records
                                                                   if r.exc_info]
            # The admin does late what the release note asked, then the next resync moves both jobs.
            leftovers = [world.names(runs).gang_name, old_gang]
            assert len(delete_unreadable(world.api, leftovers)) == 4
            wait_for(lambda: _listable(world.api), 120, "Workloads and PodGroups listable again")
            caplog.clear()
            with caplog.at_level(logging.INFO):
                stats = resync.resync_cluster(Cluster.objects.get(pk=row.pk))
            print("resync after the admin's cleanup:", stats)

        assert stats["jobs"] == 2 and stats["failed"] == 0, stats
        for job in (runs, waits):
            job.refresh_from_db()
            assert job.backend_plugin == K8sWorkloadV1beta1.name
            assert job.phase_reason, job
            attempt = job.attempts.order_by("-id").first()
            assert attempt.reason == "APIVersionChanged", (attempt.reason, attempt.message)
            assert "scheduling.k8s.io/v1alpha2" in attempt.message and "scheduling.k8s.io/v1beta1" in attempt.message
        assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]
        # The running job: the same pods, still running; its gang now in v1beta1 under the same names.
        assert {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in live_pods(world, runs)} == before
        assert all(p["status"]["phase"] == "Running" for p in live_pods(world, runs))
        assert world.get(K8sWorkloadV1beta1.POD_GROUP, world.names(runs).gang_name) is not None
        assert runs.phase == GangPhase.RUNNING
        # The queued job: recreated in v1beta1 under new names, and it runs once there is room.
        new_gang = world.names(waits).gang_name
        assert new_gang != old_gang and waits.gang_generation == 1
        assert world.get(K8sWorkloadV1beta1.POD_GROUP, new_gang) is not None
        timeline = list(waits.transitions.order_by("attempt", "at").values_list("phase", "reason"))
        assert (GangPhase.DISPATCHED, "APIVersionChanged") in timeline
        cluster.add_node("later-0", gpus=16, labels={POOL: "later"})
        wait_for(lambda: (world.reconcile(waits), phase(waits))[1] == GangPhase.RUNNING, 120, "the big job Running")
    finally:
        localcluster.down(state_dir)


def delete_unreadable(api, names: list[str]) -> list[str]:
    """What an admin runs after upgrading with v1alpha2 objects left: `kubectl delete --ignore-store-read-error-with-
    cluster-breaking-potential` of each (1.37: gate AllowUnsafeMalformedObjectDeletion, beta, on by default)."""
    deleted = []
    for ref in (K8sWorkloadV1beta1.POD_GROUP, K8sWorkloadV1beta1.WORKLOAD):
        for name in names:
            api.call_api(f"/apis/{ref.api_version}/namespaces/{NS}/{ref.plural}/{name}", "DELETE",
                         body={"apiVersion": "v1", "kind": "DeleteOptions",
                               "ignoreStoreReadErrorWithClusterBreakingPotential": True},
                         response_types_map={200: "object"}, auth_settings=["BearerToken"],
                         _return_http_data_only=True)
            deleted.append(f"{ref.kind} {name}")
    return deleted


def _listable(api) -> bool:
    try:
        for ref in (K8sWorkloadV1beta1.POD_GROUP, K8sWorkloadV1beta1.WORKLOAD):
            objects.list_objects(api, ref, None, "")
        return True
    except KubeError:
        return False


def _has_sa(core) -> bool:
    try:
        core.read_namespaced_service_account("default", NS)
        return True
    except ApiException as e:
        if e.status == 404:
            return False
        raise
