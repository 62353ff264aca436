"""Issue 14: every SQL statement of the dashboard's and the API's pages under stale planner statistics.

    DATABASE_URL=postgres://…/gangweb_x GANGWEB_TESTING=1 python -m bench.stale_stats [--fresh] [--timeout 60]

Reproduces what hung CI: the query-budget test's dataset (tests/dashboard/test_query_budgets.py, `grow`: 1,001
jobs, ~1,000 queues, clusters, templates and versions) inserted inside one open transaction into tables whose
statistics say they are empty. By default the tables first get the same rows in a transaction that is rolled back
(earlier tests' rows, now dead), then ANALYZE: `reltuples` 0 over a few hundred pages, which makes the planner
estimate 1 row for every scan however large the table has grown. `--fresh` ANALYZEs the truly empty tables instead
(`relpages` 0: the planner then extrapolates from the file size, a milder case).

Every statement each page runs (as the platform admin and as a queue submitter) is timed, and every SELECT is also
run under `EXPLAIN (ANALYZE, BUFFERS)` with the connection's own settings (server-side binding and psycopg's
prepare threshold, gangweb/settings.py), `statement_timeout` bounding each one. Prints the slowest statements with
their plans; exits 1 if any statement took a second or more. Nothing is left behind but the statistics: run it
against a database of its own (it refuses one that holds jobs).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gangweb.settings")
os.environ.setdefault("GANGWEB_TESTING", "1")

LIMIT_SECONDS = 1.0
TABLES = ("scheduling_gangjob", "scheduling_phasetransition", "scheduling_queuepolicy", "scheduling_cluster",
          "scheduling_runtimetemplate", "scheduling_runtimetemplateversion", "scheduling_queuepolicy_clusters",
          "scheduling_queueusagesample", "scheduling_queueclusterstate", "scheduling_reconcileattempt",
          "scheduling_queuegrant", "scheduling_clustergrant", "auth_user", "django_session")


class Rollback(Exception):
    """Raised to leave a transaction.atomic() block without committing."""


def _dataset():
    """The query-budget test's rows (its setup, then grow 10 and 990): returns (admin, submitter, job)."""
    from django.contrib.auth import get_user_model

    from scheduling.choices import GangPhase
    from scheduling.models import QueuePolicy
    from tests import builders
    from tests.dashboard.test_query_budgets import grow

    admin = get_user_model().objects.create_superuser("stale-admin", "a@example.com", "pw-admin-123")
    cluster = builders.make_cluster("local")
    org = builders.make_queue("org", clusters=[cluster])
    team_a = builders.make_queue("team-a", parent=org, clusters=[cluster])
    sam = builders.make_user("stale-sam")
    builders.grant(team_a, "submitter", user=sam)
    template = builders.make_template("base", pod_sets=[builders.pod_set(containers=[builders.container(gpu=1)])])
    job = builders.make_job(template, QueuePolicy.objects.get(name="team-a"), cluster, name="watched",
                            phase=GangPhase.RUNNING, user=admin)
    grow(10, admin, 0)
    grow(990, admin, 10)
    return admin, sam, job


def _urls(job_id: int) -> list[str]:
    from tests.dashboard.test_query_budgets import BUDGETS

    return [page.format(job=job_id) for page in BUDGETS] + [
        "/api/v1/jobs/", "/api/v1/jobs/?phase=Failed", "/api/v1/jobs/?phase=Running&ordering=-phase_changed_at",
        f"/api/v1/jobs/{job_id}/", f"/api/v1/jobs/{job_id}/timeline/", "/api/v1/queues/", "/api/v1/queues/tree/",
        "/api/v1/queues/tree/?depth=0", "/api/v1/queues/tree/?parent=org&depth=0", "/api/v1/templates/",
        "/api/v1/clusters/",
    ]


def _plan_lines(plan: list) -> list[str]:
    """The text form of an EXPLAIN (FORMAT JSON) plan: one line per node with its key conditions."""
    out = []

    def walk(node, depth):
        keys = [f"{k}: {node[k]}" for k in ("Index Name", "Index Cond", "Join Filter", "Hash Cond", "Filter",
                                            "Sort Key") if k in node]
        rel = f" on {node['Relation Name']}" if "Relation Name" in node else ""
        out.append(f"{'  ' * depth}{node['Node Type']}{rel} (est {node.get('Plan Rows')} rows, actual "
                   f"{node.get('Actual Rows', '?')} x {node.get('Actual Loops', '?')} loops, "
                   f"{node.get('Actual Total Time', '?')} ms) {'; '.join(keys)}")
        for child in node.get("Plans", []):
            walk(child, depth + 1)

    walk(plan[0]["Plan"], 0)
    return out


