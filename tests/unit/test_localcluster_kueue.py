"""What localcluster/kueue.py makes of Kueue's shipped manifests for a control plane on 127.0.0.1: webhooks only for
Kueue's own kinds, every Service reference turned into a 127.0.0.1 URL with the cluster CA, the conversion webhook
only where Kueue's kustomization patches it in; the manager's Configuration; the fixed-path certificates."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
import yaml
from kubernetes import client

from localcluster import kueue
from localcluster.binaries import BinariesMissing, require_kueue
from localcluster.components import KueuePorts
from localcluster.pki import generate_pki, serving_pair_valid


def _service(path: str) -> dict:
    return {"service": {"name": "webhook-service", "namespace": "system", "path": path}}


def _hook(name: str, group: str, resource: str, path: str) -> dict:
    return {"name": name, "admissionReviewVersions": ["v1"], "clientConfig": _service(path), "failurePolicy": "Fail",
            "sideEffects": "None",
            "rules": [{"apiGroups": [group], "apiVersions": ["v1beta2"], "operations": ["CREATE", "UPDATE"],
                       "resources": [resource]}]}


def _crd(name: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
            "spec": {"group": "kueue.x-k8s.io", "names": {"plural": name.split(".")[0]}, "versions": []}}


@pytest.fixture
def shipped(tmp_path):
    """A Kueue cache directory shaped like build.sh's copy of config/components (crd/, webhook/), in miniature."""
    top = tmp_path / "kueue-v0.17.0"
    comp = kueue.components_dir(top)
    (comp / "crd" / "bases").mkdir(parents=True)
    (comp / "crd" / "patches").mkdir()
    (comp / "webhook").mkdir()
    for name in ("workloads", "resourceflavors"):
        (comp / "crd" / "bases" / f"kueue.x-k8s.io_{name}.yaml").write_text(
            "---\n" + yaml.safe_dump(_crd(f"{name}.kueue.x-k8s.io")))
    (comp / "crd" / "patches" / "webhook_in_workloads.yaml").write_text(yaml.safe_dump({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "workloads.kueue.x-k8s.io"},
        "spec": {"conversion": {"strategy": "Webhook", "webhook": {
            "clientConfig": _service("/convert"), "conversionReviewVersions": ["v1"]}}}}))
    (comp / "crd" / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": ["bases/kueue.x-k8s.io_workloads.yaml", "bases/kueue.x-k8s.io_resourceflavors.yaml"],
        "patches": [{"path": "patches/webhook_in_workloads.yaml"}]}))
    (comp / "webhook" / "manifests.yaml").write_text(yaml.safe_dump_all([
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "mutating-webhook-configuration"},
         "webhooks": [_hook("mjob.kb.io", "batch", "jobs", "/mutate-batch-v1-job"),
                      _hook("mpod.kb.io", "", "pods", "/mutate--v1-pod"),
                      _hook("mworkload.kb.io", "kueue.x-k8s.io", "workloads",
                            "/mutate-kueue-x-k8s-io-v1beta2-workload")]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "validating-webhook-configuration"},
         "webhooks": [_hook("vclusterqueue.kb.io", "kueue.x-k8s.io", "clusterqueues",
                            "/validate-kueue-x-k8s-io-v1beta2-clusterqueue"),
                      _hook("vdeployment.kb.io", "apps", "deployments", "/validate-apps-v1-deployment")]},
    ]))
    return top


@pytest.fixture
def pki(tmp_path):
    return generate_pki(tmp_path / "pki")


def test_only_the_webhooks_of_kueues_own_kinds_are_kept_each_calling_127_0_0_1_with_the_cluster_ca(shipped, pki):
    mutating, validating = kueue.webhook_configurations(shipped, 9443, pki)
    assert (mutating["metadata"]["name"], validating["metadata"]["name"]) == (
        "kueue-mutating-webhook-configuration", "kueue-validating-webhook-configuration")
    assert [h["name"] for h in mutating["webhooks"]] == ["mworkload.kb.io"]
    assert [h["name"] for h in validating["webhooks"]] == ["vclusterqueue.kb.io"]
    hook = mutating["webhooks"][0]
    assert hook["clientConfig"] == {"url": "https://127.0.0.1:9443/mutate-kueue-x-k8s-io-v1beta2-workload",
                                    "caBundle": base64.b64encode(pki.ca_cert.read_bytes()).decode()}
    assert hook["failurePolicy"] == "Fail" and hook["rules"][0]["resources"] == ["workloads"]


