"""Pages as users get them (issue 36 item 1): over HTTP through gunicorn as the Helm chart runs it, as three users,
cold and warm, random deep pages, on a fresh and on an aged table.

    python -m bench.run_all --only http_pages [--http-pages-jobs 1000000] [--http-pages-samples 200]

- **Server**: gunicorn started as charts/gangweb/templates/web.yaml runs it (`Stack.start_chart_web`: 2 gthread
  workers of 16 threads, the chart's environment), a process of its own beside the other benchmarks' web.
- **Clients**: one `requests.Session` per user (keep-alive, cookies: a browser's tab), one request at a time; the
  time is the client's, from sending the request to the whole body read.
- **Users**: the bench superuser, a **team submitter** (submitter grant on one department of the seed) and a
  **team viewer** (viewer grant on the same department): the team users' lists carry the `queue_id IN (...)`
  filter. The goals (p50 <= 100 ms, p99 <= 300 ms) are judged on the team users' warm figures.
- **Pages**, each request a random one (seeded `random.Random`) of four kinds: the dashboard's job list and the
  API's job list (a random deep page by keyset cursor at a uniformly random position of the user's own list up to
  page 5,000, or a random filter: a phase, a leaf queue the user sees, both, a sort or ordering, a name search),
  and the dashboard's and API's job detail of a random job the user sees.
- **Warm**: `rounds` rounds; in each, every user in turn (the first rotating per round) makes `samples / rounds`
  requests of each kind in a shuffled order; p50 and p99 over all rounds (>= 200 samples per user and kind, so
  the p99 is not a maximum), and the spread of the rounds' p50.
- **Cold**: each round starts by restarting gunicorn (new processes, new PostgreSQL connections: cold catalog and
  plan caches, no prepared statements); the first request of each user and kind after it is a cold sample. The
  PostgreSQL 15 cluster is shared with other engineers, so its shared buffers are not dropped (that needs a restart
  of the server, or `pg_buffercache_evict` of PostgreSQL 17): the cold figure is gunicorn's and the connection's,
  with the database's pages as the previous requests left them.
- **Seeds**: `fresh`, the seed as bench/seed.py makes it (inserted in `created_at` order, indexes built after,
  VACUUM ANALYZE); then `aged`, the same table after `seed.age_jobs` (30 % of the rows updated, 10 % of the
  finished ones deleted, after the indexes; no VACUUM or ANALYZE but autovacuum as the server is configured,
  whose counters from `pg_stat_user_tables` are recorded before and after the measurement).
- **Load**: per round the 1-minute load average before and after, the machine's CPU busy share and gunicorn's CPU
  per request (`bench.cpu`).
"""
from __future__ import annotations

import random
import time
from datetime import UTC, datetime

from . import cpu
from .common import (
    TEAM_SUBMITTER,
    TEAM_VIEWER,
    bench_fixtures,
    latency_summary,
    load_average,
    logged_in_session,
    reset_jobs,
    rotated,
    spread,
    team_user,
)
from .stack import log

GOAL_P50_MS = 100.0
GOAL_P99_MS = 300.0
KINDS = ("jobs list", "job detail", "API jobs list", "API job detail")
TEAM_USERS = ("team submitter", "team viewer")
DEEP_PAGE = 5000
PAGE_SIZE = 50
CURSORS = 40  # random deep-page cursors per list (superuser's, the team's)
DETAIL_IDS = 500  # random job ids per list
PHASES = ("Running", "Queued", "Succeeded", "Failed", "Cancelled", "Submitted")
SORTS = ("-created", "name", "-name", "phase", "-phase", "in_phase", "-in_phase", "queue", "-queue")
ORDERINGS = ("created_at", "name", "-name", "phase", "-phase", "phase_changed_at", "-phase_changed_at")
WEB = "web-chart"
SLOWEST = 5  # the slowest warm requests kept per user and kind, with their paths (what the p99 is made of)


