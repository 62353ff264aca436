"""Start-time estimate accuracy (issue 21 part 4): a seeded discrete-event simulation of a GPU cluster, asking
gangweb's estimator for every job at its submit time and comparing with when the job really started.

    python -m bench.estimate [--jobs 2400] [--seed 1] [--samples 100] [--load 1.0] [--json PATH|-]

**The "real" scheduler** is gangweb's own queue-policy code: `scheduling.queueing.allocation.allocate` (KAI's
allocate action as gangweb models it: queues lowest allocated / fair share first, line order priority then time
queued, queue and ancestor limits, cluster capacity) with fair shares from `scheduling.queueing.fair_share_model.divide`
recomputed before every pass, as KAI does each cycle. A pass runs after every arrival and every end.

**The workload**: one cluster of 64 GPUs (CPU and memory never bind), five queues (a parent `org` with three teams of
quotas 16 / 16 / 8, over-quota weights 2 / 1 / 1 and limits 48 / 40 / 24, and a top-level `batch`, quota 0, limit
32), six templates whose run times are lognormal (median 8 to 150 min, sigma 0.4 to 0.9), each queue submitting a
mix of them; 15 % of jobs at priority 100 (KAI's `build`), the rest 50. Arrivals are Poisson with a daily swing
(1.6x the mean rate at midday, 0.4x at night), the mean GPU demand equal to the capacity (`--load 1.0`): queues
form by day and drain by night, small jobs often slip into gaps while large gangs wait. The random draws (arrivals,
templates, run times) come from one seeded `random.Random`: the same seed gives the same figures.

**Estimates**: at each submit, before the pass that might start the job, `estimate.estimate` (the function the
API calls, `services/jobs/start_estimate.py`) is given what gangweb would read then: the running jobs with how long they
have run, the pending jobs, the run times of every job finished so far, the capacity and the queues. The first
`--warmup` jobs only build history (the estimator would say "unknown"); the rest are measured.

**Figures**: the median absolute error of p50 against the real wait (start - submit), next to a naive baseline on
the same jobs: the median wait of the jobs of the same queue that started before this submit. Also: p50/p90
coverage (share of jobs that started by their p50 / p90), how many answers were unknown, never or "now", and the
estimator's time per call. Goal (issue 21): the estimate's error at most half the baseline's.

**The fits-aware baseline (issue 35, the one that counts)**: the naive baseline is wrong by construction on the
jobs that fit at submit (they start at once; the estimate says "now"), which flatters the estimate. This baseline
also knows whether the job fits now: the bench runs the scheduler's own pass (`allocation.allocate` on the cluster
as it is at submit, fair shares divided over the pending jobs) on a copy before the real pass; placed there ->
it predicts a start now (0 s), else the median wait of the jobs of the same queue that had to wait (wait > 0) and
started before this submit (`fits_aware_all_waits`: the same with the queue's median wait of all its jobs, the
variant issue 35 quoted). `fits_aware` in the figures scores the estimate against it over all compared jobs and
over the jobs that did not fit at submit (`waited`), with p50 / p90 coverage on those. Goals (issue 35): error
ratio <= 0.5 on the jobs that waited, p90 coverage 88-92 %. `--seeds 1,2,3` runs several seeds and adds their
spread (min / median / max); `--combine A.json B.json ...` makes the same summary from single-seed JSON files.

**Jobs submitted meanwhile (issue 35)**: at each submit the estimator is also given the submissions of the last
`--window` seconds (queue, priority, asks, template: what gangweb's job rows hold), from which its replays draw
arrivals up to `--horizon` seconds ahead (scheduling/queueing/arrivals.py); `--no-arrivals` is the estimator
before. **The p90's calibration**: each waited job's figures keep where its real start fell among its replays'
starts (`waited_ranks`: how many replays started it earlier, out of how many); `--fit S1.json S2.json S3.json
--combine S4.json S5.json S6.json` fits the replays' quantile level at which 90 % of the fitting seeds' real starts
are covered and reports the coverage at that level on the other seeds (no fitting on the figures reported);
`--starts PATH` writes each waited job's real wait and replay starts, for other calibrations.
"""
from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import random
import statistics
import sys
import time
from collections import deque

