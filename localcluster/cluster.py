"""Bring a local Kubernetes control plane (1.37 or 1.36) up, tear it down, upgrade it in place, report on it.

`up` starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok as plain processes on
127.0.0.1, installs the CRDs, creates the fake nodes and returns once the cluster is usable; with
``ClusterConfig.kueue`` it also runs the Kueue manager (`start_kueue` adds it to a running cluster). The state file is
rewritten after every process start, so `down` (from any process) stops whatever was started, whether `up`
finished, failed or was killed half-way. `switch_version` replaces kube-apiserver, kube-controller-manager,
kube-scheduler and kwok by those of another release over the same etcd, ports and certificates: an in-place
upgrade (or downgrade) as an admin would do it, for tests of clusters that change version under running jobs.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client
from kubernetes.client.rest import ApiException

from . import components as c
from . import kueue as kq
from .binaries import Binaries, require_binaries, require_kueue, resolve_k8s_version
from .crds import install_crds
from .kubeconfig import admin_ssl_context, api_client, write_kubeconfig
from .nodes import add_node, create_node, default_node_specs, remove_node, wait_nodes_ready
from .pki import PKIPaths, generate_pki
from .processes import (
    ProcessRecord,
    http_ok,
    insecure_context,
    is_running,
    rss_bytes,
    spawn,
    stop,
    tail,
    wait_until,
)
from .stages import POD_LOG_NAME, write_stage_config
from .state import ClusterState, default_state_dir, load_state, locked

Progress = Callable[[str], None]


class ClusterStartError(RuntimeError):
    """`up` failed. The message names the step and ends with the tails of the component logs.

    ``processes`` lists the `ProcessRecord` of every process `up` had started (all stopped again, unless
    ``keep_on_failure``).
    """

    def __init__(self, message: str, processes: list[ProcessRecord] | None = None):
        super().__init__(message)
        self.processes = list(processes or [])


@dataclass
class ClusterConfig:
    """Settings of `up`. Defaults: 4 nodes × 8 GPUs, 64 CPUs and 512Gi each, 2 nodes per rack, 2 racks per block."""

    state_dir: Path = field(default_factory=default_state_dir)
    # Kubernetes release (one of versions.env K8S_VERSIONS); None: $GANGWEB_K8S_VERSION, else the default (first)
    k8s_version: str | None = None
    nodes: int = 4
    gpus_per_node: int = 8
    cpu_per_node: str = "64"
    memory_per_node: str = "512Gi"
    nodes_per_rack: int = 2
    racks_per_block: int = 2
    feature_gates: dict[str, bool] = field(default_factory=dict)  # extra gates on top of the release's (components)
    # kube-scheduler only; default components.SCHEDULER_FEATURE_GATES (SchedulerPopFromBackoffQ=false, see there)
    scheduler_feature_gates: dict[str, bool] = field(default_factory=lambda: dict(c.SCHEDULER_FEATURE_GATES))
    install_crds: bool = True
    # Run the Kueue manager too (localcluster/kueue.py): `make run` and `python -m localcluster up` do by default;
    # the test fixture `kube_cluster` does not (the `kueue_cluster` fixture adds it with `start_kueue`).
    kueue: bool = False
    timeout: float = 180.0  # per readiness step, seconds; apiserver /readyz can take 10-30 s on 2 cores
    die_with_parent: bool = False  # components get SIGTERM if the starting thread dies (test fixture)
    keep_on_failure: bool = False  # leave processes running after a failed `up`, for debugging
    binaries: Binaries | None = None  # override the pinned binaries (tests use it to simulate a crash)


@dataclass
class ComponentStatus:
    """One component as `status` sees it."""

    name: str
    pid: int
    alive: bool
    rss_bytes: int
    log: str


@dataclass
class ClusterStatus:
    """What `status` reports: where the state is, whether `up` finished, and each component."""

    state_dir: Path
    kubeconfig: str | None
    server: str | None
    ready: bool
    components: list[ComponentStatus]
    k8s_version: str = ""
    kueue: dict = field(default_factory=dict)  # ClusterState.kueue: ports, config path, ... ({} without Kueue)

    @property
    def running(self) -> bool:
        """True if every recorded component is alive (and at least one was recorded)."""
        return bool(self.components) and all(comp.alive for comp in self.components)

    @property
    def total_rss_bytes(self) -> int:
        """Sum of the resident set sizes of the live components, bytes."""
        return sum(comp.rss_bytes for comp in self.components if comp.alive)


class LocalCluster:
    """A handle on a running cluster: its kubeconfig, API clients, fake nodes and component logs.

    Also works for a cluster we did not start (`attach`); then there are no processes or logs.
    """

    def __init__(self, kubeconfig: Path | str, state: ClusterState | None = None):
        self.kubeconfig = Path(kubeconfig)
        self.state = state

    @property
    def state_dir(self) -> Path | None:
        """The state directory, or None for an attached cluster."""
        return self.state.state_dir if self.state else None

    @property
    def pod_log(self) -> Path | None:
        """The file kwok serves as every simulated container's log (stages.pod_logs), or None for an attached
        cluster. Append `stages.cri_line(...)` lines to make the containers "write" them."""
        return self.state.state_dir / POD_LOG_NAME if self.state else None

    def api_client(self) -> client.ApiClient:
        """Return a new kubernetes `ApiClient` for this cluster (the caller closes it)."""
        return api_client(self.kubeconfig)

    def add_node(self, name: str, *, cpu: str = "64", memory: str = "512Gi", gpus: int = 8,
                 labels: dict[str, str] | None = None, pods: int = 110, wait: bool = True):
        """Add a fake node and wait until it is Ready; see `nodes.add_node`."""
        with self.api_client() as api:
            return add_node(api, name, cpu=cpu, memory=memory, gpus=gpus, pods=pods, labels=labels, wait=wait)

    def remove_node(self, name: str, *, delete_pods: bool = True, wait: bool = True) -> None:
        """Remove a fake node (and by default its pods); see `nodes.remove_node`."""
        with self.api_client() as api:
            remove_node(api, name, delete_pods=delete_pods, wait=wait)

    def log_tails(self, lines: int = 30) -> str:
        """Return the last ``lines`` lines of every component log, each under a header."""
        return format_log_tails(self.state, lines) if self.state else ""

    def status(self) -> ClusterStatus | None:
        """Return `status` of this cluster, or None for an attached one."""
        return status(self.state.state_dir) if self.state else None

    @property
    def kueue(self) -> dict:
        """What `start_kueue` recorded (``ports``: webhook/metrics/health/visibility, ``config``, ``namespace``,
        ``lease``, ``version``, ``ready``), or {} when Kueue was not started here (or the cluster is attached)."""
        return dict(self.state.kueue) if self.state else {}

    def start_kueue(self, progress: Progress | None = None, *, timeout: float = 180.0,
                    die_with_parent: bool = False) -> LocalCluster:
        """Run Kueue on this cluster unless it already runs (see the module function `start_kueue`); refreshes
        this handle's state. Returns self."""
        if self.state is None:
            raise ValueError("cannot start Kueue on an attached cluster")
        self.state = start_kueue(self.state.state_dir, progress, timeout=timeout,
                                 die_with_parent=die_with_parent).state
        return self


