"""One job's objects in the cluster as listed (`Observed`) and the keys of its kinds: the data both the reads
(`reconcile/observed.py`) and the ownership rules (`reconcile/ownership.py`) work on, below both of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..kube.refs import ObjectRef


def kind_key(ref: ObjectRef) -> str:
    """"apiVersion/Kind", the key of a kind in Observed.gang."""
    return f"{ref.api_version}/{ref.kind}"


def obj_key(obj: dict) -> str:
    """kind_key of an object dict."""
    return f"{obj.get('apiVersion')}/{obj.get('kind')}"


@dataclass
class Observed:
    """One job's objects in the cluster, as listed. `gang` maps kind_key -> {name: object}.

    `recorded_phases` ([(phase, at, attempt, inferred)]) is set by a resync, which reads the job's timeline right
    after its row: with it, a pass that observes nothing new neither locks nor writes the row
    (`status.StatusUpdate`).

    `listed_at` (time.time() seconds) is when a resync or batch snapshot was listed; None when the objects were
    read for this pass alone (`read`), i.e. after the job's row was loaded.
    """

    gang: dict[str, dict[str, dict]] = field(default_factory=dict)
    owners: dict[str, dict] = field(default_factory=dict)
    services: dict[str, dict] = field(default_factory=dict)
    pods: list[dict] = field(default_factory=list)
    recorded_phases: list | None = None
    listed_at: float | None = None
    # kind_key -> the StoredVersionUnreadable error its snapshot LIST got (kube/errors.py): nothing of that kind known
    unreadable: dict = field(default_factory=dict)
    # namespace -> its LimitRange defaults (kube/limit_ranges.py), shared by the passes of one snapshot: read once per
    # namespace per resync or batch, as of the snapshot, however long the passes take (the cache's minute may not)
    limit_defaults: dict | None = None
    # template version id -> its template's (pod_security_level, policy_exceptions), shared by the passes of one
    # snapshot like `limit_defaults`: the pod-policy check before an owner Job's create reads them once per batch
    pod_policies: dict | None = None
    # keys (ownership.object_key) of own objects found by their recorded UID without the job's label: the pass puts
    # the labels back
    relabel: set = field(default_factory=set)
    # foreign objects found with the job's (ownership.foreign_entry dicts), reported on the job, never touched;
    # `foreign_complete` False when only the labelled look-alikes were looked for (a snapshot's slice)
    foreign: list = field(default_factory=list)
    foreign_complete: bool = False

    @property
    def from_snapshot(self) -> bool:
        """True when these objects were listed for many jobs at once, possibly before the job's row last changed."""
        return self.listed_at is not None

    def gang_of(self, ref: ObjectRef) -> dict[str, dict]:
        """{name: object} of one gang kind."""
        return self.gang.setdefault(kind_key(ref), {})

    def unreadable_for(self, refs) -> object | None:
        """The snapshot's error for the first of `refs` (ObjectRefs) it could not list, or None."""
        return next((self.unreadable[kind_key(r)] for r in refs if kind_key(r) in self.unreadable), None)

    def is_empty(self) -> bool:
        """True when nothing of the job is left (pods included)."""
        return not (any(self.gang.values()) or self.owners or self.services or self.pods)
