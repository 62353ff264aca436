"""When a pending gang would start: a replay of the cluster's expected job ends against its queues and capacity.

A pure model (plain data in, plain data out; no database, no cluster), used by the API and the job page
(`services.jobs.start_estimate`) and by the accuracy benchmark (`bench/estimate.py`), so the benchmark measures the very
function users read. Answers "when will my job start?" (kueue #13159; Slurm's `squeue --start` is the only peer
that tries).

**The replay** (one sample): the cluster starts as it is now (its capacity minus what the placed jobs hold, each
queue's allocation). Each running job ends after a *remaining* time drawn from the run times of finished jobs like it
(`RunTimes`: same template and queue, else same template, else same queue), **conditioned on how long it has already
run**: a draw among the runs longer than its elapsed time, minus that time (a lognormal fitted to the runs when
fewer than `MIN_TAIL` of them are longer). After each end, one allocation pass (`allocate`, KAI's allocate action as
gangweb models it) places what fits; a job placed in the replay then runs for a drawn run time and ends in turn. The
target's start is the replay time at which the pass places it. **Jobs submitted meanwhile** (given `arrivals`,
queueing/arrivals.py): each replay draws arrivals at each queue's recent rate (its Gamma posterior) and mix; they
join their queue's line at their arrival time, behind every job pending now, and a pass follows.

**p50 and p90**: `SAMPLES` replays with independent draws (a seeded `random.Random`, so the same inputs give the
same answer); p50 and p90 are nearest-rank quantiles of the target's start over the replays (seconds from now), at
0.5 and at `P90_LEVEL` (fitted so that 90 % of real starts fall within it in bench/estimate.py).

**The allocation pass** (`allocate`), shared with the benchmark's "real" scheduler:

- queues are served lowest *saturation* first: a queue's allocated / fair share (the largest over GPU, CPU and
  memory), compared level by level from the top of the tree (KAI orders queues by allocated / fair share, lowest
  first: KAI `docs/fairness/README.md` "Queue Order"; docs/upstream.md, KAI fair share); ties by name;
- within a queue, jobs go in line order: priority, then time queued, then id (`services.queues.line`, KAI's
  `JobOrderFn`);
- the chosen queue's next job is placed when it fits the cluster's free room (GPU, CPU and memory, summed over the
  schedulable nodes) and every finite `limit` of its queue and the queue's ancestors; a job that does not fit is
  passed over for this pass (KAI tries the others; there is no reservation for a large gang), and the queue takes
  its turn again with its next job.

**Fair shares** are `queueing.fair_share_model.divide` (KAI's division) of the cluster's capacity over the queues, with
requested = each queue's running plus pending asks and allocated = its running asks. The estimate divides once,
from the state at the time of asking, and keeps those shares for the whole replay (KAI recomputes them every
cycle); the benchmark's scheduler recomputes them every pass, so the error this causes is part of what it measures.

**What is not modelled** (each makes the estimate earlier or later than the truth; docs/queues.md lists them):
reclaim and preemption (a queue over its fair share losing jobs to one below it), the rule that non-preemptible
jobs (priority >= 100) run only within their queue's quota, where the room is (per-node packing, node selectors,
taints, topology: room is a cluster-wide sum), pods gangweb does not manage, jobs submitted after the question
beyond what `arrivals` expects (a burst, a new kind of job), and time between placement and Running (image pulls).

**Unknown** rather than a guess when: the cluster's capacity is not known; or the target does not fit now and the
end of a job it may wait on cannot be told (any running job of the cluster, or a pending one the replay places
before it), because fewer than `MIN_RUNS` finished runs with real (not inferred) start and end times are known at
every level of that job's fallback; or the replay ends with the target still unplaced. **Never** (as things stand)
when the gang asks more than the cluster has in all, or more than a finite limit of its queue or an ancestor.

Units: amounts are whatever the caller uses per resource (gangweb passes KAI units: GPU devices, CPU millicores,
memory MB); every time is in seconds, relative to the moment of asking (0 = now).
"""
from __future__ import annotations

import bisect
import heapq
import math
import random
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist, fmean, pstdev

from .allocation import ClusterState, Job, QueueSpec, allocate, lines_of, smallest_asks
from .arrivals import Arrival, ArrivalModel, window_words
from .estimate_words import amount as _amount
from .estimate_words import arrival_work, span
from .estimate_words import number as _num

