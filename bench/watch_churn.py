"""Benchmark 6 (issue 23 part 2): does the watch keep up with pod churn?

    python -m bench.watch_churn [--minutes 10]      # standalone: starts its stack like run_all --only watch_churn
    python -m bench.run_all --only watch_churn       # the same, 2 minutes of churn (make bench runs it too)

Set-up, on a fresh local control plane: extra kwok nodes so every pod fits, 200 jobs of 8 pods (k8s-workload, 10m
CPU each) bulk-submitted over HTTP, dispatched by the Celery worker and recorded Running by the watcher
(`manage.py watch_clusters`, a process of its own, as deployed, with its Prometheus samples in a directory of the
run). Then `bench.churn` (another process) writes pod status updates at `rate` per second for the whole run:
container restarts (CrashLoopBackOff, then running again) spread over all pods but the probes' (below). Each
update changes what gangweb's API shows of the pod (its row in `observed.pods`, field `reason`), so every one is
work the watcher must pass on.

Measured over the window (after `WARMUP_SECONDS` of churn):

- **Lag**: probe threads (`PROBES`) each own a few probe pods (the first pod of 8 of the jobs; churn never touches
  them) and in turn flip one the same way, then poll `GET /api/v1/jobs/<id>/` every `POLL_SECONDS` until its row
  shows the new reason. Lag = from the PATCH's answer (the API server has stored the change) to the answer of the
  first GET showing it: an upper bound (it includes up to one poll interval and one GET). p50, p99, max; goal p99
  <= 2 s at >= 500 updates/s.
- **Rate achieved**: pod MODIFIED events the watcher received per second (its `gangweb_watch_events_total`), and
  the churn process's own count of accepted PATCHes.
- **Watcher CPU and RSS**: /proc of the watch process, sampled every `SAMPLE_SECONDS`: CPU as % of one core over
  the window and ms per update; RSS at the window's start and end, min/max, and the slope over the window (MiB
  per minute, least squares): flat means the slope is within noise. Run with `--minutes 10` for the RSS verdict.
- **Work per update**: job observations (`gangweb_watch_observations_total`) and job-row writes (PostgreSQL's
  `n_tup_upd` of the jobs table: only the watcher writes jobs meanwhile) per pod update, and timeline rows written
  (none expected: the jobs stay Running). Coalescing shows as < 1 observation per update.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .common import allow_namespaces, ensure_namespace, logged_in_session, percentile, reset_jobs
from .stack import REPO, log

TEMPLATE = "bench-churn"
NAMESPACE = "bench-churn"
PODS_PER_JOB = 8
PROBE_JOBS = 8
PROBES = 2
POLL_SECONDS = 0.1
PROBE_TIMEOUT = 30.0
WARMUP_SECONDS = 10
SAMPLE_SECONDS = 5
CHURN_THREADS = 24
GOAL_P99_S = 2.0
GOAL_RATE = 500
NODE_PODS = 500  # pods per extra kwok node
WATCH_PROCESS = "watch-churn"


def template_spec(replicas: int = PODS_PER_JOB) -> dict:
    """`replicas` pods of 10m CPU / 16Mi that run until deleted (no kwok exit annotation)."""
    return {
        "backend": "k8s-workload",
        "gang": {"scheduleTimeoutSeconds": 60},
        "podSets": [{"name": "worker", "replicas": replicas, "template": {"metadata": {}, "spec": {"containers": [{
            "name": "main", "image": "registry.example/train:1",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}],
        "overridable": [],
    }


def setup(stack, jobs: int):
    """A fresh control plane with room for `jobs` x 8 pods, registered as Cluster "local" (its client rate limit
    raised: the dispatch of the set-up is not what is measured), the template and namespace. Returns
    (cluster, queue, version, api)."""
    from django.contrib.auth import get_user_model

    from scheduling.kube import client as kube_client
    from scheduling.models import Cluster, QueuePolicy, RuntimeTemplateVersion
    from scheduling.services.clusters import local as local_cluster
    from scheduling.services.templates import versions as template_versions

    stack.restart_cluster()
    extra = max(0, -(-(jobs * PODS_PER_JOB + 100 - 4 * 110) // NODE_PODS))  # the 4 default nodes take 110 each
    for i in range(extra):
        stack.cluster.add_node(f"churn-{i}", pods=NODE_PODS, gpus=0)
    cluster = local_cluster.register(stack.cluster.kubeconfig)
    Cluster.objects.filter(pk=cluster.pk).update(api_qps=2000, api_burst=4000)
    cluster.refresh_from_db()
    queue = QueuePolicy.objects.get(name=local_cluster.DEFAULT_QUEUE)
    allow_namespaces([queue], [NAMESPACE])
    version = RuntimeTemplateVersion.objects.filter(template__name=TEMPLATE).order_by("-version").first()
    if version is None:
        user = get_user_model().objects.filter(is_superuser=True).first()
        version = template_versions.create_template(user, TEMPLATE, "watch churn benchmark", template_spec())
    api = kube_client.build_client(cluster)
    ensure_namespace(api, NAMESPACE)
    return cluster, queue, version, api


def start_watcher(stack) -> Path:
    """Start `manage.py watch_clusters` with its Prometheus samples in a fresh directory; return the directory."""
    prom = Path(tempfile.mkdtemp(prefix="prom-watch-", dir=stack.workdir))
    saved = dict(stack.env)
    stack.env = {**saved, "PROMETHEUS_MULTIPROC_DIR": str(prom)}
    try:
        stack.start_watch(WATCH_PROCESS)
    finally:
        stack.env = saved
    return prom


def submit_and_wait_running(session, base_url: str, version, queue, cluster, jobs: int, timeout: float = 420):
    """Bulk-submit `jobs` jobs and wait until the watcher recorded each Running. Returns (job ids, seconds)."""
    from django.db.models import Count

    from scheduling.choices import GangPhase
    from scheduling.models import GangJob

    t0 = time.monotonic()
    ids = []
    for start in range(0, jobs, 100):
        body = {"jobs": [{"name": f"churn-{i}", "namespace": NAMESPACE, "template": version.template.name,
                          "queue": queue.name, "cluster": cluster.name}
                         for i in range(start, min(jobs, start + 100))]}
        response = session.post(f"{base_url}/api/v1/jobs/bulk/", data=json.dumps(body))
        if response.status_code != 201:
            raise RuntimeError(f"bulk submit -> {response.status_code}: {response.text[:300]}")
        ids += [j["id"] for j in response.json()["jobs"]]
    last_log = 0.0
    while (running := GangJob.objects.filter(pk__in=ids, phase=GangPhase.RUNNING).count()) < len(ids):
        if time.monotonic() - t0 > timeout:
            phases = dict(GangJob.objects.filter(pk__in=ids).values_list("phase").annotate(n=Count("id")).order_by())
            raise RuntimeError(f"only {running} of {len(ids)} jobs Running after {timeout:.0f} s: {phases}")
        if time.monotonic() - last_log > 30:
            log(f"watch churn: {running} of {len(ids)} jobs Running")
            last_log = time.monotonic()
        time.sleep(1)
    return ids, round(time.monotonic() - t0, 1)


def pods_by_job(api, ids: list[int]) -> dict[int, list[list[str]]]:
    """{job id: [[namespace, pod name, container, image], ...] sorted by name} of the benchmark's running pods."""
    from kubernetes import client

    from scheduling.constants import LABEL_JOB_UID
    from scheduling.models import GangJob

    by_uid = {str(uid): pk for pk, uid in GangJob.objects.filter(pk__in=ids).values_list("pk", "uid")}
    body = json.loads(client.CoreV1Api(api).list_namespaced_pod(NAMESPACE, _preload_content=False,
                                                                _request_timeout=60).data)
    out: dict[int, list[list[str]]] = {}
    for pod in body["items"]:
        job = by_uid.get((pod["metadata"].get("labels") or {}).get(LABEL_JOB_UID, ""))
        if job is None or (pod.get("status") or {}).get("phase") != "Running":
            continue
        container = pod["spec"]["containers"][0]
        out.setdefault(job, []).append([NAMESPACE, pod["metadata"]["name"], container["name"], container["image"]])
    for pods in out.values():
        pods.sort(key=lambda p: p[1])
    return out