def attach(kubeconfig: Path | str) -> LocalCluster:
    """Return a handle on an existing cluster given by ``kubeconfig``; nothing is started or stopped."""
    return LocalCluster(kubeconfig)


def format_log_tails(state: ClusterState, lines: int = 30) -> str:
    """Return the last ``lines`` lines of each component log of ``state``."""
    parts = []
    for record in state.processes:
        alive = "running" if is_running(record) else "NOT RUNNING"
        parts.append(f"----- {record.name} (pid {record.pid}, {alive}) {record.log} -----")
        parts.append(tail(record.log, lines) or "(empty)")
    return "\n".join(parts)


class _Starter:
    """The steps of one `up`, sharing the state, the Popen handles and the progress callback."""

    def __init__(self, config: ClusterConfig, progress: Progress):
        self.config = config
        self.progress = progress
        self.binaries = config.binaries or require_binaries(config.k8s_version)
        if config.kueue:
            require_kueue()  # BinariesMissing before anything starts
        self.k8s_version = self.binaries.k8s_version or resolve_k8s_version(config.k8s_version)
        self.state = ClusterState(state_dir=Path(config.state_dir).resolve(), k8s_version=self.k8s_version,
                                  feature_gates=dict(config.feature_gates),
                                  scheduler_feature_gates=dict(config.scheduler_feature_gates))
        self.popens: dict[str, subprocess.Popen] = {}
        self.step = "prepare"

    # ---- helpers -------------------------------------------------------------------------------------------
    def _check_alive(self) -> None:
        for record in self.state.processes:
            popen = self.popens.get(record.name)
            if popen is not None and popen.poll() is not None:
                raise ClusterStartError(f"{record.name} exited with code {popen.returncode} during {self.step}")
            if not is_running(record):
                raise ClusterStartError(f"{record.name} (pid {record.pid}) is not running during {self.step}")

    def _start(self, name: str, argv: list[str]) -> ProcessRecord:
        popen, record = spawn(
            name, argv, self.state.logs_dir / f"{name}.log", die_with_parent=self.config.die_with_parent
        )
        self.popens[name] = popen
        self.state.processes.append(record)
        self.state.save()  # before anything can fail: `down` must know this PID
        self.progress(f"started {name} (pid {record.pid})")
        return record

    def _wait_http(self, name: str, url: str, context=None) -> None:
        self.step = f"waiting for {name}"
        took = wait_until(lambda: http_ok(url, context), self.config.timeout, f"{name} at {url}",
                          check=self._check_alive)
        self.state.timings[f"{name}_ready_s"] = round(took, 2)

    def _timed(self, key: str, fn: Callable[[], object]):
        start = time.monotonic()
        result = fn()
        self.state.timings[key] = round(time.monotonic() - start, 2)
        return result

    def start_kube(self, ports: c.Ports, pki: PKIPaths, kubeconfig: Path, stages: Path) -> None:
        """Start kube-apiserver, kube-controller-manager, kube-scheduler and kwok of `self.binaries` (etcd runs)
        and wait until each answers its health endpoint."""
        self._start(c.APISERVER, c.apiserver_args(self.binaries, pki, ports, self.config.feature_gates))
        self._wait_http(c.APISERVER, c.health_url(c.APISERVER, ports), admin_ssl_context(pki))

        gates = self.config.feature_gates
        kcm_dir, sched_dir = pki.dir / "kube-controller-manager", pki.dir / "kube-scheduler"
        self._start(c.CONTROLLER_MANAGER,
                    c.controller_manager_args(self.binaries, kubeconfig, pki, ports, kcm_dir, gates))
        self._start(c.SCHEDULER, c.scheduler_args(self.binaries, kubeconfig, ports, sched_dir, gates,
                                                  self.config.scheduler_feature_gates))
        self._start(c.KWOK, c.kwok_args(self.binaries, kubeconfig, stages, ports))
        for name in (c.CONTROLLER_MANAGER, c.SCHEDULER):
            self._wait_http(name, c.health_url(name, ports), insecure_context())
        self._wait_http(c.KWOK, c.health_url(c.KWOK, ports))

    # ---- the steps ------------------------------------------------------------------------------------------
    def run(self) -> LocalCluster:
        start = time.monotonic()
        state = self.state
        (state.state_dir / "logs").mkdir(parents=True, exist_ok=True)
        ports = c.Ports.allocate()
        state.ports = ports.to_dict()
        etcd_data = Path(tempfile.mkdtemp(prefix="gangweb-etcd-"))
        state.temp_dirs.append(str(etcd_data))
        pki = self._timed("pki_s", lambda: generate_pki(state.state_dir / "pki", service_ip=c.SERVICE_IP))
        state.server = f"https://127.0.0.1:{ports.apiserver}"
        kubeconfig = write_kubeconfig(state.state_dir / "kubeconfig", state.server, pki)
        state.kubeconfig = str(kubeconfig)
        stages = write_stage_config(state.state_dir / "kwok-stages.yaml", log_file=state.state_dir / POD_LOG_NAME)
        state.save()

        self._start(c.ETCD, c.etcd_args(self.binaries, etcd_data, ports))
        self._wait_http(c.ETCD, c.health_url(c.ETCD, ports))
        self.start_kube(ports, pki, kubeconfig, stages)

        with api_client(kubeconfig) as api:
            if self.config.install_crds:
                self.step = "installing CRDs"
                names = self._timed("crds_s", lambda: install_crds(api, timeout=self.config.timeout))
                self.progress(f"CRDs established: {len(names)}")
            self.step = "creating nodes"
            specs = default_node_specs(
                self.config.nodes,
                gpus_per_node=self.config.gpus_per_node,
                cpu=self.config.cpu_per_node,
                memory=self.config.memory_per_node,
                nodes_per_rack=self.config.nodes_per_rack,
                racks_per_block=self.config.racks_per_block,
            )
            for spec in specs:
                create_node(api, spec)
            state.nodes = [s.name for s in specs]
            self._timed("nodes_ready_s", lambda: wait_nodes_ready(api, state.nodes, self.config.timeout))
            self.progress(f"nodes Ready: {len(specs)}")
            self.step = "waiting for the default ServiceAccount"
            self._timed("default_sa_s", lambda: wait_until(
                lambda: _has_default_sa(api, "default"), self.config.timeout, "ServiceAccount default/default",
                check=self._check_alive))
        if self.config.kueue:
            kq.start_manager(self)
        self._check_alive()
        state.ready = True
        state.timings["up_s"] = round(time.monotonic() - start, 2)
        state.save()
        return LocalCluster(kubeconfig, state)


