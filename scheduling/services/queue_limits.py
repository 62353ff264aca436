"""A job against its queue's limits: what the job asks in KAI units, what its queue and the queue's ancestors
already use in the job's cluster, and the warning when it cannot fit (gangweb holds every job to its queue's
limits).
"""
from __future__ import annotations

from django.core.exceptions import ValidationError

from ..choices import QueueFamily
from ..kube import resources, runtime_classes
from ..kube.kai_units import RESOURCES, kai_amounts
from ..models import Cluster, QueueClusterState, QueuePolicy
from ..queueing.tree import QUOTA_FIELDS, ROW_FIELDS, WEIGHT_FIELDS, QueueRow, QueueTree, unlimited  # noqa: F401
from .queue_warnings import _fmt, _over


def job_request(resolved_spec: dict, cluster: Cluster | None = None) -> dict[str, float | int]:
    """What a job asks of its queue in KAI units (``{"gpu": 3.0, "cpu": 8500, "memory": 7785}``): the whole gang's
    requests as kube-scheduler counts them (`kube.resources.gang_requests`: sidecars, init peaks, pod-level
    resources, the overhead of `cluster`'s RuntimeClasses), converted by `kai_units.kai_amounts`."""
    return kai_amounts(resources.spec_requests(resolved_spec, runtime_classes.for_spec(cluster, resolved_spec)))

def load_usage(queue_ids, cluster_ids) -> dict[tuple[int, int], dict]:
    """{(policy id, cluster id): last read Queue status} for the given queues and clusters (one query)."""
    rows = QueueClusterState.objects.filter(policy_id__in=list(queue_ids), cluster_id__in=list(cluster_ids),
                                            family=QueueFamily.KAI)
    return {(pid, cid): status for pid, cid, status in rows.values_list("policy_id", "cluster_id", "status")}

# Who keeps a job above its queue's limit from running, per backend family (the template's `backend`).
OVER_LIMIT_WORDS = {
    "kai": "so KAI can never schedule it (OverLimit)",
    "volcano": "so Volcano can never schedule it (the limit is its Volcano Queue's capability)",
}

NO_QUEUE_WORDS = "so it can never run in this queue (gangweb holds every job to its queue's limits: {} has no queues)"

NO_QUEUE_SCHEDULERS = {"k8s-workload": "kube-scheduler", "coscheduling": "the scheduler-plugins scheduler"}

def over_limit_words(resolved_spec: dict) -> str:
    """The end of the over-limit refusal, naming what enforces the limit for the job's backend: KAI (its Queue's
    limit, OverLimit), Volcano (its Queue's `capability`), else gangweb itself (kube-scheduler and the
    scheduler-plugins scheduler have no queues; docs/queues.md "Who enforces quota and limit")."""
    family = (resolved_spec or {}).get("backend") or ""
    return OVER_LIMIT_WORDS.get(family) or NO_QUEUE_WORDS.format(NO_QUEUE_SCHEDULERS.get(family, "its scheduler"))

def check_job_limits(queue: QueuePolicy, cluster: Cluster, resolved_spec: dict, tree: QueueTree,
                     usage: dict[tuple[int, int], dict]) -> list[dict]:
    """Check a job's request against the finite limits of its queue and every ancestor (KAI checks them all,
    `max_allowed_check.go`), in the target cluster.

    - The job alone is over a limit (including a limit of 0): it could never be scheduled, so this raises
      ValidationError({"queue": "job requests 8 GPUs; queue 'team-a' has gpu_limit 4 GPUs, so KAI can never ..."})
      (400), naming what enforces the limit for the job's backend (`over_limit_words`).
    - It fits the limit but not next to what KAI reports allocated in that cluster: it would wait, so this returns
      a warning ``{"code": "OverQueueLimit", "queue", "resource", "limit", "allocated", "requested", "message"}``.
    Returns the warnings (empty when the job fits).
    """
    request = job_request(resolved_spec, cluster)
    chain = [tree.by_id.get(queue.id, queue), *tree.ancestors(tree.by_id.get(queue.id, queue))]
    out = []
    for q in chain:
        allocated = (usage.get((q.id, cluster.id)) or {}).get("allocated") or {}
        for r in RESOURCES:
            limit, want = getattr(q, f"{r}_limit"), request[r]
            if unlimited(limit) or not want:
                continue
            role = "queue" if q.id == queue.id else "ancestor queue"
            if _over(r, want, limit):
                raise ValidationError({"queue": f"job requests {_fmt(r, want)}; {role} '{q.name}' has {r}_limit "
                                                f"{_fmt(r, limit)}, {over_limit_words(resolved_spec)}"})
            have = allocated.get(r, 0)
            if _over(r, have + want, limit):
                out.append({"code": "OverQueueLimit", "queue": q.name, "resource": r, "limit": limit,
                            "allocated": have, "requested": want,
                            "message": f"{role} '{q.name}' in cluster '{cluster.name}' has {_fmt(r, have)} of "
                                       f"{r} allocated and a {r}_limit of {_fmt(r, limit)}; this job's "
                                       f"{_fmt(r, want)} waits until enough is freed"})
    return out
