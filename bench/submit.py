"""Benchmark 1: job submission through gunicorn, single and bulk, against a minimal DRF endpoint.

Single: N jobs via ``POST /api/v1/jobs/`` from `threads` client threads (one keep-alive requests.Session each),
alternating blocks of 100 with the baseline ``POST /bench/baseline/rows/`` (one INSERT of the same body) so both
see the same machine load. Bulk: ``POST /api/v1/jobs/bulk/`` in batches of 500 from 2 concurrent clients (one per
gunicorn worker), alternating rounds with the baseline bulk endpoint (one bulk INSERT of the same bodies).

Figures: jobs/s, p50 and p99 request latency (ms), SQL queries per submit (measured in-process).
Goals (issue 9): single >= 0.5 x baseline jobs/s; bulk >= 2,000 jobs/s. The bulk goal is judged on the default
answer (every job in its list form); the same rounds also time `Prefer: return=minimal` ({id, uid, name} per job),
reported next to it.
"""
from __future__ import annotations

import itertools
import json

from .common import bench_fixtures, logged_in_session, ms, percentile, profile, ratio, reset_jobs, run_concurrently

SINGLE_GOAL_RATIO = 0.5
BULK_GOAL_JOBS_PER_S = 2000
_names = itertools.count()


def _body(version, queue, cluster, prefix: str) -> dict:
    return {"name": f"{prefix}-{next(_names)}", "namespace": "default", "template": version.template.name,
            "queue": queue.name, "cluster": cluster.name,
            "overrides": {"podSets": {"worker": {"replicas": 2}}}}


def _post(url: str, expected: int = 201, headers: dict | None = None):
    def call(session, body):
        response = session.post(url, data=json.dumps(body), headers=headers)
        if response.status_code != expected:
            raise RuntimeError(f"POST {url} -> {response.status_code}: {response.text[:300]}")
    return call


def _figures(latencies: list[float], wall: float, jobs: int) -> dict:
    return {"jobs": jobs, "jobs_per_s": round(jobs / wall, 1), "p50_ms": ms(percentile(latencies, 50)),
            "p99_ms": ms(percentile(latencies, 99)), "wall_s": round(wall, 2)}


def _merge(parts: list[tuple[list[float], float, int]]) -> dict:
    latencies = [x for lat, _, _ in parts for x in lat]
    return _figures(latencies, sum(w for _, w, _ in parts), sum(n for _, _, n in parts))


