"""Kueue on the local cluster: the manager's Configuration, its CRDs, webhooks and visibility API, rewritten for a
control plane whose every component is a process on 127.0.0.1.

Upstream installs Kueue as a Deployment behind a Service (``config/default`` of sigs.k8s.io/kueue). Here the
manager is a local process, so what points at that Service points at 127.0.0.1 instead (docs/local-cluster.md,
"Kueue"):

- **CRDs** (``config/components/crd/bases``, copied into the cache by ``build.sh``): installed as shipped, with the
  conversion webhook that Kueue's kustomization patches in (``patches/webhook_in_*.yaml``) pointed at
  ``https://127.0.0.1:<webhook port>/convert`` with the cluster CA as ``caBundle``.
- **Admission webhooks** (``config/components/webhook/manifests.yaml``): only those whose rules name Kueue's own
  group, each ``clientConfig.service`` replaced by the same URL form and CA. The webhooks of the job integrations
  (Jobs, Pods, Deployments, ...) are dropped: no Kueue webhook sits in the path of every Job or Pod creation.
- **Visibility API** (``visibility.kueue.x-k8s.io/v1beta2``): an APIService as Kueue ships it
  (``insecureSkipTLSVerify``), whose Service is ``type: ExternalName``, ``externalName: localhost``: kube-apiserver's
  aggregator resolves such a Service to that host and the APIService's port (k8s.io/apiserver pkg/util/proxy
  ``ResolveCluster``), so it proxies to the manager's visibility server on 127.0.0.1 without any Endpoints.
- **Certificates**: the webhook server presents a certificate for 127.0.0.1/localhost signed by the cluster CA
  (``<state>/pki/kueue-webhook/``). With ``internalCertManagement.enable: false`` Kueue v0.17.0 reads two more
  certificates from fixed paths (`FIXED_CERT_DIRS`); `ensure_fixed_certs` writes a self-signed pair there once per
  machine, as nobody verifies those two servers (the aggregator skips verification, nothing scrapes the metrics).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime as dt
import fcntl
import os
from functools import lru_cache
from pathlib import Path

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from .binaries import find_kueue, read_versions, require_kueue
from .components import KUEUE, KueuePorts, kueue_args, kueue_health_url
from .crds import install_crds
from .kubeconfig import api_client
from .pki import PKIPaths, issue_serving_cert, self_signed_serving_pem, serving_pair_valid
from .processes import wait_until

NAMESPACE = "kueue-system"  # Kueue's default Configuration.namespace
GROUP = "kueue.x-k8s.io"
API_VERSION = "kueue.x-k8s.io/v1beta2"  # the storage version; gangweb uses only this one
# The manager's leader-election Lease in NAMESPACE: Kueue's default leaderElection.resourceName
# (apis/config/v1beta2/defaults.go DefaultLeaderElectionID). gangweb's scheduler-presence check reads it.
LEASE_NAME = "c1f6bfd2.kueue.x-k8s.io"
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
VISIBILITY_VERSION = "v1beta2"
VISIBILITY_APISERVICE = f"{VISIBILITY_VERSION}.{VISIBILITY_GROUP}"
VISIBILITY_SERVICE = "visibility-server"  # the Service name Kueue's APIService names (config/components/visibility)
# Kueue's kustomize namePrefix "kueue-" on config/components/webhook/manifests.yaml.
MUTATING_WEBHOOKS = "kueue-mutating-webhook-configuration"
VALIDATING_WEBHOOKS = "kueue-validating-webhook-configuration"
CONFIG_FILE = "kueue-config.yaml"  # in the state directory
WEBHOOK_CERT_DIR = "kueue-webhook"  # in the state's pki/ directory; tls.crt and tls.key (controller-runtime names)
# With internalCertManagement off, Kueue v0.17.0 reads these serving certificates (tls.crt, tls.key) from fixed
# paths that no setting moves: the visibility server's (pkg/visibility/server.go, certDir "/visibility") and the
# metrics server's (cmd/kueue/main.go, metricsCertPath). A missing file stops the manager at start.
FIXED_CERT_DIRS = (Path("/visibility"), Path("/etc/kueue/metrics/certs"))
# Leader election as the local kube-scheduler's (components.scheduler_args): the fault runs stop the API server for
# up to a minute, and a manager that cannot renew within the renew deadline exits with nothing to restart it.
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = "330s", "300s", "2s"
# Job integrations off, as far as Kueue allows: an empty list means "batch/job" (apis/config/v1beta2/defaults.go),
# whose controller would watch every Job and act on those labelled with a queue name, and on Workloads owned by a Job
# (their finalizers dropped when the Job goes). So one integration whose API this cluster does not serve: Kueue
# registers its webhook handler, defers its controller until the API appears ("No matching API in the server for job
# framework, deferring setting up controller", pkg/controller/jobframework/setup.go), and nothing of Kueue acts on
# Jobs or Pods. MPIJob (kubeflow.org/v2beta1) pulls in no other integration; no local cluster installs its CRD.
FRAMEWORKS = ("kubeflow.org/mpijob",)

_load = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the Workload CRD alone is 19,000 lines


class KueueSetupError(RuntimeError):
    """Kueue cannot be set up on this machine or cluster; the message says why and what to do."""


def components_dir(kueue_dir: Path) -> Path:
    """``<kueue cache dir>/config/components``: Kueue's ``config/components/{crd,webhook}`` as build.sh copied them."""
    return kueue_dir / "config" / "components"


