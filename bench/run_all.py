"""Run every benchmark against PostgreSQL, Redis, gunicorn (2 workers), a Celery worker and the local control plane.

    python -m bench.run_all [--only submit,pages] [--quick | --scale N] [--keep-workdir] [--churn-minutes 2]

Starts what is missing (see bench.stack), migrates the ``gangweb_bench`` database, runs each benchmark, prints
its figures with the ratio against its baseline, writes ``bench/results/latest.json``, and stops what it started.
``--quick`` shrinks every size tenfold (a smoke run; its results are not written to latest.json); ``--scale N``
divides every size by N and writes ``results/partial-<names>-scaleN.json`` (never latest.json, nor the profiles).
``BENCH_DATABASE_URL`` / ``BENCH_REDIS_URL`` point it at servers of your own instead (nothing is started then;
the database is emptied of jobs); ``BENCH_DB_NAME`` names the database created in the local PostgreSQL (default
``gangweb_bench``), so engineers sharing a machine do not empty each other's.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import platform
import secrets
import signal
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from .common import RESULTS_DIR
from .stack import REPO, Stack, log

# Order: the cluster-free benchmarks first (the cluster's background work would disturb them), then submit-to-Running
# on the fresh control plane (its 400 pods need room on the 4 nodes: 440 pods), then reconcile on the same one, then
# memory, which builds the 10,000-job dataset in the cluster and takes the resync benchmark's measurements on it
# (the dataset is built once for both). The repair benchmark on a fresh control plane of its own (~20 s to start).
# The watch churn after it: it starts a fresh control plane of its own and leaves 1,600 running pods in it (a
# watcher started on that control plane right after the churn made its first LISTs ~4 s late, after the repair
# benchmark's warm-up edit, which then waited for the resync: the warm-up now waits for the watcher's first LISTs;
# see bench/README.md, "Repair after a hand edit").
# Issue 36: pages over HTTP beside the other cluster-free ones (its own gunicorn, as the chart runs it); submit to
# Running against a raw client and the watch replay last, each on a fresh control plane of its own.
BENCHMARKS = ["submit", "pages", "http_pages", "running", "reconcile", "memory", "resync", "repair", "watch_churn",
              "resync_scale", "running_raw", "watch_replay"]


def _configure(database_url: str, redis_url: str, workdir: Path) -> dict[str, str]:
    env = {
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "SECRET_KEY": secrets.token_hex(32),
        # The bench database keeps Cluster rows between runs, so its credentials key must not change.
        "GANGWEB_ENCRYPTION_KEYS": base64.urlsafe_b64encode(hashlib.sha256(b"gangweb-bench-only").digest()).decode(),
        # Submit throttling stays on (its cache round trip is part of a submit) but never refuses a benchmark.
        "GANGWEB_SUBMIT_RATE_PER_USER": "1000000/second",
        "GANGWEB_SUBMIT_RATE_PER_TOKEN": "1000000/second",
        "GANGWEB_BULK_JOBS_PER_MINUTE": "1000000000",  # the bulk-jobs quota likewise: counted, never refusing
        "DEBUG": "0",
        "GANGWEB_TESTING": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
        "GANGWEB_STATE_DIR": str(workdir / "state"),
        "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
        # Beat is not started: each benchmark triggers resyncs itself, so none runs at a random moment.
        "GANGWEB_RESYNC_SECONDS": "3600",
        # The worker's resync run may cover the whole dataset (production bounds a run at 2,000 jobs, settings.py);
        # its time budget stays the production one, inside the task's soft time limit.
        "GANGWEB_RESYNC_MAX_JOBS": "1000000",
        # The local control plane listens on loopback, which production refuses (docs/security.md).
        "GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES": "127.0.0.0/8,::1/128",
    }
    os.environ.update(env)
    return env


def _setup_django() -> None:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", "--noinput", verbosity=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated subset of " +
                        ", ".join(BENCHMARKS))
    parser.add_argument("--quick", action="store_true", help="tenfold smaller sizes; results not saved")
    parser.add_argument("--scale", type=int, default=0,
                        help="divide every size by this (--quick is 10); unlike --quick the results are written, "
                             "to a partial-*.json only")
    parser.add_argument("--keep-workdir", action="store_true")
    parser.add_argument("--churn-minutes", type=float, default=2.0,
                        help="watch_churn: minutes of measured churn (10 for the RSS-flatness run)")
    parser.add_argument("--churn-rate", type=int, default=600, help="watch_churn: pod updates per second")
    parser.add_argument("--pages-only", default="", help="pages: '|'-separated labels of the pages to time (e.g. "
                        "'API queue tree|queue tree'), default all; the retention run is then left out")
    parser.add_argument("--pages-jobs", type=int, default=0, help="pages: jobs seeded (default 1,000,000); the "
                        "active jobs (10,000) and queues (1,000) stay")
    parser.add_argument("--pages-repeat", type=int, default=20, help="pages: timed requests per page")
    parser.add_argument("--http-pages-jobs", type=int, default=100_000,
                        help="http_pages: jobs seeded (default 100,000, a few minutes here; the issue's full "
                             "setting is 1,000,000)")
    parser.add_argument("--http-pages-samples", type=int, default=200,
                        help="http_pages: warm requests per user and page kind (>= 200 for a p99)")
    args = parser.parse_args(argv)
    # `timeout`, Ctrl-C in another shell, CI cancelling: unwind so the Stack stops its services and control plane
    # instead of leaving them running.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    selected = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = sorted(set(selected) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    scale = args.scale or (10 if args.quick else 1)
    sys.path.insert(0, str(REPO))
    workdir = Path(tempfile.mkdtemp(prefix="gangweb-bench-"))
    if scale != 1:  # a smoke or scaled run leaves the committed profiles alone
        os.environ["BENCH_PROFILE_DIR"] = str(workdir / "profiles")
    started = time.monotonic()
    results: dict[str, object] = {}
    lines: list[str] = []
    failed = []
    with Stack(workdir) as stack:
        database_url = os.environ.get("BENCH_DATABASE_URL") or stack.start_postgres()
        redis_url = os.environ.get("BENCH_REDIS_URL") or stack.start_redis()
        stack.env = _configure(database_url, redis_url, workdir)
        _setup_django()
        base_url = stack.start_web(workers=2)
        log(f"web at {base_url}, PostgreSQL and Redis ready ({time.monotonic() - started:.0f} s)")
        for name in selected:
            log(f"benchmark: {name}")
            t0 = time.monotonic()
            try:
                result, report = _run_one(name, stack, base_url, scale, args)
            except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others' figures
                failed.append(name)
                results[name] = {"error": traceback.format_exc(limit=8)}
                log(f"{name} failed:\n{results[name]['error']}")
                continue
            result["seconds"] = round(time.monotonic() - t0, 1)
            results[name] = result
            lines += report
            print("\n".join(report), flush=True)
            log(f"{name}: {result['seconds']:.0f} s")
    if not args.keep_workdir:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    total = round(time.monotonic() - started, 1)
    document = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "total_seconds": total, "scale": scale,
        "results": results,
    }
    took = ", ".join(f"{name} {r['seconds']:.0f} s" for name, r in results.items() if "seconds" in r)
    print(f"\nall benchmarks: {total:.0f} s ({took}; the rest is starting and stopping services)")
    if failed:
        # The figures of the benchmarks that did run are kept (a full run is an hour), never as latest.json.
        path = RESULTS_DIR / f"failed-run-{document['generated_at'][:19].replace(':', '')}.json"
        RESULTS_DIR.mkdir(exist_ok=True)
        path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        log(f"failed: {', '.join(failed)}; the other figures are in {path} (README and latest.json keep the last "
            "complete run)")
    elif not args.quick and scale == 1 and set(selected) == set(BENCHMARKS):
        RESULTS_DIR.mkdir(exist_ok=True)
        (RESULTS_DIR / "latest.json").write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        log(f"wrote {RESULTS_DIR / 'latest.json'}")
        from .table import TABLE_PAGES, update_readme

        for page in TABLE_PAGES:
            if update_readme(REPO / page, document):
                log(f"updated the Performance table in {page}")
    elif not args.quick:
        path = RESULTS_DIR / f"partial-{'-'.join(selected)}{f'-scale{scale}' if scale != 1 else ''}.json"
        path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        log(f"wrote {path} (a partial run does not replace latest.json)")
    return 1 if failed else 0


_pending_resync: dict = {}


def _run_one(name: str, stack: Stack, base_url: str, scale: int, args=None):
    if name == "submit":
        from . import submit

        result = submit.run(base_url, jobs=2000 // scale, bulk_batch=500 // scale)
        return result, submit.report(result)
    if name == "running":
        from . import running

        if stack.cluster is None:
            stack.start_cluster()
        result = running.run(stack, base_url, jobs=100 // scale)
        return result, running.report(result)
    if name == "reconcile":
        from . import reconcile

        if stack.cluster is None:
            stack.start_cluster()
        result = reconcile.run(stack, base_url, jobs=300 // scale, rounds=3, ramp_jobs=64 // scale)
        return result, reconcile.report(result)
    if name == "memory":
        from . import memory

        result = memory.run(stack, base_url, jobs=10_000 // scale, small=1_000 // scale)
        _pending_resync.update(result.pop("resync"))
        return result, memory.report(result)
    if name == "resync":
        from . import resync

        if not _pending_resync:
            raise RuntimeError("the resync benchmark is measured on the memory benchmark's dataset: run both")
        return dict(_pending_resync), resync.report(_pending_resync)
    if name == "resync_scale":
        from . import resync_scale

        sizes = resync_scale.sizes_from_env()
        result = resync_scale.run(stack, sizes=tuple(max(100, n // scale) for n in sizes),
                                  rounds=resync_scale.ROUNDS if scale == 1 else 1,
                                  old_code=os.environ.get("BENCH_RESYNC_OLD_CODE") or None)
        return result, resync_scale.report(result)
    if name == "pages":
        from . import pages

        only = {p.strip() for p in args.pages_only.split("|") if p.strip()} or None
        result = pages.run(jobs=(args.pages_jobs or 1_000_000) // scale, queues=1000 // scale if scale == 1 else 200,
                           active=10_000 // scale, small_jobs=1000 // scale, small_queues=10,
                           repeat=args.pages_repeat, only=only)
        return result, pages.report(result)
    if name == "http_pages":
        from . import http_pages

        result = http_pages.run(stack, jobs=max(10_000, args.http_pages_jobs // scale),
                                queues=1000 if scale == 1 else 200, active=10_000 // scale,
                                samples=args.http_pages_samples if scale == 1 else 40)
        return result, http_pages.report(result)
    if name == "running_raw":
        from . import running_raw

        result = running_raw.run(stack, base_url, jobs=max(10, running_raw.JOBS // scale))
        return result, running_raw.report(result)
    if name == "watch_replay":
        from . import watch_replay

        result = watch_replay.run(stack, base_url, jobs=max(20, 200 // scale),
                                  seconds=30 if scale == 1 else 15, record_seconds=30 if scale == 1 else 15)
        return result, watch_replay.report(result)
    if name == "watch_churn":
        from . import watch_churn

        minutes = getattr(args, "churn_minutes", 2.0) if scale == 1 else 0.5
        result = watch_churn.run(stack, base_url, jobs=200 // scale, rate=getattr(args, "churn_rate", 600) // scale,
                                 minutes=minutes)
        return result, watch_churn.report(result)
    if name == "repair":
        from . import repair

        # A fresh control plane, as in the standalone runs: the earlier benchmarks leave thousands of jobs' objects
        # in theirs (see the order above).
        if stack.cluster is None:
            stack.start_cluster()
        else:
            stack.restart_cluster()
        result = repair.run(stack, base_url, edits=60 // scale if scale == 1 else 8)
        return result, repair.report(result)
    raise NotImplementedError(f"benchmark '{name}' is not written yet")


if __name__ == "__main__":
    sys.exit(main())
