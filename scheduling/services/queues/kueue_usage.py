"""A Kueue-backed queue's usage, borrowed amounts and fair share as Kueue reports them, for the queue API and page.

Read from the queue's Kueue state per cluster (`QueueClusterState` of family kueue, written by the Kueue queue
sync from the ClusterQueue's or Cohort's `status`; kube/kueue_status.py reads both Kueue's own shape and the
normalized one). Amounts are in the queue units every queue answer uses (GPU devices, CPU millicores, memory MB:
`kube.kai_units.UNITS`), with a sentence in people's units (`amounts.for_people`).
"""
from __future__ import annotations

from ...amounts import for_api, for_people
from ...kube import kueue_status
from ...kube.kai_units import RESOURCES

FAMILY = "kueue"  # QueueClusterState.family of a Kueue ClusterQueue or Cohort


def kueue_payload(state) -> dict:
    """One cluster's Kueue report of a queue::

        {"cluster": "local", "status_at": datetime | None,
         "usage": {"gpu": {"allocated": 6, "borrowed": 2, "admitted": 6}, "cpu": {...}, "memory": {...}} | None,
         "workloads": {"pending": 1, "reserving": 2, "admitted": 2},
         "fair_share": {"weighted_share": 500 | None, "text": "..."},
         "text": "Kueue's ClusterQueue status: 6 GPUs reserved (2 GPUs borrowed from the cohort), ..."}

    `allocated`: the quota Kueue reserved for the queue's admitted Workloads (`flavorsReservation` totals),
    `borrowed`: the part above its nominal quota, `admitted`: `flavorsUsage` totals (fully admitted); `usage` is
    None when Kueue has not reported (a Cohort reports none: only its fair share)."""
    st = kueue_status.normalized(state.status)
    allocated, borrowed = st.get("allocated"), st.get("borrowed") or {}
    admitted = st.get("admitted_usage") or {}
    usage = None if allocated is None else {
        r: {"allocated": for_api(allocated.get(r, 0)), "borrowed": for_api(borrowed.get(r, 0)),
            "admitted": for_api(admitted.get(r)) if r in admitted else None} for r in RESOURCES}
    share = st.get("weighted_share")
    return {"cluster": state.cluster.name, "status_at": state.status_at, "usage": usage,
            "workloads": {k: st.get(k) for k in ("pending", "reserving", "admitted")},
            "fair_share": {"weighted_share": share, "text": kueue_status.share_words(share)},
            "text": usage_words(st)}


def usage_words(st: dict) -> str:
    """`kueue_payload`'s sentence: what Kueue says the queue holds and borrows, and how many Workloads wait."""
    allocated = st.get("allocated")
    if allocated is None:
        return "Kueue has reported no usage for this queue yet"
    borrowed = st.get("borrowed") or {}
    parts = []
    for r in RESOURCES:
        if not allocated.get(r) and not borrowed.get(r):
            continue
        said = f"{for_people(r, allocated.get(r, 0))} reserved"
        if borrowed.get(r):
            said += f" ({for_people(r, borrowed[r])} borrowed from the cohort)"
        parts.append(said)
    held = ", ".join(parts) if parts else "nothing reserved"
    counts = [f"{st[k]} {k}" for k in ("admitted", "pending") if st.get(k) is not None]
    return f"Kueue's ClusterQueue status: {held}" + (f"; workloads: {', '.join(counts)}" if counts else "")