from scheduling.queueing import allocation
from scheduling.queueing import arrivals as arrivals_model
from scheduling.queueing import estimate as model
from scheduling.queueing.allocation import ClusterState, Job, QueueSpec
from scheduling.queueing.estimate import RunTimes

from .estimate_scoring import SPREAD_FIGURES, calibrate, calibrate_z, fits_aware_figures, median_min, spread

MIN = 60.0
CAPACITY = {"gpu": 64, "cpu": 10**9, "memory": 10**9}
QUEUES = [
    QueueSpec("org", limit={"gpu": -1}),
    QueueSpec("team-a", parent="org", quota={"gpu": 16}, limit={"gpu": 48}, weight={"gpu": 2}),
    QueueSpec("team-b", parent="org", quota={"gpu": 16}, limit={"gpu": 40}, weight={"gpu": 1}),
    QueueSpec("team-c", parent="org", quota={"gpu": 8}, limit={"gpu": 24}, weight={"gpu": 1}),
    QueueSpec("batch", quota={"gpu": 0}, limit={"gpu": 32}, weight={"gpu": 1}),
]
# template: (GPUs of the gang, median run minutes, sigma of log run time)
TEMPLATES = {
    "finetune": (8, 45, 0.5), "pretrain-shard": (16, 150, 0.4), "eval": (1, 8, 0.6),
    "sweep": (2, 25, 0.9), "rl": (4, 90, 0.7), "notebook-batch": (1, 30, 0.8),
}
MIX = {  # queue: (share of arrivals, {template: weight})
    "team-a": (0.3, {"finetune": 3, "pretrain-shard": 1, "eval": 4}),
    "team-b": (0.3, {"rl": 2, "sweep": 3, "eval": 2}),
    "team-c": (0.2, {"finetune": 1, "notebook-batch": 3, "eval": 2}),
    "batch": (0.2, {"sweep": 2, "pretrain-shard": 1, "notebook-batch": 2}),
}
HIGH_PRIORITY = 0.15
TARGET_LOAD = 1.0
DAY = 24 * 3600.0
DAY_SWING = 0.6  # arrivals at 1.6x the mean rate at the day's peak, 0.4x at night


def _mean_gpu_minutes() -> float:
    total = 0.0
    for share, templates in MIX.values():
        weight = sum(templates.values())
        for name, w in templates.items():
            gpus, median, sigma = TEMPLATES[name]
            total += share * w / weight * gpus * median * math.exp(sigma ** 2 / 2)  # lognormal mean
    return total


def generate(n: int, rng: random.Random, load: float = TARGET_LOAD) -> list[tuple[float, Job, float]]:
    """n arrivals [(time s, Job, real run seconds)] in time order: a Poisson process whose rate follows the day
    (DAY_SWING above and below its mean, peaking at midday), by thinning a process at the peak rate."""
    rate = load * CAPACITY["gpu"] / (_mean_gpu_minutes() * MIN)  # mean jobs per second
    peak = rate * (1 + DAY_SWING)
    queues = list(MIX)
    shares = [MIX[q][0] for q in queues]
    t, out = 0.0, []
    for i in range(1, n + 1):
        while True:
            t += rng.expovariate(peak)
            if rng.random() * peak <= rate * (1 + DAY_SWING * math.sin(2 * math.pi * t / DAY)):
                break
        queue = rng.choices(queues, shares)[0]
        templates = MIX[queue][1]
        template = rng.choices(list(templates), list(templates.values()))[0]
        gpus, median, sigma = TEMPLATES[template]
        priority = 100 if rng.random() < HIGH_PRIORITY else 50
        job = Job(id=i, queue=queue, asks={"gpu": gpus, "cpu": 0, "memory": 0}, template=template,
                  name=f"{template}-{i}", priority=priority, queued_at=t)
        out.append((t, job, math.exp(math.log(median * MIN) + sigma * rng.gauss(0, 1))))
    return out


