"""Kueue's own words about a waiting Workload, read into facts with numbers for why-pending.

Kueue v0.17.0 writes why a Workload waits into its `QuotaReserved=False` condition (reason `Pending`) and a
`Pending` Warning Event (`pkg/scheduler/scheduler.go`: `e.inadmissibleMsg`). For a Workload that does not fit,
that message is `Assignment.Message()` (`pkg/scheduler/flavorassigner/flavorassigner.go`)::

    couldn't assign flavors to pod set <ps>: <reason>[, <reason>...][; couldn't assign flavors to pod set ...]

each reason one of (`fitsResourceQuota`, `findFlavorForPodSetResource`, `flavor_assigner_attempts.go`)::

    insufficient quota for <res> in flavor <flv>, previously considered podsets requests (<q>) + current podset
        request (<q>) > maximum capacity (<q>)          # does not fit even with borrowing up to the limit
    insufficient unused quota for <res> in flavor <flv>, <q> more needed   # fits the limit, not what is free now
    resource <res> unavailable in ClusterQueue
    flavor <flv> does not provide resource <res>

and the scheduler may append ". Pending the preemption of <n> workload(s)". Other whole messages: "ClusterQueue
<cq> is inactive", "ClusterQueue <cq> not found", "Workload namespace doesn't match ClusterQueue selector".

`<q>` is a Kubernetes quantity as Kueue prints it (`resources.ResourceQuantityString`: "6", "1500m", "64Gi"); it
is read here into gangweb's units (GPUs as devices, CPU in cores, memory in bytes). Kueue's "maximum capacity" is
`ClusterQueueSnapshot.PotentialAvailable`: what the ClusterQueue could hold of that flavor and resource counting its
nominal quota plus what it may borrow (its borrowing limit, i.e. gangweb's limit), before other workloads' usage.

A message that does not match these wordings is never guessed at: it yields no fact and is shown as Kueue wrote it.
Everything here is cluster input: matched text is length-bounded and quoted (`causes.quote`).
"""
from __future__ import annotations

import re
from decimal import Decimal

from kubernetes.utils import parse_quantity

from .causes import quote

QUOTA_EXCEEDED = "KueueQuotaExceeded"  # does not fit even when borrowing up to the limit
QUOTA_IN_USE = "KueueQuotaInUse"  # fits the limit, but the quota is in use now (Kueue may preempt or wait)
RESOURCE_NOT_IN_QUEUE = "KueueResourceNotInQueue"
FLAVOR_LACKS_RESOURCE = "KueueFlavorLacksResource"
QUEUE_INACTIVE = "KueueQueueInactive"
QUEUE_MISSING = "KueueQueueNotFound"
NAMESPACE_NOT_SELECTED = "KueueNamespaceNotSelected"
CODES = (QUOTA_EXCEEDED, QUOTA_IN_USE, RESOURCE_NOT_IN_QUEUE, FLAVOR_LACKS_RESOURCE, QUEUE_INACTIVE, QUEUE_MISSING,
         NAMESPACE_NOT_SELECTED)

MAX_MESSAGE = 4000  # Kueue truncates condition messages to 32 KiB; gangweb reads only this much of one
_NAME = r"[A-Za-z0-9][A-Za-z0-9._/-]{0,252}"
_QTY = r"[0-9][0-9.]*(?:[eE][+-]?[0-9]+)?(?:m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?"
_PODSET = re.compile(rf"couldn't assign flavors to pod set ({_NAME}): ")
_EXCEEDED = re.compile(
    rf"insufficient quota for (?P<res>{_NAME}) in flavor (?P<flavor>{_NAME}), previously considered podsets "
    rf"requests \((?P<before>{_QTY})\) \+ current podset request \((?P<current>{_QTY})\) > maximum capacity "
    rf"\((?P<max>{_QTY})\)")
_IN_USE = re.compile(rf"insufficient unused quota for (?P<res>{_NAME}) in flavor (?P<flavor>{_NAME}), "
                     rf"(?P<more>{_QTY}) more needed")
_NOT_IN_QUEUE = re.compile(rf"resource (?P<res>{_NAME}) unavailable in ClusterQueue")
_FLAVOR_LACKS = re.compile(rf"flavor (?P<flavor>{_NAME}) does not provide resource (?P<res>{_NAME})")
_PREEMPTING = re.compile(r"\. Pending the preemption of (?P<n>[0-9]{1,9}) workload\(s\)")
_INACTIVE = re.compile(rf"^ClusterQueue (?P<cq>{_NAME}) is inactive$")
_MISSING = re.compile(rf"^ClusterQueue (?P<cq>{_NAME}) not found$")
_SELECTOR = "Workload namespace doesn't match ClusterQueue selector"


