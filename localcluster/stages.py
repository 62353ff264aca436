"""The kwok Stage objects that simulate node and pod lifecycles, shipped as YAML in ``localcluster/stages/``.

The standalone ``kwok`` binary has no built-in stages (it exits with "no stages found"), so `up` writes them into
one multi-document config file and passes it with ``--config``. Four come unchanged from kwok v0.8.0's ``fast``
stages (node-initialize, node-heartbeat-with-lease, pod-ready, and pod-delete with one selector added);
``pod-finish.yaml`` and ``pod-kill.yaml`` are ours. Lifecycle:

- a Node with the kwok annotation becomes Ready, keeping the capacity it was created with, and renews its Lease;
- a Pod bound to such a node becomes Running and Ready at once (pod-ready);
- a Running Pod finishes only on demand, through `SIM_EXIT_ANNOTATION` and/or `SIM_DURATION_ANNOTATION`
  (pod-finish; kwok's own pod-complete, which completes every Job-owned pod at once, is left out on purpose);
- a Running Pod with a deletionTimestamp is killed first (gangweb-pod-kill: phase Failed, exit code 137, its
  conditions kept), as a kubelet reports a terminal phase before the pod goes;
- a Pod with a deletionTimestamp that is not Running is removed (pod-delete), as a kubelet would after the grace
  period.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import yaml

STAGES_DIR = Path(__file__).resolve().parent / "stages"

SIM_EXIT_ANNOTATION = "gangweb.io/sim-exit"
"""Pod annotation: finish with this exit code ("0" → Succeeded, other integers → Failed)."""

SIM_DURATION_ANNOTATION = "gangweb.io/sim-duration"
"""Pod annotation: run this long before finishing (Go duration such as "30s", or an RFC 3339 time)."""


def load_stages(directory: Path = STAGES_DIR) -> list[dict]:
    """Return every Stage object of ``directory/*.yaml``, in file-name order."""
    stages: list[dict] = []
    for path in sorted(directory.glob("*.yaml")):
        stages.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return stages


POD_LOG_NAME = "kwok-pod.log"
"""The file (in the state directory) every simulated container's log is read from: see `pod_logs`."""


def pod_logs(log_file: Path) -> dict:
    """A kwok ClusterLogs object (kwok.x-k8s.io/v1alpha1) serving `log_file` as the log of every container of every
    pod on the fake nodes (also as its previous container's log). kube-apiserver proxies
    ``GET /api/v1/namespaces/NS/pods/NAME/log`` to the node's kubelet, which is kwok (components.NODE_IP and
    ``--node-port``), and kwok reads the file with the kubelet's own CRI log reader: each line is
    ``<RFC 3339 time> stdout|stderr F <text>``; lines appended later reach a ``follow`` stream."""
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs", "metadata": {"name": "gangweb-pod-logs"},
            "spec": {"logs": [{"logsFile": str(log_file), "previousLogsFile": str(log_file), "follow": True}]}}


def cri_line(text: str, stream: str = "stdout", at: datetime | None = None) -> str:
    """One line of the CRI log format kwok reads (``2026-12-06T08:00:00.000000000Z stdout F text``)."""
    at = (at or datetime.now(UTC)).astimezone(UTC)
    return f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {stream} F {text}\n"


def write_stage_config(path: Path, stages: list[dict] | None = None, log_file: Path | None = None) -> Path:
    """Write the Stage objects (and, with `log_file`, the ClusterLogs of `pod_logs`, creating the file with one
    line saying what it is when missing) as one multi-document YAML file for ``kwok --config``; return the path."""
    docs = list(stages if stages is not None else load_stages())
    if log_file is not None:
        docs.append(pod_logs(log_file))
        if not log_file.exists():
            log_file.write_text(cri_line(f"kwok simulates this container: no process runs; lines appended to "
                                         f"{log_file} appear here"))
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path