# ---- what is sampled ---------------------------------------------------------------------------------------------
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (its threads included), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mib(pid: int) -> float:
    """VmRSS of a process, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def watch_metrics(prom: Path) -> dict[str, float]:
    """The watch process's counters: pod MODIFIED events, observations, the delay histogram's sum, count and
    buckets up to 1 and 2 s, and watch restarts (a watch the API server dropped, e.g. for reading too slowly)."""
    from prometheus_client import CollectorRegistry, multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(prom))
    out = {"pod_events": 0.0, "observations": 0.0, "delay_sum": 0.0, "delay_count": 0.0, "delay_le_1": 0.0,
           "delay_le_2": 0.0, "restarts": 0.0}
    for family in registry.collect():
        for s in family.samples:
            if s.name == "gangweb_watch_events_total" and s.labels.get("resource") == "pods" and \
                    s.labels.get("type") == "MODIFIED":
                out["pod_events"] += s.value
            elif s.name == "gangweb_watch_restarts_total":
                out["restarts"] += s.value
            elif s.name == "gangweb_watch_observations_total":
                out["observations"] += s.value
            elif s.name == "gangweb_watch_delay_seconds_sum":
                out["delay_sum"] += s.value
            elif s.name == "gangweb_watch_delay_seconds_count":
                out["delay_count"] += s.value
            elif s.name == "gangweb_watch_delay_seconds_bucket" and s.labels.get("le") in ("1.0", "2.0"):
                out[f"delay_le_{s.labels['le'][0]}"] += s.value
    return out


def table_stats() -> dict[str, int]:
    """PostgreSQL's row counters of the jobs and timeline tables and the database's commits."""
    from django.db import connection

    from scheduling.models import GangJob, PhaseTransition

    with connection.cursor() as cur:
        cur.execute("SELECT relname, n_tup_upd, n_tup_ins FROM pg_stat_user_tables WHERE relname IN (%s, %s)",
                    [GangJob._meta.db_table, PhaseTransition._meta.db_table])
        rows = {name: (upd, ins) for name, upd, ins in cur.fetchall()}
        cur.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        commits = cur.fetchone()[0]
    return {"job_updates": rows.get(GangJob._meta.db_table, (0, 0))[0],
            "timeline_inserts": rows.get(PhaseTransition._meta.db_table, (0, 0))[1], "commits": commits}


def slope_per_minute(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) samples, per minute."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mx = sum(t for t, _ in samples) / n
    my = sum(v for _, v in samples) / n
    var = sum((t - mx) ** 2 for t, _ in samples)
    return sum((t - mx) * (v - my) for t, v in samples) / var * 60 if var else 0.0


# ---- probes --------------------------------------------------------------------------------------------------------
class Probe(threading.Thread):
    """Flips its probe pods in turn and times how long until the job's API answer shows each flip."""

    def __init__(self, base_url: str, user, kubeconfig: str, pods: list[tuple[int, list[str]]], stop: threading.Event):
        super().__init__(daemon=True)
        from . import churn

        self.base_url, self.pods, self.stop_event = base_url, pods, stop
        self.session = logged_in_session(base_url, user)
        self.patcher = churn.Patcher(kubeconfig, 2)
        self.states = {p[1]: churn.PodState(*p) for _, p in pods}
        self.measuring = threading.Event()
        self.lags: list[float] = []
        self.timeouts = 0
        self.gets = 0
        self.error = ""

    def run(self):
        try:
            i = 0
            while not self.stop_event.is_set():
                job_id, pod = self.pods[i % len(self.pods)]
                i += 1
                lag = self.flip(job_id, pod[1])
                if lag is not None and self.measuring.is_set():
                    self.lags.append(lag)
                time.sleep(random.uniform(0.1, 0.3))
        except Exception as exc:  # noqa: BLE001 - reported with the figures
            self.error = f"{type(exc).__name__}: {exc}"

    def flip(self, job_id: int, name: str) -> float | None:
        """One probe: PATCH, then poll the job until the pod's row shows it. Seconds, or None on a timeout."""
        from .churn import CRASH_REASON

        state = self.states[name]
        status, text = self.patcher.patch(state.namespace, name, state.next_patch())
        if status != 200:
            raise RuntimeError(f"probe PATCH of pod {name} -> {status}: {text}")
        acked = time.perf_counter()
        expected = CRASH_REASON if state.crashed else ""
        while True:
            response = self.session.get(f"{self.base_url}/api/v1/jobs/{job_id}/")
            self.gets += 1
            if response.status_code != 200:
                raise RuntimeError(f"GET job {job_id} -> {response.status_code}")
            rows = (response.json().get("observed") or {}).get("pods") or []
            if any(r.get("name") == name and (r.get("reason") or "") == expected for r in rows):
                return time.perf_counter() - acked
            if time.perf_counter() - acked > PROBE_TIMEOUT:
                self.timeouts += self.measuring.is_set()
                return None
            time.sleep(POLL_SECONDS)


