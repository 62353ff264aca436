"""Placement over two clusters of unequal size (issue 38): the makespan of 500 jobs submitted without a cluster
against the same jobs split by hand in the best fixed proportion, and the decision cost per job.

    python -m bench.placement [--jobs 500] [--seeds 1,2,3] [--big 48] [--small 16] [--duration 600]
                              [--move-after 300] [--period 30] [--json PATH|-]

**What runs.** gangweb's own rule (`scheduling.placement.rule.choose` and `take`, the functions a bulk submit
calls, on the numbers `placement.numbers` would read) places the jobs of one bulk in request order; then each
cluster runs its own jobs: a pass at every end places, in submit order, every waiting job whose whole gang fits the
free GPUs (kube-scheduler's queue with gang admission: a job that does not fit is passed over, no reservation).
Every `--period` seconds (the beat's resync period) the moves' round (`reconcile/moves.py`'s rule: a job waiting
longer than `--move-after` on one cluster while the other fits it now) moves jobs across, the other cluster's
numbers counting what it already holds and what waits there. Jobs ask 1, 2, 4 or 8 GPUs (seeded draws, one
`random.Random` per seed) and run a fixed `--duration` (the KWOK stage's `gangweb.io/sim-duration`); CPU and
memory never bind.

**The baseline.** The same jobs, each cluster running only the jobs assigned to it by hand: for every proportion
p in 0, 0.01, ..., 1, job i goes to the big cluster while the big cluster's share of the GPUs assigned so far is
below p; the makespan of the best p is the baseline (the best a person could do knowing the sizes in advance).

**Figures.** makespan (s) and its ratio to the best fixed split (goal <= 1.1), jobs and GPUs per cluster
(spread), the jobs moved and the rounds that moved any, and the decision cost per job: the rule's own CPU
(`rule.choose` + `take`, microseconds per job over the bulk; the database part is three statements per request
whatever its size, pinned by tests/api/test_job_placement.py). The load average is recorded with the run: the
CPU figure swings with it; the makespans are simulated time and do not.

**Not measured here** (left for a run on two local control planes with KWOK stages): the time the clusters'
own passes, creates and watches add; this bench gives the placement's own effect on the makespan.
"""
from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from decimal import Decimal

from scheduling.placement import rule

SIZES = (1, 2, 4, 8)
GIB = 2**30


@dataclass
class Sim:
    """One cluster in the simulation: its GPUs, running ends (heap of (end, gpus)), waiting jobs in order."""

    name: str
    gpus: int
    running: list = field(default_factory=list)
    waiting: list = field(default_factory=list)  # [(submit order, gpus, arrived_at)]
    held: int = 0

    def start_what_fits(self, now: float, duration: float) -> None:
        keep = []
        for job in self.waiting:
            if self.held + job[1] <= self.gpus:
                self.held += job[1]
                heapq.heappush(self.running, (now + duration, job[1]))
            else:
                keep.append(job)
        self.waiting = keep

    def end_until(self, now: float) -> None:
        while self.running and self.running[0][0] <= now:
            self.held -= heapq.heappop(self.running)[1]

    def where(self, cid: int) -> rule.Where:
        asks = lambda g: rule.Amounts(Decimal(g), 1000 * g, GIB * g)  # noqa: E731 - CPU/memory never bind
        return rule.Where(cid, self.name, asks(self.gpus), asks(self.held), asks(sum(j[1] for j in self.waiting)))


def demand(gpus: int) -> rule.Amounts:
    return rule.Amounts(Decimal(gpus), 1000 * gpus, GIB * gpus)


def run_cluster_pair(clusters: list[Sim], duration: float, move_after: float | None, period: float) -> dict:
    """Run both clusters until every job ended; returns {"makespan", "moved", "move_rounds"}."""
    now, moved, rounds = 0.0, 0, 0
    for c in clusters:
        c.start_what_fits(now, duration)
    next_round = period
    while any(c.running or c.waiting for c in clusters):
        ends = [c.running[0][0] for c in clusters if c.running]
        now = min([*ends, next_round] if move_after is not None else ends)
        for c in clusters:
            c.end_until(now)
            c.start_what_fits(now, duration)
        if move_after is not None and now >= next_round:
            next_round += period
            moved_now = 0
            for i, c in enumerate(clusters):
                other = clusters[1 - i]
                for job in list(c.waiting):
                    if now - job[2] < move_after:
                        continue
                    if other.where(1 - i).fits(demand(job[1])):
                        c.waiting.remove(job)
                        other.waiting.append((job[0], job[1], now))
                        other.waiting.sort()
                        other.start_what_fits(now, duration)
                        moved_now += 1
            moved += moved_now
            rounds += bool(moved_now)
    return {"makespan": now, "moved": moved, "move_rounds": rounds}


