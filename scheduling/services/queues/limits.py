"""A job against its queue's limits: what the job asks in KAI units, what its queue and the queue's ancestors
already hold in the job's cluster (services/queues/allocation.py), and the warning when it cannot fit (gangweb holds
every job to its queue's limits).
"""
from __future__ import annotations

from django.core.exceptions import ValidationError

from ...amounts import in_answer, in_people_units, unit_of, unit_words
from ...kube import resources, runtime_classes
from ...kube.kai_units import RESOURCES, kai_amounts
from ...models import Cluster, QueuePolicy
from ...queueing.tree import QUOTA_FIELDS, ROW_FIELDS, WEIGHT_FIELDS, QueueRow, QueueTree, unlimited  # noqa: F401
from .allocation import SOURCE_WORDS
from .warnings import _fmt, _over


def job_request(resolved_spec: dict, cluster: Cluster | None = None) -> dict[str, float | int]:
    """What a job asks of its queue in KAI units (``{"gpu": 3.0, "cpu": 8500, "memory": 7785}``): the whole gang's
    requests as kube-scheduler counts them (`kube.resources.gang_requests`: sidecars, init peaks, pod-level
    resources, the overhead of `cluster`'s RuntimeClasses), converted by `kai_units.kai_amounts`."""
    return kai_amounts(resources.spec_requests(resolved_spec, runtime_classes.for_spec(cluster, resolved_spec)))

# Who keeps a job above its queue's limit from running, per backend family (the template's `backend`).
OVER_LIMIT_WORDS = {
    "kai": "so KAI can never schedule it (OverLimit)",
    "volcano": "so Volcano can never schedule it (the limit is its Volcano Queue's capability)",
    "kueue": "so Kueue can never admit it (the limit is its ClusterQueue's nominal quota plus borrowing limit)",
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
                     allocations) -> list[dict]:
    """Check a job's request against the finite limits of its queue and every ancestor (KAI checks them all,
    `max_allowed_check.go`; Volcano its Queue's `capability`), in the target cluster.

    - The job alone is over a limit (including a limit of 0): it could never be scheduled, so this raises
      ValidationError({"queue": "job requests 8 GPUs; queue 'team-a' has gpu_limit 4 GPUs, so KAI can never ..."})
      (400), naming what enforces the limit for the job's backend (`over_limit_words`).
    - It fits the limit but not next to what the queue holds in that cluster, as its scheduler reports it (KAI or
      Volcano Queue status) or, where nothing is reported, as gangweb counts its running jobs
      (`queue_allocation.Allocations.of`, given as `allocations`): it would wait, so this returns a warning
      ``{"code": "OverQueueLimit", "queue", "cluster", "resource", "unit", "limit", "allocated", "requested",
      "source", "message"}``: amounts in the resource's people unit (`amounts.in_answer`: GPUs, CPU cores, GiB;
      `unit` names it), `source` "kai" | "volcano" | "gangweb", and the message says which source it used
      ("Volcano's Queue status says 4 of 8 GPUs allocated ...").
    Returns the warnings (empty when the job fits).
    """
    request = job_request(resolved_spec, cluster)
    family = (resolved_spec or {}).get("backend") or ""
    chain = [tree.by_id.get(queue.id, queue), *tree.ancestors(tree.by_id.get(queue.id, queue))]
    out = []
    for q in chain:
        reading = None
        for r in RESOURCES:
            limit, want = getattr(q, f"{r}_limit"), request[r]
            if unlimited(limit) or not want:
                continue
            role = "queue" if q.id == queue.id else "ancestor queue"
            if _over(r, want, limit):
                raise ValidationError({"queue": f"job requests {_fmt(r, want)}; {role} '{q.name}' has {r}_limit "
                                                f"{_fmt(r, limit)}, {over_limit_words(resolved_spec)}"})
            reading = reading or allocations.of(family, q.id, cluster.id)
            have = reading.allocated.get(r, 0)
            if _over(r, have + want, limit):
                unit = unit_of(r)
                said = (f"{SOURCE_WORDS[reading.source]} {in_people_units(r, have)} of {in_people_units(r, limit)} "
                        f"{unit_words(r, in_answer(r, limit))} allocated ({r}_limit)")
                out.append({"code": "OverQueueLimit", "queue": q.name, "cluster": cluster.name, "resource": r,
                            "unit": unit, "limit": in_answer(r, limit), "allocated": in_answer(r, have),
                            "requested": in_answer(r, want), "source": reading.source,
                            "message": f"{role} '{q.name}' in cluster '{cluster.name}': {said}; this job's "
                                       f"{in_people_units(r, want)} {unit_words(r, in_answer(r, want))} wait "
                                       "until enough is freed"})
    return out
