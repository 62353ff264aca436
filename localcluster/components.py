"""Command lines and health endpoints of the five control-plane components, and of the Kueue manager (the sixth,
started only when asked for: `ClusterConfig.kueue`, localcluster/kueue.py).

The flags merge controller-runtime envtest (``pkg/internal/testing/controlplane``) and kwokctl's binary runtime
(``pkg/kwokctl/components``), see ``docs/upstream.md``, "The local control plane's components". Everything listens on
127.0.0.1 only. kube-controller-manager runs, so the ServiceAccount admission plugin stays on (unlike envtest): the
``default`` ServiceAccount, namespace deletion, garbage collection and the Job controller all work.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from .binaries import Binaries, minor_of, resolve_k8s_version
from .pki import FRONT_PROXY_CLIENT, PKIPaths
from .processes import free_port

# Component names, in start order. `down` stops them in reverse.
ETCD = "etcd"
APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
KWOK = "kwok"
KUEUE = "kueue"
START_ORDER = (ETCD, APISERVER, CONTROLLER_MANAGER, SCHEDULER, KWOK, KUEUE)

# Workload-aware scheduling (KEP-4671 / KEP-5832) per Kubernetes minor release, on every component. Read from
# k8s.io/kubernetes pkg/features/kube_features.go of each release:
# - 1.36: GenericWorkload and GangScheduling are alpha (off by default); the API is scheduling.k8s.io/v1alpha2.
# - 1.37: GenericWorkload is beta but still off by default and now covers gang scheduling and workload-aware
#   preemption; the GangScheduling gate is gone (a component named it refuses to start: "unrecognized feature
#   gate"). v1alpha2 is removed; Workload/PodGroup are scheduling.k8s.io/v1beta1, not served unless asked for.
#   disruptionMode, priorityClassName and priority are served under GenericWorkload alone; preemptionPolicy needs
#   the alpha gate PodGroupPreemptionPolicy and schedulingConstraints TopologyAwareWorkloadScheduling (both off).
FEATURE_GATES: dict[str, dict[str, bool]] = {
    "1.36": {"GenericWorkload": True, "GangScheduling": True},
    "1.37": {"GenericWorkload": True},
}
RUNTIME_CONFIG: dict[str, dict[str, str]] = {
    "1.36": {"scheduling.k8s.io/v1alpha2": "true"},
    "1.37": {"scheduling.k8s.io/v1beta1": "true"},
}
# kube-scheduler only. With SchedulerPopFromBackoffQ on (beta, the default since 1.33), a 1.36.3 scheduler retries an
# unschedulable PodGroup in a tight loop whenever its queue is otherwise empty: measured 1,000-2,000 PodGroup cycles
# per second and one full CPU core for as long as a gang cannot fit. Off, the group's pods wait out the usual
# 1-10 s backoff between attempts. The API server is unaffected; only the retry timing differs from a default
# scheduler. ClusterConfig.scheduler_feature_gates restores the upstream default. See docs/local-cluster.md.
SCHEDULER_FEATURE_GATES = {"SchedulerPopFromBackoffQ": False}


def feature_gates_for(k8s_version: str) -> dict[str, bool]:
    """The workload-scheduling gates of a release ("1.37.2" -> {"GenericWorkload": True}). KeyError if unknown."""
    return dict(FEATURE_GATES[minor_of(k8s_version)])


def runtime_config_for(k8s_version: str) -> dict[str, str]:
    """The ``--runtime-config`` entries of a release ("1.37.2" -> {"scheduling.k8s.io/v1beta1": "true"})."""
    return dict(RUNTIME_CONFIG[minor_of(k8s_version)])


def _version(binaries: Binaries) -> str:
    return binaries.k8s_version or resolve_k8s_version()


SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # first address of SERVICE_CIDR: the in-cluster `kubernetes` Service
POD_CIDR = "10.244.0.0/16"  # kwok hands pod IPs out of this range
# InternalIP kwok gives nodes that have none: kwok's own address, so kube-apiserver reaches "the kubelet" of every
# fake node at kwok's server (its port is each node's daemonEndpoints.kubeletEndpoint.Port): pod logs
# (`GET .../pods/<name>/log`) are then served by kwok from the ClusterLogs file (stages.py, docs/local-cluster.md).
NODE_IP = "127.0.0.1"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
# KWOK manages only nodes that carry this annotation (see nodes.py); other nodes are left alone.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"


@dataclass
class Ports:
    """The TCP ports of one cluster, all on 127.0.0.1."""

    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int

    @classmethod
    def allocate(cls) -> Ports:
        """Pick a free port for each listener. Distinct ports are guaranteed; freeness only at the moment of asking."""
        return cls(*distinct_free_ports(6))

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (for the state file)."""
        return asdict(self)