def run(n_jobs: int = 2400, seed: int = 1, samples: int = model.SAMPLES, warmup: int = 400,
        load: float = TARGET_LOAD, window: float | None = arrivals_model.WINDOW,
        horizon: float = arrivals_model.HORIZON, redivide: bool = False) -> dict:
    """Simulate, estimate at every submit, and return the figures (see the module docstring). `window`: seconds
    of submissions the estimator's arrival model reads (None: no arrivals modelled, the estimator before issue
    35); `horizon`: seconds after which its replays draw no arrival."""
    rng = random.Random(seed)
    arrivals = generate(n_jobs, rng, load)
    state = ClusterState(CAPACITY, QUEUES)
    pending: dict[int, Job] = {}
    running: dict[int, tuple[Job, float]] = {}
    history = RunTimes()
    true_run: dict[int, float] = {}
    submitted: dict[int, float] = {}
    started: dict[int, float] = {}
    asked: dict[int, model.Estimate] = {}
    baseline: dict[int, float | None] = {}
    waits_by_queue: dict[str, list[float]] = {q: [] for q in MIX}
    waited_by_queue: dict[str, list[float]] = {q: [] for q in MIX}  # waits > 0 only
    fits: dict[int, bool] = {}
    fits_baseline: dict[int, float | None] = {}
    call_seconds: list[float] = []
    recent: deque[Job] = deque()  # submissions of the last `window` seconds, oldest first
    events = [(t, 1, job.id, job, run_s) for t, job, run_s in arrivals]  # kind 1 arrival, 0 end (ends first)
    heapq.heapify(events)

    def schedule(now: float) -> None:
        state.divide(pending.values())
        lines = allocation.lines_of(pending.values())
        for job in allocation.allocate(state, lines):
            del pending[job.id]
            running[job.id] = (job, now)
            started[job.id] = now
            waits_by_queue[job.queue].append(now - submitted[job.id])
            if now > submitted[job.id]:
                waited_by_queue[job.queue].append(now - submitted[job.id])
            heapq.heappush(events, (now + true_run[job.id], 0, job.id, job, 0.0))

    while events:
        now, kind, jid, job, run_s = heapq.heappop(events)
        if kind == 0:
            state.release(job)
            del running[jid]
            history.add(job.template, job.queue, true_run[jid])
        else:
            submitted[jid], true_run[jid] = now, run_s
            pending[jid] = job
            while recent and window is not None and recent[0].queued_at < now - window:
                recent.popleft()
            if jid > warmup:
                came = None if window is None else arrivals_model.ArrivalModel(
                    [arrivals_model.Arrival(now - j.queued_at, j.queue, j.priority, j.asks, j.template)
                     for j in recent], window, horizon)
                on_cluster = [Job(id=j.id, queue=j.queue, asks=j.asks, template=j.template, name=j.name,
                                  elapsed=now - t0) for j, t0 in running.values()]
                t1 = time.perf_counter()
                asked[jid] = model.estimate(jid, CAPACITY, QUEUES, on_cluster, list(pending.values()), history,
                                            samples=samples, arrivals=came, redivide=redivide)
                call_seconds.append(time.perf_counter() - t1)
                waits = waits_by_queue[job.queue]
                baseline[jid] = statistics.median(waits) if waits else None
                fits[jid] = fits_now(jid, running, pending)
                waited = waited_by_queue[job.queue]
                fits_baseline[jid] = 0.0 if fits[jid] else (statistics.median(waited) if waited else None)
            recent.append(job)
        # Every event at this instant first, then one pass (as a scheduling cycle would see them).
        if not events or events[0][0] > now:
            schedule(now)
    result = figures(asked, baseline, submitted, started, call_seconds)
    result["fits_aware"] = fits_aware_figures(asked, fits_baseline, fits, submitted, started)
    # The variant issue 35 quoted (0.79x / 0.57x): fits now -> now, else the queue's median wait of all its jobs.
    all_waits = {jid: 0.0 if fits[jid] else b for jid, b in baseline.items()}
    result["fits_aware_all_waits"] = fits_aware_figures(asked, all_waits, fits, submitted, started)
    result.update(jobs=n_jobs, seed=seed, samples=samples, warmup_jobs=warmup, load=load, arrival_window_s=window,
                  arrival_horizon_s=horizon if window is not None else None)
    return result


