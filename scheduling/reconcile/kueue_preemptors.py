"""Who preempted a job on Kueue: the preempting Workload's UID matched against the Workloads gangweb recorded.

Kueue's preemption message names the preemptor by its Workload UID and its `kueue.x-k8s.io/job-uid` label
(observe/kueue_preemption.py). A label is a hint, a UID gangweb recorded is the truth: the preemptor is gangweb's
job only when one of that job's recorded objects (`GangJob.observed["objects"]`, written by each observation) is a
Workload with exactly that `metadata.uid` in the same cluster. The job the JobUID label names is checked first
(one query); otherwise the jobs of the cluster whose recorded objects contain the UID's text (one query, at most
MAX_CANDIDATES rows, each checked). Answers are cached for CACHE_SECONDS per (cluster, UID): a job's disruption is
observed on every pass while the Workload says Evicted.
"""
from __future__ import annotations

import uuid
from dataclasses import replace

from django.core.cache import cache
from django.db.models import TextField
from django.db.models.functions import Cast

from ..backends.base import GangStatus
from ..models import GangJob
from ..observe import kueue_preemption

WORKLOAD_KIND = "Workload"
MAX_CANDIDATES = 5
CACHE_SECONDS = 300  # a found preemptor; "not gangweb's" is kept NONE_SECONDS only (it may be recorded soon)
NONE_SECONDS = 10
_NONE = "-"  # cached "not gangweb's"


def _recorded_workload(job: GangJob, workload_uid: str) -> bool:
    """True when `job`'s recorded objects hold a Workload with `workload_uid`."""
    objects = (job.observed or {}).get("objects") if isinstance(job.observed, dict) else None
    return any(isinstance(x, dict) and x.get("kind") == WORKLOAD_KIND
               and ((x.get("metadata") or {}).get("uid") if isinstance(x.get("metadata"), dict) else None)
               == workload_uid for x in objects or [])


def preemptor(cluster_id: int, workload_uid: str, job_uid: str = "") -> dict | None:
    """{"id", "name", "namespace", "queue"} of gangweb's job in cluster `cluster_id` whose recorded Workload has
    `workload_uid`; None when no job of gangweb's recorded it (or the UID is empty)."""
    if not workload_uid:
        return None
    key = f"gangweb:kueue-preemptor:{cluster_id}:{workload_uid}"
    hit = cache.get(key)
    if hit is not None:
        return None if hit == _NONE else hit
    rows = GangJob.objects.filter(cluster_id=cluster_id).select_related("queue").only(
        "id", "name", "namespace", "observed", "queue__name")
    try:  # the JobUID label is a hint: checked against the recorded Workload like any candidate
        candidates = [rows.get(uid=uuid.UUID(job_uid))] if job_uid else []
    except (ValueError, GangJob.DoesNotExist):
        candidates = []
    if not any(_recorded_workload(job, workload_uid) for job in candidates):
        candidates = rows.annotate(text=Cast("observed", TextField())).filter(
            text__contains=workload_uid).order_by("-id")[:MAX_CANDIDATES]
    found = next(({"id": job.id, "name": job.name, "namespace": job.namespace, "queue": job.queue.name}
                  for job in candidates if _recorded_workload(job, workload_uid)), None)
    cache.set(key, found or _NONE, CACHE_SECONDS if found else NONE_SECONDS)
    return found


def named(gang: GangStatus, cluster_id: int | None) -> GangStatus:
    """`gang` with a Kueue preemption message (`disruption_message`, observe/kueue_preemption.py) replaced by its
    plain words naming the preemptor; `gang` itself when there is none or it is not in Kueue's wording."""
    parsed = kueue_preemption.parse(gang.disruption_message) if gang.disruption_message else None
    if parsed is None or cluster_id is None:
        return gang
    who = preemptor(cluster_id, parsed["workload_uid"], parsed["job_uid"])
    return replace(gang, disruption_message=kueue_preemption.words(parsed, who))
