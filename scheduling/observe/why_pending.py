""""Why is my job pending?": a structured answer built from the gang object, the pods and the job's own asks.

Shape (JSON, stored in `GangJob.why_pending`, None once the gang is scheduled)::

    {"reason": "OverLimit",                     # code: the scheduler's reason, or gangweb's WaitingFor... codes
     "message": "team-a quota has reached ...",  # the scheduler's own words ("" when it said nothing)
     "summary": "Queue team-a: 6 of 8 GPUs in use, limit 8, this gang needs 4.",   # blocking facts lead
     "source": "PodGroup ns/name", "since": "2026-11-29T14:00:00+00:00" | None,
     "pods": {"bound": 0, "required": 3, "total": 3, "created": 3},
     "queue_name": "team-a",                       # the job's queue; every summary names it
     "queue": {"name": "team-a", "resources": {"nvidia.com/gpu": {"quota": 4, "limit": 8, "allocated": 6,
               "allocated_non_preemptible": 0, "requested": 10}}} | None,
     "job_requests": {"nvidia.com/gpu": 4, "cpu": 12, "memory": 103079215104},
     "blocking": [{"code": "QueueOverLimit", "queue": "team-a", "resource": "nvidia.com/gpu", "in_use": 6,
                   "limit": 8, "needs": 4, "message": "queue team-a: 6 of 8 GPUs in use, limit 8, this gang needs 4"}],
                                                   # what keeps it out, most certain first: ExceedsClusterCapacity,
                                                   # NoNodeFits (observe.capacity), QueueOverLimit, QueueOverQuota;
                                                   # else ClusterBusy (room taken now by gangweb's placed jobs)
     "reasons": [{"reason": "OverLimit", "message": "..."}],       # every explanation the scheduler gave
     "pod_conditions": [{"reason": "Unschedulable", "message": "0/4 nodes are available: ...", "pods": 3,
                         "example": "train-worker-0-abcde"}],
     "unknown": "Volcano reports phase Draining, which gangweb does not know",   # only when the scheduler wrote
                                                   # a value gangweb does not know (GangStatus.unknown): said as is
     "said": [{"type": "Warning", "reason": "FailedScheduling", "message": "0/4 nodes are available: ...",
               "object": "Pod ns/train-worker-0-abcde", "kind": "Pod", "count": 5000,
               "first_at": "2026-11-29T14:00:02+00:00", "last_at": "2026-11-29T15:23:09+00:00",
               "component": "default-scheduler"}]}
                                                   # only when the cluster said something: the Warning Events of the
                                                   # gang objects and one waiting pod, folded by (reason, object)
                                                   # with how often and first/last seen, newest first, at most 3
                                                   # (observe.events.said, reconcile/waiting_events.py)

Units: GPUs in devices, CPU in cores, memory in bytes, other resources as their quantity's base value; numbers are
ints when whole. Sources: KAI PodGroup `status.schedulingConditions[].reasons[]` with `details.queueDetails`
(QuotaDetails: queueDeservedResources = quota, queueResourceLimits, queueAllocatedResources,
queueAllocatedNonPreemptibleResources, queueRequestedResources, podGroupRequestedResources; KAI
`pkg/apis/scheduling/v2alpha2/podgroup_types.go`); Kueue's Workload `QuotaReserved=False` message, read into
`Kueue*` blocking facts with numbers by observe/kueue_reasons.py (only its exact wordings; any other is shown as
Kueue wrote it); v1alpha2 PodGroup `PodGroupScheduled` condition; pods'
`PodScheduled=False` conditions. A KAI condition that KAI clears once the gang schedules disappears here too,
because the answer is rebuilt from the current objects on every observation.
"""
from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal, InvalidOperation

from kubernetes.utils import parse_quantity

from ..amounts import for_people, format_number
from ..choices import GangPhase
from ..kube import resources
from . import causes, kueue_reasons
from .capacity import CLUSTER_BUSY, EXCEEDS_CLUSTER, fragmented
from .capacity import blocking as capacity_blocking
from .capacity import busy as capacity_busy
from .evidence import Evidence, sets_phrase
from .phase_entries import GATED, REASON_WAITING_FOR_PODS, REASON_WAITING_FOR_SCHEDULER, bound_of
from .pods import PodFacts

