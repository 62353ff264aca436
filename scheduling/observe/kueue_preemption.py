"""Kueue's preemption message read, and said in plain words with who preempted.

Kueue v0.17.0 evicts a preempted Workload with `Evicted=True` reason `Preempted` and sets `Preempted=True` with
the preemption's reason, both with one message (`pkg/scheduler/preemption/preemption.go`, `preemptionMessage`)::

    Preempted to accommodate a workload (UID: <preemptor Workload UID>, JobUID: <its kueue.x-k8s.io/job-uid label>)
    due to <HumanReadablePreemptionReasons[reason]>; preemptor path: /<cohort>/.../<cq>; preemptee path: /.../<cq>

(UID and JobUID read "UNKNOWN" when absent). The reasons (`apis/kueue/v1beta2/workload_types.go`, described in
`pkg/metrics/metrics.go`):

- `InClusterQueue` ("prioritization in the ClusterQueue"): a job of higher priority in the same queue;
- `InCohortReclamation` ("reclamation within the cohort"): another queue of the cohort took back its own quota,
  which this queue was borrowing;
- `InCohortFairSharing` ("Fair Sharing within the cohort"): fair sharing moved room to a queue further below its
  share;
- `InCohortReclaimWhileBorrowing` ("reclamation within the cohort while borrowing"): a job of higher priority in
  another queue of the cohort, itself borrowing, took the room.

Pure: the caller (reconcile/kueue_preemptors.py) says who the preemptor is. A message in any other wording is left
as Kueue wrote it.
"""
from __future__ import annotations

import re

from .causes import quote

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
# Kueue's HumanReadablePreemptionReasons, reversed.
KUEUE_WORDS = {
    "prioritization in the ClusterQueue": IN_CLUSTER_QUEUE,
    "reclamation within the cohort": IN_COHORT_RECLAMATION,
    "Fair Sharing within the cohort": IN_COHORT_FAIR_SHARING,
    "reclamation within the cohort while borrowing": IN_COHORT_RECLAIM_WHILE_BORROWING,
}
PLAIN_WORDS = {
    IN_CLUSTER_QUEUE: "a job of higher priority in the same queue needed the room",
    IN_COHORT_RECLAMATION: "this job's queue was borrowing, and the preemptor's queue took back its own quota",
    IN_COHORT_FAIR_SHARING: "fair sharing in the cohort gave the room to a queue further below its fair share",
    IN_COHORT_RECLAIM_WHILE_BORROWING: ("a job of higher priority in another queue of the cohort took the room, "
                                        "its queue borrowing too"),
}
UNKNOWN = "UNKNOWN"
_UID = r"[A-Za-z0-9-]{1,64}"
_PATH = r"[A-Za-z0-9._/-]{1,1024}"
_MESSAGE = re.compile(
    rf"^Preempted to accommodate a workload \(UID: (?P<uid>{_UID}), JobUID: (?P<job_uid>{_UID})\) due to "
    rf"(?P<why>[A-Za-z ]{{1,80}}); preemptor path: (?P<by_path>{_PATH}); preemptee path: (?P<path>{_PATH})")


def parse(message: str) -> dict | None:
    """{"workload_uid", "job_uid", "reason", "preemptor_path", "preemptee_path"} of a Kueue preemption message
    ("" for a UID Kueue wrote as UNKNOWN; `reason` one of the four above, "" when Kueue's words are not one of
    them); None when `message` is not in that wording."""
    m = _MESSAGE.match(str(message or "")[:4000])
    if m is None:
        return None
    uid, job_uid = (m.group(k) if m.group(k) != UNKNOWN else "" for k in ("uid", "job_uid"))
    return {"workload_uid": uid, "job_uid": job_uid, "reason": KUEUE_WORDS.get(m.group("why"), ""),
            "preemptor_path": m.group("by_path"), "preemptee_path": m.group("path")}


def words(parsed: dict, preemptor: dict | None) -> str:
    """The preemption in plain words: who preempted and why.

    `preemptor`: gangweb's job that owns the preempting Workload, ``{"id", "name", "namespace", "queue"}``, or
    None when it is not one of gangweb's recorded Workloads. E.g. "preempted by Kueue for job team-b/train-2
    (#42, queue team-b, Workload UID 5b8e...): this job's queue was borrowing, and the preemptor's queue took
    back its own quota (Kueue: InCohortReclamation; preemptor /research/team-b, preempted /research/team-a)"."""
    if preemptor is not None:
        who = (f"job {quote(preemptor['namespace'], 63)}/{quote(preemptor['name'], 63)} (#{preemptor['id']}, "
               f"queue {quote(preemptor['queue'], 253)}, Workload UID {parsed['workload_uid']})")
    elif parsed["workload_uid"]:
        who = f"a workload gangweb did not create, UID {parsed['workload_uid']}"
    else:
        who = "a workload Kueue did not name"
    why = PLAIN_WORDS.get(parsed["reason"], "Kueue gave no reason gangweb knows")
    code = parsed["reason"] or "unknown reason"
    return (f"preempted by Kueue for {who}: {why} (Kueue: {code}; preemptor {parsed['preemptor_path']}, "
            f"preempted {parsed['preemptee_path']})")
