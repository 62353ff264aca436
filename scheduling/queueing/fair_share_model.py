"""KAI Scheduler's fair-share division of one resource over a queue tree, and what it means for each queue.

A pure model (no database, no cluster): gangweb's own reading of KAI's documented algorithm, so the API and the
queue page can answer "what is my queue's fair share right now, and why?" (KAI #2056/#2057). KAI computes this
every scheduling cycle and exports it only as the metric `queue_fair_share_*`; Queue status has no fair-share
field (KAI `QueueStatus`, PR #2110; docs/upstream.md, KAI Queue and KAI fair share and queue order).

The division (docs/upstream.md; KAI `docs/fairness/README.md`, "Fair-Share Algorithm"), per resource and per level of
the tree, starting with the cluster's capacity at the top level:

1. **Deserved quota first.** Each queue gets ``min(quota, requestable)``, whatever its priority; a quota of ``-1``
   (unlimited) deserves the whole amount of its level. `requestable` is what its jobs request, capped at its limit
   (KAI `ResourceShare.GetRequestableShare`); a parent requests what its children request (KAI sums every job's
   request into its queue and each ancestor).
2. **The rest, by priority, then by over-quota weight.** What is left is offered to the highest queue `priority`
   among the siblings first; within one priority, each queue still short of its requestable amount receives a
   slice in proportion to its `overQuotaWeight`. A queue whose slice is more than it can use takes only what it
   needs, and the unused part is dealt again among the others (water-filling), until nobody can use more or
   nothing is left. Then the next priority gets what remains. A weight of 0 gets no slice (KAI
   `divideUpToFairShare` skips it); when every queue still asking has weight 0 the rest stays undivided: no
   division by zero, no NaN.
3. **Level by level.** A parent's fair share is the amount its children divide, the same way.

Where this model simplifies KAI (so its numbers can differ slightly from KAI's metric):

- KAI hands out each round's slices rounded down to whole units and then deals the remaining fractions one unit
  at a time to the queues with the largest left-over (`getResourceToGiveInCurrentRound`, `divideRemainingResource`).
  This model divides exactly (Python `Fraction`), so a queue's share can differ from KAI's by less than one unit
  (one GPU, one millicore, one MB) per queue.
- KAI can shift weights by historical usage (`kValue`, from its usage database, off unless configured); not
  modelled.
- Capacity is what gangweb knows of the cluster's schedulable nodes, and requests and allocations are gangweb's
  own jobs only; KAI counts every pod in the cluster.
- **Children whose quotas exceed their parent** (or top-level quotas above the cluster): KAI gives every queue
  ``min(quota, requestable)`` in step 1 without checking what is left, so the children's shares add up to more
  than their parent's. This model does the same (neither scaling nor capping, which would disagree with what KAI
  reclaims against) and marks the level `oversubscribed`, so the page can say the quotas are promises the parent
  cannot keep all at once.

Amounts are plain numbers in whatever unit the caller uses for one resource (gangweb passes KAI units: GPU
devices with fractions, CPU millicores, memory MB); `UNLIMITED` (-1) means unlimited for quota and limit.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction

UNLIMITED = -1


@dataclass(frozen=True)
class QueueInput:
    """One queue of the tree for one resource.

    `name` and `parent` (None at the top) build the tree; `priority` is KAI `spec.priority` (default 100);
    `quota`, `limit` and `weight` are `resources.<r>.quota|limit|overQuotaWeight` (-1 unlimited for quota and
    limit); `requested` and `allocated` are what the queue's own jobs request and hold (its children's are added
    by `divide`). Negative amounts other than -1 are treated as 0; a negative weight as 0.
    """

    name: str
    parent: str | None = None
    priority: int = 100
    quota: float = 0
    limit: float = UNLIMITED
    weight: float = 1
    requested: float = 0
    allocated: float = 0


@dataclass
class Share:
    """The division's result for one queue and resource (amounts in the caller's unit).

    - `fair_share` = `deserved` (the quota part) + `over_quota` (its slice of what was left after quotas);
    - `requested` / `allocated`: its own jobs' plus its descendants';
    - `borrowed`: allocated above a finite quota; `lent`: its idle quota that siblings use (see `divide`);
    - `surplus`: what was left at its level after quotas (the "idle" amount its siblings share by weight);
    - `weight_total`: the weights of the queues that shared that surplus with it (same priority, still asking
      when the division began), 0 when it took no part;
    - `pool`: the amount its level divided (cluster capacity at the top, else its parent's fair share);
    - `oversubscribed`: its level's deserved quotas add up to more than `pool` (KAI gives them anyway);
    - `siblings`: names of the other queues of its level; `borrowers`: those of them holding more than their quota.
    """

    name: str
    parent: str | None
    priority: int
    quota: float
    limit: float
    weight: float
    requested: float = 0.0
    allocated: float = 0.0
    fair_share: float = 0.0
    deserved: float = 0.0
    over_quota: float = 0.0
    borrowed: float = 0.0
    lent: float = 0.0
    surplus: float = 0.0
    weight_total: float = 0.0
    pool: float = 0.0
    oversubscribed: bool = False
    siblings: list[str] = field(default_factory=list)
    borrowers: list[str] = field(default_factory=list)


def _amount(x) -> Fraction:
    """A finite non-negative amount as an exact Fraction (-1 or any negative becomes 0)."""
    x = Fraction(x or 0)
    return x if x > 0 else Fraction(0)


def _finite(x) -> bool:
    return x is not None and x != UNLIMITED


@dataclass
class _Node:
    q: QueueInput
    requested: Fraction = Fraction(0)
    allocated: Fraction = Fraction(0)
    share: Fraction = Fraction(0)
    deserved: Fraction = Fraction(0)
    surplus: Fraction = Fraction(0)
    weight_total: Fraction = Fraction(0)
    pool: Fraction = Fraction(0)
    oversubscribed: bool = False
    lent: Fraction = Fraction(0)
    kids: list[_Node] = field(default_factory=list)

    @property
    def requestable(self) -> Fraction:
        if _finite(self.q.limit):
            return min(_amount(self.q.limit), self.requested)
        return self.requested

    @property
    def weight(self) -> Fraction:
        return _amount(self.q.weight)


def _divide_level(amount: Fraction, nodes: list[_Node]) -> None:
    """Steps 1 and 2 of the module docstring for one set of siblings sharing `amount`."""
    left = amount
    for n in nodes:
        n.pool = amount
        deserved = amount if n.q.quota == UNLIMITED else _amount(n.q.quota)
        n.deserved = n.share = min(deserved, n.requestable)
        left -= n.share
    oversubscribed = left < 0
    left = max(left, Fraction(0))
    for n in nodes:
        n.oversubscribed = oversubscribed
        n.surplus = left
    for priority in sorted({n.q.priority for n in nodes}, reverse=True):
        bucket = [n for n in nodes if n.q.priority == priority]
        first = True
        while left > 0:
            asking = [n for n in bucket if n.weight > 0 and n.share < n.requestable]
            total = sum((n.weight for n in asking), Fraction(0))
            if not asking or total == 0:
                break
            if first:
                for n in asking:
                    n.weight_total = total
                first = False
            offered, capped = left, False
            for n in asking:
                slice_ = offered * n.weight / total
                need = n.requestable - n.share
                give = min(slice_, need)
                capped = capped or need < slice_
                n.share += give
                left -= give
            if not capped:
                break


def _lend(nodes: list[_Node]) -> None:
    """`lent` for one set of siblings: what they borrow beyond the room their level has outside every finite
    quota (`pool`, or the parent's allocation when that is larger, minus the finite quotas) is taken from the
    siblings' idle quota, in proportion to how much of it each leaves idle. A model: KAI does not say whose idle
    quota a borrower runs on; this is the share each lender would get back by reclaim."""
    if not nodes:
        return
    allocated = sum((n.allocated for n in nodes), Fraction(0))
    room = max(nodes[0].pool, allocated) - sum((_amount(n.q.quota) for n in nodes if _finite(n.q.quota)),
                                               Fraction(0))
    borrowed = sum((max(n.allocated - _amount(n.q.quota), Fraction(0)) for n in nodes if _finite(n.q.quota)),
                   Fraction(0))
    idle = {id(n): max(_amount(n.q.quota) - n.allocated, Fraction(0)) for n in nodes if _finite(n.q.quota)}
    idle_total = sum(idle.values(), Fraction(0))
    taken = min(max(borrowed - max(room, Fraction(0)), Fraction(0)), idle_total)
    if taken <= 0:
        return
    for n in nodes:
        if idle.get(id(n)):
            n.lent = taken * idle[id(n)] / idle_total


def divide(capacity: float, queues: Iterable[QueueInput]) -> dict[str, Share]:
    """Divide `capacity` of one resource over `queues` as KAI does (module docstring).

    `queues`: every queue of the tree (names unique; a queue whose parent is not among them is treated as a
    top-level queue, a cycle is broken there too). Returns {queue name: Share}. Exact arithmetic inside; the
    results are floats. Never raises on weights of 0, unlimited (-1) quotas or limits, or fractional amounts.
    """
    nodes = {q.name: _Node(q) for q in queues}
    roots: list[_Node] = []
    for n in nodes.values():
        parent, seen = n.q.parent, {n.q.name}
        while parent in nodes and parent not in seen:  # a cycle makes the queue a root rather than loop
            seen.add(parent)
            parent = nodes[parent].q.parent
        if n.q.parent in nodes and parent not in seen:
            nodes[n.q.parent].kids.append(n)
        else:
            roots.append(n)

    def total_up(n: _Node) -> None:
        n.requested, n.allocated = _amount(n.q.requested), _amount(n.q.allocated)
        for k in n.kids:
            total_up(k)
            n.requested += k.requested
            n.allocated += k.allocated

    def down(amount: Fraction, level: list[_Node]) -> None:
        level.sort(key=lambda n: n.q.name)
        _divide_level(amount, level)
        _lend(level)
        for n in level:
            if n.kids:
                down(n.share, n.kids)

    for r in roots:
        total_up(r)
    down(_amount(capacity), roots)

    out: dict[str, Share] = {}

    def emit(level: list[_Node]) -> None:
        for n in level:
            q = n.q
            borrowed = max(n.allocated - _amount(q.quota), Fraction(0)) if _finite(q.quota) else Fraction(0)
            out[q.name] = Share(
                name=q.name, parent=q.parent if q.parent in nodes else None, priority=q.priority,
                quota=float(q.quota), limit=float(q.limit), weight=float(_amount(q.weight)),
                requested=float(n.requested), allocated=float(n.allocated), fair_share=float(n.share),
                deserved=float(n.deserved), over_quota=float(n.share - n.deserved), borrowed=float(borrowed),
                lent=float(n.lent), surplus=float(n.surplus), weight_total=float(n.weight_total),
                pool=float(n.pool), oversubscribed=n.oversubscribed,
                siblings=[s.q.name for s in level if s is not n],
                borrowers=[s.q.name for s in level if s is not n and _finite(s.q.quota)
                           and s.allocated > _amount(s.q.quota)])
            emit(n.kids)

    emit(roots)
    return out


def _num(x: float) -> str:
    """12.0 -> "12", 0.5 -> "0.5", 3.3333 -> "3.33"."""
    x = round(float(x), 2)
    return str(int(x)) if x == int(x) else f"{x:.2f}".rstrip("0").rstrip(".")


def _names(names: list[str], verb: str) -> str:
    """'team-b asks', 'team-b or team-c ask', 'team-b, team-c or others ask', 'another queue asks'."""
    if not names:
        return f"another queue {verb}s"
    if len(names) == 1:
        return f"{names[0]} {verb}s"
    if len(names) == 2:
        return f"{names[0]} or {names[1]} {verb}"
    return f"{names[0]}, {names[1]} or others {verb}"


def explain(share: Share, fmt: Callable[[float], str], noun: str, num: Callable[[float], str] | None = None) -> str:
    """One sentence on what `share`'s queue holds and why, e.g.
    "team-a holds 12 GPUs: its 8 of quota plus 4 of the 10 idle GPUs, by weight 2 of 5; it gives back 4 if
    team-b asks.", "team-a holds 12 GPUs: its 4 of quota plus 8 of the 8 idle GPUs, 4 more than the 4 idle GPUs
    its weight 1 of 2 gives it (its fair share is 8); it gives back 8 if team-b asks."

    `fmt(amount)` writes an amount with its unit ("12 GPUs"); `noun` is the unit alone in the plural ("GPUs"),
    for the idle amount; `num(amount)` writes an amount as a bare number in that unit (default: the amount as
    given); weights are plain numbers. Borrowed amounts are what KAI may reclaim: it protects only a queue's
    deserved quota (`GuaranteeDeservedQuota`; docs/upstream.md, KAI fair share and queue order)."""
    s = share
    amt = num or _num
    head = f"{s.name} holds {fmt(s.allocated)}"
    if not _finite(s.quota):
        return f"{head}, all within its unlimited quota; its fair share is {fmt(s.fair_share)}."
    if s.allocated <= s.quota:
        if s.allocated == 0 and s.requested == 0:
            text = f"{head} and asks for none of its {amt(s.quota)} of quota"
        else:
            text = f"{head}, within its {amt(s.quota)} of quota"
        if s.requested > s.allocated:
            text += f"; it asks for {amt(s.requested)} and its fair share is {amt(s.fair_share)}"
        if s.lent > 0:
            text += (f"; it lends {amt(s.lent)} of its idle quota to {' and '.join(s.borrowers[:2]) or 'others'}"
                     f"{' and others' if len(s.borrowers) > 2 else ''}, and gets it back when it asks")
        return text + "."
    ahead = s.over_quota
    if s.weight == 0:
        why = f", though by weight 0 it has no share of them (its fair share is {amt(s.fair_share)})"
    elif s.weight_total == 0:
        why = f" (its fair share is {amt(s.fair_share)})"
    elif abs(s.borrowed - ahead) < 1e-9:
        why = f", by weight {_num(s.weight)} of {_num(s.weight_total)}"
    # `ahead` is its slice of the idle amount, not its fair share (quota part + that slice): the sentence names
    # both, so "its share of 4" never stands next to a fair share of 8 (a new user's pass).
    elif s.borrowed > ahead:
        why = (f", {amt(s.borrowed - ahead)} more than the {amt(ahead)} idle {noun} its weight {_num(s.weight)} "
               f"of {_num(s.weight_total)} gives it (its fair share is {amt(s.fair_share)})")
    else:
        why = (f" (its weight {_num(s.weight)} of {_num(s.weight_total)} gives it {amt(ahead)} idle {noun}; its "
               f"fair share is {amt(s.fair_share)})")
    if s.borrowed > s.surplus + 1e-9:  # more than its level had idle after quotas: it runs on idle quota
        plus = f"plus {amt(s.borrowed)} borrowed, more than the {amt(s.surplus)} {noun} left idle after quotas"
    else:
        plus = f"plus {amt(s.borrowed)} of the {amt(s.surplus)} idle {noun}"
    return (f"{head}: its {amt(s.quota)} of quota {plus}{why}; it gives back {amt(s.borrowed)} if "
            f"{_names(s.siblings, 'ask')}.")