PENDING_PHASES = frozenset({GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED})
MAX_POD_CONDITIONS = 5

# QuotaDetails field -> our key (per resource).
QUEUE_FIELDS = {
    "queueDeservedResources": "quota",
    "queueResourceLimits": "limit",
    "queueAllocatedResources": "allocated",
    "queueAllocatedNonPreemptibleResources": "allocated_non_preemptible",
    "queueRequestedResources": "requested",
}
JOB_FIELD = "podGroupRequestedResources"
JOB_NON_PREEMPTIBLE_FIELD = "podGroupRequestedNonPreemptibleResources"

# Reasons meaning "no room for the gang now" (kube-scheduler, Volcano, KAI's free-text reasons).
GANG_UNSCHEDULABLE = frozenset({"Unschedulable", "NotEnoughResources", "Not enough resources for the workload",
                                "Unable to schedule podgroup"})
NOUNS = {"nvidia.com/gpu": "GPU", "gpu": "GPU", "cpu": "CPU", "memory": "memory"}
UNITS = {"nvidia.com/gpu": "GPUs", "gpu": "GPUs", "cpu": "CPU cores", "memory": "bytes of memory"}
# Codes of the queue's blocking facts (the capacity ones are in observe.capacity).
QUEUE_OVER_LIMIT = "QueueOverLimit"
QUEUE_OVER_QUOTA = "QueueOverQuota"
# Facts whose sentence says all (the reason's own sentence would repeat it or contradict it).
OWN_WORDS = (causes.POD_CREATE_REFUSED, causes.FOREIGN_GATE, causes.SCHEDULER_SILENT, causes.QUEUE_MANAGER_NOT_SEEN)
REASON_FAILED_CREATE = "FailedCreate"


def number(value) -> int | float | None:
    """A quantity ("8", "1500m", 2.5, "64Gi") as a JSON number in base units; None when it does not parse."""
    if value is None:
        return None
    try:
        amount = parse_quantity(value) if not isinstance(value, Decimal) else value
    except (ValueError, TypeError, InvalidOperation):
        return None
    return int(amount) if amount == amount.to_integral_value() else float(amount)


def queue_numbers(details: dict | None) -> tuple[dict | None, dict]:
    """Normalize KAI QuotaDetails into ({"name", "resources": {res: {quota, limit, ...}}} | None, job_requests)."""
    if not details:
        return None, {}
    resources: dict[str, dict] = {}
    for field, key in QUEUE_FIELDS.items():
        for res, qty in (details.get(field) or {}).items():
            resources.setdefault(res, {})[key] = number(qty)
    job = {res: number(qty) for res, qty in (details.get(JOB_FIELD) or {}).items()}
    return {"name": details.get("name", ""), "resources": resources}, job


def _kueue_queue(queue_name: str, kueue_facts: list[dict]) -> dict:
    """`queue` for a Workload Kueue keeps waiting: its queue's name and, per resource its pending message gives a
    "maximum capacity" for (`kueue_reasons.QUOTA_EXCEEDED`: the ClusterQueue's nominal quota plus what it may borrow,
    i.e. gangweb's limit), that number as `limit`. Kueue states no other queue numbers in a Workload's status."""
    resources: dict[str, dict] = {}
    for fact in kueue_facts:
        if fact.get("code") == kueue_reasons.QUOTA_EXCEEDED and fact.get("resource"):
            resources.setdefault(str(fact["resource"]), {})["limit"] = fact.get("available")
    return {"name": queue_name, "resources": resources}


def job_requests(resolved_spec: dict, runtime_classes: resources.RuntimeClasses | None = None) -> dict:
    """What the whole job asks per resource, in base units (cores, bytes, devices): {resource: amount}.

    gangweb's one request arithmetic (`kube.resources.gang_requests`, kube-scheduler's `PodRequests`: sidecars,
    init peaks, pod-level resources, overhead; `runtime_classes` from `kube.runtime_classes.for_spec`), so the
    page, the queue checks and the usage estimate say the same number. A spec that cannot be read (only hand-made
    rows; submit validates specs) asks nothing: {}."""
    try:
        return resources.as_numbers(resources.spec_requests(resolved_spec, runtime_classes))
    except resources.UNREADABLE:
        return {}


def _unit(resource: str) -> str:
    return UNITS.get(resource, resource)


def _fmt(value) -> str:
    return "?" if value is None else format_number(value)


