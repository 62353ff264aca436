"""The watcher alone against a recorded stream of pod events (issue 36 item 5): lag from an event to gangweb's
recorded state at >= 500 updates/s, without an API server sharing the CPU.

    python -m bench.run_all --only watch_replay

The watch churn benchmark (bench/watch_churn.py) cannot reach 500 updates/s here: its PATCHes go through the API
server on the same 2 cores (76-145/s). This one records the stream once and replays it:

1. **Record** (on a fresh local control plane): `jobs` running gangs of 8 pods, set up as the churn benchmark does
   (bulk submit, worker, watcher until every job is recorded Running; then the watcher process is stopped). The
   LIST of every kind the watcher watches (pods, batch Jobs, the cluster's gang kinds; label selector of gangweb's
   instance) is saved, then a pod watch from the LIST's resourceVersion saves every event's JSON line as the API
   server sent it while `bench.churn` flips containers for `record_seconds` (gzip, in the run's directory).
2. **Replay**, per rate in `rates`: a `ClusterWatcher` made as `reconcile.watching.watcher_for` makes it (the real
   `observe_job`, `GANGWEB_WATCH_OBSERVERS` observer threads, PostgreSQL) but fed from the file instead of the
   server: the saved LISTs (`apply_list`; the first observation round is waited out), then the events, each due at
   start + i / rate (the recording looped as often as needed), parsed as the watch parses them
   (`cluster_watcher._DictWatch.unmarshal_event`) and applied (`apply_event`) by one thread of this process.

**Lag** per event: from its due time (when it would have arrived from the server) to the end of the observation
that recorded it: the job's snapshot for `observe_job` is taken under the same lock as the events are applied, so
the events applied before it are exactly those it includes, and the observation's end is the commit of the job's
row. p50/p99/max over every event; events whose job was never observed again count as lost. At the end every job
row's pods are checked against the watcher's cache (each pod's `reason` as the API shows it). Goal: p99 <= 2 s at
>= 500 updates/s (the rate reached is what the replay thread applied per second, not what was asked).
"""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
import time

import urllib3

from . import cpu
from .common import latency_summary, load_average, logged_in_session, reset_client_limits, reset_jobs
from .stack import REPO, log

GOAL_P99_S = 2.0
GOAL_RATE = 500
RATES = (500, 1000)
DRAIN_TIMEOUT = 120


