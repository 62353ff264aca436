"""Benchmark 5: resident memory of the web (gunicorn, 2 workers) and Celery worker processes with 10,000 active jobs.

Baseline: the same processes after the same warm-up (pages browsed, a resync of every cluster) with no jobs. Then
the resync benchmark's dataset is built in the local control plane (`bench.resync.build`: 10,000 one-pod KAI jobs,
their PodGroups, Indexed Jobs, Services and Pending pods, every job in sync), the worker runs a resync of every
cluster (LISTs of 10,000 of each kind, 10,000 job passes), and the web serves its job lists, job detail, queue list
and overview 20 times per session. RSS is read from /proc (VmRSS; VmHWM for the peak of a process).

The resync benchmark's two in-process measurements (at ~1,000 and ~10,000 jobs) are taken along the way, on the
same dataset, so it is built once (`resync_result` holds them for run_all).
"""
from __future__ import annotations

import time

from .common import bench_fixtures, logged_in_session, ratio, reset_client_limits, reset_jobs
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


def _worker_resync(cluster_name: str = "local") -> tuple[float, int]:
    """Have the Celery worker resync every cluster; wait for it. Returns the seconds and the jobs its resync run of
    `cluster_name` recorded (its ReconcileAttempt; a run stops at GANGWEB_RESYNC_MAX_SECONDS), or (0.0, 0)."""
    from scheduling import tasks
    from scheduling.models import ReconcileAttempt

    last = ReconcileAttempt.objects.filter(kind=ReconcileAttempt.KIND_RESYNC).order_by("-pk").values_list(
        "pk", flat=True).first() or 0
    tasks.resync_all_clusters.delay()
    _wait_worker_idle(timeout=900)
    attempt = ReconcileAttempt.objects.filter(kind=ReconcileAttempt.KIND_RESYNC, pk__gt=last,
                                              cluster__name=cluster_name).order_by("-pk").first()
    if attempt is None:
        return 0.0, 0
    jobs = next((int(a.split("=", 1)[1]) for a in attempt.actions if a.startswith("jobs=")), 0)
    return round(attempt.duration_ms / 1000, 1), jobs


def run(stack, base_url: str, jobs: int = 10_000, small: int = 1_000) -> dict:
    """Measure web and worker RSS with no jobs and with `jobs` active, in-sync jobs in the local control plane;
    return the figures, with the resync benchmark's measurements at `small` and `jobs` jobs under "resync"."""
    from scheduling.models import GangJob

    from . import resync

    reset_jobs()
    reset_client_limits()
    user = bench_fixtures()[0]
    if "worker" not in stack.procs:
        stack.start_worker()
    # A cluster holding nothing but this dataset: the reconcile benchmark's objects (their jobs are gone from the
    # database once jobs are reset) would be orphans in every resync LIST.
    stack.restart_cluster()
    resync.setup(stack)
    sessions = [logged_in_session(base_url, user) for _ in range(2)]
    pages = ["/api/v1/jobs/", "/api/v1/jobs/?phase=Dispatched", "/api/v1/queues/", "/"]

    def web_paths():
        first = GangJob.objects.order_by("id").values_list("id", flat=True).first()
        return pages + ([f"/api/v1/jobs/{first}/"] if first else [])

    _browse(sessions, base_url, web_paths(), rounds=10)
    _worker_resync()
    before = {"web": snapshot(stack.procs["web"].pid), "worker": snapshot(stack.procs["worker"].pid)}

    t0 = time.monotonic()
    built = [resync.build(stack, small)]
    small_pass = resync.measure()
    built.append(resync.build(stack, jobs))
    log(f"memory: {jobs} in-sync jobs in the cluster ({time.monotonic() - t0:.0f} s); the worker resyncs them")
    worker_resync_s, worker_resync_jobs = _worker_resync()
    _browse(sessions, base_url, web_paths(), rounds=20)
    after = {"web": snapshot(stack.procs["web"].pid), "worker": snapshot(stack.procs["worker"].pid)}
    # The worker's seconds stand for an untraced pass when its run covered every job (it saves a pass of a minute).
    covered = worker_resync_jobs >= jobs
    large_pass = resync.measure(untraced=not covered)
    if covered:
        large_pass["seconds"] = worker_resync_s
    return {
        "jobs": jobs, "empty": before, "loaded": after, "worker_resync_s": worker_resync_s,
        "worker_resync_jobs": worker_resync_jobs, "dataset": built,
        "web_ratio": ratio(after["web"]["total_mib"], before["web"]["total_mib"]),
        "worker_ratio": ratio(after["worker"]["total_mib"], before["worker"]["total_mib"]),
        "resync": resync.summarize(small_pass, large_pass),
    }


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    lines = [f"memory with {result['jobs']:,} active jobs in the cluster (baseline: the same processes with no jobs; "
             f"the worker's resync run took {result['worker_resync_s']} s for "
             f"{result.get('worker_resync_jobs', 0):,} of them):"]
    for kind in ("web", "worker"):
        a, b = result["loaded"][kind], result["empty"][kind]
        lines.append(f"  {kind:6s} RSS {a['total_mib']:7.1f} MiB in {a['processes']} processes (largest child "
                     f"{a['largest_child_mib']} MiB, peak {a['peak_child_mib']} MiB)   baseline {b['total_mib']:.1f} "
                     f"MiB   x{result[kind + '_ratio']:.2f}")
    for step in result.get("dataset") or []:
        lines.append(f"  dataset     : to {step['jobs']:,} jobs: objects created in {step.get('create_s', 0)} s, pods "
                     f"{step.get('pods_s', 0)} s, first pass {step.get('first_pass_s', 0)} s")
    return lines