def _has_default_sa(api: client.ApiClient, namespace: str) -> bool:
    try:
        client.CoreV1Api(api).read_namespaced_service_account("default", namespace)
        return True
    except ApiException as e:
        if e.status == 404:
            return False
        raise


def up(config: ClusterConfig | None = None, progress: Progress | None = None) -> LocalCluster:
    """Start a local control plane and return once it is ready (see the module docstring for "ready").

    If the state directory already holds a running, ready cluster, that one is returned and nothing is started.
    A stale state (some process dead) is cleaned with `down` first. On failure every started process is stopped
    (unless ``config.keep_on_failure``) and `ClusterStartError` is raised with the component log tails.
    Raises `binaries.BinariesMissing` if the binaries are not built.
    """
    config = config or ClusterConfig()
    progress = progress or (lambda msg: None)
    state_dir = Path(config.state_dir).resolve()
    with locked(state_dir):
        existing = load_state(state_dir)
        if existing is not None:
            if existing.ready and existing.processes and all(is_running(p) for p in existing.processes):
                progress("already running")
                if config.kueue and existing.process(c.KUEUE) is None:
                    return _start_kueue_locked(state_dir, progress, config.timeout, config.die_with_parent)
                return LocalCluster(existing.kubeconfig, existing)
            progress("cleaning up a stale cluster state")
            _down_locked(state_dir, progress)
        starter = _Starter(config, progress)
        try:
            return starter.run()
        except BaseException as exc:  # also KeyboardInterrupt: never leave half a cluster behind
            tails = format_log_tails(starter.state, 25)
            if not config.keep_on_failure:
                _down_locked(state_dir, progress, popens=starter.popens)
            if isinstance(exc, (ClusterStartError, TimeoutError, ApiException, OSError, kq.KueueSetupError)):
                raise ClusterStartError(
                    f"local cluster failed while {starter.step}: {exc}\n{tails}", starter.state.processes
                ) from exc
            raise