def distinct_free_ports(count: int, taken: set[int] = frozenset()) -> list[int]:
    """`count` distinct ports free at the moment of asking, none of them in `taken`."""
    chosen: set[int] = set(taken)
    values = []
    for _ in range(count):
        port = free_port()
        while port in chosen:
            port = free_port()
        chosen.add(port)
        values.append(port)
    return values


def _gates(k8s_version: str, extra: dict[str, bool] | None = None) -> str:
    gates = {**feature_gates_for(k8s_version), **(extra or {})}
    return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))


def etcd_args(binaries: Binaries, data_dir: Path, ports: Ports) -> list[str]:
    """etcd 3.6: single member, data in ``data_dir``, no fsync (test data, speed matters more than durability)."""
    client = f"http://127.0.0.1:{ports.etcd_client}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        str(binaries.etcd),
        "--name=gangweb",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=gangweb={peer}",
        "--unsafe-no-fsync=true",
        "--auto-compaction-retention=1",
        "--quota-backend-bytes=8589934592",
        "--log-level=warn",
    ]


def apiserver_args(
    binaries: Binaries, pki: PKIPaths, ports: Ports, feature_gates: dict[str, bool] | None = None
) -> list[str]:
    """kube-apiserver: client-certificate auth against our CA, RBAC, SA key pair, the release's Workload API on
    (v1alpha2 on 1.36, v1beta1 on 1.37)."""
    version = _version(binaries)
    return [
        str(binaries.kube_apiserver),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={ports.apiserver}",
        f"--tls-cert-file={pki.apiserver_cert}",
        f"--tls-private-key-file={pki.apiserver_key}",
        f"--client-ca-file={pki.ca_cert}",
        "--authorization-mode=RBAC",
        f"--service-account-issuer={SA_ISSUER}",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # No real endpoints: do not publish 127.0.0.1 as the `kubernetes` Service endpoint (kwokctl does the same).
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        "--profiling=false",
        # Kubelet calls (pod logs) go to the node's InternalIP (kwok, on 127.0.0.1): the fake node names resolve to
        # nothing. kwok serves a self-signed certificate; without --kubelet-certificate-authority it is not checked.
        "--kubelet-preferred-address-types=InternalIP",
        f"--feature-gates={_gates(version, feature_gates)}",
        "--runtime-config=" + ",".join(f"{k}={v}" for k, v in runtime_config_for(version).items()),
        *aggregation_args(pki),
    ]


def aggregation_args(pki: PKIPaths) -> list[str]:
    """The aggregation layer's front-proxy flags (kubeadm's values): kube-apiserver proxies an APIService's requests
    (Kueue's visibility API) presenting the front-proxy client certificate, with the caller's identity in the
    X-Remote-* headers; the extension server trusts those headers only from a certificate of the front-proxy CA
    with that CN, both of which it reads from kube-system/extension-apiserver-authentication."""
    return [
        f"--requestheader-client-ca-file={pki.front_proxy_ca_cert}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki.front_proxy_client_cert}",
        f"--proxy-client-key-file={pki.front_proxy_client_key}",
    ]


def _kube_component_common(kubeconfig: Path, port: int, cert_dir: Path, k8s_version: str,
                           feature_gates) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        # Nothing calls these components with client certificates; skipping the lookup of the front-proxy CA
        # (which this cluster does not configure) avoids a stream of "missing content for CA bundle" errors.
        "--authentication-skip-lookup=true",
        f"--feature-gates={_gates(k8s_version, feature_gates)}",
    ]


def controller_manager_args(
    binaries: Binaries,
    kubeconfig: Path,
    pki: PKIPaths,
    ports: Ports,
    cert_dir: Path,
    feature_gates: dict[str, bool] | None = None,
) -> list[str]:
    """kube-controller-manager: all default controllers, signing SA tokens, publishing the root CA."""
    return [
        str(binaries.kube_controller_manager),
        *_kube_component_common(kubeconfig, ports.controller_manager, cert_dir, _version(binaries), feature_gates),
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_cert}",
        f"--cluster-signing-cert-file={pki.ca_cert}",
        f"--cluster-signing-key-file={pki.ca_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # Fake nodes heartbeat through leases (kwok); notice a removed or stuck node within seconds.
        "--node-monitor-period=5s",
        "--node-monitor-grace-period=40s",
        # The defaults (20 qps) make namespace deletion and GC crawl when tests create many objects.
        "--kube-api-qps=500",
        "--kube-api-burst=1000",
        # The Job controller syncs 5 Jobs at a time by default; each sync waits on a pod create, so thousands of
        # new Indexed Jobs (bench/: the resync dataset) got their pods at ~5/s on a loaded 2-core machine.
        "--concurrent-job-syncs=50",
    ]


