"""Benchmark: a webhook receiver that sleeps 30 s does not slow a 100-job bulk reconcile.

    python -m bench.webhooks [--jobs 100] [--rounds 2] [--sleep 30] [--no-shared-control] [--json FILE]

Standalone (not part of run_all's table); about 6 minutes. A private stack (`bench.faultstack.FaultStack`:
PostgreSQL from initdb, Redis, the local control plane, gunicorn, beat, the cluster watcher) runs as production
does: the reconcile worker (2 processes) consumes queue "celery", the webhook worker (2 processes) queue "webhooks"
(default settings: a scan every 5 s, resync every 30 s; receivers on loopback allowed). A receiver on 127.0.0.1
answers every POST after `--sleep` seconds (cut off by the delivery's 5 s read timeout, then retried with backoff).

Each round bulk-submits `--jobs` jobs of 2 pods (one reconcile batch) and times from just before the submit until
the last of them recorded Dispatched (gang objects and owners created: `recorded_at` of its Dispatched entry). Two
sides per round, their order alternating from round to round, each starting once the pods of every earlier round
exist and the webhook worker is idle:

- none: the subscription is inactive: no delivery at all;
- slow: a subscription to every phase of all the submitter's jobs points at the sleeping receiver. When it is turned
  on, the outbox scan also creates deliveries of every entry of the last 10 minutes, so the webhook worker is
  saturated from the side's first second.

The figure is slow / none per round and over all rounds (goal: <= 1.2, within the run-to-run noise of this
machine). Then, unless `--no-shared-control`, the same pair of sides once more with the layout before this change:
one worker of 2 processes consuming both queues, with one outbox scan run before its slow side (beat's own scans
expire unstarted behind that busy worker). That ratio shows what the separate queue buys.
Printed as JSON on stdout (and written to `--json`).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

from .common import percentile, ratio
from .faultstack import Client, FaultStack, create_namespace
from .stack import log

NAMESPACE = "bench-hooks"
GOAL_RATIO = 1.2


class SleepingReceiver:
    """A webhook receiver on 127.0.0.1 that answers each POST with 200 after `sleep` seconds (sooner when closed).
    `posts` counts the POSTs it received, `most_at_once` the most it held at one time."""

    def __init__(self, sleep: float):
        self.posts, self.holding, self.most_at_once = 0, 0, 0
        self._closing = threading.Event()
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    receiver.posts += 1
                    receiver.holding += 1
                    receiver.most_at_once = max(receiver.most_at_once, receiver.holding)
                try:
                    receiver._closing.wait(sleep)
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender gave up (its read timeout) and closed the connection
                finally:
                    with lock:
                        receiver.holding -= 1

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Answer whatever is held at once and stop serving."""
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()


def _sql(database_url: str, query: str, params=()) -> list[tuple]:
    import psycopg

    with psycopg.connect(database_url, connect_timeout=10) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def _deliveries(database_url: str) -> dict[str, int]:
    """Webhook deliveries by status, and their attempts in total."""
    rows = _sql(database_url, "SELECT status, count(*), coalesce(sum(attempts), 0) FROM scheduling_webhookdelivery "
                              "GROUP BY status")
    out = {status: n for status, n, _ in rows}
    out["attempts"] = sum(a for *_, a in rows)
    return out


def _quiesce(stack: FaultStack, session: requests.Session, sub_id: int, active: bool) -> None:
    """Set the subscription's `active`, fail every pending delivery (their queued tasks find them done and return),
    then wait for the webhook worker's attempts under way to time out: the side starts with that worker idle."""
    r = session.patch(f"{stack.base_url}/api/v1/webhooks/{sub_id}/", json={"active": active}, timeout=30)
    assert r.status_code == 200, (r.status_code, r.text[:300])
    if not active:
        _sql(stack.env["DATABASE_URL"], "UPDATE scheduling_webhookdelivery SET status = 'Failed', "
                                        "last_error = 'bench: cleared between sides' WHERE status = 'Pending'")
    time.sleep(6)  # > one attempt's 5 s read timeout


def _settle_pods(api, want: int, timeout: float = 180) -> None:
    """Wait until the namespace holds `want` pods (earlier rounds' pods created by the Job controller)."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(core.list_namespaced_pod(NAMESPACE).items) >= want:
            return
        time.sleep(1)
    log(f"pods: fewer than {want} after {timeout:.0f} s; going on")


def _round(stack: FaultStack, client: Client, tag: str, jobs: int, timeout: float = 300) -> dict:
    """Bulk-submit `jobs` jobs; wait until every one recorded Dispatched. Returns the side's figures."""
    db = stack.env["DATABASE_URL"]
    t0 = datetime.now(UTC)
    submitted = client.bulk([f"{tag}-{i}" for i in range(jobs)], NAMESPACE, "fault-long")
    ids = [j["id"] for j in submitted]
    deadline = time.monotonic() + timeout
    while True:
        rows = _sql(db, "SELECT recorded_at FROM scheduling_phasetransition WHERE phase = 'Dispatched' "
                        "AND job_id = ANY(%s)", (ids,))
        if len(rows) == len(ids):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{tag}: only {len(rows)} of {len(ids)} jobs dispatched after {timeout:.0f} s")
        time.sleep(0.25)
    done = [(r[0] - t0).total_seconds() for r in rows]
    return {"seconds": round(max(done), 2), "dispatched_p50_s": round(percentile(done, 50), 2)}


