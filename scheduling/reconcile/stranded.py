"""What moved jobs left on a cluster that could not be asked (a lost cluster; reconcile/moves.py), deleted when it
answers again: its resync runs `clean` before anything else.

Each `StrandedObjects` row names a job, the cluster, the namespace, the plugin whose kinds its objects are, and
the keys and UIDs gangweb recorded of them. Deleting is a cancel's, on a copy of the job as it was there (never
saved): the job's objects are listed by its UID label in that namespace (the plugin's kinds, Jobs, Services,
pods), every one deleted with a UID precondition (Jobs Foreground, so their pods go first), and every recorded UID
the label LIST missed looked up by name and deleted only while it is still the recorded object
(`JobCleanup.delete_all`, `sweep_recorded`). The row is closed (`deleted_at`) once a LIST of that pass finds
nothing of the job left there; until then the next resync goes on.
"""
from __future__ import annotations

import copy
import logging

from django.utils import timezone

from ..choices import DesiredState, GangPhase
from ..models import Cluster, StrandedObjects
from .jobs.common import Requeue
from .jobs.reconciler import JobReconciler

log = logging.getLogger(__name__)


def clean(cluster: Cluster, api) -> int:
    """Delete what moved jobs left on `cluster` (module docstring). Returns how many rows are still open after it.
    Raises the cluster's errors (KubeError): the resync records them and tries again next time."""
    rows = list(StrandedObjects.objects.filter(cluster=cluster, deleted_at__isnull=True).select_related("job"))
    left = 0
    for row in rows:
        ghost = copy.copy(row.job)  # the job as it was on this cluster; never saved
        ghost.cluster, ghost.namespace = cluster, row.namespace
        ghost.owner_uids, ghost.backend_plugin = dict(row.owner_uids or {}), row.backend_plugin
        ghost.phase, ghost.desired_state = GangPhase.DISPATCHED, DesiredState.CANCEL
        reconciler = JobReconciler(ghost, api)
        try:
            gone = reconciler.delete_all()
        except Requeue:
            gone = False
        if gone:
            StrandedObjects.objects.filter(pk=row.pk).update(deleted_at=timezone.now())
            log.info("cluster %s: nothing left of moved job %s (%s)", cluster.name, row.job_id,
                     "; ".join(reconciler.actions) or "nothing to delete")
        else:
            left += 1
            log.info("cluster %s: deleting what moved job %s left: %s", cluster.name, row.job_id,
                     "; ".join(reconciler.actions))
    return left
