"""Benchmark: 200 clients waiting on their jobs through the long-poll, against the same 200 polling every second.

    python -m bench.waiters [--clients 200] [--seconds 60] [--threads 256] [--ramp 10]

Standalone (not part of run_all's table). It starts a private PostgreSQL (initdb in a temporary folder, a free
port, max_connections 500, run as the `postgres` user when started as root), so 200 clients cannot exhaust a
shared server's connections; `--database-url` uses yours instead. It migrates it, creates the bench fixtures
(bench.common) and one job per client, starts gunicorn (gangweb.wsgi, 1 gthread worker with `--threads` threads,
GANGWEB_WAIT_POLL_SECONDS=1) on a free port, and runs two phases of `--seconds` each, alternating nothing else:

- wait: each client loops `GET /api/v1/jobs/wait/?ids=<its job>&after=<cursor>&timeout=25`;
- poll: each client loops `GET /api/v1/jobs/<its job>/` once a second (what a client without the endpoint does).

In both phases a changer records a new phase on one job every 2 s (a timeline entry, as reconcile would), so
waiters really wake. Figures per phase: requests per minute served, CPU seconds of the gunicorn processes, their
RSS at the end, database transactions per minute (pg_stat_database.xact_commit of the database, every process
included), and the wake latency of the waiter whose job changed (from the change's commit to its answer).
Printed as JSON on stdout.

Clients start over `--ramp` seconds (as pipelines do, not all in one instant): a burst of simultaneous first
requests would open one database connection per web thread at once.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

from localcluster.processes import free_port, rss_bytes

from .common import bench_fixtures, percentile
from .stack import REPO, children, log, wait_for

TICKS = os.sysconf("SC_CLK_TCK")
_changes = iter(range(100, 10**9))  # attempts of the changer's entries, unique across phases


def _cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (FileNotFoundError, IndexError):
            pass
    return total / TICKS


def _xacts() -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        return cur.fetchone()[0]


def _private_postgres(workdir: Path) -> tuple[str, subprocess.Popen]:
    """Start PostgreSQL in `workdir` on a free port; (DATABASE_URL, process)."""
    bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    data = workdir / "pgdata"
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_postgres:
        shutil.chown(workdir, "postgres")
    subprocess.run([*as_postgres, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "bench"],
                   check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    proc = subprocess.Popen([*as_postgres, str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k",
                             str(workdir), "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=500",
                             "-c", "fsync=off"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: subprocess.run([str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                                    capture_output=True).returncode == 0, 60, "private PostgreSQL")
    subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "bench", "bench"],
                   check=True)
    return f"postgres://bench@127.0.0.1:{port}/bench", proc


def _phase(mode: str, base: str, token: str, ids: list[int], seconds: float, web_pids, ramp: float) -> dict:
    from django.db import connection
    from django.utils import timezone

    from scheduling.models import GangJob, PhaseTransition

    stop = threading.Event()
    counts = [0] * len(ids)
    errors: list[str] = []
    changed_at: dict[int, float] = {}
    wakes: list[float] = []

    def client(index: int, job_id: int) -> None:
        stop.wait(ramp * index / len(ids))
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {token}"
        cursor = ""
        while not stop.is_set():
            try:
                if mode == "wait":
                    r = session.get(f"{base}/api/v1/jobs/wait/", params={"ids": job_id, "after": cursor,
                                                                          "timeout": 25}, timeout=60)
                    data = r.json()
                    if cursor and data["changed"] and job_id in changed_at:
                        wakes.append(time.monotonic() - changed_at.pop(job_id))
                    cursor = data["cursor"]
                else:
                    started = time.monotonic()
                    r = session.get(f"{base}/api/v1/jobs/{job_id}/", timeout=60)
                    stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))
                if r.status_code != 200:
                    errors.append(f"{r.status_code}")
                counts[index] += 1
            except requests.RequestException as exc:
                errors.append(type(exc).__name__)

    def changer() -> None:
        n = 0
        while not stop.wait(2.0):
            job_id = ids[n % len(ids)]
            attempt = next(_changes)  # a new (phase, attempt) each time: one timeline entry, as a re-queue records
            PhaseTransition.objects.create(job_id=job_id, phase="Queued", attempt=attempt, at=timezone.now())
            GangJob.objects.filter(pk=job_id).update(phase="Queued")
            changed_at[job_id] = time.monotonic()
            n += 1
        connection.close()

    threads = [threading.Thread(target=client, args=(i, j), daemon=True) for i, j in enumerate(ids)]
    cpu0, xact0, t0 = _cpu_seconds(web_pids()), _xacts(), time.monotonic()
    for t in threads:
        t.start()
    changing = threading.Thread(target=changer, daemon=True)
    changing.start()
    time.sleep(seconds)
    stop.set()
    elapsed = time.monotonic() - t0
    cpu, xacts = _cpu_seconds(web_pids()) - cpu0, _xacts() - xact0
    rss = sum(rss_bytes(pid) for pid in web_pids())
    changing.join()
    for t in threads:
        t.join(timeout=30)
    return {"mode": mode, "clients": len(ids), "seconds": round(elapsed, 1),
            "requests_per_minute": round(sum(counts) * 60 / elapsed),
            "web_cpu_seconds": round(cpu, 2), "web_cpu_percent": round(100 * cpu / elapsed, 1),
            "web_rss_mib": round(rss / 2**20, 1), "db_transactions_per_minute": round(xacts * 60 / elapsed),
            "wake_latency_p50_ms": round(percentile(wakes, 50) * 1000) if wakes else None,
            "wake_latency_max_ms": round(max(wakes) * 1000) if wakes else None,
            "errors": len(errors), "error_kinds": sorted(set(errors))[:5]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--threads", type=int, default=256)
    parser.add_argument("--ramp", type=float, default=10, help="seconds over which the clients start")
    parser.add_argument("--database-url", help="use this database instead of a private PostgreSQL")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="gangweb-bench-waiters-"))
    postgres = None
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url
    else:
        os.environ["DATABASE_URL"], postgres = _private_postgres(workdir)
    os.environ.setdefault("GANGWEB_STATE_DIR", str(workdir / "state"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gangweb.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", "--noinput", verbosity=0)
    from scheduling.models import GangJob
    from scheduling.services.access import tokens as token_service
    from scheduling.services.jobs import lifecycle as job_service

    user, version, queue, cluster = bench_fixtures("-waiters")
    GangJob.objects.filter(queue=queue).delete()
    jobs, _ = job_service.submit_bulk(user, [{"name": f"w-{i}", "template": version.template.name,
                                              "queue": queue.name, "cluster": cluster.name}
                                             for i in range(args.clients)])
    ids = [job.pk for job in jobs]
    user.api_token = None
    _, token = token_service.create(user, {"name": f"bench-waiters-{time.time():.0f}",
                                           "actions": ["read", "submit", "cancel"]})

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # 200 waiters of one bench token: the per-user and per-process caps on waits (429 beyond them) are lifted for the
    # measurement (what a waiter costs; bench/wait_exhaustion.py measures the caps).
    env = {**os.environ, "GANGWEB_WAIT_POLL_SECONDS": "1", "GANGWEB_WAITS_PER_USER": "1000",
           "GANGWEB_WAITS_PER_PROCESS": "1000"}
    web = subprocess.Popen([sys.executable, "-m", "gunicorn", "gangweb.wsgi", "--bind", f"127.0.0.1:{port}",
                            "--worker-class", "gthread", "--workers", "1", "--threads", str(args.threads),
                            "--timeout", "60"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: requests.get(f"{base}/api/v1/", timeout=2).status_code in (200, 401), 60, "gunicorn")

        def web_pids():
            return [web.pid, *children(web.pid)]

        results = []
        for mode in ("wait", "poll"):
            log(f"waiters: {mode} phase, {args.clients} clients, {args.seconds:g} s")
            results.append(_phase(mode, base, token, ids, args.seconds, web_pids, args.ramp))
        print(json.dumps({"threads": args.threads, "phases": results}, indent=2))
    finally:
        web.terminate()
        web.wait(timeout=30)
        GangJob.objects.filter(pk__in=ids).delete()
        if postgres is not None:
            from django.db import connections

            connections.close_all()
            postgres.terminate()
            postgres.wait(timeout=30)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