MIN_RUNS = 5  # finished runs needed before run times are trusted
MIN_TAIL = 3  # runs longer than the elapsed time needed to draw among them; fewer: the fitted lognormal's tail
PER_KEY = 200  # most recent runs kept per history key
SAMPLES = 100  # replays per estimate: ~1 %-steps for p50/p90 (bench/estimate.py: the cost per call)
MIN_SAMPLES = 20
# Units of work (a queue looked at, an order key read or a job tried in an allocation pass, 1-3 µs each) over all
# replays: past it, no new replay starts once MIN_SAMPLES are done; past 4 x it none starts at all (a line of
# hundreds of queues).
WORK_BUDGET = 50_000
MIN_SIGMA = 0.1  # the fitted lognormal's spread when every run took the same time (log-seconds)
# The replays' quantile level of "p90" before the log-normal bound (`upper_bound`).
P90_LEVEL = 0.9
# The p90 is at least exp(mean + P90_Z x sd) of the replays' log starts: a log-normal bound whose spread is the
# replays' own (run times, arrivals, the arrival rate's Gamma), with P90_Z fitted on seeds 1-3 of bench/estimate.py
# so that 90 % of the waited jobs' real starts fall within it (pooled), and checked on seeds 4-6: 89.4 / 91.8 /
# 89.7 % there (bench/README.md). The replays' own 0.9 quantile held 74-81 % of real starts, and their maximum
# 88.5 % on seeds 1-3: what the replay leaves out (fair shares redivided every cycle, arrivals beyond an hour, a
# rate that changes, jobs starved by backfill) makes its spread too narrow.
P90_Z = 2.36
LOG_FLOOR = 60.0  # seconds: starts sooner count as a minute in the log-normal bound (a start at 0 s has no log)

ESTIMATED, NOW, UNKNOWN, NEVER = "estimated", "now", "unknown", "never"
LEVELS = {"template_queue": "same template and queue", "template": "same template", "queue": "same queue"}


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (the smallest value with at least a fraction `q` of `values` at or below it).
    Raises ValueError for empty `values` (there is no such value; callers with possibly empty data use
    `Runs.p50`, which is None then)."""
    if not values:
        raise ValueError("the quantile of no values is not defined")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True)
class Runs:
    """The run times (seconds, sorted) a job's end is drawn from, and which fallback level they come from."""

    seconds: tuple[float, ...]
    level: str

    @property
    def enough(self) -> bool:
        return len(self.seconds) >= MIN_RUNS

    @property
    def p50(self) -> float | None:
        """The median run time (seconds), None when there are no runs (a template with no finished run yet)."""
        return quantile(self.seconds, 0.5) if self.seconds else None

    def _lognormal(self) -> NormalDist:
        """The normal distribution of log run seconds fitted to the runs (computed once per Runs)."""
        fitted = self.__dict__.get("_fitted")
        if fitted is None:
            logs = [math.log(max(s, 1.0)) for s in self.seconds]
            fitted = NormalDist(fmean(logs), max(pstdev(logs), MIN_SIGMA))
            object.__setattr__(self, "_fitted", fitted)  # a cache on a frozen instance, not a field
        return fitted

    def draw(self, rng: random.Random, elapsed: float = 0.0) -> float:
        """A remaining run time (seconds) for a job that has run `elapsed` seconds: a run longer than `elapsed`
        drawn uniformly, minus `elapsed`; with fewer than MIN_TAIL longer runs, the tail above `elapsed` of the
        lognormal fitted to the runs (inverse CDF)."""
        i = bisect.bisect_right(self.seconds, elapsed)
        if len(self.seconds) - i >= MIN_TAIL:
            return self.seconds[rng.randrange(i, len(self.seconds))] - elapsed
        dist = self._lognormal()
        low = dist.cdf(math.log(max(elapsed, 1.0)))
        u = min(low + (1 - low) * rng.random(), 1 - 1e-12)
        return max(math.exp(dist.inv_cdf(max(u, 1e-12))) - elapsed, 0.0)


