"""Benchmark 4: server time and SQL query count of every page and API list at a year of history: 1,000,000 jobs
(10,000 of them active) and 1,000 queues (issue 23).

Each page is requested in-process with Django's test Client as a logged-in superuser (no HTTP, no browser: the time
is the server's own), `repeat` times; the figures are the p50 and p99. It is measured twice in one run: first at a
small size (the baseline: 1,000 jobs, 10 of them active, 10 queues), then at the full size. Query counts must be
equal at both sizes (they must not grow with rows); the goals are p50 <= 100 ms and p99 <= 300 ms at the full size.

Pages: the dashboard's overview, job list (first page, page 5,000 and the last page; by queue, by phase, both,
a name search, and each sort the table offers), queue tree (top level, and one queue's children as fetched on
expand) and job detail; the API's job list likewise (its `ordering` values), job detail, queue list and queue
tree (whole, top level only, one queue's children). Page 5,000 is reached by a keyset cursor, as a reader
following Next 4,999 times would hold it; the API's old `offset` page 5,000 is measured next to it, as the cost
keyset pages avoid (not a goal). Then the retention (reconcile/row_retention.py) deletes the oldest ~50,000 finished
jobs: jobs/s and the longest batch's transaction. `plans`: EXPLAIN (ANALYZE, BUFFERS) of the jobs query of some
pages at the full size, for bench/README.md. `users` (issue 36): some of the pages (USER_PAGES) again at the full
size as the superuser and as a team viewer (viewer grant on one department, so its lists are filtered by queue),
in rounds whose first user rotates, with the spread of the rounds and the load average (`per_user`).
"""
from __future__ import annotations

import time
from datetime import timedelta

from .common import bench_fixtures, load_average, ms, percentile, profile, ratio, reset_jobs

GOAL_MS = 100.0
GOAL_P99_MS = 300.0
DEEP_PAGE = 5000
PAGE_SIZE = 50
SPACING_S = 31.5  # a job every 31.5 s: 1,000,000 jobs span a year
PRUNED = 50_000  # jobs the retention measurement deletes (the oldest)
# Pages whose jobs query is EXPLAINed at the full size.
PLANS = ("jobs list", "jobs list, page 5,000", "jobs list, last page", "jobs list, queue", "jobs list, phase=Running",
         "jobs list, name search", "jobs list, sort=queue", "jobs list, sort=phase", "jobs list, sort=-in_phase",
         "API jobs list, page 5,000 (offset, old clients)")
INFORMATIONAL = {"API jobs list, page 5,000 (offset, old clients)"}
DASHBOARD_SORTS = ("-created", "name", "-name", "phase", "-phase", "in_phase", "-in_phase", "queue", "-queue")
# SQL statements per page (session and user included), required at both sizes and pinned on a small seed by
# tests/dashboard/test_pages_bench_queries.py.
QUERIES: dict[str, int] = {
    # Dashboard pages: session, user, then the page (jobs list: capped count, page, queue and cluster names).
    "overview": 15,  # + the clusters side by side (services/clusters/summary.py: the same for any number of clusters)
    "jobs list": 6,
    "jobs list, page 5,000": 6,
    "jobs list, last page": 6,
    "jobs list, phase=Running": 6,
    "jobs list, queue": 6,
    "jobs list, queue & phase=Failed": 6,
    "jobs list, name search": 6,
    "jobs list, sort=-created": 6,
    "jobs list, sort=name": 6,
    "jobs list, sort=-name": 6,
    "jobs list, sort=phase": 6,
    "jobs list, sort=-phase": 6,
    "jobs list, sort=in_phase": 6,
    "jobs list, sort=-in_phase": 6,
    "jobs list, sort=queue": 6,
    "jobs list, sort=-queue": 6,
    "queue tree": 7,
    "queue tree, expand a queue": 6,
    "job detail": 5,
    # API: session, user, then the list (capped count, page) or the object.
    "API jobs list": 4,
    "API jobs list, page 5,000": 4,
    "API jobs list, last page": 4,
    "API jobs list, page 5,000 (offset, old clients)": 4,
    "API jobs list, phase=Running": 4,
    "API jobs list, queue & phase=Failed": 4,
    "API jobs list, name search": 4,
    "API jobs list, ordering=created_at": 4,
    "API jobs list, ordering=name": 4,
    "API jobs list, ordering=-name": 4,
    "API jobs list, ordering=phase": 4,
    "API jobs list, ordering=-phase": 4,
    "API jobs list, ordering=phase_changed_at": 4,
    "API jobs list, ordering=-phase_changed_at": 4,
    "API job detail": 4,
    "API queues list": 6,
    "API queue tree": 6,
    "API queue tree, depth=0": 6,
    "API queue tree, children": 6,
}
API_ORDERINGS = ("created_at", "name", "-name", "phase", "-phase", "phase_changed_at", "-phase_changed_at")


