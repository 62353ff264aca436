"""What every part of a job's pass shares: the reasons it records, its tunables, the exceptions that end a pass
early (a countdown, done, failed by gangweb's own finding) and small readers of an object dict."""
from __future__ import annotations

from ...backends.base import SchedulerBackend
from ...constants import LABEL_JOB_UID
from ...kube.errors import (
    CREATE_REFUSED,
    NAME_CONFLICT,
    NAMESPACE_NOT_FOUND,
    QUOTA_EXCEEDED,
    STORED_VERSION_UNREADABLE,
    CreateRefused,
    TerminalKubeError,
)
from ...kube.refs import ObjectRef
from ..observed_set import kind_key, obj_key

MAX_CONFLICT_RETRIES = 3
WAIT_SECONDS = 5  # countdown while the world catches up (an object terminating, pods going away)
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"  # set on pods by the Job controller
LIVE_POD_PHASES = ("Pending", "Running", "Unknown")
RECREATED = "Recreated"  # a Scheduled/Running job's vanished objects were created again: a new attempt
REPLACED = "Replaced"  # a Scheduled/Running job's gang was replaced under a new generation: a new attempt
BACKEND_UNAVAILABLE = "BackendUnavailable"
# The cluster stopped serving the API version of the job's plugin (an upgrade, e.g. Kubernetes 1.36 -> 1.37 removed
# scheduling.k8s.io/v1alpha2): the job moves to the newest served version of its backend family.
API_VERSION_CHANGED = "APIVersionChanged"
API_VERSION_REMOVED = "APIVersionRemoved"  # ... and the family has no served version left: the job fails
UNEXPECTED_ERROR = "UnexpectedError"  # an exception no handler expected; recorded on the job, never a bare traceback
WAITING = "WaitingForDeletion"
CANCELLING = "Cancelling"  # phase_reason of a job whose cancel is deleting its objects (observe/phases.py too)
# A placed job's cluster was lost while the job ran there (reconcile/moves.py): its phase is unknown until a pass of
# that cluster reads it again, which clears it as it clears an error.
CLUSTER_LOST = "ClusterLost"
ERROR_REASONS = frozenset({"ClusterUnreachable", CLUSTER_LOST, "Forbidden", "Unauthorized", "Throttled",
                           "ServerError", "Invalid", "Rejected", "InvalidKubeconfig", NAME_CONFLICT,
                           BACKEND_UNAVAILABLE, "Conflict",
                           NAMESPACE_NOT_FOUND, QUOTA_EXCEEDED, STORED_VERSION_UNREADABLE, UNEXPECTED_ERROR,
                           "Redirected", "AddressNotAllowed"})
REMOVING = "RemovingObjects"  # a finished job's retained Jobs and pods are being deleted (retention)
ROOT_DELETED = "RootDeleted"  # an object's ownerReference names a deleted root: it goes, and the set is recreated


class Requeue(Exception):
    """Stop this pass and come back after `countdown` seconds (the world has to move first)."""

    def __init__(self, countdown: int, reason: str, message: str):
        super().__init__(message)
        self.countdown, self.reason, self.message = countdown, reason, message


class PolicyRefused(CreateRefused):
    """gangweb's own pod-spec policy refuses a job's pods (podspec/rules.py). Ends the job as a create the API
    server refused does (reason CreateRefused, `api_reason` "PolicyRefused"), naming the field and the control."""

    def __init__(self, kind: str, name: str, message: str):
        TerminalKubeError.__init__(self, CREATE_REFUSED, f"gangweb's pod-spec policy refused to create {kind} {name}: "
                                                         f"{message}", None, "PolicyRefused")
        self.kind, self.name = kind, name


class Done(Exception):
    """The pass finished early without needing the cluster."""


class Failed(Exception):
    """The pass ended the job Failed by gangweb's own finding (already recorded); `reason`, `message` say why."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message



def is_terminating(obj: dict) -> bool:
    """True once the object has a deletionTimestamp."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def owner_uid_label(obj: dict) -> str | None:
    """The `gangweb.io/job-uid` label of an object, or None."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB_UID)


def ref_of(backend: SchedulerBackend, obj: dict) -> ObjectRef:
    """The backend's ObjectRef of a gang object dict."""
    return next(ref for ref in backend.gang_kinds if kind_key(ref) == obj_key(obj))
