"""Periodic resync of a cluster: LIST each kind once, reconcile only the jobs whose objects differ.

Per cluster and pass: one LIST per gang kind the cluster serves (of the registered backends), plus Jobs,
Services and Pods, all across namespaces and selected by `gangweb.io/instance=<this install>`. So the number
of reads is a constant (at most 8 with today's four backends) whatever the number of jobs; writes are made
only for jobs whose objects differ from the desired state, and job rows are written only when their status
changed. Each job's pass is the same `run_pass` as the per-job task, fed with its slice of the snapshot.

Jobs covered: every job of the cluster that is not finished, plus finished jobs whose objects were not yet
cleaned up. A job that fails transiently here is recorded and simply looked at again on the next resync.
"""
from __future__ import annotations

import logging
import time

from django.db.models import Q
from django.utils import timezone
from kubernetes.client.rest import ApiException

from ..backends import registry
from ..choices import ACTIVE_PHASES, ClusterHealth, ReconcileOutcome
from ..constants import LABEL_INSTANCE, LABEL_JOB_UID
from ..kube import client as kube_client
from ..kube import objects
from ..kube.errors import KubeError, TransientKubeError
from ..kube.objects import JOB, POD, SERVICE
from ..models import Cluster, GangJob, PhaseTransition, ReconcileAttempt
from . import jobs as job_reconcile
from .desired import instance_label
from .observed import Snapshot, projection

log = logging.getLogger(__name__)

INTERNAL_ERROR = "InternalError"  # reason of a resync attempt cut short by an unexpected exception (a bug)


def gang_kinds(served: set[str]) -> list:
    """Distinct gang ObjectRefs of every registered plugin the cluster serves."""
    refs = []
    for cls in registry.all_plugins():
        if cls.available(served):
            refs += [ref for ref in cls.gang_kinds if ref not in refs]
    return refs


def snapshot(api, served: set[str], uids=None) -> Snapshot:
    """LIST every kind gangweb creates, once each, across namespaces, by the instance label; with `uids` (job
    UIDs), only those jobs' objects (a set-based selector on the job-UID label), so a batch's reads stay the size
    of the batch rather than of the whole cluster (every pod of every job)."""
    selector = f"{LABEL_INSTANCE}={instance_label()}"
    if uids:
        selector += f",{LABEL_JOB_UID} in ({','.join(sorted(str(u) for u in uids))})"
    snap = Snapshot()
    for ref in [*gang_kinds(served), JOB, SERVICE, POD]:
        # Projected as each LIST is parsed: only one kind's full parse is ever alive (pods, the largest, last).
        snap.add(objects.list_objects(api, ref, None, selector, project=projection(ref)), ref)
    return snap


JOB_CHUNK = 200  # job rows loaded at a time by a resync (their JSON columns are most of a row's size)


def chunked(queryset, size: int = JOB_CHUNK):
    """Yield (job, [(phase, at, attempt)] recorded for it) for the rows of `queryset`, `size` at a time by primary
    key: the ids first (one query), then two queries per chunk (rows, their timelines), so a resync of 10,000 jobs never
    holds 10,000 model instances with their JSON. Unlike `.iterator()` it needs no server-side cursor held open
    across the passes' own writes and transactions. Rows deleted meanwhile are skipped."""
    ids = list(queryset.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), size):
        chunk = ids[start:start + size]
        recorded: dict[int, list] = {}
        # Same rows as `job.transitions.values_list("phase", "at", "attempt")`, per job.
        for job_id, phase, at, attempt in PhaseTransition.objects.filter(job_id__in=chunk).values_list(
                "job_id", "phase", "at", "attempt"):
            recorded.setdefault(job_id, []).append((phase, at, attempt))
        for job in queryset.filter(pk__in=chunk).order_by("pk"):
            yield job, recorded.get(job.pk, [])


def jobs_to_resync(cluster: Cluster):
    """Jobs of `cluster` that need looking at: unfinished ones, and finished ones not yet cleaned up."""
    return (GangJob.objects.filter(cluster=cluster)
            .filter(Q(phase__in=list(ACTIVE_PHASES)) | Q(cleaned_up_at__isnull=True))
            .select_related("cluster", "queue"))