def _bare(resource: str, value) -> str:
    """A number as it follows "of" or "has": GPUs and cores bare ("8"), memory with its unit ("64 GiB",
    "1,020 GiB"; amounts.for_people)."""
    if resource == "memory" and isinstance(value, (int, float)):
        return for_people(resource, value, units="base")
    return _fmt(value)


def amount(resource: str, value) -> str:
    """An amount with its unit, as people say it: "1 GPU", "16 GPUs", "12 CPU cores", "96 GiB of memory",
    "1,020 GiB of memory" (the numbers of amounts.for_people: separators, never an exponent)."""
    if value is None:
        return f"? {_unit(resource)}"
    if resource == "memory" and isinstance(value, (int, float)):
        return f"{for_people(resource, value, units='base')} of memory"
    if resource in ("nvidia.com/gpu", "gpu", "cpu") and isinstance(value, (int, float)):
        return for_people(resource, value, units="base")
    return f"{_fmt(value)} {resource}"


def _capacity_facts(needs: dict, per_pod: list[dict], cluster_capacity: dict | None) -> list[dict]:
    """observe.capacity.blocking with each fact's sentence (`message`, lower case: it is also a clause)."""
    facts = []
    for f in capacity_blocking(needs, per_pod, cluster_capacity):
        res, nodes = f["resource"], f["nodes"]
        where = f" ({nodes} schedulable node{'' if nodes == 1 else 's'})"
        if f["code"] == EXCEEDS_CLUSTER:
            f["message"] = (f"needs {amount(res, f['needs'])}; the cluster has {_bare(res, f['available'])} "
                            f"allocatable in total{where}")
        else:
            f["message"] = (f"one pod needs {amount(res, f['per_pod'])}; the largest node has "
                            f"{_bare(res, f['largest_node'])} allocatable")
        facts.append(f)
    return facts


def _busy_facts(needs: dict, cluster_capacity: dict | None, in_use: dict | None) -> list[dict]:
    """observe.capacity.busy with each fact's sentence (`message`, lower case: it is also a clause)."""
    facts = []
    for f in capacity_busy(needs, cluster_capacity, in_use):
        res = f["resource"]
        f["message"] = (f"needs {amount(res, f['needs'])}; gangweb's running jobs hold {_bare(res, f['in_use'])} "
                        f"of the cluster's {_bare(res, f['allocatable'])} allocatable, so at most "
                        f"{_bare(res, f['free'])} {'is' if f['free'] == 1 else 'are'} free now")
        facts.append(f)
    return facts


def _fragment_facts(waiting: list, nodes) -> list[dict]:
    """observe.capacity.fragmented with each fact's sentence (`message`, lower case: it is also a clause).
    `nodes`: a callable returning (node_list, {node: requests of gangweb's bound pods}) or None."""
    if nodes is None or not waiting:
        return []
    node_list, used = nodes()
    facts = []
    for f in fragmented(waiting, node_list, used):
        res, most, names = f["resource"], f["most_free"], f["most_free_nodes"]
        span = causes.node_span(names)
        has = f"{span} {'has' if len(names) == 1 else 'have'} {_bare(res, most)}{'' if len(names) == 1 else ' each'}"
        if most < f["per_pod"]:
            said = (f"each pod needs {amount(res, f['per_pod'])}; the most free on any node is {_bare(res, most)} "
                    f"({has}, {_bare(res, f['free_total'])} in all)")
        else:
            said = (f"each pod needs {amount(res, f['per_pod'])}; the nodes' free room holds only {f['fit']} of the "
                    f"{f['pods']} pods ({has}, {_bare(res, f['free_total'])} in all)")
        f["message"] = said + "; an upper bound: gangweb counts only the pods it manages on these nodes"
        facts.append(f)
    return facts