def _random_cursors(queryset, total: int, rng: random.Random, count: int) -> list[str]:
    """Keyset cursors (newest first) of pages at `count` uniformly random positions of `queryset`'s list (`total`
    rows), up to page DEEP_PAGE: what a reader who followed Next that often holds."""
    from scheduling.db import keyset
    from scheduling.models import GangJob

    order = ("-created_at", "-id")
    keys = keyset.keys_of(GangJob.objects.all(), order)
    deepest = max(1, min(DEEP_PAGE * PAGE_SIZE, total - PAGE_SIZE))
    out = []
    for position in sorted(rng.randrange(1, deepest + 1) for _ in range(count)):
        row = queryset.order_by(*order).only("id", "created_at")[position - 1]
        out.append(keyset.encode(keyset.values_of(row, keys), keyset.NEXT))
    return out


class Pages:
    """The random page paths of one user's view (`visible`: the jobs it sees; `queues`: leaf names it sees)."""

    def __init__(self, visible, queues: list[str], name_prefix: str, rng: random.Random):
        total = visible.count()
        self.rng = rng
        self.cursors = _random_cursors(visible, total, rng, CURSORS)
        self.ids = list(visible.order_by("?").values_list("id", flat=True)[:DETAIL_IDS])
        self.queues, self.prefix, self.total = queues, name_prefix, total

    def path(self, kind: str) -> str:
        """A random path of page kind `kind` (KINDS)."""
        from django.urls import reverse

        rng = self.rng
        if kind in ("job detail", "API job detail"):
            pk = rng.choice(self.ids)
            return reverse("scheduling:job", args=(pk,)) if kind == "job detail" else f"/api/v1/jobs/{pk}/"
        api = kind.startswith("API")
        base = "/api/v1/jobs/" if api else reverse("scheduling:jobs")
        pick = rng.randrange(6)
        if pick <= 1:  # half the list requests are a deep page
            return f"{base}?cursor={rng.choice(self.cursors)}"
        if pick == 2:
            return f"{base}?phase={rng.choice(PHASES)}"
        if pick == 3:
            return f"{base}?queue={rng.choice(self.queues)}&phase={rng.choice(PHASES)}"
        if pick == 4:
            return f"{base}?ordering={rng.choice(ORDERINGS)}" if api else f"{base}?sort={rng.choice(SORTS)}"
        return f"{base}?name={self.prefix}-{rng.randrange(1, max(2, self.total))}"


def table_stats() -> dict:
    """pg_stat_user_tables of the jobs and history tables: live and dead rows, autovacuum and autoanalyze counts
    and last times (ISO), as the server's autovacuum left them."""
    from django.db import connection

    from scheduling.models import GangJob, PhaseTransition

    with connection.cursor() as cur:
        cur.execute("SELECT relname, n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count, last_autovacuum, "
                    "last_autoanalyze FROM pg_stat_user_tables WHERE relname = ANY(%s)",
                    [[GangJob._meta.db_table, PhaseTransition._meta.db_table]])
        rows = cur.fetchall()
    return {r[0]: {"live": r[1], "dead": r[2], "autovacuums": r[3], "autoanalyzes": r[4],
                   "last_autovacuum": r[5].isoformat() if r[5] else None,
                   "last_autoanalyze": r[6].isoformat() if r[6] else None} for r in rows}


def _get(session, base_url: str, path: str) -> float:
    """GET base_url + path with `session`; seconds to the whole body. RuntimeError unless 200."""
    t0 = time.perf_counter()
    response = session.get(base_url + path)
    took = time.perf_counter() - t0
    if response.status_code != 200:
        raise RuntimeError(f"GET {path} -> {response.status_code}: {response.text[:300]}")
    return took


def _restart(stack, port: int) -> str:
    stack.stop(WEB)
    return stack.start_chart_web(WEB, port)


def _web_cpu(stack) -> float:
    proc = stack.procs.get(WEB)
    return sum(cpu.process_seconds(p) for p in cpu.tree(proc.pid)) if proc is not None else 0.0


