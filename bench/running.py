"""Benchmark: submit to Running on the Kubernetes gang path, next to kube-scheduler's own bind time (issue 23 part 4).

100 jobs of 4 pods (backend k8s-workload: on Kubernetes 1.37 the v1beta1 Workload + PodGroup plugin, gang-scheduled
by kube-scheduler itself) are submitted one `POST /api/v1/jobs/` each, at 20 per second, on a fresh local control
plane with room for all of them. The worker reconciles each job (the `reconcile_job` task, default concurrency) and
the watcher (`manage.py watch_clusters`) records what the cluster reports, as in production.

gangweb's figure, per job: from the start of its POST to the Running entry of its timeline (`recorded_at`: from then
on the API and the pages say Running); p50 and p99. The Running entry's own time (`at`, the last container start as
the cluster reports it) is given too.

kube-scheduler's figure, for the same pods, from the cluster's timestamps: per gang, from the creation of its last
pod (`metadata.creationTimestamp`: a gang cannot be placed before all its pods exist) to the last
`PodScheduled` condition's `lastTransitionTime`; per pod, creation to PodScheduled; and per PodGroup, its creation
to its `PodGroupScheduled` condition. These timestamps have one-second resolution, so a watch of the pods kept by
this process measures the gang's bind to the millisecond (its last pod first seen -> its last pod first seen
bound), and splits gangweb's time into stages on one clock (this machine's): POST -> Dispatched recorded -> the
gang's last pod seen -> its last pod bound -> Running recorded.
"""
from __future__ import annotations

import json
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from .common import logged_in_session, ms, percentile
from .stack import log

LABEL_JOB_UID = "gangweb.io/job-uid"  # scheduling.constants.LABEL_JOB_UID, on every pod of a job
RUN_NS = "bench-running"
JOBS, RATE, REPLICAS = 100, 20.0, 4
POST_THREADS = 8  # so a slow POST (0.2-0.6 s at load 16) does not hold the next one past its turn
WARM_JOBS = 4
TIMEOUT = 240  # seconds for the jobs to reach Running