def fits_now(target_id: int, running: dict[int, tuple[Job, float]], pending: dict[int, Job]) -> bool:
    """Whether the scheduler's pass at this instant places pending job `target_id`: `allocation.allocate` on a
    fresh copy of the cluster (the running jobs placed, fair shares divided over the pending jobs, every queue's
    line), as the real pass right after this submit would run it. The state the simulation keeps is not touched."""
    state = ClusterState(CAPACITY, QUEUES, [j for j, _ in running.values()])
    state.divide(pending.values())
    return any(j.id == target_id for j in allocation.allocate(state, allocation.lines_of(pending.values())))


def figures(asked, baseline, submitted, started, call_seconds) -> dict:
    """The report: errors and waits in minutes, shares in percent. `waiting_jobs`: the same figures over the jobs
    that did not fit at submit (status "estimated"), where an estimate has something to say."""
    statuses: dict[str, int] = {}
    est_err, base_err, in_p50, in_p90, waits = [], [], 0, 0, []
    waiting = {"estimate": [], "baseline": [], "waits": []}
    for jid, est in asked.items():
        statuses[est.status] = statuses.get(est.status, 0) + 1
        if est.p50 is None or baseline.get(jid) is None or jid not in started:
            continue
        wait = started[jid] - submitted[jid]
        waits.append(wait)
        est_err.append(abs(est.p50 - wait))
        base_err.append(abs(baseline[jid] - wait))
        in_p50 += wait <= est.p50 + 1e-6
        in_p90 += wait <= est.p90 + 1e-6
        if est.status == model.ESTIMATED:
            waiting["estimate"].append(est_err[-1])
            waiting["baseline"].append(base_err[-1])
            waiting["waits"].append(wait)
    compared = len(est_err)
    est_mae = statistics.median(est_err) / MIN if est_err else None
    base_mae = statistics.median(base_err) / MIN if base_err else None
    w_est, w_base = median_min(waiting["estimate"]), median_min(waiting["baseline"])
    return {
        "measured_jobs": len(asked), "compared_jobs": compared, "statuses": statuses,
        "median_wait_min": round(statistics.median(waits) / MIN, 2) if waits else None,
        "mean_wait_min": round(statistics.fmean(waits) / MIN, 2) if waits else None,
        "estimate_p50_median_abs_error_min": None if est_mae is None else round(est_mae, 2),
        "baseline_median_abs_error_min": None if base_mae is None else round(base_mae, 2),
        "error_ratio": round(est_mae / base_mae, 3) if est_mae is not None and base_mae else None,
        "goal": "estimate error <= 0.5 x baseline error",
        "goal_met": bool(est_mae is not None and base_mae and est_mae <= 0.5 * base_mae),
        "waiting_jobs": {"jobs": len(waiting["waits"]), "median_wait_min": median_min(waiting["waits"]),
                         "estimate_p50_median_abs_error_min": w_est, "baseline_median_abs_error_min": w_base,
                         "error_ratio": round(w_est / w_base, 3) if w_est is not None and w_base else None},
        "p50_coverage_pct": round(100 * in_p50 / compared, 1) if compared else None,
        "p90_coverage_pct": round(100 * in_p90 / compared, 1) if compared else None,
        "replays_per_estimate_mean": round(statistics.fmean(e.samples for e in asked.values() if e.samples), 1)
        if any(e.samples for e in asked.values()) else None,
        "estimate_call_ms": {"mean": round(1000 * statistics.fmean(call_seconds), 2) if call_seconds else None,
                             "p99": round(1000 * sorted(call_seconds)[max(0, math.ceil(0.99 * len(call_seconds)) - 1)],
                                          2) if call_seconds else None},
    }


