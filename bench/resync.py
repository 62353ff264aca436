"""Benchmark 3: API requests per resync of a cluster whose jobs are all in sync ("nothing changed").

The resync runs in this process (``scheduling.reconcile.resync.resync_cluster``) so the kube client's request
counter (``scheduling.kube.objects.requests``, which every API call goes through) sees every request. It is
measured at two job counts from the reconcile benchmark's jobs (after its first round, the baseline, and after
its last); the count must be the same at both (independent of the job count), at most 2 per kind per cluster,
with no job acted on. A second, traced pass at each size gives the resync's peak Python allocation, and from the
two sizes the allocation per job.

Why not 10,000 in-sync jobs: every in-sync job needs its gang objects, Indexed Job and Service in the cluster and
its Job controller creates its pods; 10,000 of them (40,000 pods) do not fit the 15-minute budget on 2 cores. The
DB side of a resync at 10,000 jobs is covered by the memory benchmark (worker RSS while it resyncs them).
"""
from __future__ import annotations

import time
import tracemalloc

from .common import ratio

GOAL_PER_KIND = 2


def measure(cluster_name: str = "local", settle_s: float = 2.0) -> dict:
    """One resync pass, counted: {"jobs", "acted", "failed", "requests", "by_request", "max_per_kind", "seconds"}."""
    from scheduling.kube import objects
    from scheduling.models import Cluster
    from scheduling.reconcile import resync

    time.sleep(settle_s)  # let the worker finish the round's last pass
    cluster = Cluster.objects.get(name=cluster_name)
    objects.requests.reset()
    stats = resync.resync_cluster(cluster)
    by_request = dict(sorted(objects.requests.counts.items()))
    per_kind: dict[str, int] = {}
    for key, n in by_request.items():
        kind = key.split(" ", 1)[1]
        per_kind[kind] = per_kind.get(kind, 0) + n
    # A second pass under tracemalloc: the peak Python memory a resync allocates (it grows with the job count:
    # the worker holds the LIST snapshot and the jobs' rows while it walks them).
    tracemalloc.start()
    resync.resync_cluster(cluster)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"jobs": stats["jobs"], "acted": stats["acted"], "failed": stats["failed"],
            "requests": sum(by_request.values()), "by_request": by_request,
            "max_per_kind": max(per_kind.values() or [0]), "seconds": stats["seconds"],
            "peak_alloc_mib": round(peak / 2**20, 1)}


def summarize(small: dict, large: dict) -> dict:
    """Compare the two passes against the goals."""
    return {
        "baseline": small, "measured": large,
        "ratio": ratio(large["requests"], small["requests"]),
        # Peak allocation per extra job, and what that makes at 10,000 in-sync jobs (linear extrapolation).
        "alloc_kib_per_job": round((large["peak_alloc_mib"] - small["peak_alloc_mib"]) * 1024
                                   / max(1, large["jobs"] - small["jobs"]), 1),
        "goal_max_per_kind": GOAL_PER_KIND,
        "ok": (large["requests"] == small["requests"] and large["max_per_kind"] <= GOAL_PER_KIND
               and large["acted"] == 0 and large["failed"] == 0),
    }


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    s, m = result["baseline"], result["measured"]
    return [
        f"resync        : {m['requests']} API requests for {m['jobs']} in-sync jobs (max {m['max_per_kind']} per kind, "
        f"{m['acted']} jobs acted on, {m['seconds']} s)",
        f"  baseline    : {s['requests']} API requests for {s['jobs']} jobs   ratio {result['ratio']:.2f} "
        f"(goal: equal, <= {GOAL_PER_KIND} per kind) {'OK' if result['ok'] else 'BELOW GOAL'}",
        f"  requests    : {', '.join(f'{k} x{n}' for k, n in m['by_request'].items())}",
        f"  memory      : resync peak allocation {s['peak_alloc_mib']} MiB at {s['jobs']} jobs, "
        f"{m['peak_alloc_mib']} MiB at {m['jobs']} jobs ({result['alloc_kib_per_job']} KiB per job; "
        f"~{result['alloc_kib_per_job'] * 10_000 / 1024:.0f} MiB at 10,000 jobs)",
    ]