class PodWatch:
    """A watch of the pods of one namespace in a thread of this process: per pod, the job UID label, when it was
    first seen and when it was first seen bound (spec.nodeName), as epoch seconds of this machine's clock."""

    def __init__(self, api, namespace: str):
        self.api, self.namespace = api, namespace
        self.pods: dict[str, dict] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-pod-watch", daemon=True)
        self.error: str | None = None

    def start(self) -> PodWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and join (the watch requests time out after 2 s on the server)."""
        self._stop.set()
        self._thread.join(timeout=15)

    def note(self, pod: dict, now: float) -> None:
        """Record one observed pod (a dict as the API returns it) at `now`."""
        meta = pod.get("metadata") or {}
        seen = self.pods.setdefault(meta.get("name", ""), {
            "job_uid": (meta.get("labels") or {}).get(LABEL_JOB_UID), "seen": now, "bound": None})
        if seen["bound"] is None and (pod.get("spec") or {}).get("nodeName"):
            seen["bound"] = now

    def _run(self) -> None:
        from kubernetes import client, watch

        core = client.CoreV1Api(self.api)
        version = None
        while not self._stop.is_set():
            try:
                if version is None:
                    listed = self.api.sanitize_for_serialization(core.list_namespaced_pod(self.namespace))
                    now = time.time()
                    for pod in listed.get("items") or []:
                        self.note(pod, now)
                    version = listed["metadata"]["resourceVersion"]
                stream = watch.Watch()
                for event in stream.stream(core.list_namespaced_pod, self.namespace, resource_version=version,
                                           timeout_seconds=2, _request_timeout=(5, 10)):
                    obj = self.api.sanitize_for_serialization(event["object"])
                    self.note(obj, time.time())
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if self._stop.is_set():
                        break
            except Exception as exc:  # noqa: BLE001 - 410 Gone or a dropped connection: list again
                self.error, version = f"{type(exc).__name__}: {exc}"[:300], None
                time.sleep(1)


def submit_paced(sessions: list, url: str, bodies: list[dict], rate: float) -> list[tuple[float, int]]:
    """POST each body at its turn (the i-th at start + i / rate) from one thread per session (requests.Session,
    logged in). Returns [(epoch seconds the POST started, job id)] in body order. Raises RuntimeError on a non-201
    answer."""
    free = queue.SimpleQueue()
    for session in sessions:
        free.put(session)
    start = time.time() + 0.2

    def post(index: int) -> tuple[float, int]:
        delay = start + index / rate - time.time()
        if delay > 0:
            time.sleep(delay)
        session = free.get()
        try:
            began = time.time()
            response = session.post(url, data=json.dumps(bodies[index]))
        finally:
            free.put(session)
        if response.status_code != 201:
            raise RuntimeError(f"POST {url} -> {response.status_code}: {response.text[:300]}")
        return began, response.json()["id"]

    with ThreadPoolExecutor(len(sessions), thread_name_prefix="bench-post") as pool:
        return list(pool.map(post, range(len(bodies))))


def wait_running(job_ids: list[int], timeout: float) -> int:
    """Wait until every job has a Running entry (or `timeout` s passed); returns how many have one."""
    from scheduling.choices import GangPhase
    from scheduling.models import PhaseTransition

    deadline = time.monotonic() + timeout
    while True:
        done = PhaseTransition.objects.filter(job_id__in=job_ids, phase=GangPhase.RUNNING).values(
            "job_id").distinct().count()
        if done == len(job_ids) or time.monotonic() > deadline:
            return done
        time.sleep(0.5)


def gang_bind_seconds(pods: list[dict]) -> tuple[dict[str, float], list[float]]:
    """From pods as the API returns them (dicts): per job UID (label gangweb.io/job-uid), seconds from the creation
    of its last pod to the last PodScheduled=True transition among its pods (only gangs whose every pod is bound);
    and per bound pod, creation to PodScheduled. Cluster timestamps: one-second resolution."""
    from scheduling.observe.objects import created_at, parse_time

    gangs: dict[str, list[tuple]] = {}
    per_pod = []
    for pod in pods:
        uid = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB_UID)
        scheduled = next((parse_time(c.get("lastTransitionTime")) for c in (pod.get("status") or {}).get(
            "conditions") or [] if c.get("type") == "PodScheduled" and c.get("status") == "True"), None)
        created = created_at(pod)
        gangs.setdefault(uid, []).append((created, scheduled))
        if created is not None and scheduled is not None:
            per_pod.append((scheduled - created).total_seconds())
    per_gang = {uid: (max(s for _, s in times) - max(c for c, _ in times)).total_seconds()
                for uid, times in gangs.items()
                if uid and all(c is not None and s is not None for c, s in times)}
    return per_gang, per_pod


def group_scheduled_seconds(groups: list[dict]) -> list[float]:
    """Per PodGroup (dicts as the API returns them): creation to its PodGroupScheduled=True condition's
    lastTransitionTime, in seconds; groups without that condition are left out."""
    from scheduling.observe.objects import created_at, parse_time

    out = []
    for group in groups:
        at = next((parse_time(c.get("lastTransitionTime")) for c in (group.get("status") or {}).get(
            "conditions") or [] if c.get("type") == "PodGroupScheduled" and c.get("status") == "True"), None)
        if at is not None and created_at(group) is not None:
            out.append((at - created_at(group)).total_seconds())
    return out


def _p(values: list[float]) -> dict:
    """{"p50_ms", "p99_ms", "n"} of seconds."""
    return {"p50_ms": ms(percentile(values, 50)), "p99_ms": ms(percentile(values, 99)), "n": len(values)}


def _timeline(job_ids: list[int]) -> dict[int, dict]:
    """Per job: {"uid", "dispatched": recorded epoch, "running": recorded epoch, "running_at": epoch}."""
    from scheduling.choices import GangPhase
    from scheduling.models import GangJob, PhaseTransition

    out = {pk: {"uid": str(uid)} for pk, uid in GangJob.objects.filter(pk__in=job_ids).values_list("pk", "uid")}
    rows = PhaseTransition.objects.filter(job_id__in=job_ids, phase__in=[GangPhase.DISPATCHED, GangPhase.RUNNING])
    for job_id, phase, at, recorded in rows.order_by("pk").values_list("job_id", "phase", "at", "recorded_at"):
        entry = out[job_id]
        key = "dispatched" if phase == GangPhase.DISPATCHED else "running"
        entry.setdefault(key, recorded.timestamp())
        if phase == GangPhase.RUNNING:
            entry.setdefault("running_at", at.timestamp())
    return out


def run(stack, base_url: str, jobs: int = JOBS, rate: float = RATE, replicas: int = REPLICAS) -> dict:
    """Run the benchmark (module docstring) on the stack's local control plane; returns the figures."""
    from scheduling.backends import registry
    from scheduling.kube import objects
    from scheduling.kube.objects import POD
    from scheduling.models import Lease

    from . import raw_clients
    from .common import bench_fixtures, reset_jobs
    from .reconcile import setup

    purged = reset_jobs()
    user = bench_fixtures()[0]
    cluster, queue_policy, version, api = setup(stack, replicas, namespaces=[RUN_NS])
    if "worker" not in stack.procs:
        stack.start_worker()
    Lease.objects.filter(name__startswith="watch:").delete()  # a lease left by an earlier run would delay the watch
    stack.start_watch()
    from scheduling.kube import client as kube_client

    pods = PodWatch(kube_client.build_client(raw_clients.unthrottled(cluster)), RUN_NS).start()
    sessions = [logged_in_session(base_url, user) for _ in range(POST_THREADS)]
    url = f"{base_url}/api/v1/jobs/"

    def body(name: str) -> dict:
        return {"name": name, "namespace": RUN_NS, "template": version.template.name, "queue": queue_policy.name,
                "cluster": cluster.name}

    try:
        # Untimed: the worker's and the watcher's first jobs (imports, connections, the watch's first LIST), one
        # through each gunicorn worker at least.
        warm = [job_id for _, job_id in submit_paced(sessions, url, [body(f"warm-{i}") for i in range(WARM_JOBS)],
                                                     rate)]
        if wait_running(warm, TIMEOUT) < len(warm):
            raise RuntimeError(f"the warm-up jobs did not reach Running within {TIMEOUT} s (watch log: "
                               f"{(stack.workdir / 'watch.log').read_text(errors='replace')[-500:]})")
        t0 = time.time()
        posted = submit_paced(sessions, url, [body(f"run-{i}") for i in range(jobs)], rate)
        submit_wall = time.time() - t0
        ids = [job_id for _, job_id in posted]
        running = wait_running(ids, TIMEOUT)
        time.sleep(1)  # the watch's last events
    finally:
        pods.stop()
        stack.stop("watch")
    served = set(cluster.served_apis or [])
    backend = registry.select("k8s-workload", served)
    listed = objects.list_objects(api, POD, RUN_NS, "")
    group_ref = next((r for r in backend.gang_kinds if r.kind == "PodGroup"), None)
    groups = objects.list_objects(api, group_ref, RUN_NS, "") if group_ref is not None else []
    result = _figures(posted, _timeline(ids), pods.pods, listed, groups)
    result.update({"jobs": jobs, "pods_per_job": replicas, "rate_per_s": rate, "running": running,
                   "submit_wall_s": round(submit_wall, 2), "backend": backend.name,
                   "server_version": cluster.server_version, "stale_tasks_purged": purged,
                   "watch_error": pods.error, "ok": running == jobs})
    log(f"submit-to-running: {running}/{jobs} Running; p50 {result['submit_to_running']['p50_ms']} ms, p99 "
        f"{result['submit_to_running']['p99_ms']} ms; kube-scheduler gang bind p50 "
        f"{result['scheduler_gang_bind']['p50_ms']} ms")
    return result