# ---- the benchmark -------------------------------------------------------------------------------------------------
def run(stack, base_url: str, jobs: int = 200, rate: int = 600, minutes: float = 2.0) -> dict:
    """Set up `jobs` running gangs, churn their pods at `rate` updates/s for `minutes` (plus the warm-up), and
    measure; the figures (see the module docstring). Every Cluster row's client rate limit is at the default at
    the start and put back to it at the end, however the run ends (`setup` raises it for the set-up's dispatch)."""
    from .common import reset_client_limits

    reset_client_limits()
    try:
        return _run(stack, base_url, jobs, rate, minutes)
    finally:
        reset_client_limits()


def _run(stack, base_url: str, jobs: int, rate: int, minutes: float) -> dict:
    from .common import bench_fixtures

    reset_jobs()
    user = bench_fixtures()[0]
    if "worker" not in stack.procs:
        stack.start_worker()
    t0 = time.monotonic()
    cluster, queue, version, api = setup(stack, jobs)
    prom = start_watcher(stack)
    session = logged_in_session(base_url, user)
    ids, running_s = submit_and_wait_running(session, base_url, version, queue, cluster, jobs)
    pods = pods_by_job(api, ids)
    setup_s = round(time.monotonic() - t0, 1)
    log(f"watch churn: {len(ids)} jobs Running ({sum(map(len, pods.values()))} pods) after {setup_s} s")

    probe_jobs = sorted(pods)[:PROBE_JOBS]
    probe_pods = [(job, pods[job][0]) for job in probe_jobs]
    churn_pods = [p for job, ps in pods.items() for p in (ps[1:] if job in probe_jobs else ps)]
    window = minutes * 60
    config = {"kubeconfig": str(stack.cluster.kubeconfig), "pods": churn_pods, "rate": rate,
              "threads": CHURN_THREADS, "seconds": WARMUP_SECONDS + window + 2}
    config_path = stack.workdir / "churn.json"
    config_path.write_text(json.dumps(config))
    watcher = stack.procs[WATCH_PROCESS].pid

    stop = threading.Event()
    probes = [Probe(base_url, user, str(stack.cluster.kubeconfig), probe_pods[k::PROBES], stop)
              for k in range(PROBES)]
    samples: list[tuple[float, float, float]] = []  # (seconds since the window's start, RSS MiB, CPU seconds)
    churn_log = stack.workdir / "churn.log"
    with open(churn_log, "w") as errors:  # a file, not a pipe: a full pipe would stall the churn
        churn_proc = subprocess.Popen([sys.executable, "-m", "bench.churn", str(config_path)], cwd=REPO,
                                      stdout=subprocess.PIPE, stderr=errors, text=True)
    try:
        for probe in probes:
            probe.start()
        time.sleep(WARMUP_SECONDS)
        for probe in probes:
            probe.measuring.set()
        load_start = os.getloadavg()[0]
        before = {"metrics": watch_metrics(prom), "tables": table_stats(), "cpu": cpu_seconds(watcher),
                  "rss": rss_mib(watcher)}
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < window:
            samples.append((round(elapsed, 1), round(rss_mib(watcher), 1), round(cpu_seconds(watcher), 2)))
            if churn_proc.poll() is not None:
                raise RuntimeError(f"the churn process ended early: {churn_log.read_text()[-2000:]}")
            if any(p.error for p in probes):
                raise RuntimeError(f"a lag probe failed: {next(p.error for p in probes if p.error)}")
            time.sleep(min(SAMPLE_SECONDS, max(0.0, window - elapsed)))
        elapsed = time.monotonic() - started
        after = {"metrics": watch_metrics(prom), "tables": table_stats(), "cpu": cpu_seconds(watcher),
                 "rss": rss_mib(watcher)}
        samples.append((round(elapsed, 1), round(after["rss"], 1), round(after["cpu"], 2)))
        load_end = os.getloadavg()[0]
        for probe in probes:
            probe.measuring.clear()
    except BaseException:
        churn_proc.kill()
        raise
    finally:
        stop.set()
        for probe in probes:
            probe.join(PROBE_TIMEOUT + 5)
        out, _ = churn_proc.communicate(timeout=120)
        stack.stop(WATCH_PROCESS)
    churn_summary = (json.loads(out.strip().splitlines()[-1]) if out.strip()
                     else {"error": churn_log.read_text()[-2000:]})
    return summarize(jobs, rate, window, setup_s, running_s, probes, before, after, samples, churn_summary,
                     (load_start, load_end))