def _queue_fact(reason: str, queue: dict | None, asks: dict) -> dict | None:
    """The queue's numbers as a blocking fact, for KAI's OverLimit and NonPreemptibleOverQuota (None otherwise)."""
    if reason not in ("OverLimit", "NonPreemptibleOverQuota") or not (queue or {}).get("resources"):
        return None
    res, nums = _limiting(queue["resources"], asks, reason)
    qname, needs = queue.get("name") or "?", asks.get(res)
    if reason == "OverLimit":
        in_use, limit = nums.get("allocated"), nums.get("limit")
        return {"code": QUEUE_OVER_LIMIT, "queue": qname, "resource": res, "in_use": in_use, "limit": limit,
                "needs": needs,
                "message": f"queue {qname}: {_bare(res, in_use)} of {amount(res, limit)} in use, limit "
                           f"{_bare(res, limit)}, this gang needs {_bare(res, needs)}"}
    in_use, quota = nums.get("allocated_non_preemptible"), nums.get("quota")
    return {"code": QUEUE_OVER_QUOTA, "queue": qname, "resource": res, "in_use": in_use, "quota": quota,
            "needs": needs,
            "message": f"queue {qname}: {_bare(res, in_use)} of {amount(res, quota)} of quota in use by "
                       f"non-preemptible jobs, this non-preemptible gang needs {_bare(res, needs)}"}


def _sentence(clause: str) -> str:
    return clause[:1].upper() + clause[1:] + "."


def summary(why: dict, scheduler_name: str = "") -> str:
    """The explanation in words a user understands (the UI shows it; the API returns it as `summary`).

    Blocking facts lead (the cluster or a node too small, then the queue's numbers), then what the reason means.
    """
    lead = []
    for fact in why.get("blocking") or []:
        if fact["code"] in OWN_WORDS:
            said = fact["message"].rstrip(". ")
            lead.append(said[:1].upper() + said[1:] if said.endswith("?") else _sentence(said))
        elif fact["code"] in (EXCEEDS_CLUSTER, CLUSTER_BUSY):
            lead.append("This job " + fact["message"] + ".")
        elif fact["code"] == QUEUE_OVER_QUOTA:
            lead.append(_sentence(fact["message"]) + " A preemptible job may go over quota.")
        else:
            lead.append(_sentence(fact["message"]))
    if any(f["code"] in (QUEUE_OVER_LIMIT, QUEUE_OVER_QUOTA, *OWN_WORDS, *kueue_reasons.CODES)
           for f in why.get("blocking") or []):
        return naming_queue(" ".join(lead), why.get("queue_name") or "")
    rest = _reason_summary(why, scheduler_name)
    text = " ".join([*lead, rest]) if rest else " ".join(lead)
    return naming_queue(text, why.get("queue_name") or "")


def naming_queue(text: str, queue_name: str) -> str:
    """`text` with the job's queue named: unchanged when it already names it as a queue ("queue team-a",
    "Queue 'team-a'", or there is no name), else followed by "Queue: <name>." as a sentence of its own (so every
    summary says which queue the job waits in, issue 21). A namespace or object that merely contains the name
    does not count."""
    if not queue_name or re.search(rf"\bqueue:?\s+['`\"]?{re.escape(queue_name)}(?![\w.-])", text, re.IGNORECASE):
        return text
    text = text.rstrip()
    if text and text[-1] not in ".?!":
        text += "."
    return f"{text} Queue: {queue_name}." if text else f"Queue: {queue_name}."


def _reason_summary(why: dict, scheduler_name: str) -> str:
    """What the reason code means, with the pods' numbers."""
    reason, pods, queue = why["reason"], why["pods"], why.get("queue") or {}
    qname = queue.get("name") or why.get("queue_name") or "the queue"
    short = [c for c in pods.get("sets") or [] if c["bound"] < c["minimum"]]
    bound = bound_of(pods["bound"], pods["required"], short)
    if why.get("unknown"):
        return f"{why['unknown']} ({bound})."
    if short and pods["bound"] >= pods["required"]:
        return (f"The gang is not whole: {sets_phrase(short)}, below {'its' if len(short) == 1 else 'their'} pod "
                f"set's own minimum, although {pods['bound']} of the {pods['required']} pods the gang needs in all "
                "are bound.")
    if reason == "QueueDoesNotExist":
        return f"Queue {qname} does not exist in the cluster, so the scheduler will not consider this job."
    if reason == REASON_WAITING_FOR_PODS:
        return f"Waiting for the job's pods to be created: {pods['created']} of {pods['total']} exist."
    if reason == REASON_WAITING_FOR_SCHEDULER:
        who = f"scheduler '{scheduler_name}'" if scheduler_name else "the scheduler"
        return f"{pods['created']} pods are waiting for {who} to look at them; it has not said anything yet."
    if reason == GATED:
        return f"The pods are held back by scheduling gates ({bound})."
    if reason in GANG_UNSCHEDULABLE:
        said = f" The scheduler says: {why['message']}" if why.get("message") else ""
        return (f"Not enough room for the whole gang: {bound} (all {pods['required']} must fit at once)."
                f"{said}")
    said = f": {why['message']}" if why.get("message") else ""
    return f"{reason}{said} ({bound})."