def start_kueue(state_dir: Path | str, progress: Progress | None = None, *, timeout: float = 180.0,
                die_with_parent: bool = False) -> LocalCluster:
    """Add the Kueue manager to the running, ready cluster of ``state_dir`` (nothing happens when it already runs)
    and return once Kueue serves (`kueue.start_manager`); `down` stops it with the rest.

    Raises ValueError for a state dir without a ready cluster, `binaries.BinariesMissing` when Kueue is not built
    (naming build.sh), and `ClusterStartError` naming the step and Kueue's log when it does not come up (the
    manager is stopped again; the rest of the cluster keeps running).
    """
    state_dir = Path(state_dir).resolve()
    with locked(state_dir):
        return _start_kueue_locked(state_dir, progress or (lambda msg: None), timeout, die_with_parent)


def _start_kueue_locked(state_dir: Path, progress: Progress, timeout: float, die_with_parent: bool) -> LocalCluster:
    state = load_state(state_dir)
    if state is None or not state.ready:
        raise ValueError(f"no ready local cluster in {state_dir}")
    running = state.process(c.KUEUE)
    if running is not None and is_running(running):
        return LocalCluster(state.kubeconfig, state)
    state.processes = [p for p in state.processes if p.name != c.KUEUE]
    config = ClusterConfig(state_dir=state_dir, k8s_version=state.k8s_version, timeout=timeout,
                           die_with_parent=die_with_parent)
    starter = _Starter(config, progress)
    starter.state = state
    try:
        kq.start_manager(starter)
    except (ClusterStartError, TimeoutError, OSError, ApiException, kq.KueueSetupError) as exc:
        log = state.logs_dir / f"{c.KUEUE}.log"
        record = state.process(c.KUEUE)
        if record is not None:
            stop(record, starter.popens.get(c.KUEUE))
            state.processes.remove(record)
        state.kueue = {}
        state.save()
        raise ClusterStartError(f"Kueue did not start while {starter.step}: {exc}\n"
                                f"----- the Kueue manager's log {log} -----\n{tail(log, 40) or '(empty)'}",
                                state.processes) from exc
    return LocalCluster(state.kubeconfig, state)


