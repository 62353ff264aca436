"""The placement rule: which of a queue's clusters a job goes to, from per-cluster numbers. Pure: no database, no
cluster; `placement.numbers` gathers the numbers, `services/jobs` and `reconcile/moves.py` call it.

Amounts are `Amounts`: GPUs in devices (Decimal), CPU in millicores (int), memory in bytes (int), the units of the
job columns `GangJob.requested_*` and of `kube.quantities`.

The rule (docs/queues.md, "Where a job runs"), among the candidate clusters:

1. a cluster whose numbers are unknown (unreachable, stale, capacity or backends never read: `Where.unknown`) is
   never chosen while another is known; with none known the placement fails (`Unplaceable`, code NONE_KNOWN);
2. a cluster where the gang can never fit (it asks more of a resource than all the cluster's schedulable nodes
   offer, or one of its pods asks more of one than its largest node offers: `Where.largest`) is not chosen; with
   none left, NEVER_FITS;
3. **fits now** first: the free room, the schedulable nodes' allocatable minus what gangweb's Scheduled and
   Running jobs there hold **and what its not-yet-running jobs there will take**, covers the gang's total GPU,
   CPU and memory;
4. else the **earliest estimated start**: the least work in front of it in units of the cluster's own size,
   max over the resources it asks of (held + waiting + its asks - allocatable) / allocatable. With the same run
   times everywhere a cluster drains that share of itself at the same pace, so the smallest share starts first;
5. ties (equal on 3, and on 4 among clusters that do not fit) go to the cluster where the queue uses the least
   of it (its active jobs' asks / allocatable, the largest over resources: its fair-share use there), then the
   fewest of the queue's jobs waiting there (spread), then the name.

Each placement `take`s its demand from the chosen cluster's numbers, so a bulk submit's later jobs see the earlier
ones (a cluster fills, then the next fits; once all are full they share by size).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from ..amounts import for_people

RESOURCES = ("gpu", "cpu", "memory")
PEOPLE = {"gpu": "gpu", "cpu": "cpu", "memory": "memory"}
NONE_KNOWN = "NoClusterKnown"
NEVER_FITS = "FitsNoCluster"
NO_CANDIDATE = "NoCandidateCluster"


@dataclass(frozen=True)
class Amounts:
    """GPU devices, CPU millicores, memory bytes."""

    gpu: Decimal = Decimal(0)
    cpu: int = 0
    memory: int = 0

    def __add__(self, other: Amounts) -> Amounts:
        return Amounts(self.gpu + other.gpu, self.cpu + other.cpu, self.memory + other.memory)

    def __sub__(self, other: Amounts) -> Amounts:
        return Amounts(self.gpu - other.gpu, self.cpu - other.cpu, self.memory - other.memory)

    def get(self, resource: str):
        """The amount of "gpu", "cpu" or "memory"."""
        return getattr(self, resource)

    def base(self, resource: str) -> float:
        """The amount in Kubernetes base units (devices, cores, bytes), for `amounts.for_people(..., "base")`."""
        value = self.get(resource)
        return float(value) / 1000 if resource == "cpu" else float(value)


@dataclass
class Where:
    """What gangweb knows of one cluster, shared by every queue's candidates in one placement run.

    `allocatable`: the schedulable nodes' allocatable (None when unknown); `held`: what gangweb's Scheduled and
    Running jobs there request; `waiting`: what its not-yet-running jobs there request (they will take it);
    `unknown`: why the numbers cannot be trusted ("" when they can); `largest`: the most one schedulable node offers
    of each resource (None when not read)."""

    id: int
    name: str
    allocatable: Amounts | None
    held: Amounts = field(default_factory=Amounts)
    waiting: Amounts = field(default_factory=Amounts)
    unknown: str = ""
    largest: Amounts | None = None

    def free(self) -> Amounts:
        """allocatable - held - waiting (negative when more is asked than the cluster has)."""
        return (self.allocatable or Amounts()) - self.held - self.waiting

    def fits(self, demand: Amounts) -> bool:
        """True when the free room covers every resource the gang asks for."""
        free = self.free()
        return all(demand.get(r) <= free.get(r) for r in RESOURCES if demand.get(r) > 0)

    def never_fits(self, demand: Amounts) -> str:
        """The first resource the gang asks more of than the whole cluster has ("" when none)."""
        alloc = self.allocatable or Amounts()
        return next((r for r in RESOURCES if demand.get(r) > alloc.get(r)), "")

    def pod_too_big(self, pod: Amounts | None) -> str:
        """The first resource one pod of the gang (`pod`: the most any of its pods asks, per resource) asks more of
        than the cluster's largest node offers ("" when none, or when either is not known): kube-scheduler can
        never bind that pod there, whatever is free in all."""
        if pod is None or self.largest is None:
            return ""
        return next((r for r in RESOURCES if pod.get(r) > 0 and pod.get(r) > self.largest.get(r)), "")

    def wait_share(self, demand: Amounts) -> float:
        """(held + waiting + demand - allocatable) / allocatable, the largest over the resources the gang asks:
        <= 0 when it fits now; the share of the cluster that must end before it fits otherwise."""
        alloc = self.allocatable or Amounts()
        over = self.held + self.waiting + demand - alloc
        return max((float(over.get(r)) / float(alloc.get(r)) for r in RESOURCES
                    if demand.get(r) > 0 and alloc.get(r) > 0), default=0.0)


@dataclass
class QueueThere:
    """One queue's use of one cluster: what its active jobs there ask, and how many of them wait there."""

    asks: Amounts = field(default_factory=Amounts)
    waiting_jobs: int = 0

    def share(self, where: Where) -> float:
        """asks / allocatable, the largest over resources (0 for an unknown cluster)."""
        alloc = where.allocatable or Amounts()
        return max((float(self.asks.get(r)) / float(alloc.get(r)) for r in RESOURCES if alloc.get(r) > 0),
                   default=0.0)