class RunTimes:
    """Finished runs by history key, with the fallback of the estimate: (template, queue), else template, else
    queue; the first level with at least MIN_RUNS runs wins. Built from ``(template, queue, seconds)`` rows, newest
    first, and grown with `add` (a newer run); the newest PER_KEY of each key are kept. Rows with seconds <= 0 are
    ignored."""

    def __init__(self, rows: Iterable[tuple[object, object, float]] = ()):
        self._rows: dict[tuple, deque[float]] = {}
        self._runs: dict[tuple, Runs] = {}
        for template, queue, seconds in rows:
            if seconds and seconds > 0:
                for key in self._keys(template, queue):
                    got = self._rows.setdefault(key, deque())
                    if len(got) < PER_KEY:
                        got.append(float(seconds))  # older than those already there

    @staticmethod
    def _keys(template, queue) -> tuple[tuple, ...]:
        return (("template_queue", template, queue), ("template", template), ("queue", queue))

    def add(self, template, queue, seconds: float) -> None:
        """A run newer than every run already known (the oldest beyond PER_KEY is dropped)."""
        if not seconds or seconds <= 0:
            return
        for key in self._keys(template, queue):
            got = self._rows.setdefault(key, deque())
            got.appendleft(float(seconds))
            if len(got) > PER_KEY:
                got.pop()
            self._runs.pop(key, None)

    def _get(self, key: tuple) -> Runs | None:
        if key not in self._runs:
            if key not in self._rows:
                return None
            self._runs[key] = Runs(tuple(sorted(self._rows[key])), key[0])
        return self._runs[key]

    def for_job(self, template, queue) -> Runs:
        """The runs the ends of jobs of (`template`, `queue`) are drawn from; the most specific level when none has
        enough (then `Runs.enough` is False and says why)."""
        found = [self._get(k) for k in self._keys(template, queue)]
        for runs in found:
            if runs is not None and runs.enough:
                return runs
        best = max((r for r in found if r is not None), key=lambda r: len(r.seconds), default=None)
        return best or Runs((), "template_queue")


# --- the allocation pass ------------------------------------------------------------------------------------------


# --- the estimate -----------------------------------------------------------------------------------------------

@dataclass
class Estimate:
    """The answer for one pending job.

    - `status`: "estimated" (p50/p90 set), "now" (it fits the free room now: 0 s), "unknown" or "never"
      (`reason` says why);
    - `p50`, `p90`: seconds from now to its start (None unless estimated or now);
    - `ahead`: pending jobs before it in its queue's line; `needs`, `free_now`: the binding resource's amount it
      asks and what is free of it now (`resource` names it), `blocked_by`: ("cluster", r, "") or ("limit", r,
      queue) of its first obstacle now;
    - `freed_by`: the job whose end made room in the median replay (a `Job`), `freed_was_running`: it runs now
      (else it starts in the replay first), `freed_runs`: the `Runs` its end was drawn from (None for a job being
      cancelled: it ends when its pods go, no history read), `free_then`: free room of the binding resource right
      after that end;
    - `thin`: (job, its `Runs`) of the job whose history was too thin, for an unknown;
    - `samples`: replays run; `work`: units of work they spent (`allocate`);
    - `arrivals_ahead`: work (amount of `resource` x seconds) expected from jobs submitted while it waits that go
      ahead of it, at the rate of the last `arrival_window` seconds (0 when arrivals were not modelled);
    - `starts`: the replays' starts of the target (seconds, sorted; empty unless estimated), which p50 and p90 are
      quantiles of (the benchmark calibrates `P90_LEVEL` with them).
    """

    status: str
    p50: float | None = None
    p90: float | None = None
    reason: str = ""
    ahead: int = 0
    resource: str = "gpu"
    needs: float = 0.0
    free_now: float = 0.0
    blocked_by: tuple | None = None
    freed_by: Job | None = None
    freed_was_running: bool = False
    freed_runs: Runs | None = None
    free_then: float = 0.0
    thin: tuple[Job, Runs] | None = None
    samples: int = 0
    work: int = 0
    arrivals_ahead: float = 0.0
    arrival_window: float = 0.0
    starts: tuple[float, ...] = ()


def _binding(job: Job, state: ClusterState) -> str:
    """The resource the evidence talks about: the blocked one, else GPUs when asked, else CPU."""
    blocked = state.blocker(job)
    if blocked is not None:
        return blocked[1]
    return "gpu" if (job.asks.get("gpu") or 0) > 0 else "cpu"