def _pair(stack, client, session, sub_id, receiver, api, jobs, index, slow_first, made, scan_now=False) -> dict:
    """One round: both sides, in the given order. `made` counts the jobs submitted so far (for the pods).
    `scan_now`: before the slow side, run one outbox scan in a process of its own, so its deliveries are queued
    even when beat's scans expire unstarted behind a busy worker (the shared control)."""
    out = {"first": "slow" if slow_first else "none"}
    for side in (("slow", "none") if slow_first else ("none", "slow")):
        _settle_pods(api, made[0] * 2)
        _quiesce(stack, session, sub_id, active=side == "slow")
        if side == "slow" and scan_now:
            stack.manage_output([sys.executable, "manage.py", "shell", "-c",
                                 "from scheduling import tasks; tasks.notify_transitions()"])
        posts0, before = receiver.posts, _deliveries(stack.env["DATABASE_URL"])
        figures = _round(stack, client, f"r{index}-{side}", jobs)
        made[0] += jobs
        after = _deliveries(stack.env["DATABASE_URL"])
        figures["receiver_posts"] = receiver.posts - posts0
        figures["delivery_attempts"] = after["attempts"] - before["attempts"]
        figures["deliveries_pending_at_end"] = after.get("Pending", 0)
        out[side] = figures
        log(f"round {index} {side}: {figures}")
    out["ratio"] = ratio(out["slow"]["seconds"], out["none"]["seconds"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sleep", type=float, default=30, help="seconds the receiver sleeps before answering")
    parser.add_argument("--no-shared-control", action="store_true",
                        help="skip the control pair on one worker consuming both queues")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)

    receiver = SleepingReceiver(args.sleep)
    workdir = Path(tempfile.mkdtemp(prefix="gangweb-bench-webhooks-"))
    try:
        with FaultStack(workdir) as stack:
            stack.env.update({"GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES": "1"})
            stack.start(worker_concurrency=2, resync_seconds=30)
            stack.start_worker(2, name="webhooks", loglevel="INFO", queues="webhooks")
            api = stack.cluster.api_client()
            create_namespace(api, NAMESPACE)
            stack.allow_namespace(NAMESPACE)
            client = Client(stack.base_url, stack.token)
            session = requests.Session()
            session.auth = ("faults", stack.password)  # webhooks are managed with a password, not a token
            r = session.post(f"{stack.base_url}/api/v1/webhooks/", json={"name": "sleeper", "url": receiver.url},
                             timeout=30)
            assert r.status_code == 201, (r.status_code, r.text[:300])
            sub_id = r.json()["id"]
            made = [0]
            # Warm-up, untimed: a freshly started control plane, worker and web are slow at first.
            log("warm-up round")
            _pair(stack, client, session, sub_id, receiver, api, args.jobs, 0, False, made)
            rounds = [_pair(stack, client, session, sub_id, receiver, api, args.jobs, i + 1, i % 2 == 1, made)
                      for i in range(args.rounds)]
            none_s = sum(r["none"]["seconds"] for r in rounds)
            slow_s = sum(r["slow"]["seconds"] for r in rounds)
            result = {
                "jobs_per_side": args.jobs, "pods_per_job": 2, "receiver_sleep_s": args.sleep,
                "layout": "reconcile worker -Q celery (2 processes) + webhook worker -Q webhooks (2 processes)",
                "rounds": rounds, "none_seconds": round(none_s, 2), "slow_seconds": round(slow_s, 2),
                "ratio": ratio(slow_s, none_s), "goal_ratio_max": GOAL_RATIO,
                "ok": ratio(slow_s, none_s) <= GOAL_RATIO and all(r["slow"]["receiver_posts"] > 0 for r in rounds),
            }
            if not args.no_shared_control:
                log("control: one worker consuming both queues (the layout before the webhook queue)")
                stack.stop("webhooks")
                stack.stop("worker")
                stack.start_worker(2, name="shared", loglevel="INFO", queues="celery,webhooks")
                result["shared_control"] = _pair(stack, client, session, sub_id, receiver, api, args.jobs,
                                                 args.rounds + 1, False, made, scan_now=True)
            result["receiver_posts_total"] = receiver.posts
            result["receiver_most_held_at_once"] = receiver.most_at_once
    finally:
        receiver.close()
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
