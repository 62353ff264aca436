"""The scheduler backend plugin interface.

A backend turns a job into its scheduler's gang objects, stamps the pods' template so the scheduler groups
them, and reads the gang objects' status back into a uniform `GangStatus`. It never talks to the cluster
itself: reconcile/ reads and writes; a backend only builds and interprets dicts (so it is unit-testable).

Plugins are registered in `registry.FAMILIES`, one class per scheduler and API version (KubeRay's batch
scheduler package and Kubeflow Trainer's runtime plugins are the models).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class ObjectRef:
    """Where a kind lives: API group/version, kind, plural, and whether it is namespaced."""

    api_version: str  # "scheduling.k8s.io/v1alpha2", "scheduling.run.ai/v2alpha2", "batch/v1", "v1"
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


@dataclass
class GangStatus:
    """What the scheduler said about a gang, read from its gang object(s) by a backend.

    - `admitted`: True once the scheduler admitted the gang (e.g. v1alpha2 PodGroupScheduled=True); False when
      it said it cannot (Unschedulable); None when the gang object says nothing either way (derive from pods).
    - `reason` / `message`: the scheduler's own words (e.g. "Unschedulable", "OverLimit").
    - `at`: the cluster's timestamp for that statement (condition lastTransitionTime), or None.
    - `source`: the object it came from, "Kind namespace/name".
    - `queue_details`: KAI QuotaDetails, numbers per resource, when the scheduler gives them.
    - `conditions`: the raw conditions, for display.
    """

    admitted: bool | None = None
    reason: str = ""
    message: str = ""
    at: datetime | None = None
    source: str = ""
    queue_details: dict | None = None
    conditions: list[dict] = field(default_factory=list)


class SchedulerBackend:
    """Base class of a backend plugin. Subclasses set the class attributes and implement the hooks.

    Class attributes:
    - `family`: the name templates use ("kai", "k8s-workload", "coscheduling", "volcano");
    - `name`: unique plugin name, family plus version, e.g. "k8s-workload-v1alpha2";
    - `api_version`: the group/version it needs, checked through API discovery;
    - `scheduler_name`: the pods' `spec.schedulerName` ("" keeps the default scheduler);
    - `gang_kinds`: ObjectRefs of the gang objects it creates, in creation order;
    - `immutable_spec`: True when the gang objects' spec cannot be updated (replace under a new name instead).
    """

    family: str = ""
    name: str = ""
    api_version: str = ""
    scheduler_name: str = ""
    gang_kinds: tuple[ObjectRef, ...] = ()
    immutable_spec: bool = False

    @classmethod
    def available(cls, served: set[str]) -> bool:
        """True when the cluster serves `api_version` (served: {"group/version", ...} from discovery)."""
        return cls.api_version in served