def _limiting(resources: dict, job: dict, reason: str) -> tuple[str, dict]:
    """The resource that blocks: the first whose allocated + asked exceeds its limit (or quota), GPUs first."""
    order = sorted(resources, key=lambda r: (r not in ("nvidia.com/gpu", "gpu"), r))
    cap_key, used_key = ("limit", "allocated") if reason == "OverLimit" else ("quota", "allocated_non_preemptible")
    for res in order:
        nums = resources[res]
        cap, used, ask = nums.get(cap_key), nums.get(used_key), job.get(res)
        if cap is not None and cap >= 0 and used is not None and ask is not None and used + ask > cap:
            return res, nums
    return order[0], resources[order[0]]


def _pod_conditions(pods: list[PodFacts]) -> list[dict]:
    groups: dict[tuple[str, str], dict] = {}
    for p in pods:
        if not p.waiting_reason or p.terminating:
            continue
        g = groups.setdefault((p.waiting_reason, p.waiting_message), {
            "reason": p.waiting_reason, "message": p.waiting_message, "pods": 0, "example": p.name})
        g["pods"] += 1
    return sorted(groups.values(), key=lambda g: -g["pods"])[:MAX_POD_CONDITIONS]


def _headline(gang, live: list[PodFacts], pod_conditions: list[dict]) -> tuple[str, str, str, datetime | None]:
    """(reason, message, source, since) of a pending job: the scheduler's word on the gang when it refused it, else
    the first waiting condition its live pods share, else WaitingForPods (none exists yet) or WaitingForScheduler."""
    if gang.admitted is False:
        return gang.reason or "Unschedulable", gang.message, gang.source, gang.at
    if gang.unknown and gang.admitted is None:  # a value gangweb does not know: said as it is
        return gang.reason or "Unknown", gang.unknown, gang.source, gang.at
    if pod_conditions:
        first = next(p for p in live if p.waiting_reason == pod_conditions[0]["reason"])
        return first.waiting_reason, first.waiting_message, first.ref, first.waiting_since
    if not live:
        return REASON_WAITING_FOR_PODS, "", gang.source, None
    return REASON_WAITING_FOR_SCHEDULER, "", gang.source or live[0].ref, None


def _room_facts(needs: dict, capacity: dict | None, in_use, bound: int, waiting: list | None, nodes) -> list[dict]:
    """When the scheduler says the gang has no room and nothing else blocks it: ClusterBusy (gangweb's placed jobs
    hold the room), else, with no pod bound yet, NodesFragmented (the free room is spread too thin)."""
    blocking = _busy_facts(needs, capacity, in_use()) if in_use is not None else []
    if not blocking and not bound:
        blocking = _fragment_facts(waiting or [], nodes)
    return blocking


