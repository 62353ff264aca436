"""Which Celery queue a task goes to: each cluster's work to its own shard queue (issue 18, part 3).

Work that talks to one cluster (a job's reconcile, a batch of one cluster's jobs, its resync, probe and queue sync)
goes to the cluster's **shard queue** `reconcile.<n>`, n in [0, GANGWEB_RECONCILE_SHARDS): the cluster's pinned
`work_shard` when an operator set one, else its id modulo the shard count. Everything else (the fan-outs: the
beats, and `reconcile_queue` after a queue policy write, which queues one `sync_queues(id)` per cluster the policy
concerns) stays on Celery's default queue and talks to no cluster, and webhooks go to theirs (settings).

Why a fixed number of shard queues rather than one queue per cluster id: the set of queue names is known when a
worker starts, so a worker started with every shard (`make run`, the chart's default pool) consumes a cluster
registered later without a restart or a control message (Celery consumes only the queues named at start, or added
one by one with `add_consumer`); and an operator sizes worker pools per shard group, not per cluster. Ids are
sequential, so the first N clusters land on N distinct shards; past N, or to keep one cluster alone on a pool,
`Cluster.work_shard` pins it. Isolation comes from the pools: a worker pool consuming only some shards keeps its
slots for them, so a frozen API server holds only the slots of the pool its shard is consumed by
(docs/operations.md, "Per-cluster work queues").

`route` is the Celery router (settings.CELERY_TASK_ROUTES); it never raises: a lookup that fails sends the task to
the default queue, which some worker always consumes. The job -> cluster lookup is cached per process (a job never
moves to another cluster); pins are read again after PIN_TTL seconds.
"""
from __future__ import annotations

import logging
import threading
import time

from django.conf import settings

log = logging.getLogger(__name__)

SHARD_QUEUE_PREFIX = "reconcile."
# A finished job's clean-up (and a cancel: `reconcile_job` with cleanup=True) goes to its shard's clean-up queue
# `cleanup.<n>`, consumed by whatever consumes `reconcile.<n>` (gangweb/celery.py): Celery takes from a worker's
# queues in turn, so a clean-up waits for a free slot, never behind the shard's whole backlog of dispatches
# (issue 31, part 4).
CLEANUP_QUEUE_PREFIX = "cleanup."
PIN_TTL = 30.0  # seconds a process trusts its copy of the clusters' pinned shards
JOB_CACHE_MAX = 50_000  # job id -> cluster id entries kept per process (~5 MB at most)

# Task name -> how to find the cluster id from the task's (args, kwargs): "job" (first argument is a job id, or a
# list of job ids: the first one's cluster), "cluster" (first argument is a cluster id; None: default queue).
CLUSTER_TASKS = {
    "scheduling.reconcile_job": ("job", "job_id"),
    "scheduling.reconcile_jobs": ("job", "job_ids"),
    "scheduling.resync_cluster": ("cluster", "cluster_id"),
    "scheduling.probe_cluster": ("cluster", "cluster_id"),
    "scheduling.sync_queues": ("cluster", "cluster_id"),
}

_lock = threading.Lock()
_job_cluster: dict[int, int] = {}
_pins: dict[int, int] = {}
_pins_read_at = float("-inf")


def shard_count() -> int:
    """The number of shard queues (settings.GANGWEB_RECONCILE_SHARDS, at least 1)."""
    return max(1, int(getattr(settings, "GANGWEB_RECONCILE_SHARDS", 8)))


def shard_queue(shard: int) -> str:
    """The queue name of shard `shard`: "reconcile.3"."""
    return f"{SHARD_QUEUE_PREFIX}{shard}"


def cleanup_queue(shard: int) -> str:
    """The clean-up queue of shard `shard`: "cleanup.3"."""
    return f"{CLEANUP_QUEUE_PREFIX}{shard}"


def shard_of(cluster_id: int, pinned: int | None = None, shards: int | None = None) -> int:
    """The shard of cluster `cluster_id`: `pinned` (its `work_shard`) when set, else the id modulo `shards`
    (default `shard_count()`); a pin beyond the shard count (the count was lowered) wraps around too."""
    shards = shards or shard_count()
    return (pinned if pinned is not None else cluster_id) % shards