def gangweb_run(jobs: list[int], big: int, small: int, duration: float, move_after: float, period: float) -> dict:
    clusters = [Sim("big", big), Sim("small", small)]
    wheres = [c.where(i) for i, c in enumerate(clusters)]
    queues = [rule.QueueThere(), rule.QueueThere()]
    started = time.process_time()
    chosen = []
    for gpus in jobs:
        candidates = [rule.Candidate(w, q) for w, q in zip(wheres, queues, strict=True)]
        decision = rule.choose(demand(gpus), candidates)
        pick = next(c for c in candidates if c.where.id == decision.cluster_id)
        rule.take(pick, demand(gpus))
        chosen.append(decision.cluster_id)
    cost = (time.process_time() - started) / len(jobs)
    for i, (gpus, cid) in enumerate(zip(jobs, chosen, strict=True)):
        clusters[cid].waiting.append((i, gpus, 0.0))
    spread = {c.name: {"jobs": sum(1 for x in chosen if x == i), "gpus": sum(g for g, x in zip(jobs, chosen,
                                                                                              strict=True) if x == i)}
              for i, c in enumerate(clusters)}
    out = run_cluster_pair(clusters, duration, move_after, period)
    return {**out, "spread": spread, "decision_us_per_job": round(cost * 1e6, 1)}


def draw_jobs(seed: int, count: int) -> list[int]:
    """The GPUs of each of `count` jobs, drawn from SIZES with `random.Random(seed)`: the mix of this bench and of
    bench/placement_real.py (the same seed gives the same jobs in both)."""
    rnd = random.Random(seed)
    return [rnd.choice(SIZES) for _ in range(count)]


def split(jobs: list[int], p: float, big: int, small: int) -> list[int]:
    """The split by hand in proportion `p`: for each job (GPUs, in order) 0 (the big cluster) while the big
    cluster's share of the GPUs assigned so far is below `p`, else 1 (the small one); a job larger than its
    cluster's GPUs goes to the other."""
    sizes, out = (big, small), []
    to_big = total = 0
    for gpus in jobs:
        target = 0 if (total == 0 and p > 0) or (total and to_big / total < p) else 1
        if gpus > sizes[target]:
            target = 1 - target
        out.append(target)
        total += gpus
        to_big += gpus if target == 0 else 0
    return out


def fixed_split(jobs: list[int], big: int, small: int, duration: float) -> dict:
    best = None
    for step in range(101):
        p = step / 100
        clusters = [Sim("big", big), Sim("small", small)]
        for i, (gpus, target) in enumerate(zip(jobs, split(jobs, p, big, small), strict=True)):
            clusters[target].waiting.append((i, gpus, 0.0))
        makespan = run_cluster_pair(clusters, duration, None, 1.0)["makespan"]
        if best is None or makespan < best["makespan"]:
            best = {"makespan": makespan, "proportion_big": p}
    return best


def one_seed(seed: int, args) -> dict:
    jobs = draw_jobs(seed, args.jobs)
    ours = gangweb_run(jobs, args.big, args.small, args.duration, args.move_after, args.period)
    base = fixed_split(jobs, args.big, args.small, args.duration)
    no_moves = gangweb_run(jobs, args.big, args.small, args.duration, None, args.period)
    return {"seed": seed, "gpus_asked": sum(jobs), "gangweb": ours, "gangweb_without_moves": no_moves,
            "best_fixed_split": base, "ratio": round(ours["makespan"] / base["makespan"], 3),
            "ratio_without_moves": round(no_moves["makespan"] / base["makespan"], 3)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--big", type=int, default=48)
    parser.add_argument("--small", type=int, default=16)
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--move-after", type=float, default=300.0)
    parser.add_argument("--period", type=float, default=30.0)
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    runs = [one_seed(int(s), args) for s in args.seeds.split(",")]
    result = {"bench": "placement", "jobs": args.jobs, "clusters": {"big": args.big, "small": args.small},
              "duration_s": args.duration, "move_after_s": args.move_after, "period_s": args.period,
              "load_average": list(os.getloadavg()), "runs": runs,
              "worst_ratio": max(r["ratio"] for r in runs), "goal": "ratio <= 1.1"}
    text = json.dumps(result, indent=2)
    if args.json == "-":
        sys.stdout.write(text + "\n")
    elif args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    for r in runs:
        print(f"seed {r['seed']}: gangweb {r['gangweb']['makespan']:.0f} s (moved {r['gangweb']['moved']} in "
              f"{r['gangweb']['move_rounds']} rounds; spread {r['gangweb']['spread']}), without moves "
              f"{r['gangweb_without_moves']['makespan']:.0f} s, best fixed split "
              f"{r['best_fixed_split']['makespan']:.0f} s at p={r['best_fixed_split']['proportion_big']}: "
              f"ratio {r['ratio']} ({r['ratio_without_moves']} without moves); decision "
              f"{r['gangweb']['decision_us_per_job']} us/job", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