def explain(phase: str, evidence: Evidence, job_requests: dict | None = None, scheduler_name: str = "",
            capacity: dict | None = None, per_pod: list[dict] | None = None, in_use=None, queue_name: str = "", *,
            template_gates: set[str] | None = None, waiting: list | None = None, nodes=None,
            silence_s: float | None = None, absent: list[dict] | None = None) -> dict | None:
    """The why-pending object for a job in `phase`, or None when it is not pending (Scheduled or later, or at
    least minMember pods bound).

    - `evidence` (observe/evidence.py): the job's shape (minMember and total), the backend's reading of the gang
      object, the job's pods, the owner Jobs' FailedCreate event rows (`refusals`, newest first, for
      `PodCreateRefused` facts while pods are missing) and `now`.
    - `job_requests`: what the whole job asks per resource (base units), used when the scheduler does not say.
    - `capacity`: the cluster's `Cluster.capacity` (observe.capacity.summarize; None when unknown) and `per_pod`:
      what one pod of each pod set asks (observe.capacity.pod_requests), for the capacity facts in `blocking`.
    - `in_use`: a callable returning what gangweb's placed jobs in the cluster request (observe.capacity.busy's
      `in_use`), called only when the scheduler says the gang has no room and nothing else blocks it, for a
      `ClusterBusy` fact.
    - `queue_name`: the job's queue (gangweb's name, which is the scheduler's queue object's name): stored as
      `queue_name` and named by every summary, also when the scheduler reported no queue details.
    - `template_gates`: gates the job's own templates carry.
    - `waiting` and `nodes`: per pod set (one pod's asks, nodeSelector, pods to place), and a callable returning
      (`observe.capacity.node_list`, {node: what gangweb's bound pods request there}), for a `NodesFragmented`
      fact when the gang has no room but the cluster's free room would hold it in total.
    - `evidence.said`: the folded Warning Events (observe.events.said), carried as `said` when there are any.
    - `silence_s`: when every pod exists longer than `silence_s` seconds (at the evidence's `now`) and no scheduler
      said anything,
      a `SchedulerSilent` fact naming `scheduler_name` (GANGWEB_SCHEDULER_SILENCE_SECONDS).
    - `absent`: a `QueueManagerNotSeen` fact (causes.queue_manager_absent) when the queue manager that holds the
      gang is not seen acting on the cluster: it leads, since every word of that manager below may be stale.

    Facts lead in this order: pods refused by the API server, foreign scheduling gates, the capacity facts, the
    queue's numbers, then (only when nothing else blocks) ClusterBusy or NodesFragmented, or SchedulerSilent.
    """
    shape, gang, refusals = evidence.shape, evidence.gang, evidence.refusals
    live = evidence.live_pods
    bound = sum(1 for p in live if p.bound)
    if phase not in PENDING_PHASES or evidence.whole:
        return None
    pod_conditions = _pod_conditions(live)
    said = gang.reasons if gang.admitted is False else []  # the scheduler's own reasons, as its plugin read them
    queue, asked = queue_numbers(gang.queue_details if gang.admitted is False else None)
    reason, message, source, since = _headline(gang, live, pod_conditions)
    asks = asked or {k: number(v) for k, v in (job_requests or {}).items()}
    own = {k: number(v) for k, v in (job_requests or {}).items()}  # the whole job, as its spec asks
    refused = causes.refused(refusals, len(live), shape.total)
    if refused and reason == REASON_WAITING_FOR_PODS:
        reason, message, source = REASON_FAILED_CREATE, refused[0]["server_message"], refused[0]["object"]
    blocking = [*(absent or []), *refused, *causes.foreign_gates(live, template_gates)]
    blocking += _capacity_facts(own or asks, per_pod or [], capacity)
    queue_fact = _queue_fact(reason, queue, asks)
    if queue_fact is not None:
        blocking.append(queue_fact)
    if gang.admitted is False:  # Kueue's pending message read into numbers (only its exact wordings)
        kueue_facts = kueue_reasons.facts(gang.message, [r.get("message", "") for r in said], amount, queue_name)
        blocking += kueue_facts
        if queue is None and gang.quota_only and queue_name:
            queue = _kueue_queue(queue_name, kueue_facts)
    if not blocking and (reason in GANG_UNSCHEDULABLE or any(
            c["reason"] in GANG_UNSCHEDULABLE for c in pod_conditions)):
        blocking = _room_facts(own or asks, capacity, in_use, bound, waiting, nodes)
    if not blocking and reason == REASON_WAITING_FOR_SCHEDULER and silence_s is not None and gang.admitted is None:
        blocking = causes.silent_scheduler(scheduler_name, live, evidence.now, silence_s)
    why = {
        "reason": reason,
        "message": message,
        "source": source,
        "since": since.isoformat() if since else None,
        "pods": {"bound": bound, "required": shape.min_member, "total": shape.total, "created": len(live),
                 **({"sets": evidence.set_counts} if shape.sets else {})},
        "queue": queue,
        "queue_name": queue_name or (queue or {}).get("name") or "",
        "job_requests": asks,
        "blocking": blocking,
        "reasons": [{"reason": r.get("reason", ""), "message": r.get("message", "")} for r in said],
        "pod_conditions": pod_conditions,
    }
    if evidence.said:
        why["said"] = evidence.said
    if gang.unknown and gang.admitted is None:
        why["unknown"] = gang.unknown
    why["summary"] = summary(why, scheduler_name)
    return why
