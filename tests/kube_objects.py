"""Builders of Kubernetes object dicts (camelCase, as the API server returns them) for pure unit tests.

Times are given as seconds after T0 (2026-11-29T14:00:00Z) so tests read as a story: `pod(created=2, bound=5)`.
"""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 11, 29, 14, 0, 0, tzinfo=UTC)


def at(seconds: float | None) -> str | None:
    """T0 + seconds as an RFC 3339 string (None stays None)."""
    if seconds is None:
        return None
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def t(seconds: float) -> datetime:
    """T0 + seconds as a datetime."""
    return T0 + timedelta(seconds=seconds)


def pod(name="p-0", namespace="default", created=2, bound=None, started=None, finished=None, phase=None,
        unschedulable=None, unschedulable_reason="Unschedulable", waiting_since=None, terminating=False) -> dict:
    """A pod: created at `created`; bound at `bound` (PodScheduled=True + nodeName); containers started at
    `started` (Running) and finished at `finished` (phase defaults to Succeeded then); `unschedulable` is the
    PodScheduled=False message."""
    conditions, container = [], {"name": "main", "image": "x"}
    if bound is not None:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": at(bound)})
    elif unschedulable is not None:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": unschedulable_reason,
                           "message": unschedulable, "lastTransitionTime": at(waiting_since or created)})
    if finished is not None:
        container["state"] = {"terminated": {"exitCode": 0 if phase != "Failed" else 1, "startedAt": at(started),
                                             "finishedAt": at(finished)}}
        phase = phase or "Succeeded"
    elif started is not None:
        container["state"] = {"running": {"startedAt": at(started)}}
        phase = phase or "Running"
    meta = {"name": name, "namespace": namespace, "creationTimestamp": at(created), "uid": f"uid-{name}"}
    if terminating:
        meta["deletionTimestamp"] = at(created + 100)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": "node-0"} if bound is not None else {},
            "status": {"phase": phase or "Pending", "conditions": conditions,
                       "containerStatuses": [container] if "state" in container else []}}


def batch_job(name="j-worker", namespace="default", created=1, complete=None, failed=None,
              failed_reason="BackoffLimitExceeded") -> dict:
    """A batch/v1 Job created at `created`, Complete at `complete` or Failed at `failed`."""
    conditions, status = [], {}
    if complete is not None:
        conditions.append({"type": "Complete", "status": "True", "lastTransitionTime": at(complete)})
        status["completionTime"] = at(complete)
    if failed is not None:
        conditions.append({"type": "Failed", "status": "True", "reason": failed_reason,
                           "message": "Job has reached the specified backoff limit", "lastTransitionTime": at(failed)})
    status["conditions"] = conditions
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": at(created), "uid": f"uid-{name}"},
            "status": status}


def v1alpha2_podgroup(name="j-pg", namespace="default", created=1, min_count=3, scheduled=None) -> dict:
    """A scheduling.k8s.io/v1alpha2 PodGroup; `scheduled` is (status, reason, message, seconds) of
    PodGroupScheduled."""
    conditions = []
    if scheduled is not None:
        status, reason, message, when = scheduled
        conditions.append({"type": "PodGroupScheduled", "status": status, "reason": reason, "message": message,
                           "lastTransitionTime": at(when)})
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": at(created), "uid": f"uid-{name}"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
            "status": {"conditions": conditions}}


def kai_podgroup(name="j-pg", namespace="default", created=1, min_member=3, reasons=None, when=3) -> dict:
    """A KAI scheduling.run.ai/v2alpha2 PodGroup; `reasons` fills one UnschedulableOnNodePool condition."""
    status = {}
    if reasons is not None:
        status["schedulingConditions"] = [{
            "type": "UnschedulableOnNodePool", "nodePool": "default", "reason": "Unschedulable", "status": "True",
            "message": reasons[0].get("message", "") if reasons else "", "reasons": reasons,
            "lastTransitionTime": at(when), "transitionID": "0"}]
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": at(created), "uid": f"uid-{name}"},
            "spec": {"minMember": min_member, "queue": "team-a"}, "status": status}


def kai_over_limit(queue="team-a", limit="8", allocated="6", requested="4", queue_requested="10",
                   quota="4") -> dict:
    """The OverLimit explanation KAI writes (`pkg/scheduler/api/unschedule_info.go` message format)."""
    return {
        "reason": "OverLimit",
        "message": (f"{queue} quota has reached the allowable limit of GPUs. Limit is {limit} GPUs, currently "
                    f"{allocated} GPUs allocated and workload requested {requested} GPUs"),
        "details": {"queueDetails": {
            "name": queue,
            "queueDeservedResources": {"nvidia.com/gpu": quota, "cpu": "0", "memory": "0"},
            "queueResourceLimits": {"nvidia.com/gpu": limit},
            "queueAllocatedResources": {"nvidia.com/gpu": allocated, "cpu": "12", "memory": "96Gi"},
            "queueAllocatedNonPreemptibleResources": {"nvidia.com/gpu": "0"},
            "queueRequestedResources": {"nvidia.com/gpu": queue_requested},
            "podGroupRequestedResources": {"nvidia.com/gpu": requested, "cpu": "12"},
        }},
    }


def seen(shape, gang, pods, refusals=None, now=None):
    """The `observe.evidence.Evidence` why-pending reads, of pods given as facts (`pod_facts`) and nothing else of
    the job: no gang objects or owner Jobs (what why-pending reads of them is in `gang`). `now` defaults to the
    real time."""
    from scheduling.observe.evidence import Evidence

    return Evidence(shape, gang, [], pods, [], now or datetime.now(UTC), refusals)
