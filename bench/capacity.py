"""Reconcile capacity under a sustained submit rate, with 1, 2 and 4 Celery worker processes (issue 16).

    python -m bench.capacity                                   # 1, 2, 4 processes, 60 s each at 20 submits/s
    python -m bench.capacity --processes 1,2 --seconds 30 --json bench/results/capacity.json

One private stack (`bench.faultstack.FaultStack`: PostgreSQL from initdb, Redis, the local control plane with 4
extra nodes of 1,000 pod slots, gunicorn, beat with a 30-s resync, the watcher) and, in turn, one Celery worker of
N processes. Before each N the stack gets a backlog (`--backlog` jobs in bulk submits while no worker runs), so the
worker, not the web or the submitting clients, is what limits the rate; then the worker of N processes starts and,
for `--seconds`, single submits arrive at `--rate` per second from `--clients` threads (each with an
Idempotency-Key, retried on 503) while the jobs still Submitted are counted every 5 s in the database. Capacity is
the jobs that left Submitted per second over that window (each dispatch is a reconcile pass that creates a job's
Workload, PodGroup, Job and Service; the pods run 15 s, after which the watcher's pass records the end and cleans
up: that work shares the worker too). The worker is then stopped (SIGTERM) and the next N starts on what is left.

Reported per N (stdout, and `--json`): submits answered per second, jobs dispatched per second, the backlog at the
start and the end of the window, the worker's pool processes, and the machine's load average. Not part of the test
suite (about 2 minutes of set-up, then `--seconds` plus ~20 s per N).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .faultstack import Client, FaultStack, create_namespace
from .soak import backlog_sampler, rate_between
from .stack import log

NAMESPACE = "capacity"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", default="1,2,4", help="worker pool sizes to measure, in turn (default 1,2,4)")
    parser.add_argument("--rate", type=float, default=20.0, help="submits per second (default 20)")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window per pool size (default 60)")
    parser.add_argument("--backlog", type=int, default=600, help="jobs queued before each window (default 600)")
    parser.add_argument("--clients", type=int, default=6, help="submitting threads (default 6)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="gangweb-capacity-"))
    figures: dict = {"rate": args.rate, "seconds": args.seconds, "runs": []}
    with FaultStack(workdir) as stack:
        t = time.monotonic()
        stack.start(workers=0, resync_seconds=30)
        log(f"stack up in {time.monotonic() - t:.0f} s (workdir {workdir})")
        api = stack.cluster.api_client()
        create_namespace(api, NAMESPACE)
        stack.allow_namespace(NAMESPACE)
        for i in range(4):
            stack.cluster.add_node(f"capacity-{i}", pods=1000, gpus=0)
        client = Client(stack.base_url, stack.token)
        serial = 0
        for n in [int(p) for p in args.processes.split(",")]:
            # The backlog, in bulk (one request per 200 jobs) while no worker runs.
            for start_at in range(0, args.backlog, 200):
                count = min(200, args.backlog - start_at)
                client.bulk([f"c{n}-b{serial + i}" for i in range(count)], NAMESPACE, "fault-short")
                serial += count
            samples: list = []
            stop = threading.Event()
            sampler = threading.Thread(target=backlog_sampler, args=(stack.env["DATABASE_URL"], samples, stop, 5.0),
                                       daemon=True)
            name = f"worker-c{n}"
            stack.start_worker(n, name=name, loglevel="INFO")
            sampler.start()
            start = time.monotonic()
            total = int(args.rate * args.seconds)
            base = serial
            serial += total

            def submit(i: int, start=start, base=base, n=n) -> None:
                if time.monotonic() > start + args.seconds + 30:
                    return  # the web fell this far behind: the window is over, stop adding
                time.sleep(max(0.0, start + i / args.rate - time.monotonic()))
                client.submit(f"c{n}-s{base + i}", NAMESPACE, "fault-short")

            answered_before = client.answers[201]
            with ThreadPoolExecutor(args.clients) as pool:
                list(pool.map(submit, range(total)))
            end = time.monotonic()
            stop.set()
            sampler.join(10)
            stack.stop(name)
            window = [s for s in samples if start <= s[0] <= end]
            run = {
                "processes": n,
                "submits_per_second": round((client.answers[201] - answered_before) / (end - start), 2),
                "dispatched_per_second": rate_between(samples, start, end),
                "backlog_at_start": window[0][2] if window else None,
                "backlog_at_end": window[-1][2] if window else None,
                "window_seconds": round(end - start, 1),
                "load_average": round(os.getloadavg()[0], 1),
            }
            figures["runs"].append(run)
            log(f"capacity {run}")
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
