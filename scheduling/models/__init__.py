"""gangweb's data model, one module per domain."""
from .clusters import Cluster
from .jobs import GangJob, PhaseTransition
from .queues import QueueClusterState, QueuePolicy, QueueUsageSample
from .runs import ReconcileAttempt
from .templates import RuntimeTemplate, RuntimeTemplateVersion

__all__ = [
    "Cluster",
    "GangJob",
    "PhaseTransition",
    "QueueClusterState",
    "QueuePolicy",
    "QueueUsageSample",
    "ReconcileAttempt",
    "RuntimeTemplate",
    "RuntimeTemplateVersion",
]
