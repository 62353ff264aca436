"""What moved jobs left on a cluster that could not be asked (a lost cluster; reconcile/moves.py), deleted when it
answers again: its resync runs `clean` before anything else.

Each `StrandedObjects` row names a job, the cluster, the namespace, the plugin whose kinds its objects are, and
the keys and UIDs gangweb recorded of them. Deleting is a cancel's, on a copy of the job as it was there (never
saved): the job's objects are listed by its UID label in that namespace (the plugin's kinds, Jobs, Services,
pods), every one deleted with a UID precondition (Jobs Foreground, so their pods go first), and every recorded UID
the label LIST missed looked up by name and deleted only while it is still the recorded object
(`JobCleanup.delete_all`, `sweep_recorded`). An object of the job there whose UID gangweb never recorded (its
create was sent as the cluster went away, and the answer was lost) is taken as the job's when it carries gangweb's
creation mark for the job under its own name and kind (`ownership.made_by_gangweb`, an HMAC only gangweb can make)
and nothing is recorded under that key: the same rule as adopting it on a 409 (`ownership.may_adopt`). The row is
closed (`deleted_at`) once a LIST of that pass finds
nothing of the job left there; until then the next resync goes on.
"""
from __future__ import annotations

import copy
import logging

from django.utils import timezone

from ..choices import DesiredState, GangPhase
from ..constants import LABEL_JOB_UID
from ..kube import objects
from ..kube.refs import JOB, SERVICE
from ..models import Cluster, StrandedObjects
from . import ownership
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
        unrecorded = marked(api, reconciler.backend, row.namespace, str(ghost.uid), ghost.owner_uids)
        if unrecorded:
            ghost.owner_uids.update(unrecorded)
            reconciler.observed = reconciler.read()
            reconciler.actions.append(f"made by gangweb, never recorded: {', '.join(sorted(unrecorded))}")
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


def marked(api, backend, namespace: str, job_uid: str, recorded: dict) -> dict[str, str]:
    """{key: UID} (`ownership.object_key`) of the objects of the job in `namespace` (its backend's gang kinds, its
    Jobs and Service) that carry gangweb's creation mark for job `job_uid` under their own key while nothing is
    recorded under that key (`recorded`): gangweb made them and never learnt their UID. One LIST per kind."""
    found = {}
    for ref in (*backend.gang_kinds, JOB, SERVICE):
        selector = "" if ref in backend.gang_kinds else f"{LABEL_JOB_UID}={job_uid}"  # as `observed.read` lists
        for obj in objects.list_objects(api, ref, namespace, selector):
            key, uid = ownership.object_key(obj), (obj.get("metadata") or {}).get("uid")
            if (uid and key not in recorded and ownership.in_namespace(obj, namespace)
                    and ownership.made_by_gangweb(obj, job_uid)):
                found[key] = uid
    return found
