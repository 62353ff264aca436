"""Periodic resync of a cluster: LIST each kind once, reconcile only the jobs whose objects differ.

Per cluster and pass: one LIST per gang kind the cluster serves (of the registered backends), plus Jobs,
Services and Pods, all across namespaces and selected by `gangweb.io/instance=<this install>`. So the number
of LISTs is a constant (at most 8 with today's four backends) whatever the number of jobs, each read in pages of
settings.GANGWEB_LIST_PAGE_SIZE objects (one request a page, kube/objects.py `list_pages`); the pages are filed on
disk as they come (reconcile/spilled.py), so the resync's memory does not grow with the cluster. Writes are made
only for jobs whose objects differ from the desired state, and job rows are written only when their status
changed. Each job's pass is the same `run_pass` as the per-job task, fed with its slice of the snapshot.

Jobs covered: every job of the cluster that is not finished, plus finished jobs whose objects were not yet
cleaned up, plus finished jobs whose retention is over and whose Jobs and pods are not yet removed
(reconcile/retention.py), plus finished jobs marked cleaned up whose own objects the snapshot still holds (a pass
created them after the clean-up): their marks are cleared and they are passed first (reconcile/left_behind.py).
A job that fails transiently here is recorded and simply looked at again on the next resync.

Under a backlog (resync_all from the periodic task):
- one resync per cluster at a time: a database lease (`models.leases`, works on SQLite and PostgreSQL, decided on
  the database's clock, whatever the hosts' clocks say) that lapses after `LEASE_SECONDS` (60 s) if its holder is
  killed (a heartbeat thread renews it while the pass runs); a
  resync that finds it held skips that cluster;
- bounded: at most `max_jobs` job passes and `budget_seconds` of them per run, going on next run from the job id
  where this one stopped (kept in the lease's cursor), so every job's turn comes;
- it hands a backlog of never-dispatched jobs to batch tasks rather than passing them one by one
  (reconcile/resync_handoff.py);
- it leaves to their own task the jobs a task works on now (a live claim) or whose task is surely still queued
  (`task_queued_at` less than `grace_seconds` ago); a task that gave up released its claim, so its jobs are the
  next resync's at once (`jobs_to_resync`);
- Celery's SoftTimeLimitExceeded is never swallowed (recorded on the resync attempt, then raised again), and a
  database connection broken by an error inside a driver call is closed before anything else uses it (`dbconn`).
A snapshot is older than what a pass may learn from the database: a job whose row changed after the snapshot was
listed is read afresh, and no pass concludes from a snapshot that anything is gone (`JobReconciler.confirm_absence`).
"""
from __future__ import annotations

import logging
import time
from contextlib import ExitStack
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone
from kubernetes.client.rest import ApiException

from ..choices import ACTIVE_PHASES, ClusterHealth, GangPhase, ReconcileOutcome
from ..db import clock as dbclock
from ..db import connections as dbconn
from ..kube import client as kube_client
from ..kube import objects
from ..kube.errors import KubeError, TransientKubeError, describe
from ..models import Cluster, GangJob, PhaseTransition, ReconcileAttempt, leases
from . import jobs as job_reconcile
from . import left_behind, resync_handoff, stranded
from .jobs import claims
from .observed import Snapshot, snapshot  # noqa: F401 -- snapshot: named from here by the batch and bench code
from .spilled import SpilledSnapshot, spilled_snapshot

log = logging.getLogger(__name__)

INTERNAL_ERROR = "InternalError"  # reason of a resync attempt cut short by an unexpected exception (a bug)
TIME_LIMIT = "TimeLimit"  # reason of a resync attempt cut short by Celery's soft time limit
# A resync holds a short lease that a heartbeat renews while the pass runs: a worker killed mid-pass releases
# nothing, and the next resync of that cluster may start once the lease has lapsed (at most LEASE_SECONDS later,
# not the pass's hard time limit).
LEASE_SECONDS = 60
LEASE_RENEW_SECONDS = 15


def lease_name(cluster: Cluster) -> str:
    """The lease that lets one resync of `cluster` run at a time."""
    return f"resync:cluster:{cluster.pk}"


JOB_CHUNK = 200  # job rows loaded at a time by a resync (their JSON columns are most of a row's size)