def parse_shards(spec: str, shards: int | None = None) -> list[int]:
    """The shard numbers named by `spec`: "all" (or "*"), or a comma list of numbers and ranges ("0-3,6").

    Raises ValueError naming the part that is not a number, a reversed range, or a shard >= the shard count."""
    shards = shards or shard_count()
    spec = (spec or "").strip()
    if spec in ("all", "*"):
        return list(range(shards))
    picked: set[int] = set()
    for part in filter(None, (p.strip() for p in spec.split(","))):
        low, sep, high = part.partition("-")
        try:
            first, last = int(low), int(high) if sep else int(low)
        except ValueError:
            raise ValueError(f"shard {part!r} is not a number or a range like 0-3") from None
        if first < 0 or last < first:
            raise ValueError(f"shard range {part!r} is empty or negative")
        if last >= shards:
            raise ValueError(f"shard {last} does not exist: GANGWEB_RECONCILE_SHARDS is {shards} (0-{shards - 1})")
        picked.update(range(first, last + 1))
    if not picked:
        raise ValueError("no shard named: give \"all\" or a list like 0-3,6")
    return sorted(picked)


def worker_queues(spec: str = "all", *, default: bool = True) -> list[str]:
    """Queue names a reconcile worker consumes for shard spec `spec` (parse_shards): each shard's queue and its
    clean-up queue, with Celery's default queue first when `default`: ["celery", "reconcile.0", "cleanup.0", ...]."""
    names = [name for n in parse_shards(spec) for name in (shard_queue(n), cleanup_queue(n))]
    return [settings.CELERY_TASK_DEFAULT_QUEUE, *names] if default else names


def _first(args, kwargs, name: str):
    if args:
        return args[0]
    return (kwargs or {}).get(name)


def _pins_now() -> dict[int, int]:
    """{cluster id: pinned shard} of the clusters that have one, read at most every PIN_TTL seconds."""
    global _pins, _pins_read_at
    now = time.monotonic()
    with _lock:
        if now - _pins_read_at <= PIN_TTL:
            return _pins
    from ..models import Cluster

    pins = dict(Cluster.objects.filter(work_shard__isnull=False).values_list("pk", "work_shard"))
    with _lock:
        _pins, _pins_read_at = pins, now
    return pins


def cluster_of_job(job_id: int) -> int | None:
    """The cluster id of job `job_id` (cached per process; a job's cluster never changes), None if it is gone."""
    with _lock:
        cached = _job_cluster.get(job_id)
    if cached is not None:
        return cached
    from ..models import GangJob

    cluster_id = GangJob.objects.filter(pk=job_id).values_list("cluster_id", flat=True).first()
    if cluster_id is not None:
        with _lock:
            if len(_job_cluster) >= JOB_CACHE_MAX:
                _job_cluster.clear()
            _job_cluster[job_id] = cluster_id
    return cluster_id


def remember(job_clusters: dict[int, int]) -> None:
    """Cache {job id: cluster id} of jobs this process has just written (a submit knows their cluster), so routing
    their tasks reads nothing: one query less per single submit. Ids are never reused, so an entry of a rolled-back
    insert names no other job."""
    with _lock:
        if len(_job_cluster) + len(job_clusters) > JOB_CACHE_MAX:
            _job_cluster.clear()
        _job_cluster.update(job_clusters)


def queue_for_cluster(cluster_id: int, *, cleanup: bool = False) -> str:
    """The shard queue of cluster `cluster_id` (its pin, read through the PIN_TTL cache); its clean-up queue with
    `cleanup`."""
    shard = shard_of(cluster_id, _pins_now().get(cluster_id))
    return cleanup_queue(shard) if cleanup else shard_queue(shard)


def cluster_for_task(name: str, args, kwargs) -> int | None:
    """The cluster id a task of `name` with these arguments works on, None when it is not one cluster's work."""
    how = CLUSTER_TASKS.get(name)
    if how is None:
        return None
    kind, param = how
    value = _first(args, kwargs, param)
    if kind == "job":
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        return cluster_of_job(int(value)) if value is not None else None
    return int(value) if value is not None else None


def route(name, args, kwargs, options, task=None, **kw):
    """Celery router (task_routes): {"queue": "reconcile.<n>"} for one cluster's work ("cleanup.<n>" for a
    clean-up), None otherwise (the next router, then the default queue). Never raises: on any error the task goes
    to the default queue."""
    try:
        cluster_id = cluster_for_task(name, args, kwargs)
        if cluster_id is None:
            return None
        return {"queue": queue_for_cluster(cluster_id, cleanup=bool((kwargs or {}).get("cleanup")))}
    except Exception as exc:  # noqa: BLE001 - a routing failure must never lose the enqueue
        log.warning("routing %s to the default queue: %s: %s", name, type(exc).__name__, exc)
        return None


def forget() -> None:
    """Drop this process's cached job clusters and pins (tests; a pin change is otherwise seen within PIN_TTL)."""
    global _pins_read_at
    with _lock:
        _job_cluster.clear()
        _pins.clear()
        _pins_read_at = float("-inf")
