"""Placement on two real control planes (issue 38's "Done when"): the makespan of jobs submitted without a cluster
against the same jobs split by hand in the best fixed proportion, and the decision cost per job.

    python -m bench.placement_real [--jobs 500] [--seed 2] [--big 48] [--small 16] [--duration 20]
                                   [--move-after 30] [--resync-seconds 10] [--bulk 100]
                                   [--order baseline,gangweb] [--json PATH]

**What runs.** A private stack (`bench.faultstack.FaultStack`'s services: PostgreSQL from initdb, Redis, gunicorn,
one Celery worker of 2 processes, Celery beat, `manage.py watch_clusters`, configured as in production) with TWO
local control planes of the default release (`localcluster.up`, no default nodes) registered as clusters "big"
and "small": `--big` and `--small` GPUs in KWOK nodes of 8 GPUs (1,000 pods each). One queue ("place") takes jobs
on both, with `move_after_seconds` = `--move-after`. The processes are the production ones, so the placement of a
bulk submit (gunicorn), the moves' round (beat's resync fan-out, every `--resync-seconds`), the capacity the
watcher records and the probes run exactly as deployed; nothing is driven in this process (tests/cluster/
test_placement.py drives the passes in-process: that is simpler, but then the rounds' timing is the test's, not
the product's).

**Jobs.** `bench.placement.draw_jobs(--seed, --jobs)`: the same seeded mix of 1, 2, 4 and 8 GPUs as the
simulation, each a k8s-workload gang of that many 1-GPU pods (template "place", replicas overridden) whose pods
run `--duration` seconds once Running (the KWOK stage's `gangweb.io/sim-duration`). One GPU per pod: the gang fits
when the cluster's free GPUs cover it, as in the simulation, whatever the nodes' fragmentation.

**Runs** (`--order`, each in a fresh namespace of the same stack, one after the other):

- `gangweb`: every job submitted WITHOUT `cluster` in bulk requests of `--bulk` (the API's cap is 5,000 a
  request), as a pipeline would; gangweb places each job and moves those that wait;
- `baseline`: the same jobs with `cluster` named, split in the proportion `p` the simulation finds best for this
  seed and these sizes (`bench.placement.fixed_split`, the same `split` function). Same stack, same path: the only
  difference is who chose the cluster (and a job whose submit named its cluster is never moved).

**Figures per run.** Makespan: the first bulk request sent (this process's clock) to the last batch/v1 Job's
`completionTime` on either API server (second resolution; gangweb's own last `finished_at` is kept beside it).
Jobs and GPUs per cluster (where they ran, from the API servers) and where they were first placed, jobs moved (the
`Moved` timeline entries). The decision cost: each bulk request's time to its 201 (loopback) divided by its jobs,
median over the run's requests; gangweb's minus the baseline's is what choosing costs per job; the rule's own CPU
per job (in-process, `bench.placement.gangweb_run`) beside it. The 1-minute load average before and after.

**Checked at the end of each run, from the API servers** (not gangweb's census): every job has a Complete Job;
no job has objects on both clusters; the gang objects (Workload, PodGroup) and Services of finished jobs left after
gangweb's clean-up (waited for up to 5 min); and from a sample of both clusters' live pods every 5 s: no cluster
over its GPUs at any sample, no job with live pods on both at once, and the GPU-seconds a cluster had room idle,
nothing of its own waiting, while the other had a gang waiting that would fit that room.

Not part of `make bench` (a run takes 10-15 minutes per side on this machine).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from . import placement as sim
from .faultstack import Client, cluster_objects
from .stack import log
from .two_clusters import CLUSTERS, GPUS_PER_NODE, QUEUE, TEMPLATE, TwoClusterStack

LIVE = "status.phase!=Succeeded,status.phase!=Failed"


def bodies(jobs: list[int], namespace: str, targets: list[int] | None) -> list[dict]:
    """The submit bodies of `jobs` (GPUs each): queue "place", template "place" with `replicas` = GPUs, `cluster`
    named from `targets` (0 big, 1 small) or left out (None: gangweb chooses)."""
    out = []
    for i, gpus in enumerate(jobs):
        body = {"name": f"j-{i:04d}", "namespace": namespace, "template": TEMPLATE, "queue": QUEUE,
                "overrides": {"podSets": {"worker": {"replicas": gpus}}}}
        if targets is not None:
            body["cluster"] = CLUSTERS[targets[i]]
        out.append(body)
    return out


def parse_time(value: str | None) -> float | None:
    """An RFC 3339 time of the API server ("2026-12-06T19:30:00Z") as epoch seconds; None for None or junk."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def job_ends(items: list[dict]) -> dict[str, dict]:
    """{gangweb job uid: {"complete": all its batch/v1 Jobs Complete, "end": the latest completionTime (epoch s,
    None until all complete)}} from a list of Job dicts labelled with the job's uid."""
    out: dict[str, dict] = {}
    for job in items:
        uid = ((job.get("metadata") or {}).get("labels") or {}).get("gangweb.io/job-uid")
        if not uid:
            continue
        status = job.get("status") or {}
        done = any(c.get("type") == "Complete" and c.get("status") == "True" for c in status.get("conditions") or [])
        end = parse_time(status.get("completionTime"))
        entry = out.setdefault(uid, {"complete": True, "end": None})
        entry["complete"] = entry["complete"] and done and end is not None
        if end is not None:
            entry["end"] = max(entry["end"] or end, end)
    for entry in out.values():
        if not entry["complete"]:
            entry["end"] = None
    return out


