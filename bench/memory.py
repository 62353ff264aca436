"""Benchmark 5: resident memory of the web (gunicorn, 2 workers) and Celery worker processes with 10,000 active jobs.

Baseline: the same processes after the same warm-up with no jobs. Then 10,000 active jobs are seeded, the web
serves its list, detail and overview pages a few dozen times, and the worker runs a resync of every cluster (which
reads every non-terminal job) and reconciles a batch. RSS is read from /proc (VmRSS; VmHWM for the peak).
"""
from __future__ import annotations

import time

from .common import bench_fixtures, logged_in_session, ratio, reset_jobs
from .stack import children, log

MIB = 1024 * 1024


def _proc_kib(pid: int, key: str) -> int:
    try:
        for line in open(f"/proc/{pid}/status"):  # noqa: SIM115 - tiny file, read once
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def snapshot(pid: int) -> dict:
    """RSS and peak RSS (MiB) of a process and its children."""
    pids = [pid, *children(pid)]
    rss = [_proc_kib(p, "VmRSS") / 1024 for p in pids]
    hwm = [_proc_kib(p, "VmHWM") / 1024 for p in pids]
    return {"total_mib": round(sum(rss), 1), "largest_child_mib": round(max(rss[1:] or [0]), 1),
            "peak_child_mib": round(max(hwm[1:] or [0]), 1), "processes": len(pids)}


def _browse(sessions, base_url: str, paths: list[str], rounds: int) -> None:
    for _ in range(rounds):
        for session in sessions:
            for path in paths:
                response = session.get(base_url + path)
                if response.status_code != 200:
                    raise RuntimeError(f"GET {path} -> {response.status_code}")


def _wait_worker_idle(timeout: float = 300) -> None:
    """Wait until the Celery queue is empty and no worker runs a task."""
    from gangweb.celery import app

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with app.connection_for_read() as conn:
            queued = conn.default_channel.client.llen("celery")
        active = app.control.inspect(timeout=2).active() or {}
        if queued == 0 and active and not any(active.values()):
            return
        time.sleep(1)
    raise RuntimeError("the Celery worker did not finish its tasks in time")


def _work(job_ids: list[int]) -> None:
    from scheduling import tasks

    tasks.resync_all_clusters.delay()
    for i in range(0, len(job_ids), 200):
        tasks.reconcile_jobs.delay(job_ids[i:i + 200])
    _wait_worker_idle()


def run(stack, base_url: str, jobs: int = 10_000) -> dict:
    """Measure web and worker RSS at 0 and at `jobs` active jobs; return the figures."""
    from scheduling.models import GangJob

    from . import seed

    reset_jobs()
    user, version, queue, cluster = bench_fixtures()
    if "worker" not in stack.procs:
        stack.start_worker()
    sessions = [logged_in_session(base_url, user) for _ in range(2)]
    pages = ["/api/v1/jobs/", "/api/v1/jobs/?phase=Running", "/api/v1/queues/", "/"]

    def web_paths():
        first = GangJob.objects.order_by("id").values_list("id", flat=True).first()
        return pages + ([f"/api/v1/jobs/{first}/"] if first else [])

    _browse(sessions, base_url, web_paths(), rounds=10)
    _work([])
    before = {"web": snapshot(stack.procs["web"].pid), "worker": snapshot(stack.procs["worker"].pid)}

    first, last = seed.insert_jobs(jobs, version, [queue], cluster, user, prefix="mem", phases=seed.ACTIVE_MIX)
    seed.analyze()
    log(f"memory: {jobs} active jobs seeded; browsing and resyncing")
    _browse(sessions, base_url, web_paths(), rounds=20)
    _work(list(range(first, last + 1)))
    after = {"web": snapshot(stack.procs["web"].pid), "worker": snapshot(stack.procs["worker"].pid)}
    reset_jobs()
    return {
        "jobs": jobs, "empty": before, "loaded": after,
        "web_ratio": ratio(after["web"]["total_mib"], before["web"]["total_mib"]),
        "worker_ratio": ratio(after["worker"]["total_mib"], before["worker"]["total_mib"]),
    }


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    lines = [f"memory with {result['jobs']:,} active jobs (baseline: the same processes with no jobs):"]
    for kind in ("web", "worker"):
        a, b = result["loaded"][kind], result["empty"][kind]
        lines.append(f"  {kind:6s} RSS {a['total_mib']:7.1f} MiB in {a['processes']} processes (largest child "
                     f"{a['largest_child_mib']} MiB, peak {a['peak_child_mib']} MiB)   baseline {b['total_mib']:.1f} "
                     f"MiB   x{result[kind + '_ratio']:.2f}")
    return lines