def _deep_cursor(total: int, queryset=None) -> str:
    """The cursor of page DEEP_PAGE of the newest-first list of `queryset` (every job by default; `total` its
    size), or of the deepest full page there is."""
    from scheduling.db import keyset
    from scheduling.models import GangJob

    queryset = GangJob.objects.all() if queryset is None else queryset
    position = max(1, min((DEEP_PAGE - 1) * PAGE_SIZE, total - PAGE_SIZE))
    order = ("-created_at", "-id")
    row = queryset.order_by(*order).only("id", "created_at")[position - 1]
    return keyset.encode(keyset.values_of(row, keyset.keys_of(GangJob.objects.all(), order)), keyset.NEXT)


def _pages(job_id: int, parent: str, queue: str, name: str, total: int) -> list[tuple[str, str]]:
    """(label, path) of every page to measure. `parent`: a queue with children (the first department of the
    latest seed: 9 children at the small size, ~90 at the full); `queue`: a leaf queue; `name`: what the name
    search looks for; `total`: jobs in the table."""
    from django.urls import reverse

    from scheduling.db import keyset

    deep, last = _deep_cursor(total), keyset.encode(None, keyset.LAST)
    offset = min((DEEP_PAGE - 1) * PAGE_SIZE, total - PAGE_SIZE)
    jobs = reverse("scheduling:jobs")
    pages = [("overview", reverse("scheduling:overview")), ("jobs list", jobs),
             ("jobs list, page 5,000", f"{jobs}?cursor={deep}"), ("jobs list, last page", f"{jobs}?cursor={last}"),
             ("jobs list, phase=Running", f"{jobs}?phase=Running"), ("jobs list, queue", f"{jobs}?queue={queue}"),
             ("jobs list, queue & phase=Failed", f"{jobs}?queue={queue}&phase=Failed"),
             ("jobs list, name search", f"{jobs}?name={name}"),
             *((f"jobs list, sort={sort}", f"{jobs}?sort={sort}") for sort in DASHBOARD_SORTS),
             ("queue tree", reverse("scheduling:queues")),
             ("queue tree, expand a queue", reverse("scheduling:queue-children", args=(parent,))),
             ("job detail", reverse("scheduling:job", args=(job_id,)))]
    pages += [
        ("API jobs list", "/api/v1/jobs/"),
        ("API jobs list, page 5,000", f"/api/v1/jobs/?cursor={deep}"),
        ("API jobs list, last page", f"/api/v1/jobs/?cursor={last}"),
        ("API jobs list, page 5,000 (offset, old clients)", f"/api/v1/jobs/?offset={offset}&limit={PAGE_SIZE}"),
        ("API jobs list, phase=Running", "/api/v1/jobs/?phase=Running"),
        ("API jobs list, queue & phase=Failed", f"/api/v1/jobs/?queue={queue}&phase=Failed"),
        ("API jobs list, name search", f"/api/v1/jobs/?name={name}"),
        *((f"API jobs list, ordering={o}", f"/api/v1/jobs/?ordering={o}") for o in API_ORDERINGS),
        ("API job detail", f"/api/v1/jobs/{job_id}/"),
        ("API queues list", "/api/v1/queues/"),
        ("API queue tree", "/api/v1/queues/tree/"),
        ("API queue tree, depth=0", "/api/v1/queues/tree/?depth=0"),
        ("API queue tree, children", f"/api/v1/queues/tree/?parent={parent}&depth=0"),
    ]
    return pages


