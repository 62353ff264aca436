"""Command-line front end shared by ``python -m localcluster`` and ``python manage.py localcluster``.

`add_arguments` fills an argparse parser (Django's ``BaseCommand.add_arguments`` hands one over too) and `run`
executes the parsed options, so both entry points accept exactly the same flags.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path
from typing import TextIO

from .binaries import BUILD_SCRIPT, K8S_VERSION_ENV, BinariesMissing, k8s_versions, resolve_k8s_version
from .cluster import ClusterConfig, ClusterStartError, down, status, switch_version, up
from .state import default_state_dir

ACTIONS = ("up", "down", "status", "build", "switch")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the action and the options of ``localcluster`` to ``parser``."""
    parser.add_argument("action", choices=ACTIONS,
                        help="start, stop, report on, or build the local control plane; switch: upgrade or "
                             "downgrade the running one in place to --k8s-version (same etcd)")
    parser.add_argument("--k8s-version", default=None, choices=k8s_versions(),
                        help=f"Kubernetes release (default ${K8S_VERSION_ENV}, else {k8s_versions()[0]}); "
                             "build: also 'all'")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="state directory (default $GANGWEB_STATE_DIR/localcluster or <repo>/var/localcluster)")
    parser.add_argument("--nodes", type=int, default=4, help="fake nodes to create (default 4)")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="nvidia.com/gpu per node (default 8)")
    parser.add_argument("--cpu-per-node", default="64", help="CPU capacity per node, a quantity (default 64)")
    parser.add_argument("--memory-per-node", default="512Gi", help="memory per node, a quantity (default 512Gi)")
    parser.add_argument("--nodes-per-rack", type=int, default=2, help="nodes per rack label (default 2)")
    parser.add_argument("--racks-per-block", type=int, default=2, help="racks per block label (default 2)")
    parser.add_argument("--feature-gates", default="", type=parse_gates,
                        help="extra feature gates for every component, e.g. WorkloadWithJob=true")
    parser.add_argument("--scheduler-feature-gates", default=None, type=parse_gates,
                        help="kube-scheduler-only gates (default SchedulerPopFromBackoffQ=false; pass '' for none)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds allowed per readiness step")
    parser.add_argument("--keep-on-failure", action="store_true", help="leave processes running if up fails")
    parser.add_argument("--no-kueue", dest="kueue", action="store_false",
                        help="up: do not run the Kueue manager (it runs by default; docs/local-cluster.md, Kueue)")
    parser.add_argument("--purge-logs", action="store_true", help="down: also delete the component logs")


def parse_gates(text: str) -> dict[str, bool]:
    """Parse ``"A=true,B=false"`` into ``{"A": True, "B": False}`` (empty text gives ``{}``)."""
    gates = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or value.lower() not in ("true", "false"):
            raise argparse.ArgumentTypeError(f"feature gate {item!r} is not NAME=true|false")
        gates[name] = value.lower() == "true"
    return gates


def kueue_summary(kueue: dict) -> str:
    """One line on Kueue for `status`: version, readiness, its 127.0.0.1 ports and Configuration file; or that it
    does not run here."""
    if not kueue:
        return "kueue:      not started (python -m localcluster up starts it unless --no-kueue)"
    ports = kueue.get("ports", {})
    listeners = ", ".join(f"{name} {port}" for name, port in ports.items())
    return (f"kueue:      v{kueue.get('version', '?')} {'ready' if kueue.get('ready') else 'NOT READY'}; "
            f"127.0.0.1 ports: {listeners}; config {kueue.get('config')}; "
            f"Lease {kueue.get('namespace')}/{kueue.get('lease')}")


def _print(out: TextIO, msg: str) -> None:
    out.write(msg + "\n")
    out.flush()


def _sigterm_as_interrupt(signum, frame):  # `up` cleans up on KeyboardInterrupt; make SIGTERM do the same
    raise KeyboardInterrupt


def run(options: dict, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Execute one action from parsed ``options`` (a dict of the argparse destinations); return an exit code."""
    action = options["action"]
    state_dir = options.get("state_dir") or default_state_dir()
    if action == "build":
        version = options.get("k8s_version")
        return subprocess.call(["bash", str(BUILD_SCRIPT), *(["--k8s-version", version] if version else [])])
    if action == "switch":
        try:
            cluster = switch_version(state_dir, resolve_k8s_version(options.get("k8s_version")),
                                     lambda m: _print(out, m), timeout=options.get("timeout", 180.0))
        except (ValueError, BinariesMissing, ClusterStartError) as e:
            _print(err, f"localcluster switch failed: {e}")
            return 1
        _print(out, f"now Kubernetes {cluster.state.k8s_version}; export KUBECONFIG={cluster.kubeconfig}")
        return 0
    if action == "down":
        stopped = down(state_dir, lambda m: _print(out, m), purge_logs=options.get("purge_logs", False))
        _print(out, f"down: {len(stopped)} process(es) stopped, state cleared in {state_dir}")
        return 0
    if action == "status":
        st = status(state_dir)
        if not st.components:
            _print(out, f"no local cluster recorded in {state_dir}")
            return 1
        _print(out, f"state dir:  {st.state_dir}\nkubeconfig: {st.kubeconfig}\nserver:     {st.server}")
        _print(out, f"ready:      {st.ready}\nkubernetes: {st.k8s_version or '?'}")
        for comp in st.components:
            state = f"running  rss {comp.rss_bytes / 2**20:7.1f} MiB" if comp.alive else "NOT RUNNING"
            _print(out, f"  {comp.name:24} pid {comp.pid:<8} {state}  log {comp.log}")
        _print(out, f"total RSS: {st.total_rss_bytes / 2**20:.1f} MiB")
        _print(out, kueue_summary(st.kueue))
        return 0 if st.running else 1
    config = ClusterConfig(
        state_dir=Path(state_dir),
        k8s_version=options.get("k8s_version"),
        nodes=options.get("nodes", 4),
        gpus_per_node=options.get("gpus_per_node", 8),
        cpu_per_node=options.get("cpu_per_node", "64"),
        memory_per_node=options.get("memory_per_node", "512Gi"),
        nodes_per_rack=options.get("nodes_per_rack", 2),
        racks_per_block=options.get("racks_per_block", 2),
        timeout=options.get("timeout", 180.0),
        feature_gates=options.get("feature_gates") or {},
        keep_on_failure=options.get("keep_on_failure", False),
        kueue=options.get("kueue", True),
    )
    if options.get("scheduler_feature_gates") is not None:
        config.scheduler_feature_gates = options["scheduler_feature_gates"]
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        cluster = up(config, lambda m: _print(out, m))
    except (ValueError, BinariesMissing, ClusterStartError) as e:
        _print(err, f"localcluster up failed: {e}")
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    took = cluster.state.timings.get("up_s") if cluster.state else None
    _print(out, f"ready{f' in {took:.1f}s' if took else ''}; export KUBECONFIG={cluster.kubeconfig}")
    _print(out, str(cluster.kubeconfig))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m localcluster``."""
    parser = argparse.ArgumentParser(prog="python -m localcluster", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(vars(parser.parse_args(argv)))
