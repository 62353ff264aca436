"""gangweb's data model, one module per domain."""
from .audit import AuditEvent
from .clusters import Cluster, ClusterNodes
from .grants import ClusterGrant, QueueGrant
from .idempotency import BulkSubmitKey
from .jobs import GangJob, PhaseTransition, StrandedObjects
from .leases import Lease
from .notifications import DeliveryStatus, WebhookDelivery, WebhookSubscription
from .queues import QueueClusterState, QueuePolicy, QueueUsageSample
from .runs import ReconcileAttempt
from .templates import RuntimeTemplate, RuntimeTemplateVersion
from .tokens import ApiToken

__all__ = [
    "ApiToken",
    "AuditEvent",
    "BulkSubmitKey",
    "Cluster",
    "ClusterGrant",
    "ClusterNodes",
    "DeliveryStatus",
    "GangJob",
    "Lease",
    "PhaseTransition",
    "QueueClusterState",
    "QueueGrant",
    "QueuePolicy",
    "QueueUsageSample",
    "ReconcileAttempt",
    "StrandedObjects",
    "RuntimeTemplate",
    "RuntimeTemplateVersion",
    "WebhookDelivery",
    "WebhookSubscription",
]
