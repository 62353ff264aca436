"""gangweb's data model, one module per domain."""
from .clusters import Cluster
from .jobs import GangJob, PhaseTransition
from .queues import QueuePolicy
from .runs import ReconcileAttempt
from .templates import RuntimeTemplate, RuntimeTemplateVersion

__all__ = [
    "Cluster",
    "GangJob",
    "PhaseTransition",
    "QueuePolicy",
    "ReconcileAttempt",
    "RuntimeTemplate",
    "RuntimeTemplateVersion",
]
