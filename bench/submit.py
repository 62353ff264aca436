"""Benchmark 1: job submission through gunicorn, single and bulk, against a minimal DRF endpoint.

Single: N jobs via ``POST /api/v1/jobs/`` from `threads` client threads (one keep-alive requests.Session each),
alternating blocks of 100 with the baseline ``POST /bench/baseline/rows/`` (one INSERT of the same body) so both
see the same machine load. Bulk: ``POST /api/v1/jobs/bulk/`` in batches of 500 from 2 concurrent clients (one per
gunicorn worker), alternating rounds with the baseline bulk endpoint (one bulk INSERT of the same bodies).

Every side runs as two users (issue 36): the bench superuser, whose access checks return at once, and a team
submitter (a plain user with a submitter QueueGrant on the bench queue), in rounds where the side that goes first
rotates. Figures per user: jobs/s (overall, per round, and the spread min/median/max of the per-round ratios
against the baseline), p50 and p99 request latency (ms), SQL statements per request (CaptureQueriesContext,
in-process); the load average before and after. Goals (issue 9), judged on the team submitter's figures (issue
36): single >= 0.5 x baseline jobs/s; bulk >= 2,000 jobs/s. The bulk goal is judged on the default
answer (every job in its list form); the same rounds also time `Prefer: return=minimal` ({id, uid, name} per job),
reported next to it.
"""
from __future__ import annotations

import itertools
import json

from .common import (
    bench_fixtures,
    load_average,
    logged_in_session,
    ms,
    percentile,
    profile,
    ratio,
    reset_jobs,
    rotated,
    run_concurrently,
    spread,
)

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


USERS = ("superuser", "team submitter")
GOAL_USER = "team submitter"  # issue 36: the goals are judged on a team member's figures


def _users(superuser, queue) -> dict:
    """label -> user: the bench superuser, and a team member with a submitter grant on the bench queue."""
    from .common import TEAM_SUBMITTER, team_user

    return {"superuser": superuser, "team submitter": team_user(TEAM_SUBMITTER, queue, "submitter")}


def _sides(parts: dict[str, list[tuple[list[float], float, int]]], baseline: str) -> dict:
    """Per side: its merged figures, its jobs/s per round with their spread and, for every side but `baseline`,
    the ratio of each round against the baseline's same round (and the spread of those ratios)."""
    out = {}
    for side, rounds in parts.items():
        rates = [n / wall for _, wall, n in rounds]
        fig = {**_merge(rounds), "rounds_jobs_per_s": [round(r, 1) for r in rates], "spread_jobs_per_s": spread(rates)}
        if side != baseline:
            base = [n / wall for _, wall, n in parts[baseline]]
            per_round = [r / b for r, b in zip(rates, base, strict=True)]
            fig["per_round_ratio"] = [round(x, 2) for x in per_round]
            fig["spread_ratio"] = spread(per_round, 2)
        out[side] = fig
    return out


