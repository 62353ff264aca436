"""Why-pending in plain words: turn the structured `GangJob.why_pending` object into sentences with numbers.

The object is written by the observer (scheduling/observe/why_pending.py, docs/observability.md)::

    {"reason": "OverLimit", "message": "<the scheduler's own words>", "summary": "<one sentence with numbers>",
     "source": "PodGroup ns/name", "since": "2026-11-29T14:00:00+00:00" | None,
     "pods": {"bound": 0, "required": 3, "total": 3, "created": 3},
     "queue": {"name": "team-a", "resources": {"nvidia.com/gpu": {"quota": 4, "limit": 8, "allocated": 6,
               "allocated_non_preemptible": 0, "requested": 10}}} | None,
     "job_requests": {"nvidia.com/gpu": 4, "cpu": 12, "memory": 103079215104},
     "reasons": [{"reason", "message"}], "pod_conditions": [{"reason", "message", "pods", "example"}],
     "blocking": [{"code": "NoNodeFits", "message": "one pod needs 8 GPUs; ...", <numbers>}],
     "said": [{"reason": "FailedScheduling", "object": "Pod ns/p-0", "count": 5000, "first_at": "<RFC 3339>",
               "last_at": "<RFC 3339>", "message": "...", "component": "default-scheduler", ...}]}

Units there: GPUs in devices, CPU in cores, memory in bytes. Reason codes come from the schedulers (KAI
`UnschedulableExplanation` reasons, Kubernetes v1alpha2 `PodGroupScheduled` reasons, pod `PodScheduled` reasons)
plus gangweb's own (`WaitingForScheduler`, `WaitingForPods`, cluster errors).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..kube.times import parse_time
from .display import for_people

# What a reason means, for someone who has not read the scheduler's source.
REASON_WORDS = {
    "OverLimit": "The job would push queue {queue} (or one of its parents) over its limit, so the scheduler holds "
                 "it back until enough is freed.",
    "NonPreemptibleOverQuota": "The job is non-preemptible and would push queue {queue} over its guaranteed quota; "
                               "non-preemptible jobs may only use quota.",
    "QueueDoesNotExist": "Queue {queue} does not exist in the cluster yet, so the scheduler ignores the job.",
    "PreemptionDelayNotElapsed": "The scheduler waits for running jobs' minimum runtime before it preempts them.",
    "Unschedulable": "The scheduler cannot place the whole gang at once: not enough free room on the nodes.",
    "SchedulerError": "The scheduler reported an error while placing the gang.",
    "NotReady": "The gang is not ready: fewer pods exist than it needs.",
    "WaitingForScheduler": "The pods exist but no scheduler has said anything about them yet (is the scheduler "
                           "for this backend installed?).",
    "WaitingForPods": "The gang object exists; its pods are being created.",
}


def amount(resource: str, value) -> str:
    """An amount of a resource in the observer's base units, for people: "4 GPUs", "12 CPU cores", "96 GiB" (the
    dashboard's one unit style: display.for_people)."""
    return for_people(resource, value, units="base")


def _sentence(clause: str) -> str:
    return clause[:1].upper() + clause[1:].rstrip(".") + "."


@dataclass
class WhyPending:
    """What the job page shows: a headline, what the reason means, detail sentences with numbers, the scheduler's
    own message and the pods' scheduling conditions."""

    reason: str = ""
    headline: str = ""
    meaning: str = ""
    details: list[str] = field(default_factory=list)
    message: str = ""
    source: str = ""
    since: str = ""
    pod_conditions: list[dict] = field(default_factory=list)
    blocking: list[dict] = field(default_factory=list)  # [{"code", "message"}]: what blocks, most certain first
    said: list[dict] = field(default_factory=list)  # `said_rows`: what the cluster keeps saying, with how often


def _when(value) -> str:
    """An RFC 3339 time from the stored answer as the dashboard writes times ("2026-12-06 08:00:00 UTC"); "" when
    it is not one."""
    at = parse_time(value)
    return at.strftime("%Y-%m-%d %H:%M:%S UTC") if at else ""


def said_rows(said) -> list[dict]:
    """The stored `said` entries (observe.events.said) for the page: {"reason", "object", "component", "message",
    "count" (int >= 1), "first", "last" (times as `_when` writes them)}; entries that are not dicts are left out."""
    rows = []
    for e in said if isinstance(said, list) else []:
        if not isinstance(e, dict):
            continue
        count = e.get("count")
        rows.append({"reason": str(e.get("reason") or ""), "object": str(e.get("object") or ""),
                     "component": str(e.get("component") or ""), "message": str(e.get("message") or ""),
                     "count": count if isinstance(count, int) and count >= 1 else 1,
                     "first": _when(e.get("first_at")), "last": _when(e.get("last_at"))})
    return rows


def explain(why: dict | None, phase: str = "") -> WhyPending | None:
    """Sentences for a why-pending object, or None when there is nothing to explain."""
    if not why or not isinstance(why, dict):
        return None
    reason = str(why.get("reason") or "")
    queue = why.get("queue") if isinstance(why.get("queue"), dict) else {}
    queue_name = queue.get("name") or ""
    meaning = REASON_WORDS.get(reason, "").format(queue=f"'{queue_name}'" if queue_name else "(its queue)")
    headline = str(why.get("summary") or "") or meaning or (
        f"The scheduler says: {reason}." if reason else f"The job is {phase or 'pending'}.")
    out = WhyPending(reason=reason, headline=headline, meaning=meaning if meaning != headline else "",
                     message=str(why.get("message") or ""), source=str(why.get("source") or ""),
                     since=str(why.get("since") or ""),
                     pod_conditions=[c for c in why.get("pod_conditions") or [] if isinstance(c, dict)],
                     blocking=[{"code": str(f.get("code") or ""), "message": _sentence(str(f.get("message") or ""))}
                               for f in why.get("blocking") or [] if isinstance(f, dict) and f.get("message")],
                     said=said_rows(why.get("said")))
    pods = why.get("pods") if isinstance(why.get("pods"), dict) else {}
    if pods.get("bound") is not None and pods.get("required") is not None:
        sentence = f"{pods['bound']} of the {pods['required']} pods the gang needs are bound"
        if pods.get("total") not in (None, pods["required"]):
            sentence += f" ({pods['total']} pods in all"
            sentence += f", {pods['created']} created)" if pods.get("created") is not None else ")"
        out.details.append(sentence + ".")
    asks = why.get("job_requests") if isinstance(why.get("job_requests"), dict) else {}
    for res, nums in (queue.get("resources") or {}).items():
        if not isinstance(nums, dict):
            continue
        parts = [f"{label} {amount(res, nums[key])}" for key, label in
                 (("quota", "quota"), ("limit", "limit"), ("allocated", "allocated"), ("requested", "requested"))
                 if nums.get(key) is not None]
        sentence = f"Queue '{queue_name}', {res}: " + ", ".join(parts)
        if res in asks:
            sentence += f"; this job asks for {amount(res, asks[res])}"
            limit, allocated = nums.get("limit"), nums.get("allocated")
            if isinstance(limit, (int, float)) and limit >= 0 and isinstance(allocated, (int, float)):
                sentence += f", and {amount(res, max(0, limit - allocated))} are left under the limit"
        out.details.append(sentence + ".")
    if asks and not queue.get("resources"):
        out.details.append("This job asks for " + ", ".join(amount(r, v) for r, v in asks.items()) + " in all.")
    return out