def measure(client, path: str, repeat: int) -> dict:
    """p50/p99 server time (ms), p50 CPU time of the request's thread (ms) and SQL query count of GET `path` (one
    warm-up request first)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(path)
    if response.status_code != 200:
        raise RuntimeError(f"GET {path} -> {response.status_code}: {response.content[:300]!r}")
    times, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.thread_time()
        client.get(path)
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    with CaptureQueriesContext(connection) as queries:
        client.get(path)
    # The request's own CPU (this thread's: Django, the view, the JSON; not PostgreSQL's) moves less with the
    # machine's load than its time does.
    return {"p50_ms": ms(percentile(times, 50)), "p99_ms": ms(percentile(times, 99)), "queries": len(queries),
            "cpu_p50_ms": ms(percentile(cpu, 50))}


USER_ROUNDS = 3
USER_PAGES = ("jobs list", "jobs list, deep page", "job detail", "queue tree", "API jobs list",
              "API jobs list, deep page", "API job detail", "API queue tree, depth=0")


def _user_pages(job_id: int, cursors: dict[str, str]) -> dict[str, dict[str, str]]:
    """label -> {user label -> path} of the pages measured per user: the same paths for both users except the
    deep page, which is each user's own list's page DEEP_PAGE (or its deepest full page)."""
    from django.urls import reverse

    jobs = reverse("scheduling:jobs")
    same = {"jobs list": jobs, "job detail": reverse("scheduling:job", args=(job_id,)),
            "queue tree": reverse("scheduling:queues"), "API jobs list": "/api/v1/jobs/",
            "API job detail": f"/api/v1/jobs/{job_id}/", "API queue tree, depth=0": "/api/v1/queues/tree/?depth=0"}
    pages = {label: dict.fromkeys(cursors, path) for label, path in same.items()}
    pages["jobs list, deep page"] = {u: f"{jobs}?cursor={c}" for u, c in cursors.items()}
    pages["API jobs list, deep page"] = {u: f"/api/v1/jobs/?cursor={c}" for u, c in cursors.items()}
    return {label: pages[label] for label in USER_PAGES}


def _wanted(label: str, only: set[str] | None) -> bool:
    return only is None or label in only


def per_user(superuser, version, parent: str, repeat: int, rounds: int = USER_ROUNDS,
             only: set[str] | None = None) -> dict | None:
    """The pages of USER_PAGES as the superuser and as a team viewer (a plain user with a viewer QueueGrant on the
    department `parent`, so its lists carry a `queue_id IN (...)` filter): `rounds` rounds, each requesting every
    page `repeat` times per user, the user that goes first rotating per round. Per page and user: p50 and p99 over
    all requests, the spread (min/median/max) of the rounds' p50, SQL statements of one request; the job detail is
    a Running job the team viewer can see; the load average before and after. `only`: those of USER_PAGES alone
    (None when none of them is wanted)."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from scheduling.models import GangJob, QueuePolicy

    from .common import TEAM_VIEWER, load_average, rotated, spread, team_user

    department = QueuePolicy.objects.get(name=parent)
    viewer = team_user(TEAM_VIEWER, department, "viewer")
    users = {"superuser": superuser, "team viewer": viewer}
    clients = {}
    for label, user in users.items():
        clients[label] = Client()
        clients[label].force_login(user)
    visible = GangJob.objects.filter(queue__in=[department.id, *department.children.values_list("id", flat=True)])
    visible_total = visible.count()
    job_id = visible.filter(phase="Running").values_list("id", flat=True).first()
    cursors = {"superuser": _deep_cursor(GangJob.objects.count()),
               "team viewer": _deep_cursor(visible_total, visible)}
    pages = {label: paths for label, paths in _user_pages(job_id, cursors).items() if _wanted(label, only)}
    if not pages:
        return None
    load_before = load_average()
    times: dict[tuple[str, str], list[list[float]]] = {(p, u): [] for p in pages for u in users}
    for paths in pages.values():  # warm-up, and a check that each user may see the page
        for user_label, path in paths.items():
            response = clients[user_label].get(path)
            if response.status_code != 200:
                raise RuntimeError(f"GET {path} as {user_label} -> {response.status_code}")
    for i in range(rounds):
        for user_label in rotated(list(users), i):
            for label, paths in pages.items():
                round_times = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    clients[user_label].get(paths[user_label])
                    round_times.append(time.perf_counter() - t0)
                times[(label, user_label)].append(round_times)
    out = {}
    for label, paths in pages.items():
        out[label] = {}
        for user_label in users:
            with CaptureQueriesContext(connection) as queries:
                clients[user_label].get(paths[user_label])
            samples = [t for r in times[(label, user_label)] for t in r]
            out[label][user_label] = {
                "p50_ms": ms(percentile(samples, 50)), "p99_ms": ms(percentile(samples, 99)),
                "samples": len(samples), "queries": len(queries), "path": paths[user_label],
                "spread_round_p50_ms": spread([percentile(r, 50) * 1000 for r in times[(label, user_label)]]),
                "ok": ms(percentile(samples, 50)) <= GOAL_MS and ms(percentile(samples, 99)) <= GOAL_P99_MS}
    return {"rounds": rounds, "repeat": repeat, "team_viewer_queue": parent, "team_viewer_jobs": visible_total,
            "job_id": job_id, "load_average_before": load_before, "load_average_after": load_average(),
            "pages": out}


