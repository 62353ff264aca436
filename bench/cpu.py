"""CPU seconds spent by the processes of a benchmark run, and how busy the whole machine was, over an interval.

Read from /proc (Linux): a process's utime + stime (`/proc/<pid>/stat`, clock ticks), the machine's from
`/proc/stat`'s first line. Groups: the local control plane's components (etcd, kube-apiserver, controller manager,
scheduler, kwok: their pids from the cluster's state), the Celery worker and gunicorn with their children, and the
bench process's own reaped children (the raw clients, `resource.RUSAGE_CHILDREN`). PostgreSQL is left out: the
cluster is shared with other users, and the batch threads' backends end with their connections.
"""
from __future__ import annotations

import os
import resource
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def process_seconds(pid: int) -> float:
    """utime + stime of process `pid` in seconds (0.0 when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return 0.0
    fields = raw[raw.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def tree(pid: int) -> list[int]:
    """`pid` and its descendants (from /proc/<pid>/task/*/children)."""
    from .stack import children

    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo += children(current)
    return out


def machine() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, over every core (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values) - idle) / TICK, sum(values) / TICK


def snapshot(stack) -> dict[str, float]:
    """CPU seconds so far per group: control_plane, worker, web, bench_children; plus the machine's busy/total."""
    state = getattr(stack.cluster, "state", None)
    groups = {"control_plane": [p.pid for p in state.processes] if state is not None else [],
              "worker": tree(stack.procs["worker"].pid) if "worker" in stack.procs else [],
              "web": tree(stack.procs["web"].pid) if "web" in stack.procs else []}
    out = {name: sum(process_seconds(pid) for pid in pids) for name, pids in groups.items()}
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["bench_children"] = usage.ru_utime + usage.ru_stime
    out["machine_busy"], out["machine_total"] = machine()
    return out


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per group between two snapshots, and `machine_busy_pct`: the share of the machine's CPU time
    (every core) that was busy meanwhile, with anything else that ran on it."""
    out = {k: round(after[k] - before[k], 2) for k in before if not k.startswith("machine_")}
    total = after["machine_total"] - before["machine_total"]
    out["machine_busy_pct"] = round(100 * (after["machine_busy"] - before["machine_busy"]) / total, 1) if total else 0.0
    return out
