"""Glue between the cluster watches and the jobs: what to watch in a cluster, and what to do on a change.

`observe_job` is the watcher's `on_change`: it records the job's phase from the watch cache at once (no API call,
`status.apply_observation`); when one of the job's gang objects or Jobs was deleted under a running job, or its
backend plugin asks for a pass (`backend_wants_pass`: Kueue admitted or evicted it), it
enqueues `scheduling.reconcile_job`, which recreates what is missing, and when the job ended or is being cancelled,
the same task marked `cleanup` (its shard's clean-up queue), which deletes what the job no longer needs. Acting
stays with the reconciler; the watch only observes, and only the job's own objects (`select`,
reconcile/ownership.py). `finished_with` tells the watcher which cached jobs gangweb is done with, so its cache
follows the live jobs (reconcile/cluster_watcher.py).
"""
from __future__ import annotations

import functools
import logging
import time
import uuid

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection, connections, router

from ..backends import registry
from ..choices import TERMINAL_PHASES, DesiredState
from ..db.statements import fetch, joined, joined_instance
from ..models import Cluster, ClusterNodes, GangJob
from ..observe import phase_entries
from ..observe.evidence import JobObjects
from ..work import enqueue
from . import ownership, refusals, status
from .cluster_watcher import ClusterWatcher
from .jobs import repairs

log = logging.getLogger(__name__)

LOCK_RETRIES = 8  # quick tries (a SQLite lock) before a database error is logged as an outage
DB_OUTAGE_SECONDS = 120  # how long an observation waits for the database (a PostgreSQL restart takes seconds)


def gang_kinds(cluster: Cluster) -> list:
    """Gang kinds to watch in `cluster`: `registry.gang_kinds` of its probed APIs (every plugin's when never
    probed)."""
    return registry.gang_kinds(set(cluster.served_apis or []) or None)


def backend_of(job: GangJob):
    """The job's backend plugin instance (`registry.plugin_for`): by the name recorded at dispatch, else the highest
    version of the template's family the cluster serves (a watch event can arrive before the first pass saved the
    name); None when there is none."""
    cls = registry.plugin_for(job.backend_plugin, job.resolved_spec.get("backend", ""), job.cluster.served_apis or [])
    return cls() if cls is not None else None


def select(job_objects: JobObjects, backend, job: GangJob) -> JobObjects:
    """The job's JobObjects as the reconciler passes them: only what is the job's own (`ownership.select`). The cache
    holds whatever carries the job's label anywhere in the cluster."""
    return ownership.select(job_objects, backend, job)


# phase_reasons of an observation that the reconciler must act on at once (not at the next resync): a broken gang
# object set is replaced, a partial gang released once its grace is over (the pass counts it down). Not
# WaitingForGangObject: the pass whose create was throttled comes back after the server's Retry-After itself.
ACT_ON = frozenset({phase_entries.REASON_REPLACING, phase_entries.REASON_PARTIAL_GANG})


def observe_job(job_uid: str, job_objects: JobObjects, deleted: bool, cluster_id: int | None = None) -> bool:
    """Record what the watch cache holds of one job; enqueue a reconcile when its gang objects or Jobs were deleted,
    started terminating or had their spec edited (`deleted`, reconcile/cluster_watcher.py `edited`), or when the
    observation says the reconciler has to act (ACT_ON: a gang being replaced, a partial gang; not while a repair of the
    job is held back, jobs/repairs.py); and its clean-up (the same task with
    `cleanup`, on the shard's clean-up queue) when this observation ended it (Succeeded, Failed) or it is being
    cancelled: a finished job's gang objects go at once, not at the capped resync's turn behind the dispatch
    backlog. Waits out a database outage (`with_database`); a broker that cannot take the task is logged and left to
    the periodic resync, so the watch goes on either way.

    Returns True when the job must be observed again soon although nothing changes in the cluster (the watcher
    does, reconcile/cluster_watcher.py `LOOK_AGAIN_SECONDS`): `awaiting_record`, the cache holds a Job of the job's that
    its row does not record yet, so its pods were left out of this observation."""
    job = with_database(lambda: _observe(job_uid, job_objects, cluster_id))
    if job is None:
        return False
    again = awaiting_record(job, job_objects)
    ended = job.phase in TERMINAL_PHASES and job.cleaned_up_at is None  # `_observe` skips jobs that had ended
    cleanup = ended or job.desired_state == DesiredState.CANCEL
    if not (cleanup or deleted or job.phase_reason in ACT_ON or backend_wants_pass(job, job_objects)):
        return again
    if not (cleanup or deleted) and repairs.holding(job):
        return again  # a repair that does not hold waits out its backoff: its pass is queued already (jobs/repairs.py)
    try:
        enqueue.send(enqueue.RECONCILE_JOB, job.pk, **({"kwargs": {"cleanup": True}} if cleanup else {}))
    except Exception as exc:  # Redis down: kombu's OperationalError after its publish retries
        log.warning("watch: could not queue a reconcile of job %s (%s: %s); the resync will", job.pk,
                    type(exc).__name__, exc)
    return again