def chunked(queryset, size: int = JOB_CHUNK, ordered: list[int] | None = None):
    """Yield (job, [(phase, at, attempt, inferred)] recorded for it) for the rows of `queryset`, `size` at a time by
    primary key: the ids first (one query, unless given in `ordered`: then in that order), then two queries per
    chunk (rows, then their timelines), so a resync of 10,000 jobs never holds 10,000 model instances with their
    JSON. Unlike `.iterator()` it needs no server-side cursor held open across the passes' own writes and
    transactions. Rows deleted meanwhile are skipped."""
    ids = ordered if ordered is not None else list(queryset.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), size):
        chunk = ids[start:start + size]
        rows = {job.pk: job for job in queryset.filter(pk__in=chunk)}
        recorded: dict[int, list] = {}
        # Read after the rows, so a row's `updated_at` vouches for its timeline (status.locked_row); the same rows
        # as `status.read_timeline`, per job.
        for job_id, *entry in PhaseTransition.objects.filter(job_id__in=chunk).values_list(
                "job_id", "phase", "at", "attempt", "inferred"):
            recorded.setdefault(job_id, []).append(tuple(entry))
        for pk in chunk:
            if pk in rows:
                yield rows[pk], recorded.get(pk, [])


def jobs_to_resync(cluster: Cluster, grace_seconds: float = 0):
    """Jobs of `cluster` that need looking at: unfinished ones, finished ones not yet cleaned up, and finished ones
    whose retention is over (`remove_after` passed, or never set) and whose Jobs and pods were not yet removed.

    With `grace_seconds`, not those left to a task: a task works on it now (a live claim, reconcile/jobs/claims.py),
    or one was queued for it (a submit, a cancel, an edit: `task_queued_at`) less than `grace_seconds` ago and has
    not taken it yet. A task that took a job and gave up on it (the cluster was down) released its claim and the
    job has no `task_queued_at` any more: the resync takes it at once; so it does a job whose worker died once its
    claim lapsed, and one whose task was lost with the broker after the grace. Every time is compared on the
    database's clock (`now()` in the statement)."""
    rows = (GangJob.objects.filter(cluster=cluster)
            .filter(Q(phase__in=list(ACTIVE_PHASES)) | Q(cleaned_up_at__isnull=True)
                    | Q(objects_removed_at__isnull=True, remove_after__lte=Now())
                    | Q(objects_removed_at__isnull=True, remove_after__isnull=True,
                        phase__in=[GangPhase.SUCCEEDED, GangPhase.FAILED]))
            .select_related("cluster", "queue"))
    if grace_seconds > 0:
        queued = Q(task_queued_at__isnull=False, task_queued_at__gt=Now() - timedelta(seconds=grace_seconds))
        rows = rows.exclude(queued | claims.held())
    return rows


def changed_since(job: GangJob, listed_at: float) -> bool:
    """True when the job's row was written after a snapshot was listed (`listed_at`, this host's time.time()): the
    snapshot may not hold what that change led to (objects created or deleted since), so the job is read afresh
    instead. `updated_at` is on the database's clock (models/fields.py): `listed_at` is put on it first."""
    updated = job.updated_at or job.created_at
    return updated is not None and updated >= dbclock.from_host(listed_at)


def resync_job(job: GangJob, api, snap: Snapshot | SpilledSnapshot, recorded: list) -> tuple[bool, bool]:
    """One job's pass within a resync, fed with its slice of `snap` (or, when its row changed after `snap` was
    listed, with its objects read afresh). Returns (acted, failed). A transient error was recorded on the job by the
    pass (NamespaceNotFound, Forbidden, ...) and counts as failed; the next resync looks again."""
    try:
        backend = job_reconcile.backend_for(job, api)
        # Popped: what a job's pass has seen is garbage once the pass ends.
        observed = snap.take(job, backend)
        if changed_since(job, snap.listed_at):
            observed = None  # the pass reads the job's objects itself
        else:
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


def _order_from(ids: list[int], cursor: int) -> list[int]:
    """`ids` (ascending) starting after `cursor`, then from the start: where the previous bounded run stopped."""
    later = [i for i in ids if i > cursor]
    return later + ids[:len(ids) - len(later)]


def resync_cluster(cluster: Cluster, *, grace_seconds: float = 0, max_jobs: int | None = None,
                   budget_seconds: float | None = None) -> dict:
    """One resync pass over `cluster`, unless another is running (then {"skipped": 1} and nothing else is done).

    Returns {"jobs", "acted", "failed", "left", "orphaned_jobs", "reopened", "requests", "seconds"}; records a
    ReconcileAttempt of kind "resync" (and one per job that was acted on or failed). At most `max_jobs` (default
    `settings.GANGWEB_RESYNC_MAX_JOBS`) job passes and `budget_seconds` (default `GANGWEB_RESYNC_MAX_SECONDS`) of
    them; `left` counts the jobs left for the next run, which starts after the last job this one looked at.
    `grace_seconds`: see `jobs_to_resync`. `orphaned_jobs` counts job UIDs that have objects labelled with this
    instance but no job row here; `reopened` the finished jobs whose clean-up left objects behind, made due again
    and passed first (reconcile/left_behind.py). A job whose pass raises something unexpected is logged with its id
    and counted in "failed"; the other jobs go on. Raises SoftTimeLimitExceeded (after recording the attempt) when
    Celery's soft time limit lands during the pass."""
    name = lease_name(cluster)
    token = leases.acquire(name, LEASE_SECONDS)
    if token is None:
        log.info("resync of cluster %s skipped: another resync of it is running", cluster.name)
        return {"skipped": 1}
    cursor = None
    try:
        with leases.Heartbeat.of_lease(name, token, LEASE_SECONDS, LEASE_RENEW_SECONDS) as heartbeat:
            stats, cursor = _resync_cluster(cluster, grace_seconds,
                                            settings.GANGWEB_RESYNC_MAX_JOBS if max_jobs is None else max_jobs,
                                            settings.GANGWEB_RESYNC_MAX_SECONDS if budget_seconds is None
                                            else budget_seconds, name, heartbeat.lost)
    finally:
        dbconn.discard_if_broken()
        leases.release(name, token, cursor)
    return stats


