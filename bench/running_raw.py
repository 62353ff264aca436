"""Submit to Running against a raw client (issue 36 item 4): the same interval, the same objects, the same rate.

    python -m bench.run_all --only running_raw

On a fresh local control plane (kwok nodes, room added for every pod), in rounds whose first side alternates (the
raw client first in rounds 1 and 3):

- **gangweb**: `jobs` single `POST /api/v1/jobs/` at `rate` per second (8 client threads, as bench/running.py),
  worker (concurrency 2) and watcher (`manage.py watch_clusters`) running. Per job: from the POST's start to the
  Running entry of its timeline (`recorded_at`: from then on the API says Running).
- **raw client**: the same jobs' objects (gangweb's own desired objects, `reconcile.baseline_objects`: the
  gang objects, the Indexed Job and the Service, labelled for another instance so gangweb ignores them) created at
  the same rate by 8 forked kubernetes-client processes (`raw_clients.run_paced`), each job root first and the rest
  with its ownerReference, as gangweb's dispatch does. Per job: from its first create to the moment its last pod
  is seen Running by a pod watch of this process (the raw client's "Running": every pod of the gang Running).

Both sides' pods are watched (`RunningWatch`: first seen, first seen bound, first seen Running, on this machine's
clock) so each job's interval splits into stages: gangweb: POST -> Dispatched recorded (its gang objects and Jobs
created: the status write follows the creates) -> the gang's last pod seen (the Job controller) -> last pod bound
(kube-scheduler) -> last pod Running (kwok) -> Running recorded (the watcher); raw: first create -> last create
answered -> last pod seen -> bound -> Running. What the worker's log says of gangweb's batches (single submits that
wait are dispatched together: `reconcile/jobs/coalesce.py`) is given per round (`bench.batch_log`). The ratio (goal
<= 1.5x on an otherwise idle machine) is gangweb's p50 over the raw client's p50, overall and per round, with the
load average and CPU busy of each side.
"""
from __future__ import annotations

import math
import time

from . import batch_log, cpu, raw_clients
from .common import load_average, logged_in_session, ms, percentile, reset_client_limits, reset_jobs, rotated, spread
from .running import POST_THREADS, PodWatch, _timeline, submit_paced
from .stack import log

GW_NS, RAW_NS = "bench-run-gangweb", "bench-run-raw"
JOBS, RATE, REPLICAS, ROUNDS = 50, 20.0, 4, 3
WARM_JOBS = 4
TIMEOUT = 300
GOAL_RATIO = 1.5
NODE_PODS = 500


class RunningWatch(PodWatch):
    """PodWatch that also notes when each pod was first seen Running (`status.phase`)."""

    def note(self, pod: dict, now: float) -> None:
        super().note(pod, now)
        seen = self.pods[(pod.get("metadata") or {}).get("name", "")]
        if seen.get("running") is None and (pod.get("status") or {}).get("phase") == "Running":
            seen["running"] = now

    def gangs(self) -> dict[str, dict]:
        """Per job UID label: {"pods", "seen" (last pod first seen), "bound" (last bound), "running" (last
        Running)}, times None until every pod seen has it."""
        out: dict[str, list[dict]] = {}
        for pod in list(self.pods.values()):
            out.setdefault(pod["job_uid"], []).append(pod)

        def last(pods, key):
            values = [p.get(key) for p in pods]
            return None if any(v is None for v in values) else max(values)

        return {uid: {"pods": len(p), "seen": last(p, "seen"), "bound": last(p, "bound"),
                      "running": last(p, "running")} for uid, p in out.items()}


def stage_intervals(start: float, created: float | None, gang: dict, recorded: float | None = None) -> dict:
    """One job's stages in seconds from epoch times: start -> created (objects created) -> seen (its last pod seen)
    -> bound -> running (last pod Running) [-> recorded (gangweb's Running entry)]. A stage whose ends are not
    both known is left out."""
    points = [("created", created), ("pods_seen", gang.get("seen")), ("bound", gang.get("bound")),
              ("running", gang.get("running"))]
    if recorded is not None:
        points.append(("recorded", recorded))
    out, previous, name_before = {}, start, "start"
    for name, at in points:
        if at is not None and previous is not None:
            out[f"{name_before}_to_{name}"] = at - previous
        previous, name_before = at, name
    return out