def measure(client, url: str, timeout_s: float) -> list[dict]:
    """GET `url`; every statement it ran: {"sql", "seconds", "plan" (SELECTs), "error"}."""
    from django.db import connection

    rows: list[dict] = []

    def wrapper(execute, sql, params, many, context):
        row = {"url": url, "sql": sql}
        rows.append(row)
        if sql.lstrip().upper().startswith("SELECT") and not many:
            raw = context["cursor"].cursor
            raw.execute("SAVEPOINT stale_explain")
            try:
                raw.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", params)
                plan = raw.fetchone()[0]
                row["plan"] = plan if isinstance(plan, list) else json.loads(plan)
                row["explain_ms"] = row["plan"][0]["Execution Time"]
                raw.execute("RELEASE SAVEPOINT stale_explain")
            except Exception as exc:  # noqa: BLE001 - the statement timed out: show the plan it would have run
                raw.execute("ROLLBACK TO SAVEPOINT stale_explain")
                raw.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
                plan = raw.fetchone()[0]
                row["plan"] = plan if isinstance(plan, list) else json.loads(plan)
                row["error"] = f"{type(exc).__name__}: {str(exc).strip()}"
                row["seconds"] = timeout_s
                raise TimeoutError(row["error"]) from exc
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            row["seconds"] = time.perf_counter() - t0

    with connection.execute_wrapper(wrapper):
        try:
            response = client.get(url)
            if response.status_code != 200:
                rows.append({"url": url, "sql": "", "seconds": 0, "error": f"HTTP {response.status_code}"})
        except TimeoutError:
            pass
    return rows


def stats(cur) -> dict[str, tuple[float, int]]:
    cur.execute("SELECT relname, reltuples, relpages FROM pg_class WHERE relname = ANY(%s)", [list(TABLES)])
    return {name: (tuples, pages) for name, tuples, pages in cur.fetchall()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh", action="store_true", help="ANALYZE the truly empty tables (no dead pages)")
    parser.add_argument("--timeout", type=float, default=60.0, help="statement_timeout in seconds (default 60)")
    parser.add_argument("--show", type=int, default=3, help="plans of the N slowest statements to print")
    parser.add_argument("--json", help="write every statement with its time and plan to this file")
    args = parser.parse_args(argv)

    import django

    django.setup()
    from django.db import connection, transaction
    from django.test import Client
    from django.test.utils import setup_test_environment

    from scheduling.models import GangJob

    if connection.vendor != "postgresql":
        sys.exit("bench.stale_stats: DATABASE_URL must name a PostgreSQL database")
    if GangJob.objects.exists():
        sys.exit("bench.stale_stats: this database holds jobs; point DATABASE_URL at a database of its own")
    setup_test_environment()
    if not args.fresh:
        try:
            with transaction.atomic():
                _dataset()
                raise Rollback
        except Rollback:
            pass
    with connection.cursor() as cur:
        cur.execute("ANALYZE")  # every table of this database, as autovacuum may have left them
        print("statistics after ANALYZE (reltuples, relpages):", stats(cur))
    results: list[dict] = []
    try:
        with transaction.atomic():
            admin, sam, job = _dataset()
            with connection.cursor() as cur:
                cur.execute("SELECT set_config('statement_timeout', %s, true)", [f"{int(args.timeout * 1000)}ms"])
                print("statistics the planner sees now (reltuples, relpages):", stats(cur))
            for who, user in (("admin", admin), ("submitter", sam)):
                client = Client()
                client.force_login(user)
                for url in _urls(job.pk):
                    for row in measure(client, url, args.timeout):
                        row["who"] = who
                        results.append(row)
            raise Rollback
    except Rollback:
        pass
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1, default=str)
    timed = sorted(results, key=lambda r: -max(r.get("seconds", 0), r.get("explain_ms", 0) / 1000))
    slow = [r for r in timed if max(r.get("seconds", 0), r.get("explain_ms", 0) / 1000) >= LIMIT_SECONDS
            or r.get("error")]
    print(f"{len(results)} statements over {len(_urls(job.pk)) * 2} page loads; "
          f"{len(slow)} at or over {LIMIT_SECONDS} s or failed")
    for r in timed[:args.show]:
        print(f"\n== {r['who']} GET {r['url']}: {r.get('seconds', 0) * 1000:.1f} ms "
              f"(EXPLAIN ANALYZE {r.get('explain_ms', '-')} ms) {r.get('error', '')}")
        print(r["sql"][:600])
        for line in _plan_lines(r["plan"]) if r.get("plan") else []:
            print("   ", line)
    per_url: dict[str, float] = {}
    for r in results:
        key = f"{r['who']:9} {r['url']}"
        per_url[key] = max(per_url.get(key, 0.0), r.get("seconds", 0), r.get("explain_ms", 0) / 1000)
    print("\nslowest statement per page (ms):")
    for key, worst in per_url.items():
        print(f"  {worst * 1000:9.1f}  {key}")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