def _figures(posted: list[tuple[float, int]], timeline: dict[int, dict], seen: dict[str, dict], pods: list[dict],
             groups: list[dict]) -> dict:
    """The result's figures from the POST times, the jobs' timelines, the watch's observations and the cluster's
    pods and PodGroups (see `run`)."""
    by_uid: dict[str, list[dict]] = {}
    for pod in seen.values():
        by_uid.setdefault(pod["job_uid"], []).append(pod)
    to_running, to_running_at, stages = [], [], {k: [] for k in (
        "post_to_dispatched", "dispatched_to_pods_seen", "pods_seen_to_bound_seen", "bound_to_running_recorded")}
    watch_bind = []
    for began, job_id in posted:
        entry = timeline.get(job_id) or {}
        if "running" not in entry:
            continue
        to_running.append(entry["running"] - began)
        to_running_at.append(entry["running_at"] - began)
        mine = by_uid.get(entry["uid"]) or []
        if not mine or any(p["bound"] is None for p in mine) or "dispatched" not in entry:
            continue
        last_seen, last_bound = max(p["seen"] for p in mine), max(p["bound"] for p in mine)
        watch_bind.append(last_bound - last_seen)
        for key, value in (("post_to_dispatched", entry["dispatched"] - began),
                           ("dispatched_to_pods_seen", last_seen - entry["dispatched"]),
                           ("pods_seen_to_bound_seen", last_bound - last_seen),
                           ("bound_to_running_recorded", entry["running"] - last_bound)):
            stages[key].append(value)
    uids = {(timeline.get(job_id) or {}).get("uid") for _, job_id in posted}

    def timed(objs: list[dict]) -> list[dict]:  # the timed jobs' objects (not the warm-up's)
        return [o for o in objs if ((o.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB_UID) in uids]

    per_gang, per_pod = gang_bind_seconds(timed(pods))
    return {
        "submit_to_running": _p(to_running),
        "submit_to_running_cluster_time": _p(to_running_at),
        "scheduler_gang_bind": _p(list(per_gang.values())),
        "scheduler_pod_bind": _p(per_pod),
        "podgroup_scheduled": _p(group_scheduled_seconds(timed(groups))),
        "scheduler_gang_bind_watch": _p(watch_bind),
        "stages_p50_ms": {k: ms(percentile(v, 50)) for k, v in stages.items()},
        "submit_to_dispatched": _p(stages["post_to_dispatched"]),
    }


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    r, g, w = result["submit_to_running"], result["scheduler_gang_bind"], result["scheduler_gang_bind_watch"]
    s, d = result["stages_p50_ms"], result.get("submit_to_dispatched") or {}
    return [
        f"submit->Running: {result['running']}/{result['jobs']} jobs x {result['pods_per_job']} pods at "
        f"{result['rate_per_s']:g}/s ({result['backend']}, {result['server_version']})",
        f"  gangweb     : POST -> Running recorded p50 {r['p50_ms']} ms  p99 {r['p99_ms']} ms; POST -> Dispatched "
        f"recorded p50 {d.get('p50_ms')} ms  p99 {d.get('p99_ms')} ms",
        f"  scheduler   : gang bind (last pod created -> bound, cluster timestamps, 1 s resolution) p50 "
        f"{g['p50_ms']} ms  p99 {g['p99_ms']} ms; by watch p50 {w['p50_ms']} ms  p99 {w['p99_ms']} ms",
        f"  stages p50  : POST->Dispatched {s['post_to_dispatched']} ms, ->pods seen {s['dispatched_to_pods_seen']} "
        f"ms, ->bound {s['pods_seen_to_bound_seen']} ms, ->Running recorded {s['bound_to_running_recorded']} ms",
    ]