def resync_job(job: GangJob, api, snap: Snapshot, recorded: list) -> tuple[bool, bool]:
    """One job's pass within a resync, fed with its slice of `snap`. Returns (acted, failed). A transient error
    was recorded on the job by the pass (NamespaceNotFound, Forbidden, ...) and counts as failed; the next
    resync looks again."""
    try:
        backend = job_reconcile.backend_for(job, api)
        # Popped: what a job's pass has seen is garbage once the pass ends.
        observed = snap.take(str(job.uid), backend)
        observed.recorded_phases = recorded
        result = job_reconcile.run_pass(job, api=api, observed=observed, record_idle=False)
    except TransientKubeError:
        return False, True
    except KubeError as exc:  # backend unavailable: record on the job like a pass would
        log.info("resync: job %s: %s", job.pk, exc)
        try:
            job_reconcile.run_pass(job, api=api)  # records the terminal error and the attempt
        except TransientKubeError:
            pass
        return False, True
    return bool(result.actions), result.error is not None


def resync_cluster(cluster: Cluster) -> dict:
    """One resync pass over `cluster`. Returns {"jobs", "acted", "failed", "orphaned_jobs", "requests",
    "seconds"}; records a ReconcileAttempt of kind "resync" (and one per job that was acted on or failed).
    `orphaned_jobs` counts job UIDs that have objects labelled with this instance but no job row here. A job whose
    pass raises something unexpected is logged with its id and counted in "failed"; the other jobs go on."""
    started = time.monotonic()
    before = objects.requests.total()
    stats = {"jobs": 0, "acted": 0, "failed": 0}
    outcome, reason, message = ReconcileOutcome.OK, "", ""
    try:
        api = kube_client.api_client(cluster)
        served = set(cluster.served_apis or [])
        if not served:
            from . import probe

            served = set(probe.probe_cluster(cluster).served_apis or [])
        try:
            snap = snapshot(api, served)
        except ApiException as exc:
            if exc.status != 404:
                raise
            # A kind the last probe listed is not served any more (the cluster changed version under us): probe
            # again and list what it serves now; the jobs pinned to the old version then move (reconcile/jobs.py).
            from . import probe

            served = set(probe.probe_cluster(cluster).served_apis or [])
            snap = snapshot(api, served)
        known = {str(u) for u in GangJob.objects.filter(cluster=cluster, uid__in=list(snap.by_uid))
                 .values_list("uid", flat=True)}
        # Objects of this install whose job row is gone: reported, never deleted (deleting needs a human).
        stats["orphaned_jobs"] = len(set(snap.by_uid) - known)
        # The cluster row is the one in hand: not joined per job (its kubeconfig is decrypted per loaded row).
        for job, recorded in chunked(jobs_to_resync(cluster).select_related(None).select_related("queue")):
            job.cluster = cluster
            stats["jobs"] += 1
            try:
                acted, failed = resync_job(job, api, snap, recorded)
            except Exception:  # a bug in one job's pass must not stop the resync of the others
                log.exception("resync of cluster %s: job %s (%s) raised unexpected", cluster.name, job.pk, job)
                acted, failed = False, True
            stats["acted"] += acted
            stats["failed"] += failed
    except KubeError as exc:
        outcome = (ReconcileOutcome.TRANSIENT_ERROR if isinstance(exc, TransientKubeError)
                   else ReconcileOutcome.TERMINAL_ERROR)
        reason, message = exc.reason, exc.message
        Cluster.objects.filter(pk=cluster.pk).update(
            health=ClusterHealth.FORBIDDEN if exc.reason == "Forbidden" else ClusterHealth.UNREACHABLE,
            health_message=exc.message[:2000], last_probe_at=timezone.now())
    except Exception as exc:  # not a cluster answer: a bug; recorded on the resync attempt, the jobs left wait
        log.exception("resync of cluster %s raised unexpected", cluster.name)
        outcome, reason, message = ReconcileOutcome.TRANSIENT_ERROR, INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"
    stats["requests"] = objects.requests.total() - before
    stats["seconds"] = round(time.monotonic() - started, 3)
    ReconcileAttempt.objects.create(
        kind=ReconcileAttempt.KIND_RESYNC, cluster=cluster, duration_ms=int(stats["seconds"] * 1000),
        outcome=outcome, reason=reason, message=message[:2000],
        actions=[f"{k}={v}" for k, v in stats.items()])
    return stats


def resync_all() -> dict[str, dict]:
    """Resync every cluster; one cluster's failure never stops the others. Returns stats per cluster name."""
    stats = {}
    for cluster in Cluster.objects.all():
        try:
            stats[cluster.name] = resync_cluster(cluster)
        except Exception as exc:  # e.g. the resync attempt row could not be written: log, go on
            log.exception("resync of cluster %s raised unexpected", cluster.name)
            stats[cluster.name] = {"failed": 1, "error": f"{type(exc).__name__}: {exc}"[:500]}
    return stats