def pod_sample(items: list[dict]) -> dict:
    """One cluster's live pods as {"used": GPUs of bound pods, "waiting": {job uid: GPUs of its unbound pods},
    "uids": job uids with a live pod}."""
    used, waiting, uids = 0.0, Counter(), set()
    for pod in items:
        uid = ((pod.get("metadata") or {}).get("labels") or {}).get("gangweb.io/job-uid", "?")
        gpus = sum(float(((c.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu", 0) or 0)
                   for c in (pod.get("spec") or {}).get("containers") or [])
        uids.add(uid)
        if (pod.get("spec") or {}).get("nodeName"):
            used += gpus
        else:
            waiting[uid] += gpus
    return {"used": used, "waiting": dict(waiting), "uids": uids}


def summarize_samples(samples: list[dict], caps: dict[str, float], every: float) -> dict:
    """From samples [{"t", clusters name: pod_sample(...)}]: samples with a cluster over its GPUs, samples with a
    job live on both, each cluster's most GPUs used and mean use (share of its GPUs), and the GPU-seconds each
    cluster had free GPUs, no gang of its own waiting, while the other had a waiting gang that fits that room
    (each sample counts for `every` seconds)."""
    over = both = 0
    most = dict.fromkeys(caps, 0.0)
    use = dict.fromkeys(caps, 0.0)
    idle = dict.fromkeys(caps, 0.0)
    names = list(caps)
    for s in samples:
        if all(name in s for name in names):
            if set.intersection(*(set(s[name]["uids"]) for name in names)) - {"?"}:
                both += 1
        for name in names:
            if name not in s:
                continue
            here = s[name]
            most[name] = max(most[name], here["used"])
            use[name] += here["used"] / caps[name] if caps[name] else 0.0
            over += here["used"] > caps[name]
            free = caps[name] - here["used"]
            others = [o for o in names if o != name and o in s]
            fits_elsewhere = [g for o in others for g in s[o]["waiting"].values() if g <= free]
            if free > 0 and not here["waiting"] and fits_elsewhere:
                idle[name] += free * every
    n = len(samples) or 1
    return {"samples": len(samples), "over_capacity_samples": over, "live_on_both_samples": both,
            "most_gpus_used": most, "mean_use": {k: round(v / n, 3) for k, v in use.items()},
            "idle_gpu_seconds_while_other_waits": {k: round(v, 1) for k, v in idle.items()}}


def list_json(api, kind: str, namespace: str, field_selector: str = "") -> list[dict]:
    """Every gangweb-labelled pod ("pods") or batch/v1 Job ("jobs") of `namespace`, as dicts (one LIST)."""
    from kubernetes import client

    kwargs = {"label_selector": "gangweb.io/instance=gangweb", "_preload_content": False, "_request_timeout": 60}
    if field_selector:
        kwargs["field_selector"] = field_selector
    if kind == "pods":
        r = client.CoreV1Api(api).list_namespaced_pod(namespace, **kwargs)
    else:
        r = client.BatchV1Api(api).list_namespaced_job(namespace, **kwargs)
    return json.loads(r.data).get("items") or []


def sampler(planes: dict, namespace: str, t0: float, samples: list, stop: threading.Event, every: float) -> None:
    """Every `every` s until `stop`: both clusters' live pods of `namespace` (`pod_sample`), with the time since
    `t0` and the 1-minute load (clients of its own: not shared with the main thread)."""
    apis = {name: lc.api_client() for name, lc in planes.items()}
    while not stop.is_set():
        sample = {"t": round(time.time() - t0, 1), "load1": round(os.getloadavg()[0], 1)}
        for name, api in apis.items():
            try:
                sample[name] = pod_sample(list_json(api, "pods", namespace, LIVE))
            except Exception as exc:  # noqa: BLE001 - a missed sample is a gap, not a failed run
                log(f"sample of {name} failed: {exc}")
        samples.append(sample)
        stop.wait(every)
    for api in apis.values():
        api.close()


def gangweb_rows(database_url: str, namespace: str) -> list[tuple]:
    """(name, cluster, phase, cleaned up, finished_at epoch, first cluster placed on, moves, gpus) of every job of
    `namespace`, from gangweb's database."""
    import psycopg

    with psycopg.connect(database_url, connect_timeout=5) as conn:
        return conn.execute(
            "SELECT j.name, c.name, j.phase, j.cleaned_up_at IS NOT NULL, extract(epoch FROM j.finished_at), "
            "coalesce(j.placement->'moves'->0->>'from', c.name), "
            "coalesce(jsonb_array_length(j.placement->'moves'), 0), j.requested_gpu "
            "FROM scheduling_gangjob j JOIN scheduling_cluster c ON c.id = j.cluster_id WHERE j.namespace = %s",
            (namespace,)).fetchall()


def run_one(stack: TwoClusterStack, mode: str, jobs: list[int], targets: list[int] | None, namespace: str,
            args) -> dict:
    """Submit `jobs` in `namespace` (cluster named from `targets`, or left to gangweb), wait until every job ended
    on the clusters and gangweb cleaned up, and check (module docstring). Returns the run's figures."""
    stack.allow(namespace)
    apis = {name: lc.api_client() for name, lc in stack.planes.items()}
    caps = {"big": float(args.big), "small": float(args.small)}
    client = Client(stack.base_url, stack.token)
    load_before = os.getloadavg()[0]
    log_from = len(stack.log_text("worker"))
    samples: list = []
    stop = threading.Event()
    t0 = time.time()
    thread = threading.Thread(target=sampler, args=(stack.planes, namespace, t0, samples, stop, args.sample_seconds),
                              daemon=True)
    thread.start()
    requests_ = []
    all_bodies = bodies(jobs, namespace, targets)
    for start in range(0, len(all_bodies), args.bulk):
        chunk = all_bodies[start:start + args.bulk]
        asked = time.monotonic()
        r = client.request("POST", "/api/v1/jobs/bulk/", json={"jobs": chunk},
                           headers={"Idempotency-Key": uuid.uuid4().hex, "Prefer": "return=minimal"})
        seconds = time.monotonic() - asked
        assert r.status_code == 201, (r.status_code, r.text[:500])
        requests_.append({"jobs": len(chunk), "seconds": round(seconds, 3)})
    log(f"{mode}: {len(jobs)} jobs submitted in {len(requests_)} bulk requests "
        f"({sum(q['seconds'] for q in requests_):.1f} s)")
    ends: dict[str, dict] = {}
    deadline = time.monotonic() + args.timeout
    last_log = 0.0
    while time.monotonic() < deadline:
        ends = {}
        for api in apis.values():
            for uid, entry in job_ends(list_json(api, "jobs", namespace)).items():
                ends.setdefault(uid, []).append(entry)
        done = sum(1 for e in ends.values() if any(x["complete"] for x in e))
        if done >= len(jobs):
            break
        if time.monotonic() - last_log > 60:
            last = samples[-1] if samples else {}
            log(f"{mode}: {done}/{len(jobs)} jobs complete at {time.time() - t0:.0f} s; GPUs in use "
                f"{ {n: last.get(n, {}).get('used') for n in CLUSTERS} }; load {os.getloadavg()[0]:.1f}")
            last_log = time.monotonic()
        time.sleep(5)
    end = max((x["end"] for e in ends.values() for x in e if x["end"] is not None), default=None)
    load_after_last_end = os.getloadavg()[0]
    # gangweb's record: every job Succeeded and cleaned up (its gang objects and Service deleted)
    wait_until = time.monotonic() + 300
    rows = gangweb_rows(stack.env["DATABASE_URL"], namespace)
    while time.monotonic() < wait_until and not (
            len(rows) == len(jobs) and all(r[2] == "Succeeded" and r[3] for r in rows)):
        time.sleep(5)
        rows = gangweb_rows(stack.env["DATABASE_URL"], namespace)
    stop.set()
    thread.join(60)
    objects = {name: cluster_objects(api, namespace) for name, api in apis.items()}
    gang_left = Counter()
    for per_job in objects.values():
        for counts in per_job.values():
            gang_left.update({k: v for k, v in counts.items() if k not in ("Job", "pods", "live pods")})
    on_both = sorted(set(objects["big"]) & set(objects["small"]))
    complete_on = Counter()
    for entries in ends.values():
        complete_on[sum(1 for x in entries if x["complete"])] += 1
    ran = {name: {"jobs": 0, "gpus": 0} for name in CLUSTERS}
    for name in objects:
        gpus_of = {}
        for pod in list_json(apis[name], "pods", namespace):
            uid = pod["metadata"]["labels"].get("gangweb.io/job-uid")
            gpus_of[uid] = gpus_of.get(uid, 0) + 1
        ran[name]["jobs"] = len(gpus_of)
        ran[name]["gpus"] = sum(gpus_of.values())
    placed = {name: {"jobs": 0, "gpus": 0} for name in CLUSTERS}
    for row in rows:
        placed[row[5]]["jobs"] += 1
        placed[row[5]]["gpus"] += int(row[7] or 0)
    finished = [float(r[4]) for r in rows if r[4] is not None]
    rounds = move_rounds(stack.log_text("worker")[log_from:])
    per_job_ms = [1000 * q["seconds"] / q["jobs"] for q in requests_]
    figures = {
        "mode": mode, "namespace": namespace, "t0": datetime.fromtimestamp(t0, UTC).isoformat(),
        "load1_before": round(load_before, 1), "load1_at_last_end": round(load_after_last_end, 1),
        "load1_after": round(os.getloadavg()[0], 1),
        "makespan_s": round(end - t0, 1) if end else None,
        "makespan_gangweb_finished_at_s": round(max(finished) - t0, 1) if finished else None,
        "jobs_complete_on_clusters": sum(n for k, n in complete_on.items() if k >= 1),
        "jobs_complete_on_two_clusters": complete_on.get(2, 0),
        "gangweb_phases": dict(Counter(r[2] for r in rows)), "gangweb_cleaned_up": sum(1 for r in rows if r[3]),
        "placed": placed, "ran": ran, "jobs_moved": sum(1 for r in rows if r[6]), "moves": sum(r[6] for r in rows),
        "move_rounds": rounds,
        "jobs_with_objects_on_both_clusters": len(on_both),
        "gang_objects_left_after_cleanup": dict(gang_left),
        "bulk_requests": requests_, "request_ms_per_job_median": round(statistics.median(per_job_ms), 3),
        "pods": summarize_samples(samples, caps, args.sample_seconds),
        "timeline": [{"t": s["t"], "load1": s["load1"], **{n: {"used": s[n]["used"],
                                                                "waiting": sum(s[n]["waiting"].values())}
                                                            for n in CLUSTERS if n in s}}
                     for s in samples[:: max(1, int(30 / args.sample_seconds))]],
    }
    for api in apis.values():
        api.close()
    log(f"{mode}: makespan {figures['makespan_s']} s (gangweb's finished_at {figures['makespan_gangweb_finished_at_s']}"
        f" s); ran {ran}; moved {figures['jobs_moved']}; {figures['request_ms_per_job_median']} ms/job to submit; "
        f"checks: complete {figures['jobs_complete_on_clusters']}, on both {len(on_both)}, left {dict(gang_left)}, "
        f"over capacity {figures['pods']['over_capacity_samples']}; load {load_before:.1f} -> "
        f"{figures['load1_after']}")
    return figures


def move_rounds(worker_log: str) -> dict:
    """From the worker's log: the moves' rounds that claimed any move ("moves: {'claimed': n, ...}", logged by
    `scheduling.resync_all_clusters`) and the moves they claimed."""
    claimed = [int(m) for m in re.findall(r"moves: \{'claimed': (\d+)", worker_log)]
    return {"rounds": sum(1 for n in claimed if n), "claimed": sum(claimed)}


def pairs(runs: list[dict]) -> list[dict]:
    """Each gangweb run against the baseline run next to it (the one before it in the order, else after): makespan
    ratio and the decision cost per job (request ms per job, gangweb's minus the baseline's)."""
    out = []
    for i, run in enumerate(runs):
        if run["mode"] != "gangweb" or not run.get("makespan_s"):
            continue
        near = [r for r in (runs[i - 1] if i else None, runs[i + 1] if i + 1 < len(runs) else None)
                if r and r["mode"] == "baseline" and r.get("makespan_s")]
        if not near:
            continue
        base = near[0]
        out.append({"gangweb": run["namespace"], "baseline": base["namespace"],
                    "ratio": round(run["makespan_s"] / base["makespan_s"], 3),
                    "decision_ms_per_job": round(run["request_ms_per_job_median"]
                                                 - base["request_ms_per_job_median"], 3)})
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--big", type=int, default=48, help="GPUs of the big cluster (nodes of 8)")
    parser.add_argument("--small", type=int, default=16, help="GPUs of the small cluster (nodes of 8)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds each pod runs")
    parser.add_argument("--move-after", type=int, default=30, help="the queue's move_after_seconds (>= 30)")
    parser.add_argument("--resync-seconds", type=int, default=10, help="GANGWEB_RESYNC_SECONDS: the moves' round")
    parser.add_argument("--bulk", type=int, default=100, help="jobs per bulk request (the API takes 5,000)")
    parser.add_argument("--order", default="baseline,gangweb", help="runs in order, comma-separated")
    parser.add_argument("--split", type=float, default=None, help="the baseline's proportion (default: the best)")
    parser.add_argument("--sample-seconds", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds a run may take")
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    order = [m.strip() for m in args.order.split(",") if m.strip()]
    if set(order) - {"gangweb", "baseline"} or not 1 <= args.bulk <= 5000 or args.big % GPUS_PER_NODE \
            or args.small % GPUS_PER_NODE:
        parser.error("--order takes gangweb and baseline; --bulk 1..5000; --big and --small multiples of 8")
    jobs = sim.draw_jobs(args.seed, args.jobs)
    best = sim.fixed_split(jobs, args.big, args.small, args.duration)
    p = best["proportion_big"] if args.split is None else args.split
    simulated = sim.gangweb_run(jobs, args.big, args.small, args.duration, args.move_after, args.resync_seconds)
    targets = sim.split(jobs, p, args.big, args.small)
    result = {"bench": "placement_real", "jobs": args.jobs, "seed": args.seed, "gpus_asked": sum(jobs),
              "clusters": {"big": args.big, "small": args.small}, "duration_s": args.duration,
              "move_after_s": args.move_after, "resync_s": args.resync_seconds, "bulk": args.bulk,
              "split_p": p, "k8s": os.environ.get("GANGWEB_K8S_VERSION", "default (1.37.2)"),
              "simulation": {"best_fixed_split": best, "gangweb_makespan_s": simulated["makespan"],
                             "gangweb_moved": simulated["moved"], "spread": simulated["spread"],
                             "rule_cpu_us_per_job": simulated["decision_us_per_job"]},
              "runs": [], "goal": "makespan ratio <= 1.1"}

    def write() -> None:
        result["pairs"] = pairs(result["runs"])
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2) + "\n")

    workdir = Path(tempfile.mkdtemp(prefix="gangweb-placement-real-"))
    with TwoClusterStack(workdir) as stack:
        t = time.monotonic()
        stack.start_two(args.big, args.small, args.move_after, args.duration, args.resync_seconds)
        log(f"stack up in {time.monotonic() - t:.0f} s (workdir {workdir}); split p={p}")
        # This process lists objects with gangweb's own helpers (faultstack.cluster_objects), which read settings.
        os.environ.update(stack.env)
        import django

        django.setup()
        for i, mode in enumerate(order):
            run = run_one(stack, mode, jobs, targets if mode == "baseline" else None, f"pr-{i}-{mode}", args)
            result["runs"].append(run)
            write()
    write()
    for pair in result["pairs"]:
        print(f"{pair['gangweb']} against {pair['baseline']}: ratio {pair['ratio']}, decision "
              f"{pair['decision_ms_per_job']} ms/job", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