def plan(client, path: str) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of the jobs query GET `path` runs (its first SELECT on the jobs table with a
    LIMIT), bound as the app binds it; its lines."""
    from django.db import connection

    seen = []

    def keep(execute, sql, params, many, context):
        if (not seen and 'FROM "scheduling_gangjob"' in sql and "LIMIT" in sql and sql.startswith("SELECT")
                and "COUNT(" not in sql[:40]):
            seen.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        client.get(path)
    if not seen:
        return []
    with connection.cursor() as cur:
        cur.execute(f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {seen[0][0]}", seen[0][1])
        return [row[0] for row in cur.fetchall()]


def _seed(jobs: int, queues: int, prefix: str, user, version, cluster, active: int,
          rebuild: bool) -> tuple[int, str, str, str, float]:
    """Seed `jobs` jobs (the newest `active` of them active) over `queues` queues; return the id of a running job
    with a full timeline, the name of a queue with children, of a leaf queue, what the name search looks for, and
    the seconds the seed took (VACUUM ANALYZE included)."""
    from scheduling.models import GangJob

    from . import seed

    t0 = time.perf_counter()
    leaves = seed.make_queues(queues, prefix=prefix, clusters=[cluster])
    first, last = seed.insert_jobs(jobs, version, leaves, cluster, user, prefix=prefix, active=active,
                                   spacing_seconds=SPACING_S, rebuild_indexes=rebuild)
    seed.analyze()
    took = time.perf_counter() - t0
    job_id = GangJob.objects.filter(id__range=(first, last), phase="Running").values_list("id", flat=True).first()
    # A name search as a reader types most of a name: a dozen jobs contain it at the full size.
    probe = f"{prefix}-{(first + last) // 2}"[:-1] if jobs >= 100_000 else f"{prefix}-{(first + last) // 2}"
    return job_id, leaves[0].parent.name, leaves[-1].name, probe, took


def _drop_queues() -> None:
    from scheduling.models import QueuePolicy

    QueuePolicy.objects.filter(name__startswith="pg", parent__isnull=False).delete()  # leaves first: PROTECT
    QueuePolicy.objects.filter(name__startswith="pg").delete()


def _retention(jobs: int) -> dict:
    """Delete the oldest ~PRUNED finished jobs with the retention (reconcile/row_retention.py)."""
    from scheduling.reconcile import row_retention as job_history

    days = max(0.0, (jobs - PRUNED) * SPACING_S / 86400)
    t0 = time.perf_counter()
    result = job_history.prune(timedelta(days=days))
    took = time.perf_counter() - t0
    return {"older_than_days": round(days, 1), "jobs": result.jobs, "batches": result.batches,
            "seconds": round(took, 1), "jobs_per_s": round(result.jobs / took) if took else 0,
            "longest_batch_ms": round(result.longest_batch_s * 1000, 1)}


def run(jobs: int = 1_000_000, queues: int = 1000, active: int = 10_000, small_jobs: int = 1000,
        small_queues: int = 10, repeat: int = 20, only: set[str] | None = None) -> dict:
    """Seed, measure at the small size, grow to the full size, measure again; return the figures. `only`: the
    labels of the pages to measure (`_pages`; the per-user pages among them too), None for all; with it, the
    retention measurement is left out and a failing page is not profiled (a quick look at a few pages)."""
    from django.test import Client

    reset_jobs()
    user, version, _queue, cluster = bench_fixtures()
    _drop_queues()
    client = Client()
    client.force_login(user)

    small_active = max(1, active * small_jobs // jobs)
    job_id, parent, queue, name, _ = _seed(small_jobs, small_queues, "pgs", user, version, cluster, small_active,
                                           rebuild=False)
    small = {label: measure(client, path, repeat) for label, path in _pages(job_id, parent, queue, name,
                                                                             small_jobs) if _wanted(label, only)}
    job_id, parent, queue, name, seed_s = _seed(jobs - small_jobs, queues - small_queues, "pgl", user, version,
                                                cluster, active - small_active, rebuild=True)
    paths = {label: path for label, path in _pages(job_id, parent, queue, name, jobs) if _wanted(label, only)}
    load_before = load_average()
    full = {label: measure(client, path, repeat) for label, path in paths.items()}
    load_after = load_average()
    users = per_user(user, version, parent, repeat, only=only)

    pages = {}
    for label, fig in full.items():
        base = small[label]
        pages[label] = {**fig, "baseline_p50_ms": base["p50_ms"], "baseline_queries": base["queries"],
                        "ratio": ratio(fig["p50_ms"], base["p50_ms"]),
                        "queries_constant": fig["queries"] == base["queries"],
                        "pinned_queries": QUERIES.get(label),
                        "ok": fig["p50_ms"] <= GOAL_MS and fig["p99_ms"] <= GOAL_P99_MS
                        and fig["queries"] == base["queries"] == QUERIES.get(label)}
        if label in INFORMATIONAL:
            pages[label]["informational"] = True
    result = {"jobs": jobs, "active": active, "queues": queues, "baseline_jobs": small_jobs,
              "baseline_queues": small_queues, "repeat": repeat, "seed_s": round(seed_s, 1), "goal_p50_ms": GOAL_MS,
              "goal_p99_ms": GOAL_P99_MS, "pages": pages,
              "load_average_before": load_before, "load_average_after": load_after, "users": users,
              "plans": {label: plan(client, paths[label]) for label in PLANS if label in paths}}
    for label, fig in pages.items():
        if not fig["ok"] and not fig.get("informational") and only is None:
            slug = label.lower().replace(" ", "-").replace(",", "").replace("=", "-").replace("&", "and")
            fig["profile"] = profile(f"page-{slug}", lambda p=paths[label]: [client.get(p) for _ in range(2)])
    if only is None:
        result["retention"] = _retention(jobs)
    else:
        result["only"] = sorted(only)
    reset_jobs()
    _drop_queues()
    return result


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    lines = [f"pages at {result['jobs']:,} jobs ({result.get('active', 0):,} active) / {result['queues']:,} queues, "
             f"seeded in {result['seed_s']} s (baseline: the same page at {result['baseline_jobs']:,} jobs / "
             f"{result['baseline_queues']} queues), p50 and p99 of {result['repeat']}:"]
    for label, f in result["pages"].items():
        verdict = "(not a goal)" if f.get("informational") else "OK" if f["ok"] else "BELOW GOAL"
        lines.append(f"  {label:48s} {f['p50_ms']:7.1f} ms p99 {f.get('p99_ms', 0):7.1f} ms "
                     f"cpu {f.get('cpu_p50_ms', 0):6.1f} ms {f['queries']:3d} "
                     f"queries   baseline {f['baseline_p50_ms']:6.1f} ms {f['baseline_queries']:3d} queries   "
                     f"x{f['ratio']:.2f}  {verdict}")
    u = result.get("users")
    if u:
        lines.append(f"  per user at the full size ({u['rounds']} rounds of {u['repeat']} requests per page and user, "
                     f"first user rotating; the team viewer sees {u['team_viewer_jobs']:,} jobs of "
                     f"{u['team_viewer_queue']}; load {u['load_average_before']} -> {u['load_average_after']}):")
        for label, figs in u["pages"].items():
            for user_label, f in figs.items():
                sp = f["spread_round_p50_ms"]
                lines.append(f"    {label:26s} {user_label:12s} p50 {f['p50_ms']:7.1f} ms p99 {f['p99_ms']:7.1f} ms "
                             f"{f['queries']:3d} queries  round p50s {sp['min']}/{sp['median']}/{sp['max']}  "
                             f"{'OK' if f['ok'] else 'BELOW GOAL'}")
    r = result.get("retention")
    if r:
        lines.append(f"  retention: {r['jobs']:,} finished jobs older than {r['older_than_days']} days deleted in "
                     f"{r['seconds']} s ({r['jobs_per_s']:,} jobs/s), {r['batches']} batches, longest "
                     f"{r['longest_batch_ms']} ms")
    return lines