def _replay_watcher_class():
    from scheduling.kube.refs import POD
    from scheduling.reconcile.cluster_watcher import ClusterWatcher, job_uid_of

    class ReplayWatcher(ClusterWatcher):
        """A ClusterWatcher fed by `feed` (no API server): it notes, per job, the events applied since the job's
        last snapshot, and hands them to the observation that snapshot starts (`taken`, per thread)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.replay_lock = threading.Lock()
            self.pending: dict[str, list[float]] = {}
            self.local = threading.local()

        def feed(self, etype: str, obj: dict, due: float) -> None:
            with self.replay_lock:
                uid = job_uid_of(obj)
                if uid:
                    self.pending.setdefault(uid, []).append(due)
                self.apply_event(POD, etype, obj)

        def objects_of(self, job_uid: str):
            with self.replay_lock:
                objects = super().objects_of(job_uid)
                self.local.taken = self.pending.pop(job_uid, [])
            return objects

        def idle(self) -> bool:
            with self._lock:
                busy = bool(self._dirty) or (self._work is not None and self._work.unfinished_tasks > 0)
            return not busy

    return ReplayWatcher


def record(stack, base_url: str, jobs: int, seconds: float, rate: int) -> dict:
    """Step 1 (module docstring): returns {"path", "lists", "events", "seconds", "cluster_pk", "ids"}."""
    from kubernetes import client

    from scheduling.kube.refs import NODE, POD
    from scheduling.reconcile import watching
    from scheduling.reconcile.cluster_watcher import _DictWatch, resource_label

    from . import watch_churn
    from .common import bench_fixtures

    user = bench_fixtures()[0]
    if "worker" not in stack.procs:
        stack.start_worker()
    cluster, queue, version, api = watch_churn.setup(stack, jobs)
    watch_churn.start_watcher(stack)
    session = logged_in_session(base_url, user)
    ids, _ = watch_churn.submit_and_wait_running(session, base_url, version, queue, cluster, jobs)
    stack.stop(watch_churn.WATCH_PROCESS)
    pods = watch_churn.pods_by_job(api, ids)
    probe = watching.watcher_for(cluster, api=api)  # never started: its kinds, list calls and selector
    path = stack.workdir / "watch-stream.jsonl.gz"
    lists, pod_rv = {}, ""
    with gzip.open(path, "wt") as out:
        for ref in [k for k in probe.kinds if k != NODE]:
            fn, args = probe._list_call(ref)
            try:
                body = json.loads(fn(*args, label_selector=probe.selector, _preload_content=False,
                                     _request_timeout=(5, 60)).data)
            except client.exceptions.ApiException as exc:
                if exc.status == 404:
                    continue
                raise
            lists[resource_label(ref)] = len(body.get("items") or [])
            out.write(json.dumps({"list": [ref.api_version, ref.kind, ref.plural, ref.namespaced],
                                  "items": body.get("items") or []}) + "\n")
            if ref == POD:
                pod_rv = body["metadata"]["resourceVersion"]
        lines: list[str] = []

        class Recording(_DictWatch):
            def unmarshal_event(self, data, return_type):
                lines.append(data)
                return super().unmarshal_event(data, return_type)

        stop = threading.Event()
        stream = Recording()

        def watch_pods():
            fn, args = probe._list_call(POD)
            try:
                for _ in stream.stream(fn, *args, label_selector=probe.selector, resource_version=pod_rv,
                                       timeout_seconds=int(seconds) + 30, _request_timeout=(5, seconds + 60)):
                    if stop.is_set():
                        break
            except urllib3.exceptions.HTTPError:
                if not stop.is_set():  # cut by `stream.stop()` at the end: the recording is complete
                    raise

        watcher = threading.Thread(target=watch_pods, daemon=True)
        watcher.start()
        churn_pods = [p for ps in pods.values() for p in ps]
        config = stack.workdir / "replay-churn.json"
        config.write_text(json.dumps({"kubeconfig": str(stack.cluster.kubeconfig), "pods": churn_pods,
                                      "rate": rate, "threads": 24, "seconds": seconds}))
        t0 = time.monotonic()
        churn = subprocess.run([sys.executable, "-m", "bench.churn", str(config)], cwd=REPO, capture_output=True,
                               text=True, timeout=seconds + 300)
        settled = time.monotonic() + 30  # the last events: until none came for 2 s (a loaded server's watch lags)
        seen = -1
        while len(lines) != seen and time.monotonic() < settled:
            seen = len(lines)
            time.sleep(2)
        stop.set()
        stream.stop()
        took = time.monotonic() - t0
        for line in list(lines):
            if json.loads(line).get("type") in ("MODIFIED", "ADDED", "DELETED"):
                out.write(json.dumps({"event": line}) + "\n")
    events = sum(1 for line in lines if json.loads(line).get("type") == "MODIFIED")
    summary = churn.stdout.strip().splitlines()[-1] if churn.stdout.strip() else churn.stderr[-500:]
    log(f"watch replay: recorded {events} pod events in {took:.0f} s ({path.stat().st_size // 1024} KiB gzip); "
        f"churn: {summary}")
    return {"path": path, "lists": lists, "events": events, "seconds": round(took, 1), "cluster_pk": cluster.pk,
            "ids": ids, "churn": summary}


def load(path) -> tuple[list[tuple], list[str]]:
    """The recording: ([(ObjectRef, items)], [event JSON lines])."""
    from scheduling.kube.refs import ObjectRef

    lists, events = [], []
    with gzip.open(path, "rt") as f:
        for line in f:
            entry = json.loads(line)
            if "list" in entry:
                lists.append((ObjectRef(*entry["list"]), entry["items"]))
            else:
                events.append(entry["event"])
    return lists, events


def replay(cluster, lists, events: list[str], rate: float, seconds: float) -> dict:
    """Step 2 at one rate; returns its figures."""
    import copy

    from django.conf import settings

    from scheduling.observe import metrics
    from scheduling.reconcile import watching
    from scheduling.reconcile.cluster_watcher import _DictWatch

    lags: list[float] = []
    lost = [0]
    observations = [0]

    def on_change(job_uid, objects, deleted):
        taken = getattr(watcher.local, "taken", [])
        watcher.local.taken = []
        try:
            again = watching.observe_job(job_uid, objects, deleted)
        except Exception:
            lost[0] += len(taken)  # never recorded by this observation; the dispatcher logs the error
            raise
        done = time.monotonic()
        lags.extend(done - due for due in taken)
        observations[0] += 1  # under the GIL; a lost count of one would not matter here
        return again

    cls = _replay_watcher_class()
    watcher = cls(cluster.name, None, watching.gang_kinds(cluster), settings.GANGWEB_INSTANCE, on_change,
                  on_exit=watching.close_thread_connections, finished_with=watching.finished_with,
                  observers=watching.observers())
    for ref, items in lists:
        watcher.apply_list(ref, copy.deepcopy(items))
    watcher.start_dispatch()
    deadline = time.monotonic() + DRAIN_TIMEOUT
    while not watcher.idle() and time.monotonic() < deadline:
        time.sleep(0.2)
    lags.clear()
    observations[0] = lost[0] = 0
    parser = _DictWatch()
    count = int(rate * seconds)
    load0, busy0, cpu0 = load_average(), cpu.machine(), time.process_time()
    start = time.monotonic() + 0.1
    behind = 0.0
    for i in range(count):
        due = start + i / rate
        ahead = due - time.monotonic()
        if ahead > 0.001:
            time.sleep(ahead)
        else:
            behind = max(behind, -ahead)
        event = parser.unmarshal_event(events[i % len(events)], None)
        metrics.WATCH_EVENTS.labels(cluster.name, "pods", event.get("type") or "").inc()
        watcher.feed(event["type"], event["object"], due)
    fed = time.monotonic() - start
    deadline = time.monotonic() + DRAIN_TIMEOUT
    while (watcher.pending or not watcher.idle()) and time.monotonic() < deadline:
        time.sleep(0.1)
    drained = time.monotonic() - start
    busy1, cpu1 = cpu.machine(), time.process_time()
    lost[0] += sum(len(v) for v in watcher.pending.values())
    mismatches = _check_rows(watcher)
    watcher.stop()
    summary = latency_summary(lags)
    total = busy1[1] - busy0[1]
    reached = round(count / fed, 1) if fed else 0.0
    return {"rate_asked": rate, "rate_reached": reached, "events": count, "feed_seconds": round(fed, 2),
            "drain_seconds": round(drained, 2), "most_behind_s": round(behind, 3),
            "lag": {"n": summary["n"], "p50_s": round(summary["p50_ms"] / 1000, 3),
                    "p99_s": round(summary["p99_ms"] / 1000, 3) if summary["p99_ms"] is not None else None,
                    "max_s": round(summary["max_ms"] / 1000, 3)},
            "lost": lost[0], "rows_not_matching_cache": mismatches, "observations": observations[0],
            "observations_per_event": round(observations[0] / count, 3) if count else 0.0,
            "process_cpu_pct": round(100 * (cpu1 - cpu0) / drained, 1) if drained else 0.0,
            "cpu_ms_per_event": round(1000 * (cpu1 - cpu0) / count, 3) if count else 0.0,
            "machine_busy_pct": round(100 * (busy1[0] - busy0[0]) / total, 1) if total else 0.0,
            "load_average_before": load0, "load_average_after": load_average(),
            "ok": summary["p99_ms"] is not None and summary["p99_ms"] / 1000 <= GOAL_P99_S
            and reached >= GOAL_RATE and lost[0] == 0 and mismatches == 0}


def expected_reason(pod: dict) -> str:
    """What gangweb's pod row says of a pod whose one container is crash-looping ("CrashLoopBackOff") or running
    (""), from the pod as the watch has it."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    waiting = ((statuses[0].get("state") or {}).get("waiting") or {}) if statuses else {}
    return waiting.get("reason") or ""