def webhook_url(port: int, path: str) -> str:
    """``https://127.0.0.1:<port><path>``: where the API server calls the manager's webhook server."""
    return f"https://127.0.0.1:{port}{path}"


def manager_config(ports: KueuePorts, webhook_cert_dir: Path) -> dict:
    """The manager's Configuration (``config.kueue.x-k8s.io/v1beta2``; field names from
    apis/config/v1beta2/configuration_types.go, decoded strictly by Kueue): every listener on 127.0.0.1, leader
    election on with the default Lease name in `NAMESPACE`, no internal certificate management (the webhook
    certificate comes from ``webhook_cert_dir``), only the `FRAMEWORKS` integration (none acting here)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports.health}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports.metrics}"},
        "webhook": {"host": "127.0.0.1", "port": ports.webhook, "certDir": str(webhook_cert_dir)},
        "leaderElection": {
            "leaderElect": True,
            "resourceName": LEASE_NAME,
            "resourceNamespace": NAMESPACE,
            "leaseDuration": LEASE_DURATION,
            "renewDeadline": RENEW_DEADLINE,
            "retryPeriod": RETRY_PERIOD,
        },
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 50, "burst": 100},  # Kueue's shipped controller_manager_config.yaml
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "visibilityServer": {"bindAddress": "127.0.0.1", "bindPort": ports.visibility},
    }


def write_manager_config(path: Path, ports: KueuePorts, webhook_cert_dir: Path) -> Path:
    """Write `manager_config` as YAML to ``path``; return it."""
    path.write_text(yaml.safe_dump(manager_config(ports, webhook_cert_dir), sort_keys=False))
    return path


@lru_cache(maxsize=4)
def _read_yaml_docs(path: Path) -> tuple:
    return tuple(doc for doc in yaml.load_all(path.read_text(), Loader=_load) if doc)


def _docs(path: Path) -> list[dict]:
    return copy.deepcopy(list(_read_yaml_docs(path)))  # callers edit them; the cache keeps the file's text


def _ca_bundle(pki: PKIPaths) -> str:
    return base64.b64encode(pki.ca_cert.read_bytes()).decode("ascii")


def crds(kueue_dir: Path, webhook_port: int, pki: PKIPaths) -> list[dict]:
    """Kueue's CRDs in the order of its kustomization's ``resources``, those its ``patches`` give a conversion
    webhook (``spec.conversion``) with it pointed at ``/convert`` on the local webhook server (the cluster CA as
    ``caBundle``); the others as shipped."""
    crd_dir = components_dir(kueue_dir) / "crd"
    kustomization = _docs(crd_dir / "kustomization.yaml")[0]
    conversions: dict[str, dict] = {}
    for patch in kustomization.get("patches") or []:
        for doc in _docs(crd_dir / patch["path"]):
            webhook = ((doc.get("spec") or {}).get("conversion") or {}).get("webhook")
            if webhook is None:
                continue
            path = webhook["clientConfig"]["service"]["path"]
            conversions[doc["metadata"]["name"]] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": webhook_url(webhook_port, path), "caBundle": _ca_bundle(pki)},
                    "conversionReviewVersions": list(webhook["conversionReviewVersions"]),
                },
            }
    out = []
    for resource in kustomization["resources"]:
        for crd in _docs(crd_dir / resource):
            if crd["metadata"]["name"] in conversions:
                crd["spec"]["conversion"] = conversions[crd["metadata"]["name"]]
            out.append(crd)
    return out


def _own_kinds_only(webhook: dict) -> bool:
    rules = webhook.get("rules") or []
    return bool(rules) and all(rule.get("apiGroups") == [GROUP] for rule in rules)


def webhook_configurations(kueue_dir: Path, webhook_port: int, pki: PKIPaths) -> list[dict]:
    """Kueue's Mutating- and ValidatingWebhookConfiguration with only the webhooks for Kueue's own kinds (rules
    naming only group `GROUP`), each calling ``https://127.0.0.1:<webhook_port><its path>`` with the cluster CA;
    named as Kueue's kustomization names them (`MUTATING_WEBHOOKS`, `VALIDATING_WEBHOOKS`)."""
    names = {"MutatingWebhookConfiguration": MUTATING_WEBHOOKS,
             "ValidatingWebhookConfiguration": VALIDATING_WEBHOOKS}
    out = []
    for doc in _docs(components_dir(kueue_dir) / "webhook" / "manifests.yaml"):
        kept = []
        for webhook in filter(_own_kinds_only, doc.get("webhooks") or []):
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": webhook_url(webhook_port, path), "caBundle": _ca_bundle(pki)}
            kept.append(webhook)
        out.append({"apiVersion": doc["apiVersion"], "kind": doc["kind"],
                    "metadata": {"name": names[doc["kind"]]}, "webhooks": kept})
    return out