KUBE_COMPONENTS = (c.APISERVER, c.CONTROLLER_MANAGER, c.SCHEDULER, c.KWOK)


def switch_version(state_dir: Path | str, k8s_version: str, progress: Progress | None = None, *,
                   timeout: float = 180.0, die_with_parent: bool = False) -> LocalCluster:
    """Upgrade (or downgrade) a running cluster in place to Kubernetes ``k8s_version``.

    Stops kwok, kube-scheduler, kube-controller-manager and kube-apiserver, then starts those of ``k8s_version``
    with that release's feature gates and runtime config (`components.FEATURE_GATES`), on the same ports and
    certificates and over the same etcd and its data, as an admin upgrading a control plane would (nodes stay;
    pods keep their state in etcd). Returns once every component is healthy again. Objects of an API version the
    new release no longer serves stay in etcd, unreadable through the API, as upstream describes.

    Raises ValueError for an unknown release or a state dir without a ready cluster, `binaries.BinariesMissing`,
    and `ClusterStartError` (with log tails) when a new component does not come up; the old ones are not restarted.
    """
    progress = progress or (lambda msg: None)
    state_dir = Path(state_dir).resolve()
    version = resolve_k8s_version(k8s_version)
    with locked(state_dir):
        state = load_state(state_dir)
        if state is None or not state.ready:
            raise ValueError(f"no ready local cluster in {state_dir}")
        config = ClusterConfig(state_dir=state_dir, k8s_version=version, timeout=timeout,
                               feature_gates=dict(state.feature_gates), die_with_parent=die_with_parent,
                               scheduler_feature_gates=dict(state.scheduler_feature_gates))
        starter = _Starter(config, progress)  # require_binaries first: nothing is stopped when they are missing
        old = state.k8s_version
        for record in reversed([p for p in state.processes if p.name in KUBE_COMPONENTS]):
            stop(record)
            progress(f"stopped {record.name} {old} (pid {record.pid})")
        state.processes = [p for p in state.processes if p.name not in KUBE_COMPONENTS]
        state.k8s_version, state.ready = version, False
        state.save()
        starter.state = state
        start = time.monotonic()
        try:
            starter.start_kube(c.Ports(**state.ports), PKIPaths(state_dir / "pki"), Path(state.kubeconfig),
                               state_dir / "kwok-stages.yaml")
        except (ClusterStartError, TimeoutError, OSError) as exc:
            raise ClusterStartError(f"switching to Kubernetes {version} failed while {starter.step}: {exc}\n"
                                    f"{format_log_tails(state, 25)}", state.processes) from exc
        state.ready = True
        state.timings[f"switch_to_{version}_s"] = round(time.monotonic() - start, 2)
        state.save()
        progress(f"Kubernetes {old} -> {version}: ready")
        return LocalCluster(state.kubeconfig, state)


