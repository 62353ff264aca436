"""Soak: a sustained submit rate against the whole of gangweb on this machine, then the count of what is left.

    python -m bench.soak                                  # 5 min at 20 submits/s: 6,000 short jobs (issue 16)
    python -m bench.soak --seconds 60 --concurrency 1     # reconcile capacity with 1 worker process
    python -m bench.soak --seconds 60 --concurrency 4 --json bench/results/soak-c4.json

A private stack (`bench.faultstack.FaultStack`: PostgreSQL from initdb, Redis, the local control plane, gunicorn,
one Celery worker of `--concurrency` processes, beat, the watcher) takes `--rate` single submits per second from
`--clients` threads for `--seconds` (each with an Idempotency-Key, retried on 503), of 2-pod jobs whose pods run
15 s; every `--cancel-every`-th job is cancelled right after its submit. Then it waits (up to `--drain-seconds`)
until every job has finished or been cancelled and cleaned up.

Reported (stdout, and `--json`): submits answered per second; reconcile capacity, i.e. jobs dispatched (left
Submitted) per second while the load lasted and while the backlog drained after it, and the largest backlog;
seconds to drain; the end count (`faultstack.census`: jobs by phase, gang objects, Services and live pods of
finished or cancelled jobs, orphans; 0 problems is the goal); every status read of a cancelled job that said
Cancelled followed by a LIST of its pods (how many found pods: the goal is 0); from the worker's log, the number of
`SoftTimeLimitExceeded` lines and the most resyncs of the cluster that ran at once (Celery's received/succeeded
lines); once a minute from the start to the end of the drain, the finished jobs whose Workload, PodGroup or Service
is still in the cluster (listed from the API server) and how long the longest of them has been finished (the
largest of each is reported). Not part of the test suite: it takes 6-15 minutes.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from .faultstack import Client, FaultStack, census, cluster_objects, create_namespace, pods_of
from .stack import log

NAMESPACE = "soak"


def backlog_sampler(database_url: str, samples: list, stop: threading.Event, every: float = 5.0) -> None:
    """Append (monotonic time, jobs, jobs still Submitted) every `every` seconds until `stop` is set."""
    import psycopg

    while not stop.is_set():
        try:
            with psycopg.connect(database_url, connect_timeout=5) as conn:
                total, waiting = conn.execute(
                    "SELECT count(*), count(*) FILTER (WHERE phase = 'Submitted') FROM scheduling_gangjob").fetchone()
            samples.append((time.monotonic(), total, waiting))
        except Exception as exc:  # noqa: BLE001 - a sample missed is a gap in the curve, not a failed run
            log(f"sample failed: {exc}")
        stop.wait(every)


def held_after_finish(client: Client, api, samples: list, stop: threading.Event, every: float = 60.0) -> None:
    """Every `every` seconds until `stop` is set, the finished jobs (Succeeded, Failed, Cancelled) whose Workload,
    PodGroup or Service is still in the cluster: the jobs are read first (gangweb's API: phase and `finished_at`),
    then those kinds are listed from the API server, so a job counts only when its object outlived its recorded end
    (a job still running when its objects were listed cannot count). Append (monotonic time, count, longest
    seconds from `finished_at` to the end of the LISTs, 1-min load, seconds the LISTs took): the longest is an upper
    bound by the LISTs' own duration."""
    while not stop.wait(every):
        try:
            ended = {j["uid"]: datetime.fromisoformat(j["finished_at"]) for j in client.jobs(NAMESPACE)
                     if j["phase"] in ("Succeeded", "Failed", "Cancelled") and j["finished_at"]}
            listing = time.monotonic()
            present = cluster_objects(api, NAMESPACE, gang_only=True)
            listed_at = datetime.now().astimezone()
            holding = [uid for uid in ended if present.get(uid)]
            longest = max(((listed_at - ended[uid]).total_seconds() for uid in holding), default=0.0)
            took = time.monotonic() - listing
            samples.append((time.monotonic(), len(holding), round(longest, 1), round(os.getloadavg()[0], 1),
                            round(took, 1)))
            log(f"finished jobs still holding gang objects: {len(holding)} of {len(ended)} finished "
                f"(longest {longest:.0f} s; LISTs took {took:.1f} s)")
        except Exception as exc:  # noqa: BLE001 - a sample missed is a gap, not a failed run
            log(f"holding sample failed: {exc}")


def rate_between(samples: list, t0: float, t1: float) -> float:
    """Jobs dispatched per second between t0 and t1 (dispatched = total - still Submitted), from the samples."""
    inside = [s for s in samples if t0 <= s[0] <= t1]
    if len(inside) < 2:
        return 0.0
    (a, ta, wa), (b, tb, wb) = inside[0], inside[-1]
    return round(((tb - wb) - (ta - wa)) / (b - a), 2) if b > a else 0.0


def resyncs_at_once(worker_log: str) -> int:
    """The most resync passes of the cluster (`scheduling.resync_cluster` tasks that did not skip) running at the same
    time, from Celery's INFO lines: a task's "succeeded in <s>s" line gives its run as [end - s, end]; a task whose
    pool process logged "skipped: another resync" (the per-cluster lease) just before is left out. Celery's
    "received" lines are not used: with a backlog a worker prefetches tasks long before it runs them."""
    stamp = re.compile(r"^\[(\S+ \S+): \w+/(\S+?)\]")
    skipped: set[str] = set()
    runs: list[tuple[float, int]] = []
    for line in worker_log.splitlines():
        head = stamp.match(line)
        if not head:
            continue
        process = head.group(2)
        if "skipped: another resync" in line:
            skipped.add(process)
            continue
        done = re.search(r"scheduling\.resync_cluster\[[^\]]+\] (?:succeeded|raised \w+) in ([\d.]+)s", line)
        if not done:
            continue
        if process in skipped:
            skipped.discard(process)
            continue
        end = datetime.strptime(head.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        runs += [(end - float(done.group(1)), 1), (end, -1)]
    running = most = 0
    for _, step in sorted(runs):
        running += step
        most = max(most, running)
    return most


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=20.0, help="submits per second (default 20)")
    parser.add_argument("--seconds", type=float, default=300.0, help="how long the load lasts (default 300)")
    parser.add_argument("--concurrency", type=int, default=2, help="Celery worker processes (default 2)")
    parser.add_argument("--clients", type=int, default=6, help="submitting threads (default 6)")
    parser.add_argument("--cancel-every", type=int, default=10, help="cancel every n-th job (0: none)")
    parser.add_argument("--drain-seconds", type=float, default=900.0, help="how long to wait for the backlog")
    parser.add_argument("--resync-seconds", type=int, default=30, help="GANGWEB_RESYNC_SECONDS of the stack")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    # A background run (nohup ... &) ignores SIGINT: SIGTERM must still stop the stack it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    workdir = Path(tempfile.mkdtemp(prefix="gangweb-soak-"))
    figures: dict = {"rate": args.rate, "seconds": args.seconds, "concurrency": args.concurrency}
    with FaultStack(workdir) as stack:
        t = time.monotonic()
        stack.start(worker_concurrency=args.concurrency, resync_seconds=args.resync_seconds)
        log(f"stack up in {time.monotonic() - t:.0f} s (workdir {workdir})")
        api = stack.cluster.api_client()
        create_namespace(api, NAMESPACE)
        stack.allow_namespace(NAMESPACE)
        # 4 default nodes hold 110 pods each; at 20 jobs/s of 2 pods living ~20 s the load needs ~800 at once.
        for i in range(4):
            stack.cluster.add_node(f"soak-{i}", pods=1000, gpus=0)
        client = Client(stack.base_url, stack.token)
        samples: list = []
        stop = threading.Event()
        sampler = threading.Thread(target=backlog_sampler, args=(stack.env["DATABASE_URL"], samples, stop),
                                   daemon=True)
        sampler.start()
        holding: list = []
        holder = threading.Thread(target=held_after_finish, args=(client, api, holding, stop), daemon=True)
        holder.start()

        total = int(args.rate * args.seconds)
        to_cancel: list[tuple[int, str]] = []
        lock = threading.Lock()
        start = time.monotonic()

        latencies: list[float] = []

        def submit(i: int) -> None:
            time.sleep(max(0.0, start + i / args.rate - time.monotonic()))  # hold the rate, not a burst
            asked = time.monotonic()
            job = client.submit(f"soak-{i}", NAMESPACE, "fault-short")
            with lock:
                latencies.append(time.monotonic() - asked)  # to the 201, retries on 503 included
            if args.cancel_every and i % args.cancel_every == 0:
                client.cancel(job["id"])
                with lock:
                    to_cancel.append((job["id"], job["uid"]))

        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(submit, range(total)))
        load_end = time.monotonic()
        figures["submits_per_second"] = round(total / (load_end - start), 2)
        ordered = sorted(latencies)
        figures["submit_seconds"] = {q: round(ordered[min(len(ordered) - 1, int(len(ordered) * f))], 3)
                                     for q, f in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))}
        log(f"{total} submits in {load_end - start:.0f} s")

        # Drain, reading every cancelled job until it says Cancelled, then listing what of it is left.
        cancelled_reads = pods_after_cancelled = 0
        pending = dict(to_cancel)
        deadline = load_end + args.drain_seconds
        done_at = None
        while time.monotonic() < deadline:
            for job_id, uid in list(pending.items()):
                job = client.job(job_id)
                if job["phase"] == "Cancelled":
                    cancelled_reads += 1
                    pods_after_cancelled += len(pods_of(api, NAMESPACE, uid))
                    del pending[job_id]
            jobs = client.jobs(NAMESPACE)
            unfinished = [j for j in jobs if j["phase"] not in ("Succeeded", "Failed", "Cancelled")
                          or not j["cleaned_up_at"]]
            if not unfinished and not pending:
                done_at = time.monotonic()
                break
            time.sleep(5)
        stop.set()
        sampler.join(10)
        holder.join(120)
        figures["most_finished_jobs_holding_gang_objects"] = max((n for _, n, _, _, _ in holding), default=0)
        figures["longest_finished_job_holding_gang_objects_s"] = max((t for _, _, t, _, _ in holding), default=0.0)
        figures["holding_each_minute"] = [  # minutes from the first submit
            {"minute": round((at - start) / 60, 1), "holding": n, "longest_s": t, "load1": load, "list_s": took}
            for at, n, t, load, took in holding]
        figures["drain_seconds_after_load"] = round((done_at or time.monotonic()) - load_end, 1)
        figures["drained"] = done_at is not None
        figures["dispatch_rate_during_load"] = rate_between(samples, start, load_end)
        figures["dispatch_rate_after_load"] = rate_between(samples, load_end, done_at or time.monotonic())
        figures["largest_backlog"] = max((w for _, _, w in samples), default=0)
        result = census(client, api, NAMESPACE)
        figures["census"] = result.summary()
        figures["problems"] = result.problems[:20]
        figures["problem_count"] = len(result.problems)
        figures["cancelled_reads"] = cancelled_reads
        figures["pods_found_after_a_cancelled_read"] = pods_after_cancelled
        worker_log = stack.log_text("worker")
        figures["soft_time_limit_lines"] = worker_log.count("SoftTimeLimitExceeded")
        figures["most_resyncs_at_once"] = resyncs_at_once(worker_log)
        figures["answers"] = dict(client.answers)
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if figures["drained"] and not figures["problem_count"] and not pods_after_cancelled else 1


if __name__ == "__main__":
    raise SystemExit(main())