def visibility_service() -> dict:
    """The Service the APIService names: ExternalName ``localhost`` (see the module docstring)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": VISIBILITY_SERVICE, "namespace": NAMESPACE},
            "spec": {"type": "ExternalName", "externalName": "localhost"}}


def visibility_apiservice(port: int) -> dict:
    """Kueue's ``v1beta2.visibility.kueue.x-k8s.io`` APIService (config/components/visibility/apiservice_v1beta2.yaml)
    with the visibility server's port on the Service reference."""
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": VISIBILITY_APISERVICE},
        "spec": {
            "group": VISIBILITY_GROUP,
            "version": VISIBILITY_VERSION,
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
            "insecureSkipTLSVerify": True,
            "service": {"namespace": NAMESPACE, "name": VISIBILITY_SERVICE, "port": port},
        },
    }


@contextlib.contextmanager
def _flocked(path: Path):
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_fixed_certs(dirs: tuple[Path, ...] = FIXED_CERT_DIRS) -> None:
    """Make sure each of ``dirs`` holds a valid ``tls.crt``/``tls.key`` pair (self-signed, 127.0.0.1/localhost),
    writing one where missing, mismatched or expiring within a week. Shared by every local cluster of the machine
    (clusters of parallel test workers start at once: a lock file in each directory serialises the check and the
    write; the files are replaced by rename). Raises `KueueSetupError` saying how to fix it when a directory cannot
    be written (not root, or a file in the way)."""
    for directory in dirs:
        cert, key = directory / "tls.crt", directory / "tls.key"
        if serving_pair_valid(cert, key):
            continue
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with _flocked(directory / ".lock"):
                if serving_pair_valid(cert, key):
                    continue
                cert_pem, key_pem = self_signed_serving_pem(f"gangweb-localcluster-kueue-{directory.name}")
                for path, data, mode in ((key, key_pem, 0o600), (cert, cert_pem, 0o644)):
                    tmp = path.with_name(f".{path.name}.{os.getpid()}")
                    tmp.write_bytes(data)
                    tmp.chmod(mode)
                    os.replace(tmp, path)
        except OSError as e:  # not root (PermissionError), or a file in the way
            raise KueueSetupError(
                f"Kueue reads a serving certificate from {directory}/tls.crt and tls.key (a path Kueue "
                f"hard-codes when its internal certificate management is off), and {directory} cannot be written "
                f"here ({e.strerror}). Once, as root: `mkdir -p {directory} && chown $USER {directory}` "
                "(localcluster then writes a self-signed pair there), or start the cluster without Kueue "
                "(`python -m localcluster up --no-kueue`)."
            ) from e


def _apply(create, read, replace, body: dict) -> None:
    """``create(body)``; when it exists, ``replace(name, body)`` carrying the resourceVersion ``read(name)`` gives."""
    name = body["metadata"]["name"]
    try:
        create(body)
    except ApiException as e:
        if e.status != 409:
            raise
        current = read(name)
        replace(name, {**body, "metadata": {**body["metadata"], "resourceVersion": current.metadata.resource_version}})


def ensure_namespace(api: client.ApiClient) -> None:
    """Create `NAMESPACE` unless it exists."""
    try:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
    except ApiException as e:
        if e.status != 409:
            raise


def install_webhooks(api: client.ApiClient, configurations: list[dict]) -> None:
    """Create or replace the webhook configurations of `webhook_configurations`."""
    adm = client.AdmissionregistrationV1Api(api)
    for body in configurations:
        if body["kind"] == "MutatingWebhookConfiguration":
            _apply(adm.create_mutating_webhook_configuration, adm.read_mutating_webhook_configuration,
                   adm.replace_mutating_webhook_configuration, body)
        else:
            _apply(adm.create_validating_webhook_configuration, adm.read_validating_webhook_configuration,
                   adm.replace_validating_webhook_configuration, body)