def test_the_conversion_webhook_goes_only_on_the_crds_kueues_kustomization_patches(shipped, pki):
    workloads, flavors = kueue.crds(shipped, 20443, pki)
    assert workloads["spec"]["conversion"] == {"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": "https://127.0.0.1:20443/convert",
                         "caBundle": base64.b64encode(pki.ca_cert.read_bytes()).decode()},
        "conversionReviewVersions": ["v1"]}}
    assert "conversion" not in flavors["spec"]
    # the parsed files are cached: a second call with another port must not see the first call's edits
    again, _ = kueue.crds(shipped, 30443, pki)
    assert again["spec"]["conversion"]["webhook"]["clientConfig"]["url"] == "https://127.0.0.1:30443/convert"


def test_the_manager_configuration_listens_on_127_0_0_1_with_leader_election_and_no_cert_management(tmp_path):
    cfg = kueue.manager_config(KueuePorts(webhook=1001, metrics=1002, health=1003, visibility=1004), tmp_path)
    assert cfg["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and cfg["kind"] == "Configuration"
    assert cfg["namespace"] == "kueue-system"
    assert cfg["webhook"] == {"host": "127.0.0.1", "port": 1001, "certDir": str(tmp_path)}
    assert cfg["metrics"] == {"bindAddress": "127.0.0.1:1002"}
    assert cfg["health"] == {"healthProbeBindAddress": "127.0.0.1:1003"}
    assert cfg["visibilityServer"] == {"bindAddress": "127.0.0.1", "bindPort": 1004}
    election = cfg["leaderElection"]
    assert (election["leaderElect"], election["resourceName"], election["resourceNamespace"]) == (
        True, "c1f6bfd2.kueue.x-k8s.io", "kueue-system")
    assert cfg["internalCertManagement"] == {"enable": False}
    # one integration (Kueue refuses none) whose API no local cluster serves: no Kueue controller for Jobs or Pods
    assert cfg["integrations"] == {"frameworks": ["kubeflow.org/mpijob"]}
    assert cfg["manageJobsWithoutQueueName"] is False


def test_fixed_path_certificates_are_written_once_and_then_left_alone(tmp_path):
    dirs = (tmp_path / "visibility", tmp_path / "etc" / "kueue" / "metrics" / "certs")
    kueue.ensure_fixed_certs(dirs)
    for d in dirs:
        assert serving_pair_valid(d / "tls.crt", d / "tls.key")
    before = (dirs[0] / "tls.crt").read_bytes()
    kueue.ensure_fixed_certs(dirs)
    assert (dirs[0] / "tls.crt").read_bytes() == before
    (dirs[1] / "tls.key").write_bytes((dirs[0] / "tls.key").read_bytes())  # a key of another pair: rewritten
    kueue.ensure_fixed_certs(dirs)
    assert serving_pair_valid(dirs[1] / "tls.crt", dirs[1] / "tls.key")


def test_a_fixed_path_that_cannot_be_written_says_how_to_fix_it(tmp_path):
    (tmp_path / "etc").write_text("a file where a directory should be")  # fails for root too, unlike a mode
    with pytest.raises(kueue.KueueSetupError, match=r"mkdir -p .*/etc/kueue && chown \$USER"):
        kueue.ensure_fixed_certs((tmp_path / "etc" / "kueue",))


@pytest.mark.parametrize("age_s, holder, expected", [
    (1, "kueue-abc", "kueue-abc"),
    (60, "kueue-abc", None),  # not renewed within its 15 s: the holder is gone
    (1, "", None),  # released on the way out
])
def test_the_lease_counts_as_held_only_when_renewed_within_its_duration(monkeypatch, age_s, holder, expected):
    lease = client.V1Lease(spec=client.V1LeaseSpec(
        holder_identity=holder, lease_duration_seconds=15,
        renew_time=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=age_s)))

    class Coordination:
        def __init__(self, api):
            pass

        def read_namespaced_lease(self, name, namespace):
            assert (name, namespace) == ("c1f6bfd2.kueue.x-k8s.io", "kueue-system")
            return lease

    monkeypatch.setattr(kueue.client, "CoordinationV1Api", Coordination)
    assert kueue.lease_holder(None) == expected


def test_kueue_not_built_is_an_error_naming_build_sh(tmp_path, monkeypatch):
    monkeypatch.setenv("GANGWEB_CACHE", str(tmp_path))
    with pytest.raises(BinariesMissing) as missing:
        require_kueue()
    message = str(missing.value)
    assert f"{tmp_path}/localcluster/kueue-v0.17.0/bin/kueue" in message
    assert "localcluster/build.sh" in message and "--no-kueue" in message