def run(base_url: str, jobs: int = 2000, threads: int = 8, bulk_batch: int = 500, bulk_threads: int = 2,
        block: int = 100, rounds: int = 3) -> dict:
    """Run the submit benchmark against gunicorn at `base_url` as the superuser and as a team submitter; return
    the figures (see module docstring). Every round runs each side once, who goes first rotating per round; at
    least `rounds` rounds."""
    from django.test import Client

    reset_jobs()
    superuser, version, queue, cluster = bench_fixtures()
    users = _users(superuser, queue)
    sessions = {label: [logged_in_session(base_url, user) for _ in range(threads)] for label, user in users.items()}
    jobs_url, baseline_url = f"{base_url}/api/v1/jobs/", f"{base_url}/bench/baseline/rows/"
    load_before = load_average()

    def body(prefix):
        return _body(version, queue, cluster, prefix)

    # Warm-up: each gunicorn worker imports and connects before anything is timed.
    for label in USERS:
        run_concurrently([body("warm") for _ in range(4 * threads)], _post(jobs_url), sessions[label])
    run_concurrently([body("warm") for _ in range(4 * threads)], _post(baseline_url), sessions["superuser"])

    # Rounds of one block of `block` requests per side (baseline, superuser, team submitter), the side that goes
    # first rotating per round: load from anything else on the machine changes over seconds, so every side sees
    # the same load.
    single_sides = ["baseline", *USERS]
    single: dict[str, list] = {side: [] for side in single_sides}
    for i in range(max(rounds, jobs // block)):
        for side in rotated(single_sides, i):
            url, group = (baseline_url, sessions["superuser"]) if side == "baseline" else (jobs_url, sessions[side])
            single[side].append((*run_concurrently([body("s") for _ in range(block)], _post(url), group), block))
    single_figs = _sides(single, "baseline")

    # Bulk: `bulk_threads` concurrent clients (one per gunicorn worker); per round the baseline, each user's
    # default answer and the superuser's Prefer: return=minimal answer, the first side rotating per round.
    prefer_minimal = {"Prefer": "return=minimal"}
    per_round = bulk_batch * bulk_threads
    bulk_sides = ["baseline", *USERS, "superuser minimal"]
    bulk: dict[str, list] = {side: [] for side in bulk_sides}
    for i in range(max(rounds, jobs // per_round)):
        for side in rotated(bulk_sides, i):
            batches = [{"jobs": [body("bk") for _ in range(bulk_batch)]} for _ in range(bulk_threads)]
            if side == "baseline":
                call, group = _post(f"{baseline_url}bulk/"), sessions["superuser"]
            elif side == "superuser minimal":
                call, group = _post(f"{jobs_url}bulk/", headers=prefer_minimal), sessions["superuser"]
            else:
                call, group = _post(f"{jobs_url}bulk/"), sessions[side]
            bulk[side].append((*run_concurrently(batches, call, group[:bulk_threads]), per_round))
    bulk_figs = _sides(bulk, "baseline")
    load_after = load_average()

    per_user = {}
    for label, user in users.items():
        s, k = single_figs[label], bulk_figs[label]
        per_user[label] = {
            "single": s, "single_ratio": ratio(s["jobs_per_s"], single_figs["baseline"]["jobs_per_s"]),
            "bulk": k, "bulk_ratio": ratio(k["jobs_per_s"], bulk_figs["baseline"]["jobs_per_s"]),
            "queries": query_counts(user, version, queue, cluster, bulk_batch),
        }
    goal = per_user[GOAL_USER]
    result = {
        # The top-level figures (and the goals) are the team submitter's; "users" has both.
        "goal_user": GOAL_USER, "users": per_user,
        "single": goal["single"], "baseline_single": single_figs["baseline"], "single_ratio": goal["single_ratio"],
        "bulk": goal["bulk"], "baseline_bulk": bulk_figs["baseline"], "bulk_minimal": bulk_figs["superuser minimal"],
        "bulk_ratio": goal["bulk_ratio"], "queries": goal["queries"],
        "threads": threads, "bulk_batch": bulk_batch, "bulk_threads": bulk_threads, "block": block,
        "single_rounds": len(single["baseline"]), "bulk_rounds": len(bulk["baseline"]),
        "load_average_before": load_before, "load_average_after": load_after,
        "goals": {"single_ratio_min": SINGLE_GOAL_RATIO, "bulk_jobs_per_s_min": BULK_GOAL_JOBS_PER_S},
    }
    result["single_ok"] = result["single_ratio"] >= SINGLE_GOAL_RATIO
    result["bulk_ok"] = goal["bulk"]["jobs_per_s"] >= BULK_GOAL_JOBS_PER_S
    client = Client()
    client.force_login(users[GOAL_USER])
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
    """Lines to print for this benchmark: each user's figures, the goals judged on the team submitter's."""
    b, bb, m = result["baseline_single"], result["baseline_bulk"], result.get("bulk_minimal")
    lines = [f"submit (load average {result.get('load_average_before')} -> {result.get('load_average_after')}; "
             f"{result.get('single_rounds')} single and {result.get('bulk_rounds')} bulk rounds, first side "
             "rotating):"]
    for label, u in (result.get("users") or {"": result}).items():
        s, k, q = u["single"], u["bulk"], u["queries"]
        sr = s.get("spread_ratio", {})
        lines += [
            f"  {label:15s} single {s['jobs_per_s']:7.1f} jobs/s  p50 {s['p50_ms']} ms  p99 {s['p99_ms']} ms  "
            f"{q['single']} SQL/submit  x{u['single_ratio']:.2f} baseline (rounds {sr.get('min')}-"
            f"{sr.get('median')}-{sr.get('max')})",
            f"  {label:15s} bulk   {k['jobs_per_s']:7.1f} jobs/s  p50 {k['p50_ms']} ms/request of "
            f"{result['bulk_batch']}  {q['bulk']} SQL/request  x{u['bulk_ratio']:.2f} baseline",
        ]
    lines += [
        f"  baseline        single {b['jobs_per_s']:7.1f} rows/s  bulk {bb['jobs_per_s']:7.1f} rows/s",
        f"  goals on the {result.get('goal_user', 'superuser')}: single x{result['single_ratio']:.2f} "
        f"(>= {SINGLE_GOAL_RATIO}) {'OK' if result['single_ok'] else 'BELOW GOAL'}; bulk "
        f"{result['bulk']['jobs_per_s']} jobs/s (>= {BULK_GOAL_JOBS_PER_S}) "
        f"{'OK' if result['bulk_ok'] else 'BELOW GOAL'}",
        *([f"  superuser minimal bulk {m['jobs_per_s']:7.1f} jobs/s  p50 {m['p50_ms']} ms/request "
           "(Prefer: return=minimal; not the goal's figure)"] if m else []),
    ]
    return lines
