"""What is known of one job's objects in its cluster at one moment: the one shape the phase and why-pending logic read.

Whoever read the objects (a reconcile pass's per-job LIST, the resync's snapshot slice, the watch's cache), they
travel as one `JobObjects` (the raw dicts; the watch's cache hands out exactly this), and the phase rules
(observe/phases.py) and why-pending (observe/why_pending.py) get them as one `Evidence` (`Evidence.of`: the
objects with the job's shape, its backend's reading of the gang and the time), never as loose positional lists.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from ..backends.base import GangStatus
from . import objects as o
from .pods import OwnerFacts, PodFacts, cross_check, owner_facts, pod_facts


@dataclass
class JobObjects:
    """One job's objects in its cluster as read, camelCase dicts (the API server's JSON): its gang objects (any
    generation, terminating ones included), owner Jobs and pods. From a pass's per-job LIST or the resync's
    snapshot (`reconcile/observed.Observed`, the current generation's part: `JobReconciler.observe_now`), or the
    watch's cache (`kube/watches.ClusterWatcher.objects_of`, then `reconcile/watching.select`)."""

    gang: list[dict] = field(default_factory=list)
    owners: list[dict] = field(default_factory=list)
    pods: list[dict] = field(default_factory=list)
    # The watch only: the kinds (metric labels, "podgroups.scheduling.x-k8s.io") whose first LIST was not in when
    # these objects were read from its cache (`ClusterWatcher.unlisted`): what they say may lack that kind's objects,
    # so times derived from them may be the weaker ones (reconcile/derive.py marks such entries inferred).
    unlisted: tuple[str, ...] = ()


@dataclass(frozen=True)
class SetShape:
    """A pod set that states its own minimum: `name`, `replicas`, `minimum` (0 = optional)."""

    name: str
    replicas: int
    minimum: int


@dataclass(frozen=True)
class JobShape:
    """What the job expects: `min_member` pods for the gang, `total` pods in all, whether it is being cancelled.

    - `sets`: the pod sets that state their own minimum (a gang is whole only when each of them has that many pods
      bound, besides `min_member` in all).
    - `gang_gone`: the job's gang objects of its current generation that are not there as they should be, one
      phrase each ("PodGroup ns/x is being deleted", "Workload ns/x is missing"); () when all exist and are live
      (or when the job's backend is not known). The phase rules read it: Dispatched only once the whole set
      exists; a Scheduled or Running job whose set is broken reads `Replacing`, a waiting one
      `WaitingForGangObject` (observe/phases.py).
    - `min_edited`: the job's gang minimum was edited by someone else than gangweb (a gang object declares a lower
      minimum than the job's, or carries gangweb's `gangweb.io/min-edited-at` mark of a minimum it put back):
      pods bound below `min_member` are then a partial gang (`PartialGang`), never Scheduled.
    - `partial_release_s`: seconds after which gangweb releases such a partial gang (deletes its bound pods), or
      None when releasing is turned off (GANGWEB_PARTIAL_GANG_GRACE_SECONDS); only said in the reason.
    """

    min_member: int
    total: int
    cancelling: bool = False
    sets: tuple[SetShape, ...] = ()
    gang_gone: tuple[str, ...] = ()
    min_edited: bool = False
    partial_release_s: float | None = None


@dataclass(frozen=True)
class Evidence:
    """One job's objects as seen at `now` (timezone-aware; used only where the cluster gives no time).

    - `shape`: what the job expects (JobShape);
    - `gang`: its backend's reading of the current generation's gang objects (`GangStatus`; empty without one);
    - `gang_objects`: its gang objects as camelCase dicts (the API server's JSON), terminating ones included;
    - `pods`, `owners`: its pods and owner Jobs as facts (observe/pods.py `pod_facts`, `owner_facts`);
    - `refusals`: its owner Jobs' FailedCreate event rows, newest first (`observe.events.row`; None when not read);
    - `said`: the Warning Events of its gang objects and a waiting pod, folded with their count and first/last seen,
      newest first (`observe.events.said`; None when not read);
    - `objects`: the JobObjects it was made of (`of`), for what reads the raw dicts (the `observed` summary).

    The `live_*` views leave out what is terminating; `bound` is the live pods a node was assigned to.
    """

    shape: JobShape
    gang: GangStatus
    gang_objects: list[dict]
    pods: list[PodFacts]
    owners: list[OwnerFacts]
    now: datetime
    refusals: list[dict] | None = None
    objects: JobObjects | None = None
    uncounted: list[str] = field(default_factory=list)  # pods seen but not counted (`pods.cross_check`), by name
    count_note: str = ""  # why: where the pods seen and the Job controller's report disagree
    said: list[dict] | None = None

    @classmethod
    def of(cls, shape: JobShape, gang: GangStatus, objects: JobObjects, now: datetime,
           refusals: list[dict] | None = None, *, said: list[dict] | None = None) -> Evidence:
        """The evidence of `objects` (their pods and owner Jobs turned into facts) for a job of `shape` whose
        backend reads its current gang objects as `gang`. Only the pods the owner Jobs' controller reports count
        (`pods.cross_check`): the others are left out of `pods` (and of `objects.pods`) and named in `uncounted`."""
        owners = [owner_facts(w) for w in objects.owners]
        checked = cross_check([pod_facts(p) for p in objects.pods], owners)
        if checked.dropped:
            objects = JobObjects(objects.gang, objects.owners, [objects.pods[i] for i in checked.kept])
        return cls(shape, gang, objects.gang, checked.pods, owners, now, refusals, objects, checked.dropped,
                   checked.note, said)

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

    @cached_property
    def set_counts(self) -> list[dict]:
        """Per pod set of the job's shape that states a minimum: ``{"name", "replicas", "minimum", "bound"}``, its
        live pods bound to a node counted by their `gangweb.io/pod-set` label (set by gangweb on the pod
        templates it writes)."""
        bound: dict[str, int] = {}
        for p in self.bound:
            bound[p.pod_set] = bound.get(p.pod_set, 0) + 1
        return [{"name": s.name, "replicas": s.replicas, "minimum": s.minimum, "bound": bound.get(s.name, 0)}
                for s in self.shape.sets]

    @cached_property
    def short_sets(self) -> list[dict]:
        """The `set_counts` entries below their minimum; empty when every pod set that states one meets it."""
        return [c for c in self.set_counts if c["bound"] < c["minimum"]]

    @cached_property
    def whole(self) -> bool:
        """True when at least `min_member` live pods are bound (and one) and every pod set meets its minimum."""
        return bool(self.bound) and len(self.bound) >= self.shape.min_member and not self.short_sets


def sets_phrase(short: list[dict]) -> str:
    """"gpu-workers 0 of 2 bound" (joined with ", ") for pod sets below their minimum; "" for none."""
    return ", ".join(f"{c['name']} {c['bound']} of {c['minimum']} bound" for c in short)