def amount_of(resource: str, quantity: str) -> int | float | None:
    """A quantity Kueue printed ("6", "1500m", "64Gi") in gangweb's units for `resource` (GPUs as devices, CPU in
    cores, memory in bytes, others as the quantity's base value): an int when whole; None when it does not parse."""
    try:
        value = parse_quantity(quantity)
    except (ValueError, TypeError, ArithmeticError):
        return None
    return int(value) if value == value.to_integral_value() else float(Decimal(value))


def _pod_sets(message: str) -> list[tuple[str, str]]:
    """[(pod set, its reasons text)] of an `Assignment.Message()`; [] when the message has no pod set part."""
    starts = list(_PODSET.finditer(message))
    return [(m.group(1), message[m.end():starts[i + 1].start() if i + 1 < len(starts) else len(message)])
            for i, m in enumerate(starts)]


def parse(message: str) -> list[dict]:
    """The facts in one Kueue pending message, in the order Kueue wrote them; [] when nothing in it is a wording
    listed in the module docstring. Each fact is ``{"code", "pod_set", "resource", "flavor", ...numbers}``:

    - QUOTA_EXCEEDED: "requested" (earlier pod sets' requests + this one's), "available" (Kueue's maximum
      capacity, within the limit), "more_needed" (requested - available), "earlier" and "current";
    - QUOTA_IN_USE: "more_needed" (beyond what is unused now), "preempting" (workloads Kueue is preempting for it,
      0 when it said none);
    - RESOURCE_NOT_IN_QUEUE / FLAVOR_LACKS_RESOURCE: the names only;
    - QUEUE_INACTIVE / QUEUE_MISSING ("cluster_queue") and NAMESPACE_NOT_SELECTED: whole-message facts.

    Amounts are in gangweb's units (`amount_of`). No `message` key: `facts` words them."""
    text = str(message or "")[:MAX_MESSAGE]
    whole = text.strip()
    for pattern, code in ((_INACTIVE, QUEUE_INACTIVE), (_MISSING, QUEUE_MISSING)):
        m = pattern.match(whole)
        if m:
            return [{"code": code, "cluster_queue": quote(m.group("cq"), 253)}]
    if whole == _SELECTOR:
        return [{"code": NAMESPACE_NOT_SELECTED}]
    preempting = _PREEMPTING.search(text)
    waiting_for = int(preempting.group("n")) if preempting else 0
    out = []
    for pod_set, reasons in _pod_sets(text):
        found = []
        for m in _EXCEEDED.finditer(reasons):
            res = m.group("res")
            earlier, current, most = (amount_of(res, m.group(k)) for k in ("before", "current", "max"))
            if None in (earlier, current, most):
                continue
            requested = earlier + current
            found.append((m.start(), {"code": QUOTA_EXCEEDED, "resource": res, "flavor": m.group("flavor"),
                                      "earlier": earlier, "current": current, "requested": requested,
                                      "available": most, "more_needed": _tidy(requested - most)}))
        for m in _IN_USE.finditer(reasons):
            res, more = m.group("res"), amount_of(m.group("res"), m.group("more"))
            if more is not None:
                found.append((m.start(), {"code": QUOTA_IN_USE, "resource": res, "flavor": m.group("flavor"),
                                          "more_needed": more, "preempting": waiting_for}))
        for m in _NOT_IN_QUEUE.finditer(reasons):
            found.append((m.start(), {"code": RESOURCE_NOT_IN_QUEUE, "resource": m.group("res")}))
        for m in _FLAVOR_LACKS.finditer(reasons):
            found.append((m.start(), {"code": FLAVOR_LACKS_RESOURCE, "resource": m.group("res"),
                                      "flavor": m.group("flavor")}))
        for _, fact in sorted(found, key=lambda f: f[0]):
            out.append({"pod_set": quote(pod_set, 253), **{k: quote(v, 253) if isinstance(v, str) else v
                                                          for k, v in fact.items()}})
    return _cumulative(out)


