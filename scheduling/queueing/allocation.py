"""The allocation pass of the start estimate's replay: the jobs and queues it places (Job, QueueSpec), a cluster's
free and per-queue allocated resources (ClusterState), and one pass that admits what fits, in each scheduler's
order. The replay and its sources: queueing/estimate.py.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from . import fair_share_model as fair_share

RESOURCES = ("gpu", "cpu", "memory")

UNLIMITED = fair_share.UNLIMITED

EPS = 1e-9

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
    line (`services.queues.line`); `elapsed`: seconds a placed job has run (0 when placed but not yet Running);
    `ending`: a placed job being cancelled (it frees its room now); `name`: how the evidence names it; `line`: the
    scheduler line it waits in (its backend family, as `services.queues.line` counts places: "jobs ahead" counts
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
