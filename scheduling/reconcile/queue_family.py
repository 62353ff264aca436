"""What a queue family supplies to the queue-sync engine (reconcile/queue_sync.py): the `Family` adapter, and the
`Pass` a sync reports. Kept apart from the engine so each stays small; `queue_sync` re-exports both."""
from __future__ import annotations

from dataclasses import dataclass, field

from kubernetes import client

from ..kube.client import REQUEST_TIMEOUT
from ..kube.errors import describe
from ..models import Cluster
from . import queue_desired as qd

STATE_FIELDS = ("state", "message", "last_synced_at", "resource_version", "last_drift", "last_drift_at", "status",
                "status_at")


@dataclass
class Pass:
    """What one sync pass did: actions (short strings), errors (terminal) and transient errors."""

    cluster: Cluster
    actions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    transient: list[str] = field(default_factory=list)


class Family:
    """What one queue family supplies to the engine. Subclasses set the class attributes and the spec hooks; one
    instance serves one pass (a family may keep per-pass data on it, e.g. the KAI usage samples)."""

    group = version = plural = ""
    reason = "QueueSync"  # ReconcileAttempt.reason of a pass that listed the cluster
    noun = "Queue"  # in state messages: "a Queue named 'x' already exists ..."
    write_label = ""  # after the verb in write errors: "create: 409 Conflict" / "create Volcano Queue: 409 ..."
    detail_statuses: tuple[int, ...] = ()  # write errors whose API message is added to the state's message
    pending_message = "the Queue is being deleted; it is created again once gone"
    action_prefix = ""  # before each action on the attempt row
    absent_on_404 = False  # a 404 on the LIST means the cluster does not serve this family: no pass, nothing recorded
    parent_key = "parentQueue"  # spec key naming the parent Queue
    queue_family = ""  # QueueFamily: the `family` of its QueueClusterState rows
    state_fields: tuple[str, ...] = STATE_FIELDS

    def list_failed_message(self, exc: BaseException) -> str:
        return describe(exc, 2000)

    def desired(self, policy, parent_name: str, children: list) -> tuple[dict, list[dict] | None]:
        """(spec, warnings or None when the family's state has no warnings) of a managed policy; `children` are the
        policy's children that are desired in the same cluster."""
        raise NotImplementedError

    def flat(self, spec: dict | None) -> dict:
        raise NotImplementedError

    def diff(self, want: dict, found: dict) -> list[dict]:
        return qd.diff_fields(want, found)

    def body(self, name: str, spec: dict, existing: dict | None) -> dict:
        raise NotImplementedError

    def import_fields(self, spec: dict | None) -> dict:
        raise NotImplementedError

    def status(self, obj: dict) -> dict:
        raise NotImplementedError

    def protected_imports(self) -> set[int]:
        """Unmanaged policies whose fields another family's import owns (not refreshed by this one)."""
        return set()

    def still_linked(self, cluster: Cluster) -> set[int]:
        """Unmanaged policies that stay linked to `cluster` when this family's Queue of theirs is gone."""
        return set()

    def on_status(self, ctx, policy, previous: dict, status: dict) -> None:
        """Called for each policy whose status was read back (`previous` = the status stored before)."""

    def save_extra(self, ctx) -> None:
        """Further writes inside the state rows' transaction."""

    def parent_of(self, obj: dict) -> str:
        return ((obj.get("spec") or {}).get(self.parent_key)) or ""

    def list_objects(self, api: client.CustomObjectsApi) -> list[dict]:
        """Every queue object of the family in the cluster (one LIST by default). Raises ApiException or OSError."""
        listing = api.list_cluster_custom_object(self.group, self.version, self.plural,
                                                 _request_timeout=REQUEST_TIMEOUT)
        return listing.get("items", [])

    def plural_of(self, obj: dict) -> str:
        """The resource (plural) of a queue object or body."""
        return self.plural

    def kind_name(self, obj: dict) -> str:
        """The object's kind as the action strings say it ("Queue")."""
        return "Queue"

    def replaced_kind(self, name: str, obj: dict) -> bool:
        """True when the observed object `obj` of a desired policy `name` is of another kind than the one desired
        (it is deleted, the new one created once it is gone)."""
        return False

    def keep_reason(self, obj: dict) -> str:
        """Why gangweb's object `obj` must not be deleted now although no policy wants it ("" = it may go)."""
        return ""

    def steps(self, steps: tuple) -> tuple:
        """The pass's steps (the engine's `STEPS`; a family may add its own around them)."""
        return steps