def backend_wants_pass(job: GangJob, job_objects: JobObjects) -> bool:
    """True when the job's backend plugin asks the reconciler to act on what the watch sees (`wants_pass`: Kueue
    admitted or evicted the Workload, so its Jobs must be un-suspended or suspended, or an evicted Workload's pods
    are gone and its reservation is to be cleared). A finished or unknown-plugin job: False."""
    if job.phase in TERMINAL_PHASES or not job.backend_plugin:
        return False
    try:
        plugin = registry.by_name(job.backend_plugin)()
    except KeyError:
        return False
    if not plugin.holds_pods_until_admitted:
        return False
    name = status.current_gang_name(job)
    gang = [g for g in job_objects.gang if (g.get("metadata") or {}).get("name") == name]
    return plugin.wants_pass(gang, job_objects.owners, job_objects.pods)


def awaiting_record(job: GangJob, job_objects: JobObjects) -> bool:
    """True when the watch cache holds a Job (batch/v1) in the job's namespace, labelled for it and not being
    deleted, whose UID the job's row (`job`, as the observation wrote it) does not record under its name.

    That is a pass in flight: it created the Job, and records its UID only with its status write, at its end
    (reconcile/jobs/reconciler.py `create_members`). Until then `ownership.select` leaves the Job and its pods out,
    so an observation meanwhile sees the gang objects alone (the scheduler's word on the PodGroup, not its pods),
    and the pass's write then records what the pass read, from before the pods existed. The pods' conditions are
    written once (kube-scheduler does not rewrite an unchanged PodScheduled=False), so no later event would bring
    them in: the watcher observes such a job again until its row records the Job (or LOOK_AGAIN_TRIES). A Job
    that is never recorded (a look-alike made by someone else) costs those tries and nothing more."""
    recorded = job.owner_uids
    if recorded is None or job.phase in TERMINAL_PHASES:
        return False  # a row from before UIDs were recorded trusts every Job in its namespace; an ended job is done
    for owner in job_objects.owners:
        meta = owner.get("metadata") if isinstance(owner.get("metadata"), dict) else {}
        if (ownership.in_namespace(owner, job.namespace) and not meta.get("deletionTimestamp") and meta.get("uid")
                and recorded.get(meta.get("name")) != meta["uid"]):
            return True
    return False


def with_database(fn):
    """`fn()`, tried again while the database refuses, for up to DB_OUTAGE_SECONDS; then its error is raised.

    Two causes, one cure: SQLite (a laptop, or the test database shared between threads) reports a concurrent
    writer as an OperationalError instead of waiting; PostgreSQL restarting or a cut connection raises
    OperationalError / InterfaceError, and Django closes the broken connection only at the end of a request,
    which a watcher thread never reaches (`close_old_connections()` before each try closes it here, and the next
    query connects anew). The callers' writes are idempotent observations, so trying again is harmless; the
    dispatcher's other dirty jobs wait meanwhile, as they would have nothing to write to."""
    deadline = time.monotonic() + DB_OUTAGE_SECONDS
    attempt = 0
    while True:
        close_old_connections()
        try:
            return fn()
        except (OperationalError, InterfaceError) as exc:
            if time.monotonic() >= deadline:
                raise
            if attempt == LOCK_RETRIES:
                log.warning("watch: database unavailable (%s); retrying for up to %d s", exc, DB_OUTAGE_SECONDS)
            time.sleep(min(0.05 * (attempt + 1), 2.0))
            attempt += 1


@functools.lru_cache(maxsize=8)
def _job_statement(alias: str) -> tuple[str, tuple]:
    """(SQL, columns) of the job with a given UID joined with its cluster (`statements.joined`)."""
    return joined(alias, GangJob, ("cluster",), "uid")


def job_with_cluster(job_uid: str) -> GangJob | None:
    """The job a `gangweb.io/job-uid` label value names, with its cluster loaded (`job.cluster`; the queue is not),
    or None (no such job, or not a UUID).

    One statement of fixed text (built once from the models' metadata; rows converted by Django's own converters and
    built with `Model.from_db`: `scheduling/db/statements.py`), not a queryset: building and compiling the
    equivalent `select_related` query cost ~2 ms of Python, about 40 % of a watch observation's own CPU (bench/:
    watch churn; the watcher observes every job that changed)."""
    try:
        uid = uuid.UUID(str(job_uid))
    except ValueError:
        return None
    alias = router.db_for_read(GangJob)
    sql, cols = _job_statement(alias)
    rows = fetch(alias, sql, [GangJob._meta.get_field("uid").get_db_prep_value(uid, connections[alias])], cols)
    if not rows:
        return None
    return joined_instance(alias, GangJob, ("cluster",), rows[0])