def _down_locked(state_dir: Path, progress: Progress, popens: dict | None = None, purge_logs: bool = False):
    state = load_state(state_dir)
    stopped: list[ProcessRecord] = []
    if state is not None:
        # Kueue first, while the API server still answers: it releases its Lease on the way out (ReleaseOnCancel)
        # instead of waiting out the grace period for an API server that is gone.
        for record in sorted(reversed(state.processes), key=lambda r: r.name != c.KUEUE):
            gone = stop(record, (popens or {}).get(record.name))
            progress(f"stopped {record.name} (pid {record.pid})" if gone else f"could not stop {record.name}")
            stopped.append(record)
        for temp in state.temp_dirs:
            shutil.rmtree(temp, ignore_errors=True)
    shutil.rmtree(state_dir / "pki", ignore_errors=True)
    for name in ("kubeconfig", "kwok-stages.yaml", kq.CONFIG_FILE, POD_LOG_NAME, "state.json", "state.tmp"):
        (state_dir / name).unlink(missing_ok=True)
    if purge_logs:
        shutil.rmtree(state_dir / "logs", ignore_errors=True)
    return stopped


def down(state_dir: Path | str | None = None, progress: Progress | None = None, *,
         purge_logs: bool = False) -> list[ProcessRecord]:
    """Stop every process recorded in ``state_dir`` and remove the cluster's temporary files.

    Works whether `up` finished, failed or was killed half-way; a directory with no state is not an error.
    Component logs are kept in ``<state_dir>/logs`` unless ``purge_logs``. Returns the records it stopped.
    """
    state_dir = Path(state_dir).resolve() if state_dir else default_state_dir()
    with locked(state_dir):
        return _down_locked(state_dir, progress or (lambda msg: None), purge_logs=purge_logs)


def status(state_dir: Path | str | None = None) -> ClusterStatus:
    """Report the cluster recorded in ``state_dir``: each component's PID, liveness and RSS."""
    state_dir = Path(state_dir).resolve() if state_dir else default_state_dir()
    state = load_state(state_dir)
    if state is None:
        return ClusterStatus(state_dir, None, None, False, [])
    comps = []
    for record in state.processes:
        alive = is_running(record)
        comps.append(ComponentStatus(record.name, record.pid, alive, rss_bytes(record.pid) if alive else 0,
                                     record.log))
    return ClusterStatus(state_dir, state.kubeconfig, state.server, state.ready, comps, state.k8s_version,
                         dict(state.kueue))
