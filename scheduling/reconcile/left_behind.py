"""Objects a finished job's clean-up left behind: found by the periodic resync and handed back to the clean-up.

A clean-up sets `cleaned_up_at` once a LIST of its own finds nothing of the job's gang and Service left (and, for a
cancelled or refused job or once the retention is over, `objects_removed_at` once nothing at all is left;
reconcile/jobs/cleanup.py). A pass that loaded the job's row before the job ended may still create after that LIST:
it reads the row again before its first create and after its creates (`JobReconciler.refuse_when_over`,
`cancelled_meanwhile`), but a clean-up that listed before those creates and commits after the second read still
marks the job clean while its objects stand. Whatever the interleaving, the resync's snapshot then holds them, and
`reopen` clears the marks so the clean-up runs again, in the same resync: level-triggered, the cluster converges
within one resync period.

What counts as left behind, per job (a finished one whose `cleaned_up_at` is set):
- its gang objects (of the kinds of its backend plugin) and its Service; with `objects_removed_at` set, its Indexed
  Jobs too (then nothing of it should be left);
- only objects that are the job's own as every pass judges them (`ownership.trust`: the UID gangweb recorded under
  the object's key, or, with nothing recorded there, the job's label under its current generation's name): the
  snapshot finds them by label (a hint); anything else carrying the job's labels is someone else's and never acted
  on;
- and only once a GET made after the job's row was read finds the object still there under the same UID: a
  snapshot is older than the row (a clean-up that finished after the LIST is no leftover), and no time of two
  hosts' clocks is compared.

Each job reopened gets a ReconcileAttempt (reason `LeftAfterCleanUp`) naming what was found. Cost: nothing when
no cleaned job's objects are in the snapshot (decided from the resync's orphan check, which reads the marks with
the UIDs); else one query for the suspects' rows, one GET per suspect object and one UPDATE and one INSERT per job
reopened.
"""
from __future__ import annotations

import logging

from kubernetes.client.rest import ApiException

from ..backends import registry
from ..backends.base import object_source
from ..kube import objects
from ..kube.errors import KubeError
from ..kube.objects import JOB, SERVICE
from ..kube.refs import ObjectRef
from ..models import Cluster, GangJob, ReconcileAttempt
from . import ownership
from .observed import Observed, Snapshot
from .spilled import SpilledSnapshot

log = logging.getLogger(__name__)

LEFT_AFTER_CLEANUP = "LeftAfterCleanUp"  # reason of the attempt that reopens a job's clean-up
# What a suspect's row is loaded with: what `ownership.trust` and the kinds of its plugin need.
ROW_FIELDS = ("pk", "uid", "name", "namespace", "gang_generation", "owner_uids", "backend_plugin", "phase",
              "cleaned_up_at", "objects_removed_at")


def _holds(found: dict[str, Observed], with_jobs: bool) -> bool:
    """True when a job's snapshot slice ({namespace: Observed}) holds a gang object or Service (or, `with_jobs`, an
    Indexed Job) in any namespace: the cheap filter before any row is read."""
    return any(any(o.gang.values()) or o.services or (with_jobs and o.owners) for o in found.values())


def suspects(snap: Snapshot | SpilledSnapshot, marks: dict[str, tuple]) -> list[str]:
    """Job UIDs whose row is marked cleaned up while `snap` holds objects of them that should be gone. `marks`:
    {job uid: (cleaned_up_at, objects_removed_at)} of the cluster's rows among the snapshot's UIDs."""
    out = []
    for uid, (cleaned, removed) in marks.items():
        if cleaned is not None and _holds(snap.slice(uid), removed is not None):
            out.append(uid)
    return out


def _kinds(job: GangJob) -> dict[tuple[str, str], ObjectRef] | None:
    """{(apiVersion, kind): ObjectRef} that the job's clean-up deletes: its plugin's gang kinds, Service, and
    (`objects_removed_at` set) Job. None when its plugin is not registered (nothing judged then)."""
    try:
        gang = registry.by_name(job.backend_plugin).gang_kinds
    except KeyError:
        return None
    refs = [*gang, SERVICE, *([JOB] if job.objects_removed_at is not None else [])]
    return {(r.api_version, r.kind): r for r in refs}


def left_objects(job: GangJob, found: Observed, api) -> list[dict]:
    """The job's own objects in `found` (its snapshot slice in its namespace, `ownership.trust`) that its clean-up
    should have deleted (`_kinds`) and that a GET finds still there under the same UID, in a stable order (kind,
    name). Raises KubeError when a GET fails otherwise than 404."""
    kinds = _kinds(job)
    if kinds is None:
        return []
    own = ownership.trust(found, job.namespace, job.owner_uids, str(job.uid), ownership.adopt_names(job))
    listed = [*(o for g in own.gang.values() for o in g.values()), *own.services.values(), *own.owners.values()]
    left = []
    for obj in sorted(listed, key=lambda o: (o.get("kind") or "", o["metadata"].get("name") or "")):
        ref = kinds.get((obj.get("apiVersion"), obj.get("kind")))
        if ref is None:
            continue
        try:
            now = objects.get(api, ref, job.namespace, obj["metadata"]["name"])
        except ApiException as exc:
            if exc.status == 404:
                continue
            raise
        if (now.get("metadata") or {}).get("uid") == obj["metadata"].get("uid"):
            left.append(now)
    return left


def reopen(cluster: Cluster, api, snap: Snapshot | SpilledSnapshot, uids: list[str]) -> list[int]:
    """For each job of `cluster` among `uids` (`suspects`) whose clean-up left objects behind (`left_objects`):
    clear its `cleaned_up_at` and `objects_removed_at` (only when they are still the values read, so a pass that
    changed them meanwhile wins) and record a ReconcileAttempt, reason LEFT_AFTER_CLEANUP, naming the objects.
    Returns the ids of the jobs reopened, which the resync then passes first. A GET that fails (the cluster went
    away between its LISTs and now) leaves that job to the next resync."""
    if not uids:
        return []
    reopened = []
    rows = (GangJob.objects.filter(cluster=cluster, uid__in=uids, cleaned_up_at__isnull=False)
            .only(*ROW_FIELDS).order_by("pk"))
    for job in rows:
        found = snap.slice(str(job.uid)).get(job.namespace)
        if found is None:
            continue
        try:
            left = left_objects(job, found, api)
        except KubeError as exc:
            log.info("resync of cluster %s: job %s: objects after clean-up not confirmed: %s", cluster.name, job.pk,
                     exc)
            continue
        if not left or not GangJob.objects.filter(
                pk=job.pk, cleaned_up_at=job.cleaned_up_at, objects_removed_at=job.objects_removed_at).update(
                cleaned_up_at=None, objects_removed_at=None):
            continue
        names = ", ".join(object_source(o) for o in left)
        message = (f"objects found after clean-up: {names}; the job's clean-up marks are cleared and its clean-up "
                   "runs again")
        log.warning("resync of cluster %s: job %s (%s) %s", cluster.name, job.pk, job.phase, message)
        ReconcileAttempt.objects.create(kind=ReconcileAttempt.KIND_JOB, job_id=job.pk, cluster=cluster,
                                        reason=LEFT_AFTER_CLEANUP, message=message[:2000],
                                        actions=[f"found after clean-up: {object_source(o)}" for o in left])
        reopened.append(job.pk)
    return reopened