def _replay(target: Job, state: ClusterState, lines: dict[str, list[Job]], running: Sequence[Job],
            runs_of, rng: random.Random, work: list[int], arrivals: ArrivalModel | None = None,
            redivide: bool = False):
    """One sample: (start seconds, the Job whose end triggered the pass that placed `target`, it was running
    now, free room after that end by resource) or ("thin", job) when a job whose end is needed has too thin a
    history, or None when the replay runs out of ends with `target` unplaced. Jobs drawn from `arrivals`
    (queueing/arrivals.py) join their queue's line at their arrival time, in line order, and a pass follows.
    Adds its passes to `work[0]`."""
    events: list[tuple[float, int, Job, bool]] = []
    for job in running:
        runs = runs_of(job)
        end = 0.0 if job.ending else runs.draw(rng, job.elapsed)
        events.append((end, job.id, job, True))
    heapq.heapify(events)
    coming = arrivals.draw(rng, origin=max((j.queued_at for js in lines.values() for j in js), default=0.0) + 1.0) \
        if arrivals else []
    k = 0  # the next arrival in `coming`
    t, trigger, was_running, free_after = 0.0, None, False, dict(state.free)
    smallest = smallest_asks(lines)  # placed jobs leave it stale: a pass then runs and places nothing
    while True:
        if redivide:
            state.divide(j for js in lines.values() for j in js)
        for job in allocate(state, lines, smallest, work):
            if job.id == target.id:
                return t, trigger, was_running, free_after
            runs = runs_of(job)
            if not runs.enough:
                return ("thin", job)
            heapq.heappush(events, (t + runs.draw(rng), job.id, job, False))
        if k < len(coming) and (not events or coming[k][0] < events[0][0]):
            t = coming[k][0]
            while k < len(coming) and coming[k][0] <= t:
                job = coming[k][1]
                line = lines.setdefault(job.queue, [])
                bisect.insort(line, job, key=Job.line_key)
                smallest.setdefault(job.queue, []).append(job.vec)  # a superset of the line's smallest asks
                k += 1
            continue
        if not events:
            return None
        t, _, trigger, was_running = heapq.heappop(events)
        state.release(trigger)
        while events and events[0][0] <= t:
            _, _, other, _ = heapq.heappop(events)
            state.release(other)
        free_after = dict(state.free)


