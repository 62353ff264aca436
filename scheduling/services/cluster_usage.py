"""What gangweb's placed jobs hold in a cluster, for the `ClusterBusy` fact of why_pending.

Sums the gang totals stored on each job (`GangJob.requested_*`, filled at submit) over the cluster's Scheduled and
Running jobs: one `SUM` query, remembered for a few seconds per cluster in Django's cache, so a resync that
explains many pending gangs of one cluster asks once. Pods gangweb does not manage are not counted: what is left
free is an upper bound.
"""
from __future__ import annotations

from django.core.cache import cache
from django.db.models import Sum

from ..models import GangJob
from .queue_usage import COLUMNS, RUNNING_PHASES

REMEMBER_SECONDS = 5


def in_use(cluster_id: int) -> dict:
    """{"nvidia.com/gpu": devices, "cpu": cores, "memory": bytes} requested by the cluster's Scheduled and
    Running jobs (base units, as `Cluster.capacity` states allocatable). Cached REMEMBER_SECONDS per cluster."""
    def compute() -> dict:
        sums = GangJob.objects.filter(cluster_id=cluster_id, phase__in=RUNNING_PHASES).aggregate(
            **{r: Sum(column) for r, column in COLUMNS.items()})  # gpu devices, cpu millicores, memory bytes
        gpu = sums["gpu"] or 0
        return {"nvidia.com/gpu": int(gpu) if float(gpu).is_integer() else gpu,
                "cpu": (sums["cpu"] or 0) / 1000, "memory": sums["memory"] or 0}

    return cache.get_or_set(f"gangweb:cluster-in-use:{cluster_id}", compute, REMEMBER_SECONDS)
