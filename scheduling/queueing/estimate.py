"""When a pending gang would start: a replay of the cluster's expected job ends against its queues and capacity.

A pure model (plain data in, plain data out; no database, no cluster), used by the API and the job page
(`services.start_estimate`) and by the accuracy benchmark (`bench/estimate.py`), so the benchmark measures the very
function users read. Answers "when will my job start?" (kueue #13159; Slurm's `squeue --start` is the only peer
that tries).

**The replay** (one sample): the cluster starts as it is now (its capacity minus what the placed jobs hold, each
queue's allocation). Each running job ends after a *remaining* time drawn from the run times of finished jobs like it
(`RunTimes`: same template and queue, else same template, else same queue), **conditioned on how long it has already
run**: a draw among the runs longer than its elapsed time, minus that time (a lognormal fitted to the runs when
fewer than `MIN_TAIL` of them are longer). After each end, one allocation pass (`allocate`, KAI's allocate action as
gangweb models it) places what fits; a job placed in the replay then runs for a drawn run time and ends in turn. The
target's start is the replay time at which the pass places it.

**p50 and p90**: `SAMPLES` replays with independent draws (a seeded `random.Random`, so the same inputs give the
same answer); p50 and p90 are nearest-rank quantiles of the target's start over the replays (seconds from now).

**The allocation pass** (`allocate`), shared with the benchmark's "real" scheduler:

- queues are served lowest *saturation* first: a queue's allocated / fair share (the largest over GPU, CPU and
  memory), compared level by level from the top of the tree (KAI orders queues by allocated / fair share, lowest
  first: KAI `docs/fairness/README.md` "Queue Order"; docs/upstream.md, KAI fair share); ties by name;
- within a queue, jobs go in line order: priority, then time queued, then id (`services.queue_line`, KAI's
  `JobOrderFn`);
- the chosen queue's next job is placed when it fits the cluster's free room (GPU, CPU and memory, summed over the
  schedulable nodes) and every finite `limit` of its queue and the queue's ancestors; a job that does not fit is
  passed over for this pass (KAI tries the others; there is no reservation for a large gang), and the queue takes
  its turn again with its next job.

**Fair shares** are `queueing.fair_share.divide` (KAI's division) of the cluster's capacity over the queues, with
requested = each queue's running plus pending asks and allocated = its running asks. The estimate divides once,
from the state at the time of asking, and keeps those shares for the whole replay (KAI recomputes them every
cycle); the benchmark's scheduler recomputes them every pass, so the error this causes is part of what it measures.

**What is not modelled** (each makes the estimate earlier or later than the truth; docs/queues.md lists them):
reclaim and preemption (a queue over its fair share losing jobs to one below it), the rule that non-preemptible
jobs (priority >= 100) run only within their queue's quota, where the room is (per-node packing, node selectors,
taints, topology: room is a cluster-wide sum), pods gangweb does not manage, jobs submitted after the question
(a later job of higher priority overtakes), and time between placement and Running (image pulls).

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
from dataclasses import dataclass, field
from statistics import NormalDist, fmean, pstdev

from ..amounts import in_people_units
from . import fair_share

RESOURCES = ("gpu", "cpu", "memory")
UNLIMITED = fair_share.UNLIMITED
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
EPS = 1e-9

ESTIMATED, NOW, UNKNOWN, NEVER = "estimated", "now", "unknown", "never"
LEVELS = {"template_queue": "same template and queue", "template": "same template", "queue": "same queue"}


@dataclass(frozen=True)
class QueueSpec:
    """One queue (KAI `QueueSpec`): `parent` None at the top; `quota`, `limit`, `weight` map a resource to its
    `resources.<r>.quota|limit|overQuotaWeight` (a missing resource: quota 0, limit -1 = unlimited, weight 1)."""

    name: str
    parent: str | None = None
    priority: int = 100
    quota: Mapping[str, float] = field(default_factory=dict)
    limit: Mapping[str, float] = field(default_factory=dict)
    weight: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Job:
    """A job of the cluster. `asks`: what its whole gang requests, {resource: amount}; `template`, `queue`: its
    history keys (any hashable); `priority` and `queued_at` (seconds, any origin) order a pending job in its queue's
    line (`services.queue_line`); `elapsed`: seconds a placed job has run (0 when placed but not yet Running);
    `ending`: a placed job being cancelled (it frees its room now); `name`: how the evidence names it; `line`: the
    scheduler line it waits in (its backend family, as `services.queue_line` counts places: "jobs ahead" counts
    only the jobs of the target's line, so it agrees with the place in line)."""

    id: int
    queue: str
    asks: Mapping[str, float]
    template: object = None
    name: str = ""
    priority: int = 50
    queued_at: float = 0.0
    elapsed: float = 0.0
    ending: bool = False
    line: str = ""

    def __post_init__(self):
        # (gpu, cpu, memory) asks as floats, read by every pass of every replay (a cache, not a field).
        object.__setattr__(self, "vec", tuple(float(self.asks.get(r) or 0) for r in RESOURCES))

    def line_key(self) -> tuple:
        """KAI's order within a queue: higher priority first, then queued earlier, then the lower id."""
        return (-self.priority, self.queued_at, self.id)


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

class ClusterState:
    """What the allocation pass reads and changes: free room, each queue's allocation (its own jobs' plus its
    descendants'), and the fair shares the queue order compares against."""

    def __init__(self, capacity: Mapping[str, float], queues: Iterable[QueueSpec], placed: Iterable[Job] = ()):
        self.capacity = {r: float(capacity.get(r) or 0) for r in RESOURCES}
        self.queues = {q.name: q for q in queues}
        self.chain: dict[str, tuple[str, ...]] = {}
        self.free = dict(self.capacity)
        self.alloc: dict[str, dict[str, float]] = {name: dict.fromkeys(RESOURCES, 0.0) for name in self.queues}
        self.fair: dict[str, dict[str, float]] = {}
        for job in placed:
            self.take(job)

    def path(self, queue: str) -> tuple[str, ...]:
        """`queue` and its ancestors, leaf first (unknown queues and cycles end the walk)."""
        if queue not in self.chain:
            out, name = [], queue
            while name is not None and name not in out:
                out.append(name)
                spec = self.queues.get(name)
                name = spec.parent if spec is not None else None
            self.chain[queue] = tuple(out)
        return self.chain[queue]

    def _alloc(self, name: str) -> dict[str, float]:
        return self.alloc.setdefault(name, dict.fromkeys(RESOURCES, 0.0))

    def take(self, job: Job) -> None:
        """`job` is placed: its asks leave the free room and join its queue's and ancestors' allocation."""
        self._move(job, 1.0)

    def release(self, job: Job) -> None:
        """`job` ended: the inverse of `take`."""
        self._move(job, -1.0)

    def _move(self, job: Job, sign: float) -> None:
        path = [self._alloc(name) for name in self.path(job.queue)]
        for r, a in zip(RESOURCES, job.vec, strict=True):
            if a:
                self.free[r] -= sign * a
                for alloc in path:
                    alloc[r] += sign * a

    def blocker(self, job: Job) -> tuple[str, str, str] | None:
        """Why `job` does not fit now: ("cluster", resource, "") or ("limit", resource, queue name); None when
        it fits."""
        for r in RESOURCES:
            a = float(job.asks.get(r) or 0)
            if a <= 0:
                continue
            if a > self.free[r] + EPS:
                return ("cluster", r, "")
            for name in self.path(job.queue):
                spec = self.queues.get(name)
                limit = spec.limit.get(r, UNLIMITED) if spec is not None else UNLIMITED
                if limit != UNLIMITED and self._alloc(name)[r] + a > limit + EPS:
                    return ("limit", r, name)
        return None

    def never(self, job: Job) -> tuple[str, str, float, float] | None:
        """("cluster" | queue name, resource, asks, what there is) when `job` can never fit as things stand: it
        asks more than the cluster's capacity or a finite limit of its queue or an ancestor; else None."""
        for r in RESOURCES:
            a = float(job.asks.get(r) or 0)
            if a <= 0:
                continue
            if a > self.capacity[r] + EPS:
                return ("cluster", r, a, self.capacity[r])
            for name in self.path(job.queue):
                spec = self.queues.get(name)
                limit = spec.limit.get(r, UNLIMITED) if spec is not None else UNLIMITED
                if limit != UNLIMITED and a > limit + EPS:
                    return (name, r, a, float(limit))
        return None

    def divide(self, pending: Iterable[Job]) -> None:
        """Set the fair shares (`fair_share.divide` per resource) from the allocation and `pending`'s asks."""
        asked: dict[str, dict[str, float]] = {}
        for job in pending:
            own = asked.setdefault(job.queue, dict.fromkeys(RESOURCES, 0.0))
            for r in RESOURCES:
                own[r] += float(job.asks.get(r) or 0)
        own_alloc = self._own_alloc()
        names = set(self.queues) | set(asked)
        self.fair = {name: {} for name in names}
        for r in RESOURCES:
            if not any(a.get(r) for a in asked.values()) and not any(a.get(r) for a in own_alloc.values()):
                continue  # nobody asks or holds it: no saturation reads its share
            inputs = []
            for name in names:
                spec = self.queues.get(name) or QueueSpec(name)
                alloc = own_alloc.get(name, {}).get(r, 0.0)
                inputs.append(fair_share.QueueInput(
                    name=name, parent=spec.parent, priority=spec.priority, quota=spec.quota.get(r, 0),
                    limit=spec.limit.get(r, UNLIMITED), weight=spec.weight.get(r, 1),
                    requested=alloc + asked.get(name, {}).get(r, 0.0), allocated=alloc))
            for name, share in fair_share.divide(self.capacity[r], inputs).items():
                self.fair[name][r] = share.fair_share

    def _own_alloc(self) -> dict[str, dict[str, float]]:
        """Each queue's allocation without its children's (the rolled-up `alloc` minus the children's)."""
        own = {name: dict(a) for name, a in self.alloc.items()}
        for name in self.alloc:
            spec = self.queues.get(name)
            parent = spec.parent if spec is not None else None
            if parent in own:
                for r in RESOURCES:
                    own[parent][r] -= self.alloc[name][r]
        return own

    def saturation(self, name: str) -> float:
        """allocated / fair share, the largest over the resources (inf when it holds what it has no share of)."""
        fair, alloc, worst = self.fair.get(name, {}), self._alloc(name), 0.0
        for r in RESOURCES:
            a, f = alloc[r], fair.get(r, 0.0)
            if a > EPS:
                worst = max(worst, a / f if f > EPS else math.inf)
        return worst

    def order_key(self, queue: str) -> tuple:
        """Queue order: saturations from the top of the tree down to `queue`, then its name."""
        return (tuple(self.saturation(n) for n in reversed(self.path(queue))), queue)


Vec = tuple[float, float, float]


def _minimal(vecs: Iterable[Vec]) -> list[Vec]:
    out: list[Vec] = []
    for v in sorted(set(vecs)):  # sorted: a vector at most v in every resource comes before it
        if not any(o[0] <= v[0] and o[1] <= v[1] and o[2] <= v[2] for o in out):
            out.append(v)
    return out


def smallest_asks(lines: Mapping[str, list[Job]]) -> dict[str, list[Vec]]:
    """Per queue, the distinct ask vectors (gpu, cpu, memory) of its pending jobs that no other job's asks are at
    most in every resource: one of the queue's jobs fits the free room only if one of these does (a few vectors,
    however many jobs)."""
    return {q: _minimal(job.vec for job in jobs) for q, jobs in lines.items() if jobs}


def _fits(free: Vec, smallest: Iterable[Vec]) -> bool:
    fg, fc, fm = free
    return any(g <= fg and c <= fc and m <= fm for g, c, m in smallest)


def allocate(state: ClusterState, lines: Mapping[str, list[Job]],
             smallest: Mapping[str, list[Vec]] | None = None, work: list[int] | None = None) -> list[Job]:
    """One allocation pass (module docstring): places what fits, in queue order then line order, into `state`.

    `lines`: {queue name: its pending jobs in line order (`Job.line_key`)}; placed jobs are removed from them.
    `smallest`: `smallest_asks` of `lines` or of a superset of them (a replay computes it once: jobs placed since
    only make a queue look able to fit when it is not, and then its jobs are tried and none placed), else computed.
    A queue none of whose smallest asks fit the free room is not tried: nothing of it could be placed.
    Returns the placed jobs in the order placed. Each turn goes to the queue of lowest `order_key` among those with
    jobs not yet tried in this pass; saturations are remembered within the pass and forgotten along the path of a
    queue that was given a job, and only the order keys that read one of them are recomputed (ancestors every
    queue in the pass shares are left out of the keys: equal for all, they never decide). `work`: a one-item
    counter to which the pass adds its units of work (queues looked at, order keys read, jobs tried), which bound
    a replay's cost."""
    placed: list[Job] = []
    smallest = smallest_asks(lines) if smallest is None else smallest
    free = state.free

    def room() -> Vec:
        return (free["gpu"] + EPS, free["cpu"] + EPS, free["memory"] + EPS)

    now = room()
    counter = work if work is not None else [0]
    counter[0] += len(lines)
    turn = {q: 0 for q, jobs in lines.items() if jobs and _fits(now, smallest.get(q, ()))}
    if not turn:
        return placed
    sat: dict[str, float] = {}

    def saturation(name: str) -> float:
        if name not in sat:
            sat[name] = state.saturation(name)
        return sat[name]

    keys: dict[str, tuple] = {}
    paths = {q: tuple(reversed(state.path(q))) for q in turn}  # top of the tree first
    shared = 0  # leading ancestors every queue of the pass has in common
    first = next(iter(paths.values()))
    while shared < len(first) and all(len(p) > shared + 1 and p[shared] == first[shared] for p in paths.values()):
        shared += 1
    readers: dict[str, set[str]] = {}  # queue -> the queues whose key reads its saturation
    for q, path in paths.items():
        for name in path[shared:]:
            readers.setdefault(name, set()).add(q)

    def key(queue: str) -> tuple:
        counter[0] += 1
        if queue not in keys:
            keys[queue] = (tuple(saturation(n) for n in paths[queue][shared:]), queue)
        return keys[queue]

    taken: dict[str, set[int]] = {}
    while turn:
        if all(free[r] <= EPS for r in RESOURCES):
            break
        # The lowest queue keeps the turn while its jobs are passed over (its key does not change), so its jobs are
        # tried in line order until one is placed; then the saturations along its path change and keys are redone.
        queue = min(turn, key=key)
        if placed and not _fits(room(), smallest.get(queue, ())):
            del turn[queue]  # the room left after this pass's placements holds none of its jobs
            continue
        jobs, i, placed_one = lines[queue], turn[queue], False
        while i < len(jobs) and not placed_one:
            counter[0] += 1
            job = jobs[i]
            g, c, m = job.vec
            if g <= free["gpu"] + EPS and c <= free["cpu"] + EPS and m <= free["memory"] + EPS \
                    and state.blocker(job) is None:
                state.take(job)
                placed.append(job)
                taken.setdefault(queue, set()).add(i)
                placed_one = True
            i += 1
        if i < len(jobs):
            turn[queue] = i
        else:
            del turn[queue]
        if placed_one:
            for name in state.path(queue):
                sat.pop(name, None)
                for reader in readers.get(name, ()):
                    keys.pop(reader, None)  # its key read a saturation that just changed
    for queue, idx in taken.items():
        lines[queue][:] = [j for k, j in enumerate(lines[queue]) if k not in idx]
    return placed


def lines_of(pending: Iterable[Job]) -> dict[str, list[Job]]:
    """{queue: its pending jobs in line order}."""
    out: dict[str, list[Job]] = {}
    for job in pending:
        out.setdefault(job.queue, []).append(job)
    for jobs in out.values():
        jobs.sort(key=Job.line_key)
    return out


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
    - `samples`: replays run; `work`: units of work they spent (`allocate`).
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


def _binding(job: Job, state: ClusterState) -> str:
    """The resource the evidence talks about: the blocked one, else GPUs when asked, else CPU."""
    blocked = state.blocker(job)
    if blocked is not None:
        return blocked[1]
    return "gpu" if (job.asks.get("gpu") or 0) > 0 else "cpu"


def _replay(target: Job, state: ClusterState, lines: dict[str, list[Job]], running: Sequence[Job],
            runs_of, rng: random.Random, work: list[int]):
    """One sample: (start seconds, the Job whose end triggered the pass that placed `target`, it was running
    now, free room after that end by resource) or ("thin", job) when a job whose end is needed has too thin a
    history, or None when the replay runs out of ends with `target` unplaced. Adds its passes to `work[0]`."""
    events: list[tuple[float, int, Job, bool]] = []
    for job in running:
        runs = runs_of(job)
        end = 0.0 if job.ending else runs.draw(rng, job.elapsed)
        events.append((end, job.id, job, True))
    heapq.heapify(events)
    t, trigger, was_running, free_after = 0.0, None, False, dict(state.free)
    smallest = smallest_asks(lines)  # placed jobs leave it stale: a pass then runs and places nothing
    while True:
        for job in allocate(state, lines, smallest, work):
            if job.id == target.id:
                return t, trigger, was_running, free_after
            runs = runs_of(job)
            if not runs.enough:
                return ("thin", job)
            heapq.heappush(events, (t + runs.draw(rng), job.id, job, False))
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
             seed: int | None = None, budget: int = WORK_BUDGET) -> Estimate:
    """When pending job `target_id` (one of `pending`) would start (module docstring).

    - `capacity`: {resource: amount} of the cluster's schedulable nodes, None when unknown;
    - `queues`: every queue of the tree (ancestors included); `running`: the cluster's placed jobs (Scheduled or
      Running, with `elapsed`); `pending`: its pending jobs, the target included, in any order;
    - `history`: finished runs; `samples`: replays at most; `seed`: the draws' seed (default: the target's id, so
      the same inputs give the same answer); `budget`: units of work (`allocate`) over all replays after which no
      new replay starts once MIN_SAMPLES are done, nor after 4 x `budget` once one is (`Estimate.samples` says how
      many ran).

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
    rng = random.Random(target.id if seed is None else seed)
    results, work = [], [0]
    for _ in range(max(1, samples)):
        if (len(results) >= MIN_SAMPLES and work[0] >= budget) or (results and work[0] >= 4 * budget):
            break  # a large cluster line: fewer replays rather than seconds per read (deterministic: counted work)
        got = _replay(target, _copy(base), {q: list(js) for q, js in line.items()}, running, runs_of, rng, work)
        if got is None:
            out.status = UNKNOWN
            out.reason = "the replay of the running jobs' ends never made room for it"
            return out
        if got[0] == "thin":
            return _thin(out, got[1], runs_of(got[1]))
        results.append(got)
    results.sort(key=lambda g: g[0])
    starts = [g[0] for g in results]
    out.p50, out.p90, out.samples, out.work = quantile(starts, 0.5), quantile(starts, 0.9), len(starts), work[0]
    median = results[max(0, math.ceil(0.5 * len(results)) - 1)]
    _, trigger, was_running, free_after = median
    if trigger is not None:
        # A job being cancelled frees its room when its pods are gone, whatever its history (it may have none).
        out.freed_by, out.freed_was_running = trigger, was_running
        out.freed_runs = None if trigger.ending else runs_of(trigger)
        out.free_then = max(free_after[resource], 0.0)
    return out


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

NOUNS = {"gpu": ("GPU", "GPUs"), "cpu": ("CPU core", "CPU cores"), "memory": ("GiB", "GiB")}


def _amount(resource: str, amount: float) -> str:
    """A KAI amount in the pages' units (scheduling/amounts.py): 3 -> "3 GPUs", 1 -> "1 GPU", 8000 (millicores) ->
    "8 CPU cores", 4295 (MB) -> "4 GiB"."""
    n = _num(resource, amount)
    one, many = NOUNS[resource]
    return f"{n} {one if n == '1' else many}"


def _num(resource: str, amount: float) -> str:
    """A KAI amount as a bare number in the unit `_amount` names (amounts.in_people_units)."""
    return in_people_units(resource, amount)


def minutes(seconds: float) -> int:
    """Whole minutes, rounded up (a start 30 s away is "in 1 min")."""
    return int(math.ceil(max(seconds, 0.0) / 60 - 1e-9))


def span(seconds: float) -> str:
    """A duration for people: "21 s" under 2 minutes (a 21-s run is not "1 min"), else "42 min", "3 h 10 min",
    "2 d 4 h" (to the nearest minute)."""
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{int(math.floor(seconds + 0.5))} s"
    m = int(math.floor(seconds / 60 + 0.5))
    if m < 120:
        return f"{m} min"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(h, 24)
    return f"{d} d {h} h" if h else f"{d} d"


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
    parts.append("first in line in " + queue if est.ahead == 0 else
                 f"{est.ahead} job{'' if est.ahead == 1 else 's'} ahead in {queue}")
    needs = f"needs {_amount(est.resource, est.needs)}, {_num(est.resource, est.free_now)} free now"
    if est.blocked_by is not None and est.blocked_by[0] == "limit":
        needs += f" (queue {est.blocked_by[2]} is at its limit)"
    if est.freed_by is not None:
        who = est.freed_by.name or f"job {est.freed_by.id}"
        started = "" if est.freed_was_running else ", which starts first,"
        needs += f", {_num(est.resource, est.free_then)} once {who}{started} ends"
    parts.append(needs)
    return "; ".join(parts)