def scheduler_args(
    binaries: Binaries,
    kubeconfig: Path,
    ports: Ports,
    cert_dir: Path,
    feature_gates: dict[str, bool] | None = None,
    scheduler_feature_gates: dict[str, bool] | None = None,
) -> list[str]:
    """kube-scheduler with the default profile; the workload gates add the gang plugin by themselves.

    ``scheduler_feature_gates`` (default `SCHEDULER_FEATURE_GATES`) apply to the scheduler only, on top of
    ``feature_gates``.
    """
    gates = {**(feature_gates or {}),
             **(SCHEDULER_FEATURE_GATES if scheduler_feature_gates is None else scheduler_feature_gates)}
    return [
        str(binaries.kube_scheduler),
        *_kube_component_common(kubeconfig, ports.scheduler, cert_dir, _version(binaries), gates),
        # The scheduler holds kube-system/kube-scheduler as a real install does (the later flag wins): gangweb's
        # probe sees a scheduler by that Lease being renewed (scheduling/kube/scheduler_presence.py). A lone
        # candidate takes a new Lease at once; on SIGTERM kube-scheduler releases it (ReleaseOnCancel), so the
        # upgrade's new scheduler takes it at once too. A leader that cannot renew within the renew deadline exits
        # (upstream: 10 s), and nothing here restarts it as a kubelet would: the fault runs stop or kill the API
        # server for up to a minute, so the deadline is 300 s; renewals still come every 2 s (retry period), which
        # is what the probe reads.
        "--leader-elect=true",
        "--leader-elect-lease-duration=330s",
        "--leader-elect-renew-deadline=300s",
        "--leader-elect-retry-period=2s",
        "--v=2",  # one line per scheduling decision: what a failing gang test needs to explain itself
    ]


def kwok_args(binaries: Binaries, kubeconfig: Path, stages_file: Path, ports: Ports) -> list[str]:
    """kwok: simulate nodes carrying the kwok annotation and the pods bound to them, using our Stage file."""
    return [
        str(binaries.kwok),
        f"--kubeconfig={kubeconfig}",
        f"--config={stages_file}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
        "--node-lease-duration-seconds=40",
        f"--cidr={POD_CIDR}",
        f"--node-ip={NODE_IP}",
        f"--server-address=127.0.0.1:{ports.kwok}",
        f"--node-port={ports.kwok}",  # the nodes' kubelet port: kube-apiserver asks kwok for pod logs
    ]


@dataclass
class KueuePorts:
    """The Kueue manager's listeners, all on 127.0.0.1: webhook server (TLS, the cluster CA), metrics (TLS),
    health probes (plain HTTP: /healthz, /readyz) and the visibility API server (TLS, behind the aggregator)."""

    webhook: int
    metrics: int
    health: int
    visibility: int

    @classmethod
    def allocate(cls, taken: set[int] = frozenset()) -> KueuePorts:
        """Pick four distinct free ports, none of them in ``taken``."""
        return cls(*distinct_free_ports(4, taken))

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (for the state file)."""
        return asdict(self)


def kueue_args(binary: Path, kubeconfig: Path, config_file: Path, ports: KueuePorts) -> list[str]:
    """The Kueue manager: everything but the kubeconfig and the visibility port comes from its Configuration file
    (`kueue.manager_config`). ``--visibility-server-port`` too, because Kueue takes the file's
    ``visibilityServer.bindPort`` only when it differs from its default 8082 (pkg/visibility/server.go)."""
    return [
        str(binary),
        f"--config={config_file}",
        f"--kubeconfig={kubeconfig}",
        f"--visibility-server-port={ports.visibility}",
    ]


def kueue_health_url(ports: KueuePorts) -> str:
    """The manager's readiness probe: 200 once its webhook server listens (cmd/kueue/main.go setupProbeEndpoints)."""
    return f"http://127.0.0.1:{ports.health}/readyz"


def health_url(name: str, ports: Ports) -> str:
    """Return the URL whose 200 answer means ``name`` is serving."""
    return {
        ETCD: f"http://127.0.0.1:{ports.etcd_client}/health",
        APISERVER: f"https://127.0.0.1:{ports.apiserver}/readyz",
        CONTROLLER_MANAGER: f"https://127.0.0.1:{ports.controller_manager}/healthz",
        SCHEDULER: f"https://127.0.0.1:{ports.scheduler}/healthz",
        KWOK: f"http://127.0.0.1:{ports.kwok}/healthz",
    }[name]