def _wait(check, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return False


def _stages_p50(per_job: list[dict]) -> dict:
    keys = sorted({k for j in per_job for k in j})
    return {k: ms(percentile([j[k] for j in per_job if k in j], 50)) for k in keys}


def run(stack, base_url: str, jobs: int = JOBS, rounds: int = ROUNDS, rate: float = RATE,
        replicas: int = REPLICAS) -> dict:
    """Run the benchmark (module docstring) on a fresh control plane; returns the figures."""
    from scheduling.kube import client as kube_client
    from scheduling.kube.refs import ObjectRef
    from scheduling.models import Lease

    from .common import bench_fixtures
    from .reconcile import baseline_objects, served_apis_of, setup

    purged = reset_jobs()
    stack.restart_cluster()
    total_pods = (2 * rounds * jobs + 2 * WARM_JOBS) * replicas
    for i in range(max(0, math.ceil((total_pods + 100 - 4 * 110) / NODE_PODS))):
        stack.cluster.add_node(f"run-raw-{i}", pods=NODE_PODS, gpus=0)
    user = bench_fixtures()[0]
    cluster, queue_policy, version, api = setup(stack, replicas, namespaces=[GW_NS, RAW_NS])
    reset_client_limits()
    cluster.refresh_from_db()
    if "worker" not in stack.procs:
        stack.start_worker()
    Lease.objects.filter(name__startswith="watch:").delete()
    stack.start_watch()
    watch_api = kube_client.build_client(raw_clients.unthrottled(cluster))
    watches = {GW_NS: RunningWatch(watch_api, GW_NS).start(), RAW_NS: RunningWatch(watch_api, RAW_NS).start()}
    sessions = [logged_in_session(base_url, user) for _ in range(POST_THREADS)]
    url = f"{base_url}/api/v1/jobs/"
    served = served_apis_of(queue_policy)
    counter = iter(range(10**9))

    def gangweb_side(count: int) -> dict:
        bodies = [{"name": f"gw-{next(counter)}", "namespace": GW_NS, "template": version.template.name,
                   "queue": queue_policy.name, "cluster": cluster.name} for _ in range(count)]
        before, load0 = cpu.snapshot(stack), load_average()
        posted = submit_paced(sessions, url, bodies, rate)
        ids = [job_id for _, job_id in posted]

        def all_recorded():
            return sum("running" in t for t in _timeline(ids).values()) == len(ids)

        done = _wait(all_recorded, TIMEOUT)
        timeline, gangs = _timeline(ids), watches[GW_NS].gangs()
        per_job, totals = [], []
        for began, job_id in posted:
            entry = timeline.get(job_id) or {}
            if "running" not in entry:
                continue
            totals.append(entry["running"] - began)
            per_job.append(stage_intervals(began, entry.get("dispatched"), gangs.get(entry["uid"]) or {},
                                           entry["running"]))
        logged = batch_log.read(stack.workdir / "worker.log")
        batches = batch_log.for_jobs(logged, ids, posted[0][0])
        split = batch_log.dispatch_split(batch_log.read_claims(stack.workdir / "worker.log"), logged,
                                         {job_id: began for began, job_id in posted},
                                         {k: v["dispatched"] for k, v in timeline.items() if "dispatched" in v})
        return {"jobs": count, "running": len(totals), "complete": done, "seconds": totals, "stages": per_job,
                "cpu": cpu.spent(before, cpu.snapshot(stack)), "load_average_before": load0,
                "load_average_after": load_average(), "batches": batches, "dispatch": list(split.values())}

    def raw_side(count: int) -> dict:
        names = [f"raw-{next(counter)}" for _ in range(count)]
        objs = [baseline_objects(version, queue_policy, RAW_NS, name, served) for name in names]
        uids = [_job_uid(o) for o in objs]
        root_ref: ObjectRef = objs[0][0][0]
        before, load0 = cpu.snapshot(stack), load_average()
        times = raw_clients.run_paced(cluster, root_ref, objs, POST_THREADS, rate)

        def all_running():
            gangs = watches[RAW_NS].gangs()
            return all((gangs.get(u) or {}).get("pods") == replicas and gangs[u]["running"] for u in uids)

        done = _wait(all_running, TIMEOUT)
        gangs = watches[RAW_NS].gangs()
        per_job, totals = [], []
        for uid, (began, created) in zip(uids, times, strict=True):
            gang = gangs.get(uid) or {}
            if gang.get("pods") != replicas or gang.get("running") is None:
                continue
            totals.append(gang["running"] - began)
            per_job.append(stage_intervals(began, created, gang))
        return {"jobs": count, "running": len(totals), "complete": done, "seconds": totals, "stages": per_job,
                "cpu": cpu.spent(before, cpu.snapshot(stack)), "load_average_before": load0,
                "load_average_after": load_average()}

    sides = {"gangweb": gangweb_side, "raw client": raw_side}
    out_rounds = []
    try:
        for name in ("gangweb", "raw client"):  # untimed: imports, connections, the watch's first LISTs
            warm = sides[name](WARM_JOBS)
            if not warm["complete"]:
                raise RuntimeError(f"the {name} warm-up jobs did not reach Running within {TIMEOUT} s")
        for i in range(rounds):
            order = rotated(["raw client", "gangweb"], i)
            figures = {name: sides[name](jobs) for name in order}
            g, r = figures["gangweb"], figures["raw client"]
            out_rounds.append({"first": order[0], "gangweb": g, "raw client": r,
                               "ratio_p50": round(percentile(g["seconds"], 50) / percentile(r["seconds"], 50), 2)
                               if r["seconds"] and g["seconds"] else None})
            log(f"running_raw round {i + 1}: gangweb p50 {ms(percentile(g['seconds'], 50))} ms, raw "
                f"{ms(percentile(r['seconds'], 50))} ms, ratio {out_rounds[-1]['ratio_p50']}")
    finally:
        for w in watches.values():
            w.stop()
        stack.stop("watch")
    return _result(out_rounds, jobs, rate, replicas, purged, cluster)


def _job_uid(objs: list) -> str:
    from scheduling.constants import LABEL_JOB_UID

    return next(body["metadata"]["labels"][LABEL_JOB_UID] for _, body in objs
                if LABEL_JOB_UID in (body["metadata"].get("labels") or {}))


def extra_by_stage(gangweb: dict[str, float], raw: dict[str, float]) -> dict[str, float]:
    """gangweb's p50 minus the raw client's per stage (ms), for the stages both have; gangweb's own last stage
    (`running_to_recorded`: the watcher recording Running) counts whole, the raw client has none."""
    out = {k: round(v - raw.get(k, 0.0), 1) for k, v in gangweb.items() if k in raw or k == "running_to_recorded"}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _result(rounds: list[dict], jobs: int, rate: float, replicas: int, purged: int, cluster) -> dict:
    """The whole figure from the rounds: per side p50/p99 over all rounds, stage p50s, the ratio of p50s overall
    and per round (spread), load and CPU busy per side and round."""
    sides = {}
    for side in ("gangweb", "raw client"):
        seconds = [t for r in rounds for t in r[side]["seconds"]]
        stages = [s for r in rounds for s in r[side]["stages"]]
        sides[side] = {"p50_ms": ms(percentile(seconds, 50)), "p99_ms": ms(percentile(seconds, 99)),
                       "n": len(seconds), "stages_p50_ms": _stages_p50(stages),
                       "running": sum(r[side]["running"] for r in rounds), "jobs": sum(r[side]["jobs"] for r in rounds)}
    sides["gangweb"]["dispatch_p50_ms"] = _stages_p50([d for r in rounds for d in r["gangweb"].get("dispatch", [])])
    for r in rounds:
        r["gangweb"]["dispatch_p50_ms"] = _stages_p50(r["gangweb"].pop("dispatch", []))
        for side in ("gangweb", "raw client"):
            s = r[side]
            s["p50_ms"], s["p99_ms"] = ms(percentile(s["seconds"], 50)), ms(percentile(s["seconds"], 99))
            s["stages_p50_ms"] = _stages_p50(s.pop("stages"))
            s.pop("seconds")
    g, r = sides["gangweb"], sides["raw client"]
    overall = round(g["p50_ms"] / r["p50_ms"], 2) if r["p50_ms"] else None
    extra = extra_by_stage(g["stages_p50_ms"], r["stages_p50_ms"])
    per_round = [x["ratio_p50"] for x in rounds if x["ratio_p50"] is not None]
    return {"jobs_per_round": jobs, "rounds": rounds, "rate_per_s": rate, "pods_per_job": replicas,
            "server_version": cluster.server_version, "stale_tasks_purged": purged, "sides": sides,
            "ratio_p50": overall, "ratio_spread": spread(per_round, 2), "goal_ratio": GOAL_RATIO,
            "gangweb_extra_p50_ms": extra, "dominant_stage": max(extra, key=extra.get) if extra else None,
            "ok": overall is not None and overall <= GOAL_RATIO
            and g["running"] == g["jobs"] and r["running"] == r["jobs"]}


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    g, r = result["sides"]["gangweb"], result["sides"]["raw client"]
    sp = result["ratio_spread"]
    lines = [f"submit->Running against a raw client: {len(result['rounds'])} rounds of {result['jobs_per_round']} "
             f"jobs x {result['pods_per_job']} pods per side at {result['rate_per_s']:g}/s "
             f"({result['server_version']}), first side alternating",
             f"  gangweb (POST -> Running recorded): p50 {g['p50_ms']} ms p99 {g['p99_ms']} ms ({g['running']}/"
             f"{g['jobs']}); raw client (first create -> last pod Running): p50 {r['p50_ms']} ms p99 {r['p99_ms']} "
             f"ms ({r['running']}/{r['jobs']})",
             f"  ratio of p50s {result['ratio_p50']}x (rounds {sp['min']}/{sp['median']}/{sp['max']}; goal <= "
             f"{result['goal_ratio']}x on an idle machine) {'OK' if result['ok'] else 'ABOVE GOAL'}",
             f"  gangweb's extra by stage (p50 ms, largest first; start_to_created is POST -> Dispatched recorded "
             f"against the raw client's creates): {result['gangweb_extra_p50_ms']}",
             f"  stages p50, gangweb: {g['stages_p50_ms']}",
             "  gangweb's batches by round (the worker's log: count, longest wait to start, snapshot, passes, "
             "requests per job): " + "; ".join(
                 f"{b['batches']}, {b['waited_s_max']} s, {b['read_s_max']} s, {b['passes_s_max']} s, "
                 f"{b['requests_per_job']}" for b in (x["gangweb"].get("batches") or {} for x in result["rounds"])
                 if b),
             f"  stages p50, raw    : {r['stages_p50_ms']}",
             "  gangweb's POST -> Dispatched split (p50 ms; the worker log's claim and batch lines: its task's wait, "
             f"POST -> claimed into a batch, the claim, the batch's read and its LISTs, its pass): "
             f"{g.get('dispatch_p50_ms')}",
             "  gangweb's snapshot LISTs by round (lists, objects listed, jobs read without a LIST, kind:s/requests/"
             "objects of each batch): " + "; ".join(
                 f"{b.get('lists')}, {b.get('listed')}, {b.get('fresh')}, {' | '.join(b.get('kinds') or [])}"
                 for b in (x["gangweb"].get("batches") or {} for x in result["rounds"]) if b)]
    for i, x in enumerate(result["rounds"], 1):
        lines.append(f"  round {i} ({x['first']} first): gangweb {x['gangweb']['p50_ms']} ms (load "
                     f"{x['gangweb']['load_average_before'][0]}, busy {x['gangweb']['cpu']['machine_busy_pct']} %), "
                     f"raw {x['raw client']['p50_ms']} ms (load {x['raw client']['load_average_before'][0]}, busy "
                     f"{x['raw client']['cpu']['machine_busy_pct']} %), ratio {x['ratio_p50']}")
    return lines
