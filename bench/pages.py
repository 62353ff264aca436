"""Benchmark 4: server time and SQL query count of the main pages at 100,000 jobs and 1,000 queues.

Each page is requested in-process with Django's test Client as a logged-in admin (no HTTP, no browser: the time
is the server's own), `repeat` times; the figure is the p50. It is measured twice in one run: first at a small
size (the baseline: 1,000 jobs, 10 queues), then at the full size. Query counts must be equal at both sizes
(they must not grow with rows); the goal is p50 <= 100 ms at the full size.

Pages: the dashboard's overview, job list, queue tree (its top level, and one queue's children as fetched on
expand) and job detail when the dashboard provides them (URL names ``scheduling:overview``, ``scheduling:jobs``,
``scheduling:queues``, ``scheduling:queue-children``, ``scheduling:job``), and always the API's job list, job
detail, queue list and queue tree (whole, top level only, and one queue's children).
"""
from __future__ import annotations

import time

from .common import bench_fixtures, ms, percentile, profile, ratio, reset_jobs

GOAL_MS = 100.0


def _pages(job_id: int, parent: str) -> list[tuple[str, str]]:
    """(label, path) of every page to measure; dashboard pages only where the route exists. `parent`: a queue
    with children (the first department of the latest seed: 9 children at the small size, ~90 at the full)."""
    from django.urls import NoReverseMatch, reverse

    pages = []
    for label, name, args in (("overview", "scheduling:overview", ()), ("jobs list", "scheduling:jobs", ()),
                              ("jobs list, phase=Running", "scheduling:jobs", ()),
                              ("queue tree", "scheduling:queues", ()),
                              ("queue tree, expand a queue", "scheduling:queue-children", (parent,)),
                              ("job detail", "scheduling:job", (job_id,))):
        try:
            path = reverse(name, args=args)
        except NoReverseMatch:
            continue
        pages.append((label, path + ("?phase=Running" if "phase=" in label else "")))
    pages += [
        ("API jobs list", "/api/v1/jobs/"),
        ("API jobs list, phase=Running", "/api/v1/jobs/?phase=Running"),
        ("API job detail", f"/api/v1/jobs/{job_id}/"),
        ("API queues list", "/api/v1/queues/"),
        ("API queue tree", "/api/v1/queues/tree/"),
        ("API queue tree, depth=0", "/api/v1/queues/tree/?depth=0"),
        ("API queue tree, children", f"/api/v1/queues/tree/?parent={parent}&depth=0"),
    ]
    return pages


def measure(client, path: str, repeat: int) -> dict:
    """p50/p99 server time (ms) and SQL query count of GET `path` (one warm-up request first)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(path)
    if response.status_code != 200:
        raise RuntimeError(f"GET {path} -> {response.status_code}: {response.content[:300]!r}")
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        client.get(path)
        times.append(time.perf_counter() - t0)
    with CaptureQueriesContext(connection) as queries:
        client.get(path)
    return {"p50_ms": ms(percentile(times, 50)), "p99_ms": ms(percentile(times, 99)), "queries": len(queries)}


def _seed(jobs: int, queues: int, prefix: str, user, version, cluster) -> tuple[int, str]:
    """Seed `jobs` jobs over `queues` queues; return the id of a running job with a full timeline and the name
    of a queue with children."""
    from scheduling.models import GangJob

    from . import seed

    leaves = seed.make_queues(queues, prefix=prefix, clusters=[cluster])
    first, last = seed.insert_jobs(jobs, version, leaves, cluster, user, prefix=prefix)
    seed.analyze()
    job_id = GangJob.objects.filter(id__range=(first, last), phase="Running").values_list("id", flat=True).first()
    return job_id, leaves[0].parent.name


def _drop_queues() -> None:
    from scheduling.models import QueuePolicy

    QueuePolicy.objects.filter(name__startswith="pg", parent__isnull=False).delete()  # leaves first: PROTECT
    QueuePolicy.objects.filter(name__startswith="pg").delete()


def run(jobs: int = 100_000, queues: int = 1000, small_jobs: int = 1000, small_queues: int = 10,
        repeat: int = 20) -> dict:
    """Seed, measure at the small size, grow to the full size, measure again; return the figures."""
    from django.test import Client

    reset_jobs()
    user, version, _queue, cluster = bench_fixtures()
    _drop_queues()
    client = Client()
    client.force_login(user)

    t0 = time.perf_counter()
    job_id, parent = _seed(small_jobs, small_queues, "pgs", user, version, cluster)
    small = {label: measure(client, path, repeat) for label, path in _pages(job_id, parent)}
    job_id, parent = _seed(jobs - small_jobs, queues - small_queues, "pgl", user, version, cluster)
    seed_s = time.perf_counter() - t0
    full = {label: measure(client, path, repeat) for label, path in _pages(job_id, parent)}

    pages = {}
    for label, fig in full.items():
        base = small[label]
        pages[label] = {**fig, "baseline_p50_ms": base["p50_ms"], "baseline_queries": base["queries"],
                        "ratio": ratio(fig["p50_ms"], base["p50_ms"]),
                        "queries_constant": fig["queries"] == base["queries"], "ok": fig["p50_ms"] <= GOAL_MS
                        and fig["queries"] == base["queries"]}
    result = {"jobs": jobs, "queues": queues, "baseline_jobs": small_jobs, "baseline_queues": small_queues,
              "repeat": repeat, "seed_s": round(seed_s, 1), "goal_p50_ms": GOAL_MS, "pages": pages}
    paths = dict(_pages(job_id, parent))
    for label, fig in pages.items():
        if not fig["ok"]:
            slug = label.lower().replace(" ", "-").replace(",", "").replace("=", "-")
            fig["profile"] = profile(f"page-{slug}", lambda p=paths[label]: [client.get(p) for _ in range(2)])
    reset_jobs()
    _drop_queues()
    return result


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    lines = [f"pages at {result['jobs']:,} jobs / {result['queues']:,} queues (baseline: the same page at "
             f"{result['baseline_jobs']:,} jobs / {result['baseline_queues']} queues), p50 of {result['repeat']}:"]
    for label, f in result["pages"].items():
        lines.append(f"  {label:32s} {f['p50_ms']:7.1f} ms  {f['queries']:3d} queries   baseline "
                     f"{f['baseline_p50_ms']:6.1f} ms {f['baseline_queries']:3d} queries   x{f['ratio']:.2f}  "
                     f"{'OK' if f['ok'] else 'BELOW GOAL'}")
    return lines