def measure(stack, port: int, users: dict, pages: dict[str, Pages], rounds: int, samples: int,
            rng: random.Random) -> dict:
    """The cold and warm rounds (module docstring) of one seed; returns per user and kind the cold and warm
    summaries, per round the load and CPU, and the rounds' spread."""
    per_round = -(-samples // rounds)
    warm = {(u, k): [] for u in users for k in KINDS}
    cold = {(u, k): [] for u in users for k in KINDS}
    round_p50 = {(u, k): [] for u in users for k in KINDS}
    slowest = {(u, k): [] for u in users for k in KINDS}  # the warm requests that made the tail: (seconds, path)
    rounds_out = []
    for i in range(rounds):
        base_url = _restart(stack, port)
        sessions = {u: logged_in_session(base_url, user) for u, user in users.items()}
        load_before, busy0, web0, t0 = load_average(), cpu.machine(), _web_cpu(stack), time.monotonic()
        requests = 0
        for u in rotated(list(users), i):  # cold: the first request of each user and kind after the restart
            for kind in rotated(list(KINDS), i):
                cold[(u, kind)].append(_get(sessions[u], base_url, pages[u].path(kind)))
                requests += 1
        for u in rotated(list(users), i):
            order = [k for k in KINDS for _ in range(per_round)]
            rng.shuffle(order)
            mine = {k: [] for k in KINDS}
            for kind in order:
                path = pages[u].path(kind)
                mine[kind].append(_get(sessions[u], base_url, path))
                slowest[(u, kind)] = sorted([*slowest[(u, kind)], (mine[kind][-1], path)], reverse=True)[:SLOWEST]
            requests += len(order)
            for kind, values in mine.items():
                warm[(u, kind)] += values
                round_p50[(u, kind)].append(latency_summary(values)["p50_ms"])
        busy1, web1 = cpu.machine(), _web_cpu(stack)
        total = busy1[1] - busy0[1]
        rounds_out.append({"first_user": rotated(list(users), i)[0], "requests": requests,
                           "seconds": round(time.monotonic() - t0, 1), "load_average_before": load_before,
                           "load_average_after": load_average(),
                           "machine_busy_pct": round(100 * (busy1[0] - busy0[0]) / total, 1) if total else 0.0,
                           "web_cpu_ms_per_request": round(1000 * (web1 - web0) / requests, 1)})
        for s in sessions.values():
            s.close()
    figures = {}
    for u in users:
        figures[u] = {}
        for kind in KINDS:
            w = latency_summary(warm[(u, kind)])
            figures[u][kind] = {
                "warm": w, "cold": latency_summary(cold[(u, kind)]),
                "spread_round_p50_ms": spread(round_p50[(u, kind)]),
                "slowest": [[round(t * 1000, 1), p] for t, p in slowest[(u, kind)]],
                "ok": w["p50_ms"] <= GOAL_P50_MS and w["p99_ms"] is not None and w["p99_ms"] <= GOAL_P99_MS}
        pooled_cold = [t for kind in KINDS for t in cold[(u, kind)]]
        figures[u]["cold, every kind"] = {"cold": latency_summary(pooled_cold)}
    return {"users": figures, "rounds": rounds_out}


def run(stack, jobs: int = 100_000, queues: int = 1000, active: int = 10_000, rounds: int = 3, samples: int = 200,
        seed: int = 36) -> dict:
    """Seed `jobs` jobs (the newest `active` active) over `queues` queues, measure (fresh), age the table, measure
    again (aged); return the figures (module docstring). `samples`: warm requests per user and page kind (>= 200
    for a p99)."""
    from scheduling.models import GangJob, QueuePolicy

    from . import pages as pages_bench
    from . import seed as seeding

    rng = random.Random(seed)
    reset_jobs()
    superuser, version, _queue, cluster = bench_fixtures()
    pages_bench._drop_queues()
    _, parent, _, _, seed_s = pages_bench._seed(jobs, queues, "pgl", superuser, version, cluster, active,
                                                rebuild=jobs >= 100_000)
    department = QueuePolicy.objects.get(name=parent)
    users = {"superuser": superuser,
             "team submitter": team_user(TEAM_SUBMITTER, department, "submitter"),
             "team viewer": team_user(TEAM_VIEWER, department, "viewer")}
    leaves = list(department.children.values_list("name", flat=True))
    all_leaves = list(QueuePolicy.objects.filter(name__startswith="pgl-team").values_list("name", flat=True))
    port = 0
    result = {"jobs": jobs, "active": active, "queues": queues, "rounds": rounds, "samples": samples,
              "seed_s": round(seed_s, 1), "team_queue": parent, "goal_p50_ms": GOAL_P50_MS,
              "goal_p99_ms": GOAL_P99_MS, "server": "gunicorn as charts/gangweb (2 gthread workers x 16 threads)",
              "seeds": {}}
    try:
        from .stack import free_port

        port = free_port()
        for state in ("fresh", "aged"):
            aged = None
            if state == "aged":
                aged = seeding.age_jobs(datetime.now(UTC))
                log(f"http pages: aged the table: {aged}")
            visible_team = GangJob.objects.filter(queue__in=[department.id, *department.children.values_list(
                "id", flat=True)])
            everything = GangJob.objects.all()
            team_pages = Pages(visible_team, leaves, "pgl", rng)
            pages = {"superuser": Pages(everything, all_leaves, "pgl", rng), "team submitter": team_pages,
                     "team viewer": team_pages}
            stats_before = table_stats()
            log(f"http pages ({state}): {len(users)} users x {len(KINDS)} kinds x {samples} requests, {rounds} "
                f"rounds")
            figures = measure(stack, port, users, pages, rounds, samples, rng)
            result["seeds"][state] = {**figures, "aged": aged, "team_jobs": team_pages.total,
                                      "all_jobs": pages["superuser"].total, "table_before": stats_before,
                                      "table_after": table_stats()}
    finally:
        stack.stop(WEB)
    result["ok"] = all(result["seeds"][s]["users"][u][k]["ok"] for s in result["seeds"] for u in TEAM_USERS
                       for k in KINDS)
    reset_jobs()
    pages_bench._drop_queues()
    return result


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    lines = [f"pages over HTTP (gunicorn as the chart runs it) at {result['jobs']:,} jobs / {result['queues']:,} "
             f"queues, {result['samples']} warm requests per user and kind in {result['rounds']} rounds; goal p50 <= "
             f"{result['goal_p50_ms']:g} ms, p99 <= {result['goal_p99_ms']:g} ms on the team users' warm figures:"]
    for state, s in result["seeds"].items():
        loads = [r["load_average_before"][0] for r in s["rounds"]] + [r["load_average_after"][0] for r in s["rounds"]]
        busy = [r["machine_busy_pct"] for r in s["rounds"]]
        lines.append(f"  {state} table (team sees {s['team_jobs']:,} of {s['all_jobs']:,} jobs; load "
                     f"{min(loads)}-{max(loads)}, machine busy {min(busy)}-{max(busy)} %, gunicorn CPU "
                     f"{', '.join(str(r['web_cpu_ms_per_request']) for r in s['rounds'])} ms/request by round)")
        for user, kinds in s["users"].items():
            for kind, f in kinds.items():
                c = f["cold"]
                if "warm" not in f:
                    lines.append(f"    {user:15s} {kind:18s} cold p50 {c['p50_ms']:7.1f} max {c['max_ms']:7.1f} ms "
                                 f"(n={c['n']})")
                    continue
                w, sp = f["warm"], f["spread_round_p50_ms"]
                p99 = f"{w['p99_ms']:7.1f}" if w["p99_ms"] is not None else "    n/a"
                lines.append(f"    {user:15s} {kind:18s} warm p50 {w['p50_ms']:7.1f} p99 {p99} ms "
                             f"(n={w['n']}, round p50s {sp['min']}/{sp['median']}/{sp['max']})  cold p50 "
                             f"{c['p50_ms']:7.1f} max {c['max_ms']:7.1f} (n={c['n']})  "
                             f"{'OK' if f['ok'] else 'BELOW GOAL'}")
    return lines
