"""A batch of jobs (bulk submit) reconciled together: one snapshot of each cluster's objects for the whole batch,
their backends recorded at once, then one pass per job from a few threads."""
from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections, connection, connections

from ...backends import discovery
from ...choices import DesiredState, GangPhase, ReconcileOutcome
from ...kube import client as kube_client
from ...kube import objects, throttle
from ...kube.errors import CLUSTER_UNREACHABLE, KubeError, TransientKubeError
from ...models import GangJob, ReconcileAttempt
from .. import status
from ..observed import Snapshot, snapshot
from . import claims
from .backend import backend_for, record_backends
from .passes import PassResult, load, run_pass

log = logging.getLogger(__name__)


def _record_not_attempted(job: GangJob, err: KubeError) -> PassResult:
    """Record on a batch's job that its pass was not attempted (its cluster failed for the batch): the error and
    an attempt row. Returns that as the job's PassResult (`error` is `err`)."""
    result = PassResult(outcome=ReconcileOutcome.TRANSIENT_ERROR if isinstance(err, TransientKubeError)
                        else ReconcileOutcome.TERMINAL_ERROR, reason=err.reason,
                        message=f"not attempted: {err.message}"[:2000], error=err)
    status.record_error(job, err.reason, result.message, err.status)
    ReconcileAttempt.objects.create(kind=ReconcileAttempt.KIND_JOB, job=job, cluster_id=job.cluster_id,
                                    outcome=result.outcome, reason=err.reason, message=result.message)
    return result


def reconcile_claimed(job_ids: list[int], *, task_id: str = "", waiting_only: bool = False) -> dict[str, int]:
    """A bulk submit's batch as the `scheduling.reconcile_jobs` task runs it: the jobs no other live task holds are
    claimed under `task_id`, kept claimed while `reconcile_many` reconciles them, and released when it ends however it
    ends (reconcile/jobs/claims.py): a job the batch gave up on (its cluster was down: "not attempted") is then the
    next resync's at once, and the jobs of a worker killed mid-batch are the resync's once their claims lapsed. A job
    another live task holds is left to it. `waiting_only` (a batch the resync handed off, reconcile/resync_handoff.py):
    only the jobs still never dispatched (Submitted, run asked) are taken; the others were dispatched meanwhile.
    Returns `reconcile_many`'s counts, plus "held" (jobs left to another task)."""
    if waiting_only:
        job_ids = sorted(GangJob.objects.filter(pk__in=job_ids, phase=GangPhase.SUBMITTED,
                                                desired_state=DesiredState.RUN).values_list("pk", flat=True))
    token = claims.token_for(task_id)
    with claims.holding(job_ids, token) as ids:
        counts = reconcile_many(ids)
    counts["held"] = len(set(job_ids)) - len(ids)
    return counts