def estimate(target_id: int, capacity: Mapping[str, float] | None, queues: Iterable[QueueSpec],
             running: Sequence[Job], pending: Sequence[Job], history: RunTimes, *, samples: int = SAMPLES,
             seed: int | None = None, budget: int = WORK_BUDGET,
             arrivals: ArrivalModel | None = None, redivide: bool = False,
             p90_level: float = P90_LEVEL, p90_z: float | None = P90_Z) -> Estimate:
    """When pending job `target_id` (one of `pending`) would start (module docstring).

    - `capacity`: {resource: amount} of the cluster's schedulable nodes, None when unknown;
    - `queues`: every queue of the tree (ancestors included); `running`: the cluster's placed jobs (Scheduled or
      Running, with `elapsed`); `pending`: its pending jobs, the target included, in any order;
    - `history`: finished runs; `samples`: replays at most; `seed`: the draws' seed (default: the target's id, so
      the same inputs give the same answer); `budget`: units of work (`allocate`) over all replays after which no
      new replay starts once MIN_SAMPLES are done, nor after 4 x `budget` once one is (`Estimate.samples` says how
      many ran); `arrivals`: the recent submissions (queueing/arrivals.py) whose like the replays expect while the
      target waits (None: none expected, as before issue 35); only those whose run times are known (`Runs.enough`)
      are drawn, and `Estimate.arrivals_ahead` says what they add ahead of the target at its p50; `redivide`:
      recompute the fair shares before every pass of a replay (as KAI does each cycle; slower); `p90_level`: the
      replays' quantile the p90 is at least (`P90_LEVEL`); `p90_z`: the log-normal bound's z (`upper_bound`, None:
      no bound).

    Returns an `Estimate`. Raises KeyError when `target_id` is not in `pending`.
    """
    target = next(j for j in pending if j.id == target_id) if any(j.id == target_id for j in pending) else None
    if target is None:
        raise KeyError(target_id)
    queues = list(queues)
    if capacity is None:
        return Estimate(UNKNOWN, reason="the cluster's capacity is not known yet (the cluster watcher has not "
                                        "reported its nodes)")
    base = ClusterState(capacity, queues, running)
    base.divide(pending)
    line = lines_of(pending)
    mine = line.get(target.queue, [])
    at = next(i for i, j in enumerate(mine) if j.id == target.id)
    ahead = sum(1 for j in mine[:at] if j.line == target.line)  # counted as the place in line counts
    resource = _binding(target, base)
    out = Estimate(ESTIMATED, ahead=ahead, resource=resource, needs=float(target.asks.get(resource) or 0),
                   free_now=max(base.free[resource], 0.0), blocked_by=base.blocker(target))
    never = base.never(target)
    if never is not None:
        where, r, asks, have = never
        out.status, out.resource, out.needs = NEVER, r, asks
        out.reason = (f"the job asks {_amount(r, asks)}; the cluster's schedulable nodes have {_amount(r, have)} "
                      "in all" if where == "cluster" else
                      f"the job asks {_amount(r, asks)}; queue {where}'s limit is {_amount(r, have)}")
        return out

    runs_cache: dict[tuple, Runs] = {}

    def runs_of(job: Job) -> Runs:
        key = (job.template, job.queue)
        if key not in runs_cache:
            runs_cache[key] = history.for_job(job.template, job.queue)
        return runs_cache[key]

    # The first pass at t=0 needs no history: a target placed there fits now.
    first = _copy(base)
    first_lines = {q: list(js) for q, js in line.items()}
    if any(j.id == target.id for j in allocate(first, first_lines)):
        out.status, out.p50, out.p90 = NOW, 0.0, 0.0
        return out
    for job in running:
        if not job.ending and not runs_of(job).enough:
            return _thin(out, job, runs_of(job))
    if arrivals:
        arrivals = arrivals.keep(lambda a: history.for_job(a.template, a.queue).enough)
    rng = random.Random(target.id if seed is None else seed)
    results, work = [], [0]
    for _ in range(max(1, samples)):
        if (len(results) >= MIN_SAMPLES and work[0] >= budget) or (results and work[0] >= 4 * budget):
            break  # a large cluster line: fewer replays rather than seconds per read (deterministic: counted work)
        got = _replay(target, _copy(base), {q: list(js) for q, js in line.items()}, running, runs_of, rng, work,
                      arrivals, redivide)
        if got is None:
            out.status = UNKNOWN
            out.reason = "the replay of the running jobs' ends never made room for it"
            return out
        if got[0] == "thin":
            return _thin(out, got[1], runs_of(got[1]))
        results.append(got)
    results.sort(key=lambda g: g[0])
    starts = [g[0] for g in results]
    out.p50, out.samples, out.work = quantile(starts, 0.5), len(starts), work[0]
    out.p90 = upper_bound(starts, p90_level, p90_z)
    out.starts = tuple(starts)
    if arrivals:
        out.arrivals_ahead = _arrivals_ahead(arrivals, target, base, out.p50, resource, history)
        out.arrival_window = arrivals.window
    median = results[max(0, math.ceil(0.5 * len(results)) - 1)]
    _, trigger, was_running, free_after = median
    if trigger is not None:
        # A job being cancelled frees its room when its pods are gone, whatever its history (it may have none).
        out.freed_by, out.freed_was_running = trigger, was_running
        out.freed_runs = None if trigger.ending else runs_of(trigger)
        out.free_then = max(free_after[resource], 0.0)
    return out


def upper_bound(starts: Sequence[float], level: float = P90_LEVEL, z: float | None = P90_Z) -> float:
    """The p90 of the replays' `starts` (seconds, non-empty): their nearest-rank quantile at `level`, or, when `z`
    is set and larger, exp(m + z x s) where m and s are the mean and standard deviation of the log starts (each at
    least LOG_FLOOR seconds): a log-normal upper bound with the replays' own spread. Starts of 10, 20 and 40 min: at
    z = 2, 62 min (20 min x e^(2 x 0.566)); at z = 1, 40 min (the quantile at 0.9 is larger). Raises ValueError for
    no starts."""
    q = quantile(starts, level)
    if z is None:
        return q
    logs = [math.log(max(s, LOG_FLOOR)) for s in starts]
    sd = pstdev(logs)
    if sd < 1e-9:  # replays that agree (or all start within a minute): nothing to widen, no rounding noise added
        return q
    return max(q, math.exp(fmean(logs) + z * sd))