def _print(result: dict) -> None:
    print(f"load {result['load']}, seed {result['seed']}, {result['jobs']} jobs, {result['samples']} replays per "
          "estimate")
    print(f"{result['compared_jobs']} of {result['measured_jobs']} measured jobs compared "
          f"(statuses {result['statuses']}); median wait {result['median_wait_min']} min")
    print(f"median |p50 - real start|: {result['estimate_p50_median_abs_error_min']} min; "
          f"baseline (queue's median wait): {result['baseline_median_abs_error_min']} min; "
          f"ratio {result['error_ratio']} (goal <= 0.5: {'met' if result['goal_met'] else 'NOT met'})")
    w = result["waiting_jobs"]
    print(f"jobs that did not fit at submit ({w['jobs']}, median wait {w['median_wait_min']} min): "
          f"{w['estimate_p50_median_abs_error_min']} min against {w['baseline_median_abs_error_min']} min, "
          f"ratio {w['error_ratio']}")
    fa = result["fits_aware"]
    for name in ("all", "waited"):
        g = fa[name]
        print(f"fits-aware baseline, {name} ({g['jobs']} jobs): {g['estimate_p50_median_abs_error_min']} min against "
              f"{g['baseline_median_abs_error_min']} min, ratio {g['error_ratio']}; started by p50 "
              f"{g['p50_coverage_pct']} %, by p90 {g['p90_coverage_pct']} %")
    v = result["fits_aware_all_waits"]
    print(f"variant (else the queue's median wait of all jobs): ratio {v['all']['error_ratio']} over all, "
          f"{v['waited']['error_ratio']} on the jobs that waited ({v['waited']['baseline_median_abs_error_min']} min)")
    print(f"issue 35 goals on the jobs that waited: ratio <= 0.5 {'met' if fa['ratio_goal_met'] else 'NOT met'}, "
          f"p90 coverage 88-92 % {'met' if fa['p90_goal_met'] else 'NOT met'} "
          f"(fits check disagrees with 'now' on {fa['fits_check_disagrees']} jobs)")
    print(f"started by p50: {result['p50_coverage_pct']} %, by p90: {result['p90_coverage_pct']} %; "
          f"estimator {result['estimate_call_ms']['mean']} ms per call (p99 {result['estimate_call_ms']['p99']}"
          f" ms); {result['seconds']} s in all; load average {result['loadavg_start']} -> {result['loadavg_end']}")


def _print_spread(summary: dict) -> None:
    print(f"spread over seeds {summary['seeds']} (min / median / max):")
    for name in SPREAD_FIGURES:
        v = summary[name]
        print(f"  {name}: " + ("-" if v is None else f"{v['min']} / {v['median']} / {v['max']}"))
    print(f"  ratio goal at the median {'met' if summary['ratio_goal_met_at_median'] else 'NOT met'}, "
          f"p90 goal at the median {'met' if summary['p90_goal_met_at_median'] else 'NOT met'}")