def cluster_snapshot(cluster: Cluster, api) -> SpilledSnapshot:
    """The resync's snapshot of `cluster`: one paginated LIST per kind it serves (its probed `served_apis`; probed now
    when it has none), filed on disk page by page (reconcile/spilled.py), so its memory does not grow with the
    cluster. A kind the last probe listed that is not served any more (the cluster changed version under us: a LIST
    answered 404) makes it probe again and list what it serves now; the jobs pinned to the old version then move
    (reconcile/jobs/reconciler.py). The caller closes the snapshot."""
    from . import probe

    served = set(cluster.served_apis or []) or set(probe.probe_cluster(cluster).served_apis or [])
    try:
        return spilled_snapshot(api, served)
    except ApiException as exc:
        if exc.status != 404:
            raise
        return spilled_snapshot(api, set(probe.probe_cluster(cluster).served_apis or []))


def orphans_and_suspects(cluster: Cluster, snap: SpilledSnapshot) -> tuple[int, list[str]]:
    """(how many job UIDs have objects in `snap` but no job row of `cluster` here, the UIDs of finished jobs marked
    cleaned up whose objects `snap` still holds: `left_behind.suspects`). One query per `spilled.UID_CHUNK` UIDs."""
    orphans, suspects = 0, []
    for uids in snap.uids():
        marks = {str(u): (cleaned, removed) for u, cleaned, removed in GangJob.objects.filter(
            cluster=cluster, uid__in=uids).values_list("uid", "cleaned_up_at", "objects_removed_at")}
        orphans += len(set(uids) - set(marks))
        suspects += left_behind.suspects(snap, {u: m for u, m in marks.items() if m[0] is not None})
    return orphans, suspects