@dataclass
class Candidate:
    """A cluster a job may go to, with its queue's use there."""

    where: Where
    queue: QueueThere


@dataclass
class Decision:
    """Where a job goes and why: `rule` "fits" (fits now) or "earliest" (the earliest estimated start), `text` the
    sentence for the timeline, `clusters` the numbers of every candidate ({"cluster", "known", "fits", "free",
    "wait_share", "queue_share", "queue_waiting", "why"}; free in people units: GPUs, CPU cores, GiB)."""

    cluster_id: int
    cluster: str
    rule: str
    text: str
    clusters: list[dict]

    def as_dict(self) -> dict:
        """The decision as stored on the job (`GangJob.placement`) and answered by the API."""
        return {"cluster": self.cluster, "rule": self.rule, "text": self.text, "clusters": self.clusters}


class Unplaceable(Exception):
    """No candidate can take the job: `code` NONE_KNOWN (no candidate's numbers are known: retry later),
    NEVER_FITS (it asks more than any candidate has) or NO_CANDIDATE; `message` says which and why."""

    def __init__(self, code: str, message: str):
        self.code, self.message = code, message
        super().__init__(message)


def _key(c: Candidate, demand: Amounts) -> tuple:
    fits = c.where.fits(demand)
    return (0 if fits else 1, 0.0 if fits else c.where.wait_share(demand), c.queue.share(c.where),
            c.queue.waiting_jobs, c.where.name)


def main_resource(demand: Amounts) -> str:
    """The resource a sentence names: GPUs when the gang asks for any, else CPU."""
    return "gpu" if demand.gpu > 0 else "cpu"


def room_words(where: Where, demand: Amounts) -> str:
    """"8 GPUs free", or "0 GPUs free (4 GPUs more asked than it has)" (the gang's main resource; free after what
    gangweb's not-yet-running jobs there will take)."""
    r = main_resource(demand)
    free = where.free().base(r)
    if free >= 0:
        return f"{for_people(PEOPLE[r], free, 'base')} free"
    return f"{for_people(PEOPLE[r], 0, 'base')} free ({for_people(PEOPLE[r], -free, 'base')} more asked than it has)"