def install_visibility(api: client.ApiClient, port: int) -> None:
    """Create or replace the visibility Service (ExternalName) and APIService."""
    core = client.CoreV1Api(api)
    _apply(lambda body: core.create_namespaced_service(NAMESPACE, body),
           lambda name: core.read_namespaced_service(name, NAMESPACE),
           lambda name, body: core.replace_namespaced_service(name, NAMESPACE, body), visibility_service())
    reg = client.ApiregistrationV1Api(api)
    _apply(reg.create_api_service, reg.read_api_service, reg.replace_api_service, visibility_apiservice(port))


def lease_holder(api: client.ApiClient) -> str | None:
    """The holder of Kueue's leader-election Lease if it is held and was renewed within its duration, else None."""
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(LEASE_NAME, NAMESPACE)
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    spec = lease.spec
    if not spec or not spec.holder_identity or not spec.renew_time:
        return None
    renewed = spec.renew_time if spec.renew_time.tzinfo else spec.renew_time.replace(tzinfo=dt.UTC)
    fresh = dt.datetime.now(dt.UTC) - renewed < dt.timedelta(seconds=spec.lease_duration_seconds or 15)
    return spec.holder_identity if fresh else None


def apiservice_available(api: client.ApiClient) -> bool:
    """True once the visibility APIService reports ``Available=True`` (the aggregator reached the manager)."""
    try:
        svc = client.ApiregistrationV1Api(api).read_api_service(VISIBILITY_APISERVICE)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    conditions = (svc.status and svc.status.conditions) or []
    return any(c.type == "Available" and c.status == "True" for c in conditions)


def start_manager(starter) -> None:
    """Start the Kueue manager on the running cluster of ``starter`` (cluster._Starter: its ``state``,
    ``config.timeout``, ``step``, ``progress`` and its ``_start``/``_wait_http``/``_timed``/``_check_alive``) and
    return once it serves: CRDs Established, manager ready (webhook server up), webhooks and visibility APIService
    installed, the leader-election Lease held and the APIService Available. Records ports and paths in
    ``state.kueue``. Raises `BinariesMissing` (Kueue not built), `KueueSetupError`, `WaitTimeout` (the step in
    ``starter.step``), `ApiException`, or cluster.ClusterStartError (a component died)."""
    state, timeout = starter.state, starter.config.timeout
    starter.step = "preparing Kueue"
    kueue_dir = require_kueue()
    ensure_fixed_certs()
    pki = PKIPaths(state.state_dir / "pki")
    ports = KueuePorts.allocate(set(state.ports.values()))
    cert_dir = pki.dir / WEBHOOK_CERT_DIR
    issue_serving_cert(pki, cert_dir / "tls.crt", cert_dir / "tls.key", "kueue-webhook")
    config_file = write_manager_config(state.state_dir / CONFIG_FILE, ports, cert_dir)
    state.kueue = {"version": read_versions()["KUEUE_VERSION"], "ports": ports.to_dict(), "config": str(config_file),
                   "namespace": NAMESPACE, "lease": LEASE_NAME, "ready": False}
    state.save()
    with api_client(state.kubeconfig) as api:
        starter.step = "installing Kueue's CRDs"
        ensure_namespace(api)
        starter._timed("kueue_crds_s", lambda: install_crds(api, crds(kueue_dir, ports.webhook, pki), timeout))
        starter._start(KUEUE, kueue_args(find_kueue(), Path(state.kubeconfig), config_file, ports))
        starter._wait_http(KUEUE, kueue_health_url(ports))
        starter.step = "installing Kueue's webhooks and visibility APIService"
        install_webhooks(api, webhook_configurations(kueue_dir, ports.webhook, pki))
        install_visibility(api, ports.visibility)
        starter.step = f"waiting for Kueue to hold its Lease {NAMESPACE}/{LEASE_NAME}"
        starter._timed("kueue_lease_s", lambda: wait_until(
            lambda: lease_holder(api) is not None, timeout, f"Lease {NAMESPACE}/{LEASE_NAME}",
            check=starter._check_alive))
        starter.step = f"waiting for Kueue's APIService {VISIBILITY_APISERVICE} to be Available"
        starter._timed("kueue_visibility_s", lambda: wait_until(
            lambda: apiservice_available(api), timeout, f"APIService {VISIBILITY_APISERVICE} Available",
            check=starter._check_alive))
    state.kueue["ready"] = True
    state.save()
    starter.progress(f"Kueue {state.kueue['version']} ready (webhooks on 127.0.0.1:{ports.webhook}, "
                     f"visibility API on 127.0.0.1:{ports.visibility})")
