"""What is known of one job's objects in its cluster at one moment: the one shape the phase logic reads.

Whoever read the objects (a reconcile pass's per-job LIST, the resync's snapshot slice, the watch's cache), the
phase rules (observe/phases.py) get them as one `Evidence`, never as loose positional lists.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from ..backends.base import GangStatus
from . import objects as o
from .pods import OwnerFacts, PodFacts


@dataclass(frozen=True)
class JobShape:
    """What the job expects: `min_member` pods for the gang, `total` pods in all, whether it is being cancelled."""

    min_member: int
    total: int
    cancelling: bool = False


@dataclass(frozen=True)
class Evidence:
    """One job's objects as seen at `now` (timezone-aware; used only where the cluster gives no time).

    - `shape`: what the job expects (JobShape);
    - `gang`: its backend's reading of the current generation's gang objects (`GangStatus`; empty without one);
    - `gang_objects`: its gang objects as camelCase dicts (the API server's JSON), terminating ones included;
    - `pods`, `owners`: its pods and owner Jobs as facts (observe/pods.py `pod_facts`, `owner_facts`).

    The `live_*` views leave out what is terminating; `bound` is the live pods a node was assigned to.
    """

    shape: JobShape
    gang: GangStatus
    gang_objects: list[dict]
    pods: list[PodFacts]
    owners: list[OwnerFacts]
    now: datetime

    @cached_property
    def live_gang(self) -> list[dict]:
        """Gang objects without a deletionTimestamp."""
        return [g for g in self.gang_objects if not o.is_terminating(g)]

    @cached_property
    def live_owners(self) -> list[OwnerFacts]:
        """Owner Jobs not being deleted."""
        return [w for w in self.owners if not w.terminating]

    @cached_property
    def live_pods(self) -> list[PodFacts]:
        """Pods not being deleted."""
        return [p for p in self.pods if not p.terminating]

    @cached_property
    def bound(self) -> list[PodFacts]:
        """Live pods bound to a node."""
        return [p for p in self.live_pods if p.bound]