def _observe(job_uid: str, job_objects: JobObjects, cluster_id: int | None = None) -> GangJob | None:
    job = job_with_cluster(job_uid)
    if job is None or job.phase in TERMINAL_PHASES:
        return None
    if cluster_id is not None and job.cluster_id != cluster_id:
        return None  # the job moved to another cluster (reconcile/moves.py): what is left here is not its state
    backend = backend_of(job)
    objects = select(job_objects, backend, job)
    # The cache's objects go along (`raw`): the status write selects them again against the row as locked, whose
    # recorded UIDs may be newer than this read of it (a pass that created the job's Job and wrote meanwhile).
    # The Warning Events (why_pending.said) are left to the passes (reconcile/waiting_events.py): kept as last read.
    status.observe_objects(job, backend, objects, refusals.read(job, objects.owners, objects.pods), raw=job_objects)
    return job


def save_capacity(cluster_pk: int, summary: dict) -> None:
    """Record what the cluster's schedulable nodes offer: `Cluster.capacity` (observe.capacity.summarize) and,
    when the summary carries `node_list` (observe.capacity.node_list), the per-node rows in `ClusterNodes`."""
    summary = dict(summary)
    has_list = "node_list" in summary
    node_list = summary.pop("node_list", None)

    def write():
        Cluster.objects.filter(pk=cluster_pk).update(capacity=summary)
        if has_list:
            ClusterNodes.objects.update_or_create(cluster_id=cluster_pk, defaults={"nodes": node_list or []})

    with_database(write)


def observers() -> int:
    """Observer threads per watched cluster: GANGWEB_WATCH_OBSERVERS on PostgreSQL, 1 on SQLite (one writer at a
    time: parallel observations would only meet its lock)."""
    return max(1, settings.GANGWEB_WATCH_OBSERVERS) if connection.vendor == "postgresql" else 1


def watcher_for(cluster: Cluster, api=None, on_change=observe_job, may_write=None) -> ClusterWatcher:
    """A (not yet started) ClusterWatcher of `cluster` that observes jobs on every change (from `observers()`
    threads) and keeps `Cluster.capacity` up to date from its Nodes. `may_write()` (when given) gates every write:
    the watch command passes its lease's `Claims.valid`, so a watcher that may have lost its lease records nothing."""
    if api is None:
        from ..kube.client import api_client

        api = api_client(cluster)
    if on_change is observe_job:  # a job that moved to another cluster is not observed from this one
        on_change = functools.partial(observe_job, cluster_id=cluster.pk)
    return ClusterWatcher(cluster.name, api, gang_kinds(cluster), settings.GANGWEB_INSTANCE, on_change,
                          on_capacity=functools.partial(save_capacity, cluster.pk), on_exit=close_thread_connections,
                          finished_with=finished_with, may_write=may_write, observers=observers())


SWEEP_CHUNK = 500  # job UIDs per query of `finished_with`


def finished_with(job_uids: list[str]) -> set[str]:
    """Of these job-UID label values (from the watch cache), the ones the watch may forget: jobs that ended and
    whose objects gangweb cleaned up (`cleaned_up_at`), and values that name no job of this database (not a UUID,
    or no row: orphans, or look-alike labels). Raises the database's errors (the watcher logs them and asks again
    at its next sweep)."""
    close_old_connections()
    valid = {}
    for value in job_uids:
        try:
            valid[str(uuid.UUID(value))] = value
        except (ValueError, TypeError, AttributeError):
            continue
    done = {v for v in job_uids if v not in valid.values()}
    keys = list(valid)
    for start in range(0, len(keys), SWEEP_CHUNK):
        chunk = keys[start:start + SWEEP_CHUNK]
        live = set()
        for uid, phase, cleaned in GangJob.objects.filter(uid__in=chunk).values_list("uid", "phase",
                                                                                    "cleaned_up_at"):
            if not (phase in TERMINAL_PHASES and cleaned is not None):
                live.add(str(uid))
        done |= {valid[k] for k in chunk if k not in live}
    return done


def close_thread_connections() -> None:
    """Close the calling thread's database connections. Django opens one per thread and closes it only at the end
    of a request; a watcher thread is no request, so it closes its own as it ends (a connection left open keeps
    PostgreSQL from dropping the database, and holds a server slot until the process exits)."""
    connections.close_all()