def _cumulative(found: list[dict]) -> list[dict]:
    """Kueue assigns a Workload's pod sets in order and checks each against the quota with the requests of the pod
    sets before it added (`flavorassigner`: the assumed usage of earlier pod sets plus this one's request), so the
    "N more needed" of a later pod set already counts the earlier ones. Of the QUOTA_IN_USE facts of one resource and
    flavor only the last is kept, naming the pod sets it covers in `earlier_pod_sets`: said per pod set, "1 more
    needed" then "4 more needed" would read as 5."""
    last: dict[tuple, int] = {}
    for i, fact in enumerate(found):
        if fact["code"] == QUOTA_IN_USE:
            last[(fact.get("resource"), fact.get("flavor"))] = i
    out = []
    for i, fact in enumerate(found):
        key = (fact.get("resource"), fact.get("flavor"))
        if fact["code"] == QUOTA_IN_USE and last[key] != i:
            continue
        if fact["code"] == QUOTA_IN_USE:
            earlier = [f["pod_set"] for f in found[:i] if f["code"] == QUOTA_IN_USE
                       and (f.get("resource"), f.get("flavor")) == key and f["pod_set"] != fact["pod_set"]]
            if earlier:
                fact = {**fact, "earlier_pod_sets": list(dict.fromkeys(earlier))}
        out.append(fact)
    return out


def _tidy(value):
    """A difference of two amounts as an int when whole (floats of CPU cores: 2.5 - 0.5 = 2)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def sentence(fact: dict, amount, queue: str = "") -> str:
    """A fact of `parse` in words (lower case: also a clause), with amounts said by `amount(resource, value)`
    (observe.why_pending.amount: "6 GPUs", "1.5 CPU cores", "64 GiB of memory"). `queue`: the job's queue, named
    when Kueue's words are about its ClusterQueue."""
    code, res = fact["code"], fact.get("resource", "")
    where = f"for {res} in flavor {fact.get('flavor')}"
    if code == QUOTA_EXCEEDED:
        return (f"insufficient quota {where}: {amount(res, fact['requested'])} requested, "
                f"{_bare(amount(res, fact['available']), res)} available within the limit, "
                f"{_bare(amount(res, fact['more_needed']), res)} more needed")
    if code == QUOTA_IN_USE:
        together = fact.get("earlier_pod_sets") or []
        counted = f" (with pod set{'s' if len(together) > 1 else ''} {', '.join(together)} before it)" \
            if together else ""
        said = (f"insufficient unused quota {where}: {amount(res, fact['more_needed'])} more needed than is "
                f"unused now{counted}; it fits the limit, so it waits for room")
        n = fact.get("preempting") or 0
        return said + (f" (Kueue is preempting {n} workload{'' if n == 1 else 's'} for it)" if n else "")
    cq = f"ClusterQueue {queue}" if queue else "the queue's ClusterQueue"
    if code == RESOURCE_NOT_IN_QUEUE:
        return f"{cq} has no quota for {res}: the queue policy sets none for it"
    if code == FLAVOR_LACKS_RESOURCE:
        return f"flavor {fact['flavor']} does not provide {res}"
    if code == QUEUE_INACTIVE:
        return f"ClusterQueue {fact['cluster_queue']} is inactive (Kueue admits nothing from it)"
    if code == QUEUE_MISSING:
        return f"ClusterQueue {fact['cluster_queue']} does not exist in the cluster"
    return f"the job's namespace is not among those {cq} admits (its namespaceSelector)"


def _bare(said: str, resource: str) -> str:
    """'4 GPUs' -> '4' after a first amount with its unit, memory and other resources keep theirs."""
    if resource in ("nvidia.com/gpu", "gpu", "cpu"):
        return said.split(" ", 1)[0]
    return said


def facts(message: str, parts, amount, queue: str = "") -> list[dict]:
    """Blocking facts (observe.why_pending's shape: each with `message`, a lower-case clause) of Kueue's pending
    `message` (the condition's whole text), else of its `parts` (the same text split per pod set by the backend,
    `GangStatus.reasons`) joined again, so that the preemption suffix Kueue appends once applies to every pod set;
    each with `source_message` the Kueue text it came from. [] when nothing parses."""
    texts = [message] if parse(message) else ["; ".join(p for p in parts if p)]
    out, seen = [], set()
    for said in texts:
        for fact in parse(said):
            key = tuple(sorted((k, str(v)) for k, v in fact.items()))
            if key in seen:
                continue
            seen.add(key)
            fact["message"] = sentence(fact, amount, queue)
            if fact.get("pod_set"):
                fact["message"] = f"pod set {fact['pod_set']}: {fact['message']}"
            fact["source_message"] = quote(said)
            out.append(fact)
    return out