def _arrivals_ahead(arrivals: ArrivalModel, target: Job, base: ClusterState, wait: float, resource: str,
                    history: RunTimes) -> float:
    """The work (amount of `resource` x seconds) expected to arrive during `wait` and go ahead of `target`
    (`ArrivalModel.expected_ahead`): jobs of its queue and line of higher priority, and jobs of queues served
    before its queue now (a lower `ClusterState.order_key`: further below their fair share). Backfill (a smaller
    job of any queue taking room first) is in the replay but not in this figure."""
    own = base.order_key(target.queue)

    def goes_first(a: Arrival) -> bool:
        if a.queue == target.queue:
            return a.line == target.line and a.priority > target.priority
        return base.order_key(a.queue) < own

    def mean_run(a: Arrival) -> float | None:
        runs = history.for_job(a.template, a.queue)
        return fmean(runs.seconds) if runs.enough else None

    return arrivals.expected_ahead(min(wait, arrivals.horizon), resource, goes_first, mean_run)


def _copy(state: ClusterState) -> ClusterState:
    new = ClusterState.__new__(ClusterState)
    new.capacity, new.queues, new.chain, new.fair = state.capacity, state.queues, state.chain, state.fair
    new.free = dict(state.free)
    new.alloc = {k: dict(v) for k, v in state.alloc.items()}
    return new


def _thin(out: Estimate, job: Job, runs: Runs) -> Estimate:
    out.status, out.thin = UNKNOWN, (job, runs)
    n = len(runs.seconds)
    out.reason = (f"too little history to tell when {job.name or f'job {job.id}'} ends: {n} finished run"
                  f"{'' if n == 1 else 's'} with real start and end times at best (by {LEVELS[runs.level]}), "
                  f"{MIN_RUNS} needed")
    return out


# --- words ------------------------------------------------------------------------------------------------------

def evidence(est: Estimate, queue: str) -> str:
    """The estimate's reasons as one sentence, e.g. "similar jobs ran 42 min (p50) over 37 runs and train-7 has
    run 20 min; 2 jobs ahead in team-a; needs 8 GPUs, 4 free now, 8 once train-7 ends". `queue`: the target's
    queue name."""
    parts = []
    if est.freed_by is not None and est.freed_by.ending:
        parts.append(f"{est.freed_by.name or f'job {est.freed_by.id}'} is being cancelled: its room frees as its "
                     "pods go")
    elif est.freed_by is not None and est.freed_runs is not None and est.freed_runs.seconds:
        r, who = est.freed_runs, est.freed_by.name or f"job {est.freed_by.id}"
        ran = f"jobs like {who} ({LEVELS[r.level]}) ran {span(r.p50)} (p50) over {len(r.seconds)} runs"
        if est.freed_was_running:
            ran += f" and {who} has run {span(est.freed_by.elapsed)}"
        parts.append(ran)
    ahead = ("first in line in " + queue if est.ahead == 0 else
             f"{est.ahead} job{'' if est.ahead == 1 else 's'} ahead in {queue}")
    if est.arrivals_ahead > 0:
        ahead += (f", plus ~{arrival_work(est.resource, est.arrivals_ahead)} expected from jobs submitted "
                  f"meanwhile that go first (higher priority in {queue}, or queues further below their fair share) "
                  f"at {window_words(est.arrival_window)} rate")
    parts.append(ahead)
    needs = f"needs {_amount(est.resource, est.needs)}, {_num(est.resource, est.free_now)} free now"
    if est.blocked_by is not None and est.blocked_by[0] == "limit":
        needs += f" (queue {est.blocked_by[2]} is at its limit)"
    if est.freed_by is not None:
        who = est.freed_by.name or f"job {est.freed_by.id}"
        started = "" if est.freed_was_running else ", which starts first,"
        needs += f", {_num(est.resource, est.free_then)} once {who}{started} ends"
    parts.append(needs)
    return "; ".join(parts)