def _dump(doc: dict, path: str | None) -> None:
    if path == "-":
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif path:
        with open(path, "w") as fh:
            json.dump(doc, fh, indent=2)
            fh.write("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seeds", help="comma-separated seeds run one after another, with their spread")
    parser.add_argument("--combine", nargs="+", metavar="JSON", help="summarise single-seed JSON files, run nothing")
    parser.add_argument("--fit", nargs="+", metavar="JSON",
                        help="with --combine: fit the p90 level on these single-seed runs, report on --combine's")
    parser.add_argument("--samples", type=int, default=model.SAMPLES)
    parser.add_argument("--warmup", type=int, default=400, help="first jobs that only build history")
    parser.add_argument("--load", type=float, default=TARGET_LOAD, help="mean GPU demand / capacity")
    parser.add_argument("--window", type=float, default=arrivals_model.WINDOW,
                        help="seconds of submissions the arrival model reads")
    parser.add_argument("--horizon", type=float, default=arrivals_model.HORIZON,
                        help="seconds after which the replays draw no arrival")
    parser.add_argument("--redivide", action="store_true", help="replays recompute fair shares every pass")
    parser.add_argument("--no-arrivals", action="store_true", help="the estimator without the arrival model")
    parser.add_argument("--fit-starts", nargs="+", metavar="JSON",
                        help="with --combine and --report-starts: fit P90_Z on these --starts files")
    parser.add_argument("--report-starts", nargs="+", metavar="JSON", help="report the fitted P90_Z's coverage here")
    parser.add_argument("--starts", metavar="PATH", help="write each waited job's real wait and replay starts")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON ('-' for stdout)")
    args = parser.parse_args(argv)
    if args.combine:
        runs = []
        for path in args.combine:
            with open(path) as fh:
                runs.append(json.load(fh))
        doc = {"spread": spread(runs), "runs": runs}
        _print_spread(doc["spread"])
        if args.fit:
            fitted = []
            for path in args.fit:
                with open(path) as fh:
                    fitted.append(json.load(fh))
            doc["calibration"] = calibrate(fitted, runs)
            doc["fit_runs"] = fitted
            c = doc["calibration"]
            if args.fit_starts and args.report_starts:
                loaded = {}
                for path in (*args.fit_starts, *args.report_starts):
                    with open(path) as fh:
                        loaded[path] = json.load(fh)
                doc["calibration_z"] = cz = calibrate_z([loaded[p] for p in args.fit_starts],
                                                        [loaded[p] for p in args.report_starts])
                print(f"P90_Z fitted on seeds {[f['seed'] for f in cz['fit_seeds']]}: {cz['z']} (pooled coverage "
                      f"there {cz['fit_pooled_pct']} %); p90 coverage on seeds "
                      f"{[r['seed'] for r in cz['report_seeds']]}: "
                      + ", ".join(f"{r['at_z']} % (replays' 0.9: {r['at_0.9']} %)" for r in cz["report_seeds"]))
            print(f"p90 level fitted on seeds {[f['seed'] for f in c['fit_seeds']]}: {c['level']} "
                  f"(pooled coverage there {c['fit_pooled_at_level']} %); on seeds "
                  f"{[r['seed'] for r in c['report_seeds']]}: " + ", ".join(
                      f"{r['at_level']} % (at 0.9: {r['at_0.9']} %)" for r in c["report_seeds"]))
        _dump(doc, args.json)
        return 0
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [args.seed]
    runs = []
    for seed in seeds:
        load_start = [round(x, 2) for x in os.getloadavg()]
        t0 = time.perf_counter()
        result = run(args.jobs, seed, args.samples, args.warmup, args.load,
                     None if args.no_arrivals else args.window, args.horizon, args.redivide)
        result["seconds"] = round(time.perf_counter() - t0, 1)
        waited_starts = result["fits_aware"].pop("_waited_starts")
        result["fits_aware_all_waits"].pop("_waited_starts", None)
        if args.starts:
            _dump({"seed": seed, "waited": waited_starts}, args.starts.replace("{seed}", str(seed)))
        result["loadavg_start"], result["loadavg_end"] = load_start, [round(x, 2) for x in os.getloadavg()]
        runs.append(result)
        if args.json != "-":
            _print(result)
    doc = runs[0] if len(runs) == 1 else {"spread": spread(runs), "runs": runs}
    if len(runs) > 1 and args.json != "-":
        _print_spread(doc["spread"])
    _dump(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
