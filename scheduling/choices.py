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
# Waiting to start: accepted, objects created or queued by the scheduler. `?phase=pending` in the API, the CLI's
# `--phase pending` and the jobs page's "pending" choice all mean these (filtersets.PhaseFilter).
PENDING_PHASES = (GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED)
PENDING_CHOICE = "pending"
# Placed by the scheduler: what counts as a job holding its cluster's resources (queue and cluster usage).
RUNNING_PHASES = (GangPhase.SCHEDULED, GangPhase.RUNNING)
PHASE_FILTER_CHOICES = [(PENDING_CHOICE, "pending (Submitted, Dispatched, Queued)"), *GangPhase.choices]


class PodSecurityLevel(models.TextChoices):
    """A Kubernetes Pod Security Standards level that gangweb enforces on the pods it creates
    (https://kubernetes.io/docs/concepts/security/pod-security-standards/; `podspec/pod_security.py`)."""

    BASELINE = "baseline"
    RESTRICTED = "restricted"


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
    """Sync state of a queue policy in one cluster (see QueueClusterState)."""

    PENDING = "Pending"
    IN_SYNC = "InSync"
    DRIFTED = "Drifted"
    ERROR = "Error"
    DELETED = "Deleted"
    IMPORTED = "Imported"  # a cluster queue gangweb did not create: shown, never changed or deleted


class QueueFamily(models.TextChoices):
    """Which scheduler's queue object a queue state row is about (QueueClusterState.family): a cluster may serve
    several, and each is synced on its own (reconcile/queues.py, volcano_queues.py, kueue_queues.py)."""

    KAI = "kai", "KAI"  # KAI Queue, scheduling.run.ai
    VOLCANO = "volcano", "Volcano"  # Volcano Queue, scheduling.volcano.sh
    KUEUE = "kueue", "Kueue"  # Kueue Cohort (a parent) or ClusterQueue (a leaf), kueue.x-k8s.io


class QueueWarning(models.TextChoices):
    """Why a queue policy is accepted but probably not what the admin meant (docs/upstream.md, KAI Queue)."""

    ZERO_LIMIT = "ZeroLimit"  # limit 0: nothing of that resource can be allocated
    QUOTA_OVER_LIMIT = "QuotaOverLimit"  # the queue can never use its whole quota
    NO_SURPLUS_SHARE = "NoSurplusShare"  # overQuotaWeight 0: no share of unused resources
    CHILDREN_OVER_PARENT = "ChildrenQuotaOverParent"  # children's quotas add up to more than the parent's
    UNLIMITED_UNDER_FINITE = "UnlimitedUnderFiniteParent"  # limit -1 but an ancestor's limit caps it
    LIMIT_OVER_ANCESTOR = "LimitOverAncestorLimit"  # a finite limit above an ancestor's limit


class GrantRole(models.TextChoices):
    """What a queue or cluster grant lets its user or group do, weakest first (see services/access/roles.py).

    viewer: read; submitter: also submit, and cancel or change the jobs they submitted; admin: also manage the
    queue's children and templates, cancel any job in it (or manage the cluster, for a cluster grant).
    """

    VIEWER = "viewer"
    SUBMITTER = "submitter"
    ADMIN = "admin"


ROLE_RANK = {GrantRole.VIEWER: 1, GrantRole.SUBMITTER: 2, GrantRole.ADMIN: 3}


class TokenAction(models.TextChoices):
    """What an API token may be used for, within its owner's own permissions."""

    READ = "read"
    SUBMIT = "submit"
    CANCEL = "cancel"