def summarize(jobs, rate, window, setup_s, running_s, probes, before, after, samples, churn_summary, load) -> dict:
    """The figures of one run from its raw measurements."""
    lags = sorted(lag for p in probes for lag in p.lags)
    m0, m1 = before["metrics"], after["metrics"]
    t0, t1 = before["tables"], after["tables"]
    events = m1["pod_events"] - m0["pod_events"]
    observations = m1["observations"] - m0["observations"]
    delays = m1["delay_count"] - m0["delay_count"]
    cpu = after["cpu"] - before["cpu"]
    rss = [r for _, r, _ in samples]
    minute = [r for t, r, _ in samples if t <= 60]
    last_minute = [r for t, r, _ in samples if t >= samples[-1][0] - 60]
    p99 = round(percentile(lags, 99), 3)
    updates_per_s = round(events / window, 1)
    return {
        "jobs": jobs, "pods": jobs * PODS_PER_JOB, "target_rate": rate, "window_s": round(window),
        "watch_restarts": int(m1["restarts"] - m0["restarts"]),
        "setup_s": setup_s, "to_running_s": running_s, "load_avg_1m": [round(x, 1) for x in load],
        "updates_per_s": updates_per_s, "churn": churn_summary,
        "lag": {"probes": len(lags), "timeouts": sum(p.timeouts for p in probes),
                "p50_s": round(percentile(lags, 50), 3), "p99_s": p99,
                "max_s": round(lags[-1], 3) if lags else 0.0, "poll_s": POLL_SECONDS,
                "gets": sum(p.gets for p in probes)},
        "watcher": {
            "cpu_pct": round(100 * cpu / window, 1),
            "cpu_ms_per_update": round(1000 * cpu / events, 3) if events else 0,
            "rss_start_mib": round(before["rss"], 1), "rss_end_mib": round(after["rss"], 1),
            "rss_min_mib": min(rss), "rss_max_mib": max(rss),
            "rss_first_minute_mean_mib": round(sum(minute) / len(minute), 1) if minute else 0.0,
            "rss_last_minute_mean_mib": round(sum(last_minute) / len(last_minute), 1) if last_minute else 0.0,
            "rss_slope_mib_per_min": round(slope_per_minute([(t, r) for t, r, _ in samples]), 2),
            "samples": samples,
        },
        "per_update": {
            "observations": round(observations / events, 3) if events else 0,
            "job_row_writes": round((t1["job_updates"] - t0["job_updates"]) / events, 3) if events else 0,
            "timeline_rows": t1["timeline_inserts"] - t0["timeline_inserts"],
            "commits_all_processes": round((t1["commits"] - t0["commits"]) / events, 3) if events else 0,
        },
        "watch_delay": {"observations": int(delays),
                        "mean_s": round((m1["delay_sum"] - m0["delay_sum"]) / delays, 3) if delays else 0.0,
                        "within_1s": round((m1["delay_le_1"] - m0["delay_le_1"]) / delays, 3) if delays else 0.0,
                        "within_2s": round((m1["delay_le_2"] - m0["delay_le_2"]) / delays, 3) if delays else 0.0},
        "goal_p99_s": GOAL_P99_S, "goal_rate": GOAL_RATE,
        "ok": bool(lags) and p99 <= GOAL_P99_S and updates_per_s >= GOAL_RATE and not sum(p.timeouts for p in probes),
    }


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    lag, w, per = result["lag"], result["watcher"], result["per_update"]
    c = result["churn"]
    return [
        f"watch churn   : {result['jobs']} running gangs x {PODS_PER_JOB} pods, {result['updates_per_s']} pod "
        f"updates/s received by the watcher (target {result['target_rate']}; churn process {c.get('rate')} accepted/s, "
        f"errors {c.get('errors')}) over {result['window_s']} s, load {result['load_avg_1m']}",
        f"  lag         : change to API p50 {lag['p50_s']} s, p99 {lag['p99_s']} s, max {lag['max_s']} s "
        f"({lag['probes']} probes, {lag['timeouts']} timeouts, polled every {lag['poll_s']} s) "
        f"{'OK' if result['ok'] else 'BELOW GOAL'} (goal p99 <= {GOAL_P99_S} s at >= {GOAL_RATE}/s)",
        f"  watcher     : CPU {w['cpu_pct']} % of a core ({w['cpu_ms_per_update']} ms per update), RSS "
        f"{w['rss_start_mib']} -> {w['rss_end_mib']} MiB (min {w['rss_min_mib']}, max {w['rss_max_mib']}, slope "
        f"{w['rss_slope_mib_per_min']} MiB/min)",
        f"  per update  : {per['observations']} job observations, {per['job_row_writes']} job-row writes, "
        f"{per['timeline_rows']} timeline rows in all; watch delay mean {result['watch_delay']['mean_s']} s, "
        f"{result['watch_delay']['within_2s']:.1%} within 2 s; {result['watch_restarts']} watch restarts",
        f"  set-up      : {result['setup_s']} s (submit to all Running {result['to_running_s']} s)",
    ]


def main(argv: list[str] | None = None) -> int:
    """Standalone: `run_all --only watch_churn` with the churn window in minutes."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=2.0, help="churn window (default 2; 10 for the RSS run)")
    parser.add_argument("--rate", type=int, default=600, help="pod updates per second to write")
    args = parser.parse_args(argv)
    # run_all in a process of its own rather than imported: run_all imports this module, and the import back closed
    # a circle (issue 34)
    return subprocess.call([sys.executable, "-m", "bench.run_all", "--only", "watch_churn", "--churn-minutes",
                            str(args.minutes), "--churn-rate", str(args.rate)], cwd=REPO)


if __name__ == "__main__":
    sys.exit(main())