def _check_rows(watcher) -> int:
    """Pods whose row in their job's `observed.pods` does not say what the cache's pod says (`expected_reason`)."""
    from scheduling.kube.refs import POD
    from scheduling.models import GangJob
    from scheduling.reconcile.watch_dispatch import _key

    with watcher._lock:
        pods = list(watcher.cache[_key(POD)].values())
    rows = {str(uid): observed for uid, observed in GangJob.objects.values_list("uid", "observed")}
    bad = 0
    for pod in pods:
        uid = ((pod.get("metadata") or {}).get("labels") or {}).get("gangweb.io/job-uid")
        seen = {r.get("name"): (r.get("reason") or "") for r in (rows.get(uid) or {}).get("pods") or []}
        if seen.get(pod["metadata"]["name"]) != expected_reason(pod):
            bad += 1
    return bad


def run(stack, base_url: str, jobs: int = 200, record_seconds: float = 30, seconds: float = 30,
        rates: tuple = RATES, churn_rate: int = 600) -> dict:
    """Record once, replay at each of `rates` for `seconds`; returns the figures (module docstring). Every Cluster
    row's client rate limit is back at the default at the end (the set-up raises it)."""
    from scheduling.models import Cluster

    reset_jobs()
    reset_client_limits()
    try:
        recorded = record(stack, base_url, jobs, record_seconds, churn_rate)
        lists, events = load(recorded["path"])
        if not events:
            raise RuntimeError("the recording has no pod events")
        cluster = Cluster.objects.get(pk=recorded["cluster_pk"])
        runs = []
        for rate in rates:
            log(f"watch replay: {len(events)} recorded events at {rate}/s for {seconds:g} s")
            runs.append(replay(cluster, lists, events, rate, seconds))
            log(f"watch replay at {rate}/s: {runs[-1]['lag']}, reached {runs[-1]['rate_reached']}/s")
    finally:
        reset_client_limits()
    at_goal = next((r for r in runs if r["rate_asked"] == GOAL_RATE), runs[0])
    return {"jobs": jobs, "pods": jobs * 8, "recorded": {k: v for k, v in recorded.items() if k not in ("path", "ids")},
            "recording_kib": recorded["path"].stat().st_size // 1024, "replays": runs, "goal_p99_s": GOAL_P99_S,
            "goal_rate": GOAL_RATE, "ok": at_goal["ok"]}


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    rec = result["recorded"]
    lines = [f"watch replay: {result['jobs']} running gangs ({result['pods']} pods); recorded {rec['events']} pod "
             f"events in {rec['seconds']} s of churn ({result['recording_kib']} KiB gzip), replayed into the "
             f"watcher's handling code without an API server; goal p99 <= {GOAL_P99_S} s at >= {GOAL_RATE}/s"]
    for r in result["replays"]:
        lag = r["lag"]
        lines.append(f"  asked {r['rate_asked']}/s, reached {r['rate_reached']}/s: lag p50 {lag['p50_s']} s p99 "
                     f"{lag['p99_s']} s max {lag['max_s']} s (n={lag['n']}, lost {r['lost']}, rows not matching "
                     f"{r['rows_not_matching_cache']}; {r.get('observations_per_event')} observations per event); "
                     f"process CPU {r['process_cpu_pct']} % ({r['cpu_ms_per_event']} "
                     f"ms/event), machine busy {r['machine_busy_pct']} %, load {r['load_average_before'][0]} -> "
                     f"{r['load_average_after'][0]}  {'OK' if r['ok'] else 'BELOW GOAL'}")
    return lines
