"""Kueue v0.17.0 runs on the local control plane (localcluster/kueue.py, the `kueue_cluster` fixture): its CRDs are
served, the manager holds its Lease, admits a Workload within quota, keeps one over quota pending with a position
in the visibility API (through the aggregation layer), and its webhooks (admission and conversion) answer."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

import localcluster
from localcluster import kueue
from localcluster.cli import kueue_summary
from localcluster.processes import wait_until

pytestmark = pytest.mark.cluster

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
QUOTA_GPUS = 4
ADMIT_TIMEOUT = 120  # seconds; Kueue admits within a second or two when idle, the machine is often loaded


def _get(api: client.ApiClient, path: str) -> dict:
    """GET a raw API path as a dict (what `kubectl get --raw` prints)."""
    return api.call_api(path, "GET", header_params={"Accept": "application/json"}, response_types_map={200: "object"},
                        auth_settings=["BearerToken"], _return_http_data_only=True)


def _started_here(cluster) -> dict:
    """What localcluster recorded of the Kueue it started (ports, config); fails for an attached cluster."""
    if not cluster.kueue:
        pytest.fail("this test reads localcluster's own Kueue set-up (unset GANGWEB_TEST_KUBECONFIG)")
    return cluster.kueue


def _gpu_pod_template(gpus: int = 1) -> dict:
    return {"spec": {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "registry.example/train:1",
        "resources": {"requests": {localcluster.GPU_RESOURCE: str(gpus)},
                      "limits": {localcluster.GPU_RESOURCE: str(gpus)}}}]}}


def workload(name: str, queue: str, pods: int, gpus_per_pod: int = 1) -> dict:
    """A v1beta2 Workload of one pod set of ``pods`` pods asking ``gpus_per_pod`` GPUs each.

    ``spec.priority`` is set, as Kueue's job integrations always do: Kueue v0.17.0's visibility API dereferences it
    for every pending Workload (pkg/visibility/storage/utils.go) and its handler panics on one without it (the
    request fails with 503 "stream error ... INTERNAL_ERROR", observed here)."""
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workload", "metadata": {"name": name},
            "spec": {"queueName": queue, "priority": 0,
                     "podSets": [{"name": "workers", "count": pods, "template": _gpu_pod_template(gpus_per_pod)}]}}


def condition(obj: dict, kind: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


@pytest.fixture
def gpu_queue(kueue_cluster, kube_api, kube_namespace):
    """A ResourceFlavor, a ClusterQueue with a nominal quota of `QUOTA_GPUS` GPUs in it for this test's namespace,
    and a LocalQueue ``lq`` pointing at it. Returns the ClusterQueue's name; the cluster-scoped objects are deleted
    after the test (their namespaced Workloads go with the namespace)."""
    objs = client.CustomObjectsApi(kube_api)
    flavor, cq = f"rf-{kube_namespace}", f"cq-{kube_namespace}"
    objs.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor", "metadata": {"name": flavor}})
    objs.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": cq},
        "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": kube_namespace}},
                 "resourceGroups": [{"coveredResources": [localcluster.GPU_RESOURCE], "flavors": [{
                     "name": flavor,
                     "resources": [{"name": localcluster.GPU_RESOURCE, "nominalQuota": QUOTA_GPUS}]}]}]}})
    objs.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, "localqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": "lq"},
        "spec": {"clusterQueue": cq}})
    yield cq
    for plural, name in (("clusterqueues", cq), ("resourceflavors", flavor)):
        try:
            objs.delete_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as e:
            if e.status != 404:
                raise


def test_kueue_crds_are_served_in_v1beta2_with_their_conversion_webhook_on_127_0_0_1(kueue_cluster, kube_api):
    resources = {r["name"] for r in _get(kube_api, f"/apis/{GROUP}/{VERSION}")["resources"]}
    assert {"workloads", "workloads/status", "clusterqueues", "localqueues", "resourceflavors",
            "cohorts"} <= resources
    crd = client.ApiextensionsV1Api(kube_api).read_custom_resource_definition(f"workloads.{GROUP}")
    storage = [v.name for v in crd.spec.versions if v.storage]
    assert storage == [VERSION]
    assert crd.spec.conversion.strategy == "Webhook"
    port = _started_here(kueue_cluster)["ports"]["webhook"]
    assert crd.spec.conversion.webhook.client_config.url == f"https://127.0.0.1:{port}/convert"


def test_the_conversion_webhook_serves_a_v1beta1_read_of_a_v1beta2_clusterqueue(kueue_cluster, kube_api,
                                                                                kube_namespace):
    objs = client.CustomObjectsApi(kube_api)
    name = f"conv-{kube_namespace}"
    objs.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"cohortName": "team-parent", "namespaceSelector": {}}})
    try:
        old = objs.get_cluster_custom_object(GROUP, "v1beta1", "clusterqueues", name)
        # v1beta2's spec.cohortName is v1beta1's spec.cohort (apis/kueue/v1beta1 clusterqueue_conversion.go)
        assert old["apiVersion"] == f"{GROUP}/v1beta1"
        assert old["spec"]["cohort"] == "team-parent"
    finally:
        objs.delete_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)


def test_the_manager_holds_and_renews_its_lease_and_status_shows_it(kueue_cluster, kube_api):
    coord = client.CoordinationV1Api(kube_api)
    first = coord.read_namespaced_lease(kueue.LEASE_NAME, kueue.NAMESPACE)
    assert first.spec.holder_identity
    wait_until(lambda: coord.read_namespaced_lease(kueue.LEASE_NAME, kueue.NAMESPACE).spec.renew_time
               > first.spec.renew_time, 60, "the Kueue Lease to be renewed")
    assert kueue.lease_holder(kube_api) == first.spec.holder_identity

    _started_here(kueue_cluster)
    st = localcluster.status(kueue_cluster.state_dir)
    manager = next(comp for comp in st.components if comp.name == "kueue")
    assert manager.alive and manager.rss_bytes > 0
    assert st.kueue["ready"] is True and st.kueue["version"] == "0.17.0"
    assert f"webhook {st.kueue['ports']['webhook']}" in kueue_summary(st.kueue)


def test_a_workload_within_quota_is_admitted_and_one_over_it_waits_with_a_position(kube_api, kube_namespace,
                                                                                   gpu_queue):
    objs = client.CustomObjectsApi(kube_api)
    objs.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, "workloads", workload("fits", "lq", pods=2))

    def admitted() -> dict | None:
        wl = objs.get_namespaced_custom_object(GROUP, VERSION, kube_namespace, "workloads", "fits")
        ok = all((condition(wl, t) or {}).get("status") == "True" for t in ("QuotaReserved", "Admitted"))
        return wl if ok else None

    wait_until(lambda: admitted() is not None, ADMIT_TIMEOUT, "Workload fits QuotaReserved and Admitted")
    fits = admitted()
    assert fits["status"]["admission"]["clusterQueue"] == gpu_queue
    [assignment] = fits["status"]["admission"]["podSetAssignments"]
    assert assignment["count"] == 2
    assert assignment["resourceUsage"][localcluster.GPU_RESOURCE] == "2"

    # 3 more GPUs than the 2 left of the quota of 4: Kueue keeps it pending, first in line
    objs.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, "workloads", workload("waits", "lq", pods=3))

    def pending_reason() -> dict | None:
        wl = objs.get_namespaced_custom_object(GROUP, VERSION, kube_namespace, "workloads", "waits")
        reserved = condition(wl, "QuotaReserved")
        return reserved if reserved and reserved["status"] == "False" else None

    wait_until(lambda: pending_reason() is not None, ADMIT_TIMEOUT, "Workload waits QuotaReserved=False")
    reserved = pending_reason()
    assert reserved["reason"] == "Pending"
    assert localcluster.GPU_RESOURCE in reserved["message"]

    path = f"/apis/{kueue.VISIBILITY_GROUP}/{kueue.VISIBILITY_VERSION}/clusterqueues/{gpu_queue}/pendingworkloads"

    def listed() -> list[dict]:
        return [i for i in _get(kube_api, path)["items"] if i["metadata"]["name"] == "waits"]

    wait_until(lambda: bool(listed()), ADMIT_TIMEOUT, f"Workload waits in {path}")
    [item] = listed()
    assert item["metadata"]["namespace"] == kube_namespace
    assert item["localQueueName"] == "lq"
    assert (item["positionInClusterQueue"], item["positionInLocalQueue"]) == (0, 0)
    by_lq = _get(kube_api, f"/apis/{kueue.VISIBILITY_GROUP}/{kueue.VISIBILITY_VERSION}/namespaces/{kube_namespace}"
                           "/localqueues/lq/pendingworkloads")
    assert [i["metadata"]["name"] for i in by_lq["items"]] == ["waits"]
    still = objs.get_namespaced_custom_object(GROUP, VERSION, kube_namespace, "workloads", "waits")
    assert (condition(still, "Admitted") or {}).get("status") != "True"


def test_the_validating_webhook_refuses_a_clusterqueue_with_a_negative_quota(kueue_cluster, kube_api, kube_namespace):
    objs = client.CustomObjectsApi(kube_api)
    name = f"bad-{kube_namespace}"
    # The CRD's schema accepts "-1" (a quantity may be negative); only Kueue's webhook refuses it.
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{
                "name": "any", "resources": [{"name": "cpu", "nominalQuota": "-1"}]}]}]}}
    with pytest.raises(ApiException) as refused:
        objs.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", body)
    assert refused.value.status == 403
    message = json.loads(refused.value.body)["message"]
    assert message.startswith('admission webhook "vclusterqueue.kb.io" denied the request')
    assert 'nominalQuota: Invalid value: "-1": must be greater than or equal to 0' in message
    with pytest.raises(ApiException) as missing:
        objs.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)
    assert missing.value.status == 404


def test_only_kueues_own_kinds_have_webhooks_and_no_job_integration_runs(kueue_cluster, kube_api):
    port = _started_here(kueue_cluster)["ports"]["webhook"]
    adm = client.AdmissionregistrationV1Api(kube_api)
    groups = set()
    for cfg in (adm.read_mutating_webhook_configuration(kueue.MUTATING_WEBHOOKS),
                adm.read_validating_webhook_configuration(kueue.VALIDATING_WEBHOOKS)):
        for hook in cfg.webhooks:
            assert hook.client_config.url.startswith(f"https://127.0.0.1:{port}/")
            assert hook.client_config.service is None
            groups.update(g for rule in hook.rules for g in rule.api_groups)
    assert groups == {GROUP}
    # and its one job integration waits for an API this cluster does not serve: no Kueue controller for Jobs either
    log = (kueue_cluster.state_dir / "logs" / "kueue.log").read_text()
    assert ('"msg":"No matching API in the server for job framework, deferring setting up controller",'
            '"jobFrameworkName":"kubeflow.org/mpijob"') in log



def test_a_manager_that_fails_to_start_is_named_with_its_log_and_up_adds_kueue_to_a_running_cluster(
        tmp_path, local_binaries, monkeypatch):
    state_dir = tmp_path / "state"
    config = localcluster.ClusterConfig(state_dir=state_dir, nodes=1, install_crds=False, die_with_parent=True,
                                        timeout=120)
    localcluster.up(config)
    try:
        real_config = kueue.manager_config
        monkeypatch.setattr(kueue, "manager_config", lambda *a: {**real_config(*a), "noSuchField": 1})
        with pytest.raises(localcluster.ClusterStartError) as failed:
            localcluster.start_kueue(state_dir, timeout=120, die_with_parent=True)
        message = str(failed.value)
        assert "Kueue did not start while waiting for kueue: kueue exited with code 1" in message
        assert f"the Kueue manager's log {state_dir / 'logs' / 'kueue.log'}" in message
        assert 'unknown field \\"noSuchField\\"' in message  # the log's tail: Kueue decodes its file strictly
        after = localcluster.status(state_dir)
        assert [c.name for c in after.components if c.alive] == [
            "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
        assert after.kueue == {} and after.ready

        monkeypatch.setattr(kueue, "manager_config", real_config)
        config.kueue = True
        cluster = localcluster.up(config)  # the running cluster is kept; Kueue is added to it
        assert cluster.kueue["ready"] is True
        assert [c.name for c in cluster.status().components if c.alive][-1] == "kueue"
        with cluster.api_client() as api:
            assert kueue.lease_holder(api)
    finally:
        localcluster.down(state_dir)
