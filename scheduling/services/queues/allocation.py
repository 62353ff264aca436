"""What a queue holds in a cluster for the submit-time limit check, from the source that owns the answer.

Per job backend family (the template's `backend`), the allocation a limit is checked against is what the queue's
own scheduler reports, else gangweb's count:

- "kai": the KAI Queue's `status.allocated` (read back by the queue sync into `QueueClusterState.status`);
- "volcano": the Volcano Queue's `status.allocated` (`QueueClusterState.status` of family volcano,
  volcano_desired.status_payload);
  Volcano checks it against the Queue's `spec.capability`, which gangweb writes from the policy's limits;
- "kueue": the Kueue ClusterQueue's `status.flavorsReservation` totals (the quota reserved by its admitted
  Workloads, borrowed part included; `QueueClusterState.status` of family kueue, read by kube/kueue_status.py);
  Kueue checks them against the ClusterQueue's nominal quota plus borrowing limit, which gangweb writes from the
  policy's quota and limit. A parent policy is a Cohort, which reports no usage: gangweb's count stands for it;
- every other family (kube-scheduler through the Workload API, the scheduler-plugins scheduler) has no queue that
  reports anything, and a KAI, Volcano or Kueue queue that has not reported yet (no status, or no `allocated`)
  says nothing either: then gangweb's own count, the requested totals (`GangJob.requested_*`) of its Scheduled and
  Running jobs in that cluster, of the queue and every queue below it (a parent's limit caps its subtree).

Amounts are KAI units (GPU devices, CPU millicores, memory MB = 10^6 bytes). A report whose numbers are not
finite, non-negative numbers is not used (the cluster's input is hostile): the count stands in for it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.db.models import Sum

from ...kube import kueue_status
from ...kube.kai_units import RESOURCES
from ...models import GangJob, QueueClusterState, QueuePolicy
from .usage import BYTES_PER_MB, COLUMNS, RUNNING_PHASES

SOURCE_KAI = "kai"
SOURCE_VOLCANO = "volcano"
SOURCE_KUEUE = "kueue"
SOURCE_GANGWEB = "gangweb"
# Who said it, as the warning's sentence begins.
SOURCE_WORDS = {
    SOURCE_KAI: "KAI's Queue status says",
    SOURCE_VOLCANO: "Volcano's Queue status says",
    SOURCE_KUEUE: "Kueue's ClusterQueue status says",
    SOURCE_GANGWEB: "gangweb's count of its running jobs says",
}
# Backend families whose scheduler reports a queue's allocation, and where gangweb keeps that report.
REPORTING = (SOURCE_KAI, SOURCE_VOLCANO, SOURCE_KUEUE)  # families whose queue reports (QueueClusterState.family)


@dataclass(frozen=True)
class Allocation:
    """One queue's allocation in one cluster: `source` (SOURCE_*), `allocated` ({resource: KAI amount})."""

    source: str
    allocated: dict


def reported(status, family: str = SOURCE_KAI) -> dict | None:
    """The `allocated` of a stored queue status (KAI or Volcano Queue, Kueue ClusterQueue: kueue_status.normalized;
    KAI units) when it is a usable report: {resource: amount} with every present amount a finite number >= 0
    (absent = 0); None when there is none."""
    if family == SOURCE_KUEUE:
        status = kueue_status.normalized(status)
    allocated = status.get("allocated") if isinstance(status, dict) else None
    if not isinstance(allocated, dict) or not allocated:
        return None
    out = {}
    for r in RESOURCES:
        x = allocated.get(r, 0)
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            return None
        out[r] = x
    return out


@dataclass
class Allocations:
    """The allocations one request reads, loaded on first use: one statement per reporting family for the
    `queue_ids` (the queues with a finite limit) in `cluster_ids`, and one `SUM … GROUP BY queue` per cluster for
    gangweb's count (plus one query per queue-tree level above queues the request did not load).

    `parents`: {queue id: parent id} already known (the request's queue tree); more are read when needed.
    `preloaded`: {family: {(queue id, cluster id): status}} already read (e.g. the KAI statuses)."""

    queue_ids: set[int]
    cluster_ids: set[int]
    parents: dict[int, int | None] = field(default_factory=dict)
    preloaded: dict[str, dict] = field(default_factory=dict)
    _counts: dict[int, dict[int, dict]] = field(default_factory=dict)

    def of(self, family: str, queue_id: int, cluster_id: int) -> Allocation:
        """The allocation a job of backend `family` is checked against in queue `queue_id` of cluster
        `cluster_id` (see the module docstring)."""
        if family in REPORTING:
            got = reported(self._statuses(family).get((queue_id, cluster_id)), family)
            if got is not None:
                return Allocation(family, got)
        counts = self._count(cluster_id)
        return Allocation(SOURCE_GANGWEB, counts.get(queue_id) or dict.fromkeys(RESOURCES, 0.0))

    def _statuses(self, family: str) -> dict:
        if family not in self.preloaded:
            self.preloaded[family] = {} if not self.queue_ids or not self.cluster_ids else {
                (pid, cid): status for pid, cid, status in QueueClusterState.objects.filter(
                    family=family, policy_id__in=sorted(self.queue_ids),
                    cluster_id__in=sorted(self.cluster_ids)).values_list("policy_id", "cluster_id", "status")}
        return self.preloaded[family]

    def _count(self, cluster_id: int) -> dict[int, dict]:
        if cluster_id not in self._counts:
            self._counts[cluster_id] = gangweb_count(cluster_id, self.parents)
        return self._counts[cluster_id]


def gangweb_count(cluster_id: int, parents: dict[int, int | None] | None = None) -> dict[int, dict]:
    """{queue id: {resource: KAI amount}}: what gangweb's Scheduled and Running jobs in the cluster request, per
    queue including every queue below it. `parents` ({queue id: parent id}) is used and completed in place with
    the parents read (one query per tree level, only above queues that have such jobs)."""
    parents = {} if parents is None else parents
    sums = {f"s_{r}": Sum(column) for r, column in COLUMNS.items()}
    # The columns hold GPU devices, CPU millicores and memory bytes; KAI counts memory in MB (10^6 bytes).
    own = {row["queue_id"]: {r: float(row[f"s_{r}"] or 0) / (BYTES_PER_MB if r == "memory" else 1) for r in RESOURCES}
           for row in GangJob.objects.filter(cluster_id=cluster_id, phase__in=RUNNING_PHASES).order_by()
           .values("queue_id").annotate(**sums)}
    missing = set(own) - set(parents)
    while missing:
        found = dict(QueuePolicy.objects.filter(id__in=sorted(missing)).order_by().values_list("id", "parent_id"))
        for qid in missing:
            parents[qid] = found.get(qid)
        missing = {p for p in found.values() if p is not None} - set(parents)
    out: dict[int, dict] = {}
    for qid, amounts in own.items():
        seen, at = set(), qid
        while at is not None and at not in seen:  # a cycle (never written, but hostile rows) ends the walk
            seen.add(at)
            acc = out.setdefault(at, dict.fromkeys(RESOURCES, 0.0))
            for r in RESOURCES:
                acc[r] += amounts[r]
            at = parents.get(at)
    return out
