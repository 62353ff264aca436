"""The frozen-cluster benchmark (issue 18, part 3): one cluster's API server stopped must not slow another's jobs.

    python -m bench.frozen_cluster [--jobs 100] [--frozen-jobs 10] [--freeze-seconds 60] [--layouts pools,shared]

A private gangweb (`bench.faultstack.FaultStack`: PostgreSQL from initdb, Redis, gunicorn, beat with a 15-s
resync, the watcher) with **two local control planes** registered as two clusters: "local" (healthy) and "frozen",
pinned to shard queues 0 and 1 (scheduling/work/routing.py). Per worker layout:

- ``pools``: the production layout (docs/operations.md, "Per-cluster work queues"): worker A consumes the default
  queue and shard 0 (`-Q celery`, GANGWEB_WORKER_SHARDS=0), worker B only shard 1 (`-Q reconcile.1`); `--concurrency`
  processes each;
- ``shared``: one worker consuming everything (`-Q celery`, every shard: what `make run` runs), `--concurrency`
  processes, for contrast.

Rounds, in one run and one stack, side by side: an untimed warm-up; **healthy**: `--frozen-jobs` single submits to
"frozen", then one bulk submit of `--jobs` jobs to "local", timed from the bulk request until the last of them is
Dispatched (its PhaseTransition); **frozen**: the same with "frozen"'s kube-apiserver SIGSTOPped first (its jobs'
tasks hang on reads until the client's timeouts) and kept stopped `--freeze-seconds` in all, then SIGCONT; the
frozen cluster's jobs (of every round) must then converge (one live set of objects each, `faultstack.census`), timed
from SIGCONT. The figure of the issue is the ratio of the healthy cluster's dispatch rate in the frozen round to
the healthy round (1.0: not slowed at all). A second healthy round after recovery brackets it against the
machine's load drifting.

Prints the figures as JSON (and writes them to `--json`). Needs the control plane's binaries (`make
localcluster-build`) and PostgreSQL/Redis installed; starts everything it uses on free ports and stops it.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

from .faultstack import Client, FaultStack, create_namespace, settle
from .stack import log, wait_for

TEMPLATE = "fault-long"  # pods that stay Running: a round's jobs stay live, no cleanup work in later rounds
HEALTHY, FROZEN = "local", "frozen"
SHARDS = {HEALTHY: 0, FROZEN: 1}
PAST_SUBMITTED = ("Dispatched", "Queued", "Scheduled", "Running")
AFTER_SUBMITTED = (*PAST_SUBMITTED, "Succeeded", "Failed", "Cancelled")


def register(kubeconfig_path: str) -> None:
    """(In the stack's environment.) Register the second control plane as cluster "frozen" in queue "default" and
    pin both clusters to their shards (SHARDS)."""
    import django

    django.setup()
    from scheduling.models import Cluster, QueuePolicy
    from scheduling.reconcile import probe

    frozen, _ = Cluster.objects.update_or_create(name=FROZEN, defaults={
        "kubeconfig": Path(kubeconfig_path).read_text(), "context": "", "in_cluster": False})
    for name, shard in SHARDS.items():
        Cluster.objects.filter(name=name).update(work_shard=shard)
    QueuePolicy.objects.get(name="default").clusters.add(frozen)
    probe.probe_cluster(Cluster.objects.get(pk=frozen.pk))  # its served APIs: which backend a submit gets


def dispatch_times(namespace: str) -> None:
    """(In the stack's environment.) Print {job name: [created_at, first transition after Submitted]} (epoch
    seconds, None when not yet; the first is Dispatched unless a pass went further at once) of the jobs of
    `namespace`, as JSON."""
    import django

    django.setup()
    from django.db.models import Min, Q

    from scheduling.models import GangJob

    rows = (GangJob.objects.filter(namespace=namespace)
            .annotate(dispatched=Min("transitions__at", filter=Q(transitions__phase__in=AFTER_SUBMITTED)))
            .values_list("name", "created_at", "dispatched"))
    print(json.dumps({name: [created.timestamp(), dispatched.timestamp() if dispatched else None]
                      for name, created, dispatched in rows}))


class Bench:
    """One run: the stack, the second control plane, the API clients and namespaces per round."""

    def __init__(self, stack: FaultStack, second, args):
        self.stack, self.second, self.args = stack, second, args
        self.client = Client(stack.base_url, stack.token, retry_seconds=60)
        self.kube = {HEALTHY: stack.cluster.api_client(), FROZEN: second.api_client()}
        # One client per namespace of "frozen": a census compares a namespace's jobs with its client's 201s.
        self.frozen_clients: dict[str, Client] = {}
        self._prepared: list[str] = []

    # --- setup ---------------------------------------------------------------------------------------------------
    def namespace(self, cluster: str, tag: str) -> str:
        """A fresh namespace in `cluster` for one round, allowed to queue "default"."""
        name = f"fz-{tag}-{uuid.uuid4().hex[:6]}"
        create_namespace(self.kube[cluster], name)
        self.stack.allow_namespace(name)
        if cluster == FROZEN:
            self.frozen_clients[name] = Client(self.stack.base_url, self.stack.token, retry_seconds=60)
        return name

    def start_workers(self, layout: str) -> list[str]:
        """Start the Celery workers of `layout` ("pools" or "shared"); return their process names."""
        c = self.args.concurrency
        env = self.stack.env
        if layout == "pools":
            env["GANGWEB_WORKER_SHARDS"] = str(SHARDS[HEALTHY])
            self.stack.start_worker(c, name="worker-a", loglevel="INFO", queues="celery")
            env["GANGWEB_WORKER_SHARDS"] = ""
            self.stack.start_worker(c, name="worker-b", loglevel="INFO", queues=f"reconcile.{SHARDS[FROZEN]}")
            names = ["worker-a", "worker-b"]
        else:
            env["GANGWEB_WORKER_SHARDS"] = ""
            self.stack.start_worker(c, name="worker-shared", loglevel="INFO", queues="celery")
            names = ["worker-shared"]
        for name in names:
            self.stack.wait_for_process(name, lambda n=name: "ready." in self.stack.log_text(n), f"{name}")
        return names

    # --- submits and waits ---------------------------------------------------------------------------------------
    def submit_frozen(self, namespace: str, count: int) -> list[threading.Thread]:
        """Single submits of `count` jobs to cluster "frozen" from a thread each (a hung cluster never holds up
        the bench's own timing); returns the threads."""
        client = self.frozen_clients[namespace]

        def one(i):
            key = uuid.uuid4().hex
            body = {"name": f"f-{i}", "namespace": namespace, "template": TEMPLATE, "queue": "default",
                    "cluster": FROZEN}
            r = client.request("POST", "/api/v1/jobs/", json=body, headers={"Idempotency-Key": key})
            assert r.status_code == 201, (r.status_code, r.text[:300])
            client.accepted[key] = r.json()

        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(count)]
        for t in threads:
            t.start()
        return threads

    def wait_dispatched(self, client: Client, namespace: str, count: int, timeout: float) -> None:
        """Wait until `count` jobs of `namespace` are past Submitted."""
        def done():
            jobs = client.jobs(namespace)
            return len(jobs) == count and all(j["phase"] in PAST_SUBMITTED for j in jobs)

        wait_for(done, timeout, f"{count} jobs of {namespace} past Submitted", interval=0.5)

    def times(self, namespace: str) -> dict[str, list]:
        """{job name: [created, dispatched]} epoch seconds (dispatch_times, run in the stack's environment)."""
        return json.loads(self.stack.manage_output([sys.executable, "-m", "bench.frozen_cluster", "times",
                                                    namespace]))

    def healthy_round(self, tag: str) -> dict:
        """Submit --jobs to "local" in one bulk request; return its figures (jobs/s, p50/p99 to Dispatched)."""
        namespace = self.namespace(HEALTHY, tag)
        started = time.time()
        self.client.bulk([f"j-{i}" for i in range(self.args.jobs)], namespace, TEMPLATE)
        answered = time.time() - started
        self.wait_dispatched(self.client, namespace, self.args.jobs, self.args.timeout)
        rows = self.times(namespace)
        waits = sorted(d - started for _, d in rows.values())
        last = waits[-1]
        return {"jobs": len(rows), "bulk_answered_s": round(answered, 2), "last_dispatched_s": round(last, 2),
                "jobs_per_s": round(len(rows) / last, 2), "p50_s": round(statistics.median(waits), 2),
                "p99_s": round(waits[max(0, int(len(waits) * 0.99) - 1)], 2)}

    def warm_up(self) -> None:
        """An untimed round of 10 + 2 jobs: imports, connections, the first LISTs."""
        ns_a, ns_b = self.namespace(HEALTHY, "warm"), self.namespace(FROZEN, "warm")
        for t in self.submit_frozen(ns_b, 2):
            t.join(120)
        self.client.bulk([f"w-{i}" for i in range(10)], ns_a, TEMPLATE)
        self.wait_dispatched(self.client, ns_a, 10, self.args.timeout)
        self.wait_dispatched(self.frozen_clients[ns_b], ns_b, 2, self.args.timeout)

    def run_layout(self, layout: str) -> dict:
        """Warm-up, healthy round, frozen round (+ convergence after SIGCONT), healthy round again."""
        workers = self.start_workers(layout)
        out: dict = {"layout": layout, "workers": workers}
        try:
            self.warm_up()
            ns = self.namespace(FROZEN, "h1")
            threads = self.submit_frozen(ns, self.args.frozen_jobs)
            out["healthy"] = self.healthy_round("h1")
            for t in threads:
                t.join(120)
            self.wait_dispatched(self.frozen_clients[ns], ns, self.args.frozen_jobs, self.args.timeout)

            pid = next(p.pid for p in self.second.state.processes if p.name == "kube-apiserver")
            frozen_at = time.monotonic()
            os.kill(pid, signal.SIGSTOP)
            log(f"{layout}: kube-apiserver of '{FROZEN}' stopped")
            try:
                threads = self.submit_frozen(self.namespace_when_frozen(), self.args.frozen_jobs)
                time.sleep(2)  # their tasks reach the workers first and hang on the stopped server
                out["frozen"] = self.healthy_round("fr")
                out["frozen"]["submitted_while_frozen_s"] = round(time.monotonic() - frozen_at, 1)
            finally:
                left = self.args.freeze_seconds - (time.monotonic() - frozen_at)
                if left > 0:
                    time.sleep(left)
                os.kill(pid, signal.SIGCONT)
            out["frozen_for_s"] = round(time.monotonic() - frozen_at, 1)
            resumed = time.monotonic()
            log(f"{layout}: kube-apiserver of '{FROZEN}' continued")
            for t in threads:
                t.join(120)
            result = self.converge()
            out["frozen_converged_s"] = round(time.monotonic() - resumed, 1)
            out["frozen_census"] = result
            out["healthy_after"] = self.healthy_round("h2")
            base = statistics.mean([out["healthy"]["jobs_per_s"], out["healthy_after"]["jobs_per_s"]])
            out["ratio_frozen_to_healthy"] = round(out["frozen"]["jobs_per_s"] / out["healthy"]["jobs_per_s"], 2)
            out["ratio_frozen_to_both_healthy_rounds"] = round(out["frozen"]["jobs_per_s"] / base, 2)
        finally:
            for name in workers:
                self.stack.stop(name)
        return out

    def namespace_when_frozen(self) -> str:
        """A namespace in "frozen" for the frozen round, made before its API server stopped (none can be made
        while it is stopped): `prepare_frozen_namespaces`."""
        return self._prepared.pop()

    def prepare_frozen_namespaces(self, count: int) -> None:
        """Create `count` namespaces in "frozen" now (none can be created while it is stopped)."""
        self._prepared = [self.namespace(FROZEN, "fr") for _ in range(count)]

    def converge(self) -> dict:
        """Wait until every job submitted to "frozen" has its one live set of objects; return the census."""
        summary = {}
        for namespace, client in self.frozen_clients.items():
            result = settle(client, self.kube[FROZEN], namespace, self.args.timeout,
                            want=lambda j: j["phase"] in PAST_SUBMITTED)
            summary[namespace] = {"phases": dict(result.phases), "problems": result.problems[:5]}
        return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100, help="jobs per round to the healthy cluster (default 100)")
    parser.add_argument("--frozen-jobs", type=int, default=10, help="jobs per round to the frozen one (default 10)")
    parser.add_argument("--freeze-seconds", type=float, default=60.0, help="SIGSTOP duration (default 60)")
    parser.add_argument("--concurrency", type=int, default=2, help="processes per Celery worker (default 2)")
    parser.add_argument("--layouts", default="pools,shared", help="pools, shared or both (default both)")
    parser.add_argument("--timeout", type=float, default=300.0, help="longest wait for a round (s)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)

    import localcluster

    workdir = Path(tempfile.mkdtemp(prefix="gangweb-frozen-"))
    figures: dict = {"started": datetime.utcnow().isoformat(timespec="seconds") + "Z", "jobs": args.jobs,
                     "frozen_jobs": args.frozen_jobs, "freeze_seconds": args.freeze_seconds,
                     "concurrency": args.concurrency, "load_before": os.getloadavg()[0], "layouts": []}
    with FaultStack(workdir) as stack:
        stack.start(worker_concurrency=args.concurrency, resync_seconds=15, workers=0)
        second_dir = workdir / "localcluster-frozen"
        log("starting the second control plane")
        second = localcluster.up(localcluster.ClusterConfig(state_dir=second_dir))
        try:
            stack.manage_output([sys.executable, "-m", "bench.frozen_cluster", "register", str(second.kubeconfig)])
            bench = Bench(stack, second, args)
            for layout in [x.strip() for x in args.layouts.split(",") if x.strip()]:
                bench.prepare_frozen_namespaces(1)
                log(f"layout {layout}")
                figures["layouts"].append(bench.run_layout(layout))
                log(json.dumps(figures["layouts"][-1]))
        finally:
            localcluster.down(second_dir)
    figures["load_after"] = os.getloadavg()[0]
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["register"]:
    register(sys.argv[2])
elif __name__ == "__main__" and sys.argv[1:2] == ["times"]:
    dispatch_times(sys.argv[2])
elif __name__ == "__main__":
    sys.exit(main())