def reconcile_many(job_ids: list[int], threads: int | None = None,
                   results: dict[int, PassResult] | None = None) -> dict[str, int]:
    """Reconcile a batch of jobs (bulk submit), one pass each.

    Reads are shared: per cluster the backends of the batch's new jobs are recorded before anything is created (one
    UPDATE per plugin), then one snapshot (one LIST per kind across namespaces, as the resync does, selected by the
    UIDs of the batch's jobs that had a backend already; none when there are none) feeds every job's pass, so a
    batch of N jobs costs a constant number of reads plus the creates. The passes then run from `threads` threads
    (default `settings.GANGWEB_RECONCILE_THREADS`), each taking every n-th job of the batch with a database
    connection of its own, closed when it is done: a pass mostly waits on the API server's creates and on
    PostgreSQL, and the jobs of a batch are independent (each pass locks only its own row). Inside a transaction
    (tests) the passes run here, one after the other, since other connections could not see its rows. A job's error
    is recorded on it and does not stop the batch; when a cluster cannot be reached its remaining jobs get that
    error without more connection attempts (the periodic resync retries them). Returns counts {"ok", "failed",
    "requeued"}; when `results` is given, it is filled with each job's PassResult by id (a transient error, the
    pass's or the batch's, in `error`), for a caller whose retry policy follows one of the jobs
    (reconcile/jobs/coalesce.py).

    A batch's never-dispatched jobs are not listed: a job whose backend this batch recorded cannot have anything
    gangweb made in the cluster (`record_backends`), so a batch of new submits sends no LIST at all and starts
    creating at once (its LISTs were most of a batch's read on a busy 2-core machine: bench/README.md, "Submit to
    Running against a raw client"). A look-alike someone labelled with such a job's UID under another name is not
    seen by this first pass; the next read of it reports it (`Observed.foreign`: the periodic resync's, a later pass's).

    The worker log gets two INFO lines per batch, key=value (logger scheduling.reconcile.jobs.batch): "reconcile
    batch start" (jobs, first id, waited_s: from its newest job's creation to the start) and "reconcile batch end"
    (the counts; fresh: jobs that needed no LIST; read_s for the backends and the snapshot, list_s its LISTs, lists
    their requests, listed the objects they returned, kinds each LIST as kind:seconds/requests/objects; passes_s,
    total_s, API requests, and throttle_wait_s: the time this process's requests waited for the cluster's client
    rate limit meanwhile). `at` is epoch seconds.
    """
    started, requests_before, (waited_before, waits_before) = time.time(), objects.requests.total(), throttle.waited()
    batch = list(load(job_ids).order_by("pk"))
    _log_start(batch, started)
    by_cluster: dict[int, list[GangJob]] = {}
    for job in batch:
        by_cluster.setdefault(job.cluster_id, []).append(job)
    apis, snapshots, broken, down = {}, {}, {}, {}
    fresh: set[int] = set()  # jobs that need no LIST: this batch recorded their backend
    for cluster_id, jobs in by_cluster.items():
        try:
            api = apis[cluster_id] = kube_client.api_client(jobs[0].cluster)
            served = set(jobs[0].cluster.served_apis or []) or discovery.served_versions(api)
            # The backends first. A job this batch records one on had none: no pass ever created anything for it
            # (`backend_for` records the backend before a pass's first create), so the cluster holds nothing
            # gangweb made for it and its pass starts from an empty slice without a LIST. Whatever it meets under
            # its names after all (a concurrent pass's object, someone else's) answers its create with 409, which
            # is read and compared as ever (`create_gang`, `create_plain`, `read_ours`): never taken unseen.
            fresh |= record_backends(jobs, api)
            listed = [str(j.uid) for j in jobs if j.pk not in fresh]
            # Only this batch's other jobs' objects: the LISTs cost the batch's size, not the cluster's (bench/).
            snapshots[cluster_id] = snapshot(api, served, listed) if listed else Snapshot()
        except KubeError as exc:
            if isinstance(exc, TransientKubeError) or exc.reason == "InvalidKubeconfig":
                down[cluster_id] = exc
            else:
                broken[cluster_id] = exc

    def one(job: GangJob) -> str:
        result = _one(job)
        if results is not None:
            results[job.pk] = result
        if result.error is not None:
            return "failed"
        return "requeued" if result.requeue_after is not None else "ok"

    def _one(job: GangJob) -> PassResult:
        err = down.get(job.cluster_id) or broken.get(job.cluster_id)
        if err is not None:
            return _record_not_attempted(job, err)
        api = apis[job.cluster_id]
        try:
            observed = snapshots[job.cluster_id].for_job(job, backend_for(job, api))
        except KubeError as exc:
            if isinstance(exc, TransientKubeError):
                down[job.cluster_id] = exc
            return _record_not_attempted(job, exc)
        try:
            return run_pass(job, api=api, observed=observed)
        except TransientKubeError as exc:
            if exc.reason == CLUSTER_UNREACHABLE:
                down[job.cluster_id] = exc
            return PassResult(outcome=ReconcileOutcome.TRANSIENT_ERROR, reason=exc.reason, message=exc.message,
                              error=exc)

    read = time.time()
    workers = min(threads or settings.GANGWEB_RECONCILE_THREADS, len(batch))
    if workers <= 1 or connection.in_atomic_block:
        outcomes = [one(job) for job in batch]
    else:
        outcomes = [o for part in in_threads(one, [batch[i::workers] for i in range(workers)]) for o in part]
    counts = {key: outcomes.count(key) for key in ("ok", "failed", "requeued")}
    waited, waits = throttle.waited()
    reads = [r for snap in snapshots.values() for r in snap.reads]
    log.info("reconcile batch end: jobs=%d first=%s %s fresh=%d read_s=%.3f list_s=%.3f lists=%d listed=%d "
             "kinds=%s passes_s=%.3f total_s=%.3f requests=%d throttle_wait_s=%.3f throttle_waits=%d threads=%d "
             "pid=%d at=%.3f", len(batch), batch[0].pk if batch else "-",
             " ".join(f"{k}={v}" for k, v in counts.items()), len(fresh), read - started,
             sum(r["seconds"] for r in reads), sum(r["requests"] for r in reads), sum(r["objects"] for r in reads),
             ",".join(f"{r['kind']}:{r['seconds']:.3f}/{r['requests']}/{r['objects']}" for r in reads) or "-",
             time.time() - read, time.time() - started, objects.requests.total() - requests_before,
             waited - waited_before, waits - waits_before, max(workers, 1), os.getpid(), time.time())
    return counts


