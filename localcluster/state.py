"""The state directory of a local cluster and the JSON state file in it.

Layout of a state directory (default ``$GANGWEB_STATE_DIR/localcluster/``, else ``<repo>/var/localcluster/``)::

    state.json          PIDs, ports, kubeconfig path, temporary directories; written after every process start
    kubeconfig          admin kubeconfig (certificates embedded)
    pki/                CA, serving and client certificates, SA key pair; per-component cert dirs
    kwok-stages.yaml    the Stage objects kwok runs
    kueue-config.yaml   the Kueue manager's Configuration (when Kueue runs; localcluster/kueue.py)
    logs/<component>.log  one log per component; kept by `down` so a failure can still be read
    lock                serialises `up` and `down` on the same directory

etcd's data lives in a separate temporary directory (recorded in ``state.json``) and is removed by `down`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .binaries import REPO_DIR
from .processes import ProcessRecord

STATE_FILE = "state.json"


def default_state_dir() -> Path:
    """Return ``localcluster/`` inside gangweb's state folder: ``$GANGWEB_STATE_DIR`` if set, else ``<repo>/var``
    (gitignored), the same folder the Django settings keep the SQLite file and broker in."""
    env = os.environ.get("GANGWEB_STATE_DIR")
    return (Path(env).expanduser().resolve() if env else REPO_DIR / "var") / "localcluster"


@dataclass
class ClusterState:
    """What `down` and `status` need to find a cluster again from another process."""

    state_dir: Path
    kubeconfig: str | None = None
    server: str | None = None
    ports: dict = field(default_factory=dict)
    processes: list[ProcessRecord] = field(default_factory=list)
    temp_dirs: list[str] = field(default_factory=list)
    ready: bool = False
    timings: dict = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)
    k8s_version: str = ""  # the Kubernetes release the kube-* components run
    feature_gates: dict = field(default_factory=dict)  # extra gates `up` was given (kept for `switch_version`)
    scheduler_feature_gates: dict = field(default_factory=dict)
    # Kueue, once started: {"version", "ports": KueuePorts.to_dict(), "config", "namespace", "lease", "ready"}
    kueue: dict = field(default_factory=dict)

    @property
    def path(self) -> Path:
        """The state file's path."""
        return self.state_dir / STATE_FILE

    @property
    def logs_dir(self) -> Path:
        """Directory holding one ``<component>.log`` per component."""
        return self.state_dir / "logs"

    def process(self, name: str) -> ProcessRecord | None:
        """Return the record of component ``name``, or None if it was not started."""
        return next((p for p in self.processes if p.name == name), None)

    def save(self) -> None:
        """Write the state file atomically (write a temporary file, then rename)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        data = {
            "kubeconfig": self.kubeconfig,
            "server": self.server,
            "ports": self.ports,
            "processes": [p.to_dict() for p in self.processes],
            "temp_dirs": self.temp_dirs,
            "ready": self.ready,
            "timings": self.timings,
            "nodes": self.nodes,
            "k8s_version": self.k8s_version,
            "feature_gates": self.feature_gates,
            "scheduler_feature_gates": self.scheduler_feature_gates,
            "kueue": self.kueue,
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, self.path)


def load_state(state_dir: Path) -> ClusterState | None:
    """Read the state file of ``state_dir``; None if there is none."""
    path = Path(state_dir) / STATE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return ClusterState(
        state_dir=Path(state_dir),
        kubeconfig=data.get("kubeconfig"),
        server=data.get("server"),
        ports=data.get("ports", {}),
        processes=[ProcessRecord.from_dict(p) for p in data.get("processes", [])],
        temp_dirs=data.get("temp_dirs", []),
        ready=data.get("ready", False),
        timings=data.get("timings", {}),
        nodes=data.get("nodes", []),
        k8s_version=data.get("k8s_version", ""),
        feature_gates=data.get("feature_gates", {}),
        scheduler_feature_gates=data.get("scheduler_feature_gates", {}),
        kueue=data.get("kueue", {}),
    )


@contextlib.contextmanager
def locked(state_dir: Path):
    """Hold an exclusive lock on ``state_dir`` (``flock`` on its ``lock`` file) for the ``with`` block."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / "lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