def _numbers(c: Candidate, demand: Amounts) -> dict:
    w = c.where
    known = not w.unknown
    out = {"cluster": w.name, "known": known, "why": w.unknown or "", "fits": known and w.fits(demand),
           "free": None, "wait_share": None, "queue_share": round(c.queue.share(w), 6) if known else None,
           "queue_waiting": c.queue.waiting_jobs}
    if known:
        free = w.free()
        # Never below 0: what is asked beyond the room is in `wait_share` and the sentence ("... more asked").
        out["free"] = {"gpu": max(0.0, float(free.gpu)), "cpu": max(0.0, free.cpu / 1000),
                       "memory": max(0.0, round(free.memory / 2**30, 6))}
        out["wait_share"] = round(w.wait_share(demand), 6)
    return out


def too_small(where: Where, demand: Amounts, pod: Amounts | None = None) -> str:
    """Why the gang can never fit on `where` ("" when it can): "c2 has 16 GPUs of the 40 GPUs it asks", or "c2's
    largest node has 1 GPU, a pod asks 4 GPUs"."""
    r = where.never_fits(demand)
    if r:
        return (f"{where.name} has {for_people(PEOPLE[r], (where.allocatable or Amounts()).base(r), 'base')} of "
                f"the {for_people(PEOPLE[r], demand.base(r), 'base')} it asks")
    r = where.pod_too_big(pod)
    if r:
        return (f"{where.name}'s largest node has {for_people(PEOPLE[r], where.largest.base(r), 'base')}, a pod "
                f"asks {for_people(PEOPLE[r], pod.base(r), 'base')}")
    return ""


def choose(demand: Amounts, candidates: list[Candidate], pod: Amounts | None = None) -> Decision:
    """The candidate the rule (module docstring) picks for a gang asking `demand` whose largest pod asks `pod` (the
    most of each resource any one pod asks; None: not checked), with the sentence and numbers. Raises Unplaceable
    when none can take it."""
    if not candidates:
        raise Unplaceable(NO_CANDIDATE, "no cluster to choose from")
    known = [c for c in candidates if not c.where.unknown]
    if not known:
        raise Unplaceable(NONE_KNOWN, "no candidate cluster is known now: " + "; ".join(
            f"{c.where.name}: {c.where.unknown}" for c in candidates))
    able = [c for c in known if not too_small(c.where, demand, pod)]
    if not able:
        raise Unplaceable(NEVER_FITS, "it asks more than any candidate cluster has in all or on one node: "
                          + "; ".join(too_small(c.where, demand, pod) for c in known))
    best = min(able, key=lambda c: _key(c, demand))
    fits = best.where.fits(demand)
    head = f"placed on {best.where.name}: {room_words(best.where, demand)}"
    if not fits:
        head += (f" (fits nowhere now; the least waiting work for its size there: "
                 f"{best.where.wait_share(demand):.2f} of the cluster)")
    others = []
    for c in candidates:
        if c is best:
            continue
        if c.where.unknown:
            others.append(f"{c.where.name} not considered: {c.where.unknown}")
        elif too_small(c.where, demand, pod):
            others.append(f"{c.where.name} is too small for it")
        else:
            others.append(f"{c.where.name} has {room_words(c.where, demand)}")
    text = head + ("; " + "; ".join(others) if others else "")
    return Decision(best.where.id, best.where.name, "fits" if fits else "earliest", text,
                    [_numbers(c, demand) for c in candidates])


def take(candidate: Candidate, demand: Amounts) -> None:
    """Count a job just placed on `candidate` as waiting there (its cluster's and its queue's numbers)."""
    candidate.where.waiting = candidate.where.waiting + demand
    candidate.queue.asks = candidate.queue.asks + demand
    candidate.queue.waiting_jobs += 1
