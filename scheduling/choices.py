"""Named phases, states and reasons (TextChoices), so no bare strings leak into code or queries."""
from django.db import models


class GangPhase(models.TextChoices):
    """Observed phase of a gang job, in lifecycle order.

    Submitted -> Dispatched (gang object and owners created) -> Queued (waiting in the scheduler) ->
    Scheduled (at least minMember pods bound) -> Running (all pods running) -> Succeeded | Failed | Cancelled.
    """

    SUBMITTED = "Submitted"
    DISPATCHED = "Dispatched"
    QUEUED = "Queued"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


TERMINAL_PHASES = frozenset({GangPhase.SUCCEEDED, GangPhase.FAILED, GangPhase.CANCELLED})
ACTIVE_PHASES = frozenset(set(GangPhase) - TERMINAL_PHASES)
PHASE_ORDER = {phase: index for index, phase in enumerate(GangPhase)}


class DesiredState(models.TextChoices):
    """What the user wants of a job: keep it running, or cancel it (delete its cluster objects)."""

    RUN = "Run"
    CANCEL = "Cancel"


class ClusterHealth(models.TextChoices):
    """Last probe result of a cluster."""

    UNKNOWN = "Unknown"
    HEALTHY = "Healthy"
    UNREACHABLE = "Unreachable"
    FORBIDDEN = "Forbidden"


class ReconcileOutcome(models.TextChoices):
    """How one reconcile attempt ended."""

    OK = "Ok"
    TRANSIENT_ERROR = "TransientError"
    TERMINAL_ERROR = "TerminalError"


class SyncState(models.TextChoices):
    """Sync state of a queue policy in one cluster."""

    PENDING = "Pending"
    IN_SYNC = "InSync"
    DRIFTED = "Drifted"
    ERROR = "Error"
    DELETED = "Deleted"
