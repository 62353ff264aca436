"""Where a kind lives in the API: `ObjectRef`, and the refs of the built-in kinds gangweb reads and writes.

A backend plugin declares the refs of its own gang objects as class attributes (backends/base.py), so a later API
version subclasses it and overrides only the refs that changed; kube/ (objects, watches) and reconcile/ take any ref.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ObjectRef:
    """Where a kind lives: API group/version, kind, plural, and whether it is namespaced.

    `api_version` is "group/version" ("scheduling.k8s.io/v1beta1", "batch/v1") or "v1" for the core group; the
    REST path is /api/v1/... for core kinds and /apis/<group>/<version>/... otherwise (kube/objects.py).
    """

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        """API group ("" for core)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        """API version."""
        return self.api_version.rpartition("/")[2]


# Built-in kinds: the pods' owners (Indexed Jobs), the rendezvous Service, the pods, and nodes (capacity).
JOB = ObjectRef("batch/v1", "Job", "jobs")
SERVICE = ObjectRef("v1", "Service", "services")
POD = ObjectRef("v1", "Pod", "pods")
NODE = ObjectRef("v1", "Node", "nodes", namespaced=False)
# Read only, by the cluster probe: is a scheduler there (kube/scheduler_presence.py).
LEASE = ObjectRef("coordination.k8s.io/v1", "Lease", "leases")
EVENT = ObjectRef("v1", "Event", "events")