def _resync_cluster(cluster: Cluster, grace_seconds: float, max_jobs: int, budget_seconds: float,
                    lease: str, lease_lost=None) -> tuple[dict, int | None]:
    """The body of `resync_cluster` under its lease. Returns (stats, the lease cursor to keep). Stops before the
    next job once `lease_lost` (a threading.Event) is set: another resync of the cluster holds the lease now."""
    started = time.monotonic()
    before = objects.requests.total()
    stats = {"jobs": 0, "acted": 0, "failed": 0, "left": 0}
    outcome, reason, message = ReconcileOutcome.OK, "", ""
    cursor, interrupted, ids = None, None, []
    stack = ExitStack()  # the snapshot's file, removed however the pass ends
    try:
        api = kube_client.api_client(cluster)
        # What moved jobs left here while the cluster could not be asked goes first (reconcile/stranded.py).
        stats["stranded_left"] = stranded.clean(cluster, api)
        snap = stack.enter_context(cluster_snapshot(cluster, api))
        # Objects of this install whose job row is gone: reported, never deleted (deleting needs a human); and
        # finished jobs whose clean-up left objects behind (a pass that created after it): cleaned up again, first.
        stats["orphaned_jobs"], suspects = orphans_and_suspects(cluster, snap)
        reopened = left_behind.reopen(cluster, api, snap, suspects)
        stats["reopened"] = len(reopened)
        # The cluster row is the one in hand: not joined per job (its kubeconfig is decrypted per loaded row).
        rows = jobs_to_resync(cluster, grace_seconds).select_related(None).select_related("queue")
        ids = _order_from(list(rows.order_by("pk").values_list("pk", flat=True)), leases.cursor_of(lease))
        due, again = set(ids), set(reopened)
        first = [i for i in reopened if i in due]  # not when a task holds the job now: its pass cleans up
        ids = [i for i in ids if i not in again]
        fresh = resync_handoff.never_dispatched(ids) if len(ids) >= resync_handoff.HAND_OFF_AT else set()
        if len(fresh) >= resync_handoff.HAND_OFF_AT:  # a backlog of submits: batches pass them (resync_handoff.py)
            handed = resync_handoff.hand_off(fresh)  # what the broker refused stays this resync's own
            stats["handed_off"] = len(handed)
            ids = [i for i in ids if i not in handed]
        turn = first + ids[:max_jobs]
        for job, recorded in chunked(GangJob.objects.select_related("queue"), ordered=turn):
            if stats["jobs"] and time.monotonic() - started > budget_seconds:
                break  # at least one job per run: every job's turn comes, however slow the snapshot
            if lease_lost is not None and lease_lost.is_set():
                log.warning("resync of cluster %s stopped after %s jobs: its lease was lost", cluster.name,
                            stats["jobs"])
                break
            job.cluster = cluster
            stats["jobs"] += 1
            cursor = cursor if job.pk in first else job.pk  # the cursor follows the jobs in their order
            try:
                acted, failed = resync_job(job, api, snap, recorded)
            except SoftTimeLimitExceeded:
                raise
            except Exception:  # a bug in one job's pass must not stop the resync of the others
                log.exception("resync of cluster %s: job %s (%s) raised unexpected", cluster.name, job.pk, job)
                dbconn.discard_if_broken(force=True)  # an error inside a driver call: never reuse that connection
                acted, failed = False, True
            stats["acted"] += acted
            stats["failed"] += failed
    except SoftTimeLimitExceeded as exc:
        log.warning("resync of cluster %s hit the task's soft time limit after %s jobs", cluster.name, stats["jobs"])
        outcome, reason, message = ReconcileOutcome.TRANSIENT_ERROR, TIME_LIMIT, "stopped by the soft time limit"
        interrupted = exc
        dbconn.discard_if_broken(force=True)  # it may have landed inside a database call
    except KubeError as exc:
        outcome = (ReconcileOutcome.TRANSIENT_ERROR if isinstance(exc, TransientKubeError)
                   else ReconcileOutcome.TERMINAL_ERROR)
        reason, message = exc.reason, exc.message
        Cluster.objects.filter(pk=cluster.pk).update(
            health=ClusterHealth.FORBIDDEN if exc.reason == "Forbidden" else ClusterHealth.UNREACHABLE,
            health_message=exc.message[:2000], last_probe_at=timezone.now())
    except Exception as exc:  # not a cluster answer: a bug; recorded on the resync attempt, the jobs left wait
        log.exception("resync of cluster %s raised unexpected", cluster.name)
        dbconn.discard_if_broken()
        outcome, reason, message = ReconcileOutcome.TRANSIENT_ERROR, INTERNAL_ERROR, describe(exc)
    finally:
        stack.close()
    stats["left"] = len(ids) - (ids.index(cursor) + 1 if cursor in ids else 0)
    if cursor is not None and not stats["left"]:
        cursor = 0  # every job looked at: the next run starts from the first one again
    stats["requests"] = objects.requests.total() - before
    stats["seconds"] = round(time.monotonic() - started, 3)
    ReconcileAttempt.objects.create(
        kind=ReconcileAttempt.KIND_RESYNC, cluster=cluster, duration_ms=int(stats["seconds"] * 1000),
        outcome=outcome, reason=reason, message=message[:2000],
        actions=[f"{k}={v}" for k, v in stats.items()])
    if interrupted is not None:
        raise interrupted
    return stats, cursor


def resync_cluster_id(cluster_id: int, grace_seconds: float = 0) -> dict | None:
    """`resync_cluster` of the cluster with this id (the `scheduling.resync_cluster` task); None, logged, when it no
    longer exists. SoftTimeLimitExceeded is raised again after being recorded (`resync_cluster`)."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        log.info("resync: cluster %s no longer exists", cluster_id)
        return None
    return resync_cluster(cluster, grace_seconds=grace_seconds)


def resync_all(grace_seconds: float = 0, max_jobs: int | None = None,
               budget_seconds: float | None = None) -> dict[str, dict]:
    """Resync every cluster (`resync_cluster` with these limits); one cluster's failure never stops the others.
    Returns stats per cluster name. SoftTimeLimitExceeded ends the run (raised again)."""
    stats = {}
    for cluster in Cluster.objects.all():
        try:
            stats[cluster.name] = resync_cluster(cluster, grace_seconds=grace_seconds, max_jobs=max_jobs,
                                                 budget_seconds=budget_seconds)
        except SoftTimeLimitExceeded:
            raise
        except Exception as exc:  # e.g. the resync attempt row could not be written: log, go on
            log.exception("resync of cluster %s raised unexpected", cluster.name)
            dbconn.discard_if_broken()
            stats[cluster.name] = {"failed": 1, "error": describe(exc, 500)}
    return stats
