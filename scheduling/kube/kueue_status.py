"""A Kueue ClusterQueue's and Cohort's status in gangweb's queue units: usage, borrowed amounts and fair share.

Kueue v0.17.0 (`apis/kueue/v1beta2/clusterqueue_types.go`, `fairsharing_types.go`, `cohort_types.go`):

- `status.flavorsReservation[]`: ``{"name": <flavor>, "resources": [{"name": "nvidia.com/gpu", "total": "6",
  "borrowed": "2"}]}``: the quota reserved by the Workloads admitted to the ClusterQueue (QuotaReserved), per
  flavor and resource; `borrowed` is the part over its nominal quota, taken from the cohort;
- `status.flavorsUsage[]`: the same shape, for the Workloads that are fully Admitted (admission checks passed);
- `status.pendingWorkloads`, `reservingWorkloads`, `admittedWorkloads`: counts of Workloads;
- `status.fairSharing.weightedShare` (ClusterQueue and Cohort, only with fair sharing on): an integer, the
  largest over resources of (usage above nominal quota) * 1000 / (what the cohort could lend), divided by the
  weight (`pkg/cache/scheduler/fair_sharing.go`, `dominantResourceShare`): 0 = at or under its quota;
  9223372036854775807 when its weight is 0 and it borrows.

Amounts are summed over flavors (gangweb writes one, `gangweb-default`) into KAI units as every queue amount
(`kube.kai_units`: GPU devices, CPU millicores, memory MB = 10^6 bytes). Cluster input is hostile: a quantity that
does not parse counts as absent, a count that is not a non-negative integer is None.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError

from . import quantities
from .kai_units import RESOURCES, STATUS_RESOURCE_NAMES, from_quantity

MAX_FLAVORS = 64  # Kueue's own limit on flavorsReservation / flavorsUsage
MAX_SHARE = 9223372036854775807  # Kueue's "weight 0 and borrowing"
RAW_KEYS = ("flavorsReservation", "flavorsUsage", "pendingWorkloads", "admittedWorkloads", "fairSharing")


def _sums(flavors) -> tuple[dict, dict] | None:
    """({resource: total}, {resource: borrowed}) in KAI units over `flavors` (a FlavorUsage list); None when it is
    not a list."""
    if not isinstance(flavors, list):
        return None
    total = dict.fromkeys(RESOURCES, 0)
    borrowed = dict.fromkeys(RESOURCES, 0)
    by_name = {name: r for r, name in STATUS_RESOURCE_NAMES.items()}
    for flavor in flavors[:MAX_FLAVORS]:
        for item in (flavor.get("resources") if isinstance(flavor, dict) else None) or []:
            r = by_name.get(item.get("name")) if isinstance(item, dict) else None
            if r is None:
                continue
            for key, into in (("total", total), ("borrowed", borrowed)):
                raw = item.get(key)
                if raw is None:
                    continue
                try:
                    into[r] += from_quantity(r, quantities.parse(raw, STATUS_RESOURCE_NAMES[r]))
                except (ValidationError, ArithmeticError, TypeError, ValueError):
                    continue
    return {r: round(v, 3) if r == "gpu" else v for r, v in total.items()}, {
        r: round(v, 3) if r == "gpu" else v for r, v in borrowed.items()}


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def weighted_share(status) -> int | None:
    """`status.fairSharing.weightedShare` of a ClusterQueue or Cohort status, None when absent or not an integer
    within Kueue's range (fair sharing off, or hostile)."""
    fair = status.get("fairSharing") if isinstance(status, dict) else None
    share = fair.get("weightedShare") if isinstance(fair, dict) else None
    return share if isinstance(share, int) and not isinstance(share, bool) and 0 <= share <= MAX_SHARE else None


def cluster_queue(status) -> dict:
    """A ClusterQueue `status` in gangweb's shape::

        {"allocated": {"gpu": 6.0, "cpu": 12000, "memory": 68720},   # flavorsReservation totals (quota reserved)
         "borrowed": {"gpu": 2.0, ...},                               # ... of which borrowed from the cohort
         "admitted_usage": {...}, "admitted_borrowed": {...},         # flavorsUsage (fully admitted Workloads)
         "pending": 1, "reserving": 2, "admitted": 2,                 # Workload counts, None when not reported
         "weighted_share": 500}                                       # fairSharing.weightedShare, None when off

    `allocated` (and the others) is absent when Kueue has not reported that list yet, so readers can tell
    "nothing reported" from "reported 0"."""
    status = status if isinstance(status, dict) else {}
    out: dict = {}
    reserved = _sums(status.get("flavorsReservation"))
    if reserved is not None:
        out["allocated"], out["borrowed"] = reserved
    admitted = _sums(status.get("flavorsUsage"))
    if admitted is not None:
        out["admitted_usage"], out["admitted_borrowed"] = admitted
    out["pending"] = _count(status.get("pendingWorkloads"))
    out["reserving"] = _count(status.get("reservingWorkloads"))
    out["admitted"] = _count(status.get("admittedWorkloads"))
    out["weighted_share"] = weighted_share(status)
    return out


# The Kueue queue sync's stored shape (reconcile/kueue_desired.py `status_payload`) -> Kueue's own field names.
STORED_KEYS = {"flavors_reservation": "flavorsReservation", "flavors_usage": "flavorsUsage",
               "pending_workloads": "pendingWorkloads", "reserving_workloads": "reservingWorkloads",
               "admitted_workloads": "admittedWorkloads"}


def normalized(stored) -> dict:
    """A stored Kueue ClusterQueue or Cohort status (`QueueClusterState.status` of family kueue) in
    `cluster_queue`'s shape: from Kueue's own field names, or from the queue sync's stored shape (its
    `flavors_reservation` / `flavors_usage` lists as Kueue wrote them, `pending_workloads`, ..., `weighted_share`),
    whose amounts are read again here from the raw lists so that `allocated` is always the reservation."""
    if not isinstance(stored, dict):
        return {}
    if any(k in stored for k in RAW_KEYS):
        return cluster_queue(stored)
    if "allocated" in stored and not any(k in stored for k in STORED_KEYS):
        return stored  # already in this shape
    if "weighted_share" in stored or any(k in stored for k in STORED_KEYS):
        raw = {kueue: stored[ours] for ours, kueue in STORED_KEYS.items() if ours in stored}
        if stored.get("weighted_share") is not None:
            raw["fairSharing"] = {"weightedShare": stored["weighted_share"]}
        return cluster_queue(raw)
    return {}


def share_words(share: int | None) -> str:
    """Kueue's weightedShare for people: "under its quota (weighted share 0)", "borrowing: weighted share 0.25 of
    what the cohort can lend (Kueue: 250)", "borrowing with weight 0 (Kueue: maximum share)", or "unknown: fair
    sharing is off in Kueue" for None."""
    if share is None:
        return "unknown: Kueue reports no fair share (fair sharing is off in its configuration)"
    if share == 0:
        return "at or under its quota (Kueue's weighted share 0)"
    if share == MAX_SHARE:
        return "borrowing with over-quota weight 0 (Kueue's largest share: it is preempted first)"
    return (f"borrowing: {share / 1000:g} of what the cohort can lend, divided by its weight (Kueue's weighted "
            f"share {share})")
