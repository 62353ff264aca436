"""Why-pending in plain words: turn the structured `GangJob.why_pending` object into sentences with numbers.

The object is written by the observer (issue 5). Shape read here (camelCase as in the API; snake_case
accepted too)::

    {"reason": "OverLimit", "message": "<the scheduler's own words>", "source": "PodGroup ns/name",
     "podsBound": 0, "podsRequired": 3,
     "queue": {"name": "team-a", "resources": {"gpu": {"quota": 8, "limit": 8, "allocated": 6, "requested": 10}}},
     "jobRequests": {"gpu": 4}}

Reason codes come from the schedulers (KAI `UnschedulableExplanation` reasons, Kubernetes v1alpha2
`PodGroupScheduled` reasons, pod `PodScheduled` reasons) plus gangweb's own (`ClusterUnreachable`, ...).
"""
from __future__ import annotations

from dataclasses import dataclass, field

REASON_WORDS = {
    "OverLimit": "The job would push queue {queue} over its limit, so the scheduler holds it back.",
    "NonPreemptibleOverQuota": "The job is non-preemptible and would push queue {queue} over its guaranteed "
                               "quota; non-preemptible jobs may only use quota.",
    "QueueDoesNotExist": "Queue {queue} does not exist in the cluster yet, so the scheduler ignores the job.",
    "PreemptionDelayNotElapsed": "The scheduler is waiting for running jobs' minimum runtime before it preempts them.",
    "Unschedulable": "The scheduler cannot place the whole gang at once: not enough free room on the nodes.",
    "SchedulerError": "The scheduler reported an error while placing the gang.",
    "NotReady": "The gang is not ready: fewer pods exist than it needs.",
    "ClusterUnreachable": "gangweb cannot reach the cluster; it retries with backoff.",
    "Forbidden": "The cluster refused gangweb's request (permissions); it will not retry until this is fixed.",
    "WaitingForScheduler": "The gang is waiting for the scheduler to consider it.",
}
RESOURCE_UNITS = {"gpu": "GPU", "cpu": "millicores", "memory": "MB"}


def _get(d: dict, *names, default=None):
    for n in names:
        if isinstance(d, dict) and d.get(n) is not None:
            return d[n]
    return default


def _num(x) -> str:
    if x is None:
        return "?"
    if x == -1:
        return "unlimited"
    return f"{x:g}" if isinstance(x, (int, float)) else str(x)


@dataclass
class WhyPending:
    """What the job page shows: a headline sentence, detail sentences, and the scheduler's own message."""

    reason: str = ""
    headline: str = ""
    details: list[str] = field(default_factory=list)
    message: str = ""
    source: str = ""


def explain(why: dict | None, phase: str = "") -> WhyPending | None:
    """Sentences for a why-pending object, or None when there is nothing to explain."""
    if not why or not isinstance(why, dict):
        return None
    reason = str(_get(why, "reason", "code", default="") or "")
    queue = _get(why, "queue", default={}) or {}
    queue_name = queue.get("name") if isinstance(queue, dict) else str(queue)
    template = REASON_WORDS.get(reason)
    if template:
        headline = template.format(queue=f"'{queue_name}'" if queue_name else "(unknown)")
    elif reason:
        headline = f"The scheduler says: {reason}."
    else:
        headline = f"The job is {phase or 'pending'}."
    out = WhyPending(reason=reason, headline=headline, message=str(_get(why, "message", default="") or ""),
                     source=str(_get(why, "source", default="") or ""))
    bound = _get(why, "podsBound", "pods_bound")
    required = _get(why, "podsRequired", "pods_required", "minMember")
    total = _get(why, "podsTotal", "pods_total")
    if bound is not None and required is not None:
        sentence = f"{bound} of {required} required pods are bound"
        if total is not None and total != required:
            sentence += f" ({total} pods in all)"
        out.details.append(sentence + ".")
    resources = queue.get("resources", {}) if isinstance(queue, dict) else {}
    asks = _get(why, "jobRequests", "job_requests", default={}) or {}
    for res, nums in resources.items():
        if not isinstance(nums, dict):
            continue
        unit = RESOURCE_UNITS.get(res, res)
        parts = [f"{label} {_num(nums.get(key))}" for key, label in
                 (("quota", "quota"), ("limit", "limit"), ("allocated", "allocated"), ("requested", "requested"))
                 if key in nums]
        sentence = f"Queue '{queue_name}' {res}: " + ", ".join(parts) + f" {unit}"
        if res in asks:
            sentence += f"; this job asks for {_num(asks[res])}"
            limit, allocated = nums.get("limit"), nums.get("allocated")
            if isinstance(limit, (int, float)) and limit >= 0 and isinstance(allocated, (int, float)):
                free = max(0, limit - allocated)
                sentence += f" and {_num(free)} {unit} are left under the limit"
        out.details.append(sentence + ".")
    for res, amount in asks.items():
        if res not in resources:
            out.details.append(f"This job asks for {_num(amount)} {RESOURCE_UNITS.get(res, res)} of {res}.")
    return out