def query_counts(user, version, queue, cluster, bulk_size: int) -> dict:
    """SQL queries of one single submit and of one bulk submit of `bulk_size`, in-process (Django test Client)."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(user)
    counts = {}
    for key, url, payload in (
        ("single", "/api/v1/jobs/", _body(version, queue, cluster, "q")),
        ("bulk", "/api/v1/jobs/bulk/", {"jobs": [_body(version, queue, cluster, "q") for _ in range(bulk_size)]}),
    ):
        client.post(url, payload, content_type="application/json")  # warm caches (content types, sessions)
        if key == "bulk":
            payload = {"jobs": [_body(version, queue, cluster, "q") for _ in range(bulk_size)]}
        else:
            payload = _body(version, queue, cluster, "q")
        with CaptureQueriesContext(connection) as queries:
            response = client.post(url, payload, content_type="application/json")
        assert response.status_code == 201, response.content[:300]
        counts[key] = len(queries)
    return counts


def run(base_url: str, jobs: int = 2000, threads: int = 8, bulk_batch: int = 500, bulk_threads: int = 2,
        block: int = 100) -> dict:
    """Run the submit benchmark against gunicorn at `base_url`; return the figures (see module docstring)."""
    from django.test import Client

    reset_jobs()
    user, version, queue, cluster = bench_fixtures()
    sessions = [logged_in_session(base_url, user) for _ in range(threads)]
    jobs_url, baseline_url = f"{base_url}/api/v1/jobs/", f"{base_url}/bench/baseline/rows/"

    def body(prefix):
        return _body(version, queue, cluster, prefix)

    # Warm-up: each gunicorn worker imports and connects before anything is timed.
    run_concurrently([body("warm") for _ in range(4 * threads)], _post(jobs_url), sessions)
    run_concurrently([body("warm") for _ in range(4 * threads)], _post(baseline_url), sessions)

    # Alternate blocks of `block` requests (baseline, gangweb, baseline, ...): load from anything else on the
    # machine changes over seconds, so both sides see the same load.
    single, base = [], []
    for _ in range(max(1, jobs // block)):
        base.append((*run_concurrently([body("b") for _ in range(block)], _post(baseline_url), sessions), block))
        single.append((*run_concurrently([body("s") for _ in range(block)], _post(jobs_url), sessions), block))
    single_fig, base_fig = _merge(single), _merge(base)

    # Bulk: `bulk_threads` concurrent clients (one per gunicorn worker), alternating baseline, gangweb (default
    # answer) and gangweb with Prefer: return=minimal rounds.
    bulk, base_bulk, minimal = [], [], []
    prefer_minimal = {"Prefer": "return=minimal"}
    per_round = bulk_batch * bulk_threads
    bulk_sessions = sessions[:bulk_threads]
    for _ in range(max(1, jobs // per_round)):
        batches = [{"jobs": [body("bb") for _ in range(bulk_batch)]} for _ in range(bulk_threads)]
        base_bulk.append((*run_concurrently(batches, _post(f"{baseline_url}bulk/"), bulk_sessions), per_round))
        batches = [{"jobs": [body("bk") for _ in range(bulk_batch)]} for _ in range(bulk_threads)]
        bulk.append((*run_concurrently(batches, _post(f"{jobs_url}bulk/"), bulk_sessions), per_round))
        batches = [{"jobs": [body("bm") for _ in range(bulk_batch)]} for _ in range(bulk_threads)]
        minimal.append((*run_concurrently(batches, _post(f"{jobs_url}bulk/", headers=prefer_minimal), bulk_sessions),
                        per_round))
    bulk_fig, base_bulk_fig, minimal_fig = _merge(bulk), _merge(base_bulk), _merge(minimal)

    result = {
        "single": single_fig, "baseline_single": base_fig,
        "single_ratio": ratio(single_fig["jobs_per_s"], base_fig["jobs_per_s"]),
        "bulk": bulk_fig, "baseline_bulk": base_bulk_fig, "bulk_minimal": minimal_fig,
        "bulk_ratio": ratio(bulk_fig["jobs_per_s"], base_bulk_fig["jobs_per_s"]),
        "queries": query_counts(user, version, queue, cluster, bulk_batch),
        "threads": threads, "bulk_batch": bulk_batch, "bulk_threads": bulk_threads,
        "goals": {"single_ratio_min": SINGLE_GOAL_RATIO, "bulk_jobs_per_s_min": BULK_GOAL_JOBS_PER_S},
    }
    result["single_ok"] = result["single_ratio"] >= SINGLE_GOAL_RATIO
    result["bulk_ok"] = bulk_fig["jobs_per_s"] >= BULK_GOAL_JOBS_PER_S
    client = Client()
    client.force_login(user)
    if not result["single_ok"]:
        result["single_profile"] = profile("submit-single", lambda: [
            client.post("/api/v1/jobs/", body("p"), content_type="application/json") for _ in range(200)])
    if not result["bulk_ok"]:
        result["bulk_profile"] = profile("submit-bulk", lambda: [
            client.post("/api/v1/jobs/bulk/", {"jobs": [body("pb") for _ in range(bulk_batch)]},
                        content_type="application/json") for _ in range(2)])
    reset_jobs()
    return result


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    s, b, k, bb = result["single"], result["baseline_single"], result["bulk"], result["baseline_bulk"]
    q, m = result["queries"], result.get("bulk_minimal")
    return [
        f"submit single : {s['jobs_per_s']:8.1f} jobs/s  p50 {s['p50_ms']} ms  p99 {s['p99_ms']} ms  "
        f"({q['single']} SQL queries/submit)",
        f"  baseline    : {b['jobs_per_s']:8.1f} rows/s  p50 {b['p50_ms']} ms  p99 {b['p99_ms']} ms",
        f"  ratio       : {result['single_ratio']:.2f} x baseline (goal >= {SINGLE_GOAL_RATIO}) "
        f"{'OK' if result['single_ok'] else 'BELOW GOAL'}",
        f"submit bulk   : {k['jobs_per_s']:8.1f} jobs/s  p50 {k['p50_ms']} ms/request of {result['bulk_batch']}  "
        f"({q['bulk']} SQL queries/request)  goal >= {BULK_GOAL_JOBS_PER_S} jobs/s "
        f"{'OK' if result['bulk_ok'] else 'BELOW GOAL'}",
        f"  baseline    : {bb['jobs_per_s']:8.1f} rows/s  ratio {result['bulk_ratio']:.2f}",
        *([f"  minimal     : {m['jobs_per_s']:8.1f} jobs/s  p50 {m['p50_ms']} ms/request "
           "(Prefer: return=minimal; not the goal's figure)"] if m else []),
    ]