def _log_start(batch: list[GangJob], started: float) -> None:
    """The batch's start line in the worker log: its size, first job id and how long its newest job had waited
    since it was written (the submit's commit, give or take: the task's time in the broker plus the worker's start
    of it). One line a batch, key=value, with the end line written by `reconcile_many` (bench/ reads both)."""
    newest = max((j.created_at for j in batch), default=None)
    waited = started - newest.timestamp() if newest is not None else 0.0
    log.info("reconcile batch start: jobs=%d first=%s waited_s=%.3f pid=%d at=%.3f", len(batch),
             batch[0].pk if batch else "-", waited, os.getpid(), started)


_pool: ThreadPoolExecutor | None = None  # this process's batch threads (`_threads`), kept between batches
_pool_size = 0


def _forget_pool() -> None:
    """In a forked child (Celery's prefork pool): the parent's threads did not come along, so neither does their
    pool; the child makes its own at its first batch."""
    global _pool, _pool_size
    _pool, _pool_size = None, 0


os.register_at_fork(after_in_child=_forget_pool)


def close_threads() -> None:
    """Close every batch thread's database connections and stop the pool (the next batch makes a new one): before
    a database the threads are connected to is dropped (the test suite's end) or when a process stops using them.
    Each thread takes exactly one closing task (they meet at a barrier, at most 10 s), so none is missed."""
    global _pool, _pool_size
    pool, size = _pool, _pool_size
    _pool, _pool_size = None, 0
    if pool is None:
        return
    barrier = threading.Barrier(size)

    def close() -> None:
        connections.close_all()
        try:
            barrier.wait(timeout=10)
        except threading.BrokenBarrierError:
            pass

    for future in [pool.submit(close) for _ in range(size)]:
        future.result()
    pool.shutdown(wait=True)


def _threads(count: int) -> ThreadPoolExecutor:
    """The process's pool of at least `count` batch threads, made at its first batch and kept for the next ones (a
    larger one when a batch asks for more threads than it has). Each thread keeps its database connection between
    batches as Django keeps a request's (CONN_MAX_AGE, health-checked), so a batch no longer opens a PostgreSQL
    connection per thread: its set-up and authentication, and the statements psycopg had prepared on it, were ~10 %
    of the worker's CPU (bench/README). An idle worker process holds up to GANGWEB_RECONCILE_THREADS connections
    more, each closed at the next batch once older than CONN_MAX_AGE."""
    global _pool, _pool_size
    if _pool is None or _pool_size < count:
        if _pool is not None:
            _pool.shutdown(wait=False)
        _pool, _pool_size = ThreadPoolExecutor(max_workers=count, thread_name_prefix="reconcile-batch"), count
    return _pool


def in_threads(fn, parts: list[list]) -> list[list]:
    """[[fn(item) for item in part] for part in parts], each part in a thread of the process's batch pool
    (`_threads`). Around each part the thread's database connections are checked as Django checks them around a
    request (`close_old_connections`: closed when older than CONN_MAX_AGE, broken, or left in a transaction),
    else kept for the next batch. Re-raises the first exception of a part (the others finish theirs)."""
    def run(part: list) -> list:
        close_old_connections()
        try:
            return [fn(item) for item in part]
        finally:
            close_old_connections()

    return list(_threads(len(parts)).map(run, parts))
