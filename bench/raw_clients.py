"""N concurrent raw clients creating the objects gangweb would create: the API server's create rate at saturation.

Each client is a process of its own, forked from the bench (nothing is imported again), with one ApiClient built by
gangweb's client code (`kube.client.build_client`) from an unsaved copy of the Cluster row whose client rate limit
is the highest a cluster may have (`RAW_QPS`): the ceiling measured is the API server's, not a client limit.
Processes, not threads: on 2 cores one Python process is bound by its own GIL (TLS, JSON), and gangweb's side runs in
2 worker processes. Jobs are dealt out round-robin; each client creates its jobs one after the other, each job root
first and then the rest with the root's ownerReference (`common.create_owned`), as gangweb's dispatch does.

Timing: every client builds its client and opens its connection (GET /version) before a shared start (a barrier);
a run's seconds are from the first client's start to the last one's end, on the system-wide monotonic clock.
"""
from __future__ import annotations

import multiprocessing
import time

RAW_QPS = 10_000  # the highest api_qps a Cluster may have (models/clusters.py): no client limit in practice
RAW_BURST = 10_000
READY_TIMEOUT = 120  # seconds for every client to build its client and connect
RUN_TIMEOUT = 600  # seconds for one run's creates


def unthrottled(cluster):
    """An unsaved copy of `cluster` (same kubeconfig and context) with the client rate limit at RAW_QPS/RAW_BURST,
    for `kube.client.build_client`. Not saved: the worker keeps the row's own limit."""
    from scheduling.models import Cluster

    return Cluster(name=cluster.name, kubeconfig=cluster.kubeconfig, context=cluster.context,
                   in_cluster=cluster.in_cluster, api_qps=RAW_QPS, api_burst=RAW_BURST)


def _client(cluster, barrier, root_ref, jobs: list, results) -> None:
    """One client process: connect, wait at `barrier`, create `jobs` ([[(ObjectRef, body)], ...]) in order, put
    (start, end, objects created, error or None) on `results`."""
    start = end = 0.0
    created, error = 0, None
    try:
        from kubernetes import client

        from scheduling.kube import client as kube_client

        from .common import create_owned

        api = kube_client.build_client(cluster)
        client.VersionApi(api).get_code()
        barrier.wait(READY_TIMEOUT)
        start = time.monotonic()
        for job_objects in jobs:
            created += len(create_owned(api, root_ref, job_objects))
        end = time.monotonic()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        error = f"{type(exc).__name__}: {exc}"[:500]
        try:
            barrier.abort()
        except Exception:  # noqa: BLE001, S110 - already broken or passed
            pass
    results.put((start, end, created, error))


def run(cluster, root_ref, jobs: list, clients: int) -> dict:
    """Create `jobs` ([[(ObjectRef, body)] per job], bodies as `reconcile.baseline_objects` builds them) from
    `clients` processes at once. Returns {"clients", "jobs", "objects", "seconds", "jobs_per_s", "objects_per_s"}.
    Raises RuntimeError naming the first client error (409 when a name is taken, an unreachable server, ...)."""
    clients = max(1, min(clients, len(jobs)))
    context = multiprocessing.get_context("fork")  # the bench's Django and imports, as they are
    barrier, results = context.Barrier(clients + 1), context.Queue()
    from scheduling.kube import throttle

    raw = unthrottled(cluster)
    throttle.bucket_for(raw)  # made here, before the fork: no client builds a rate limiter (or its thread) of its own
    procs = [context.Process(target=_client, args=(raw, barrier, root_ref, jobs[i::clients], results), daemon=True)
             for i in range(clients)]
    _start_all(procs, barrier)
    outcomes = [results.get(timeout=RUN_TIMEOUT) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    errors = [o[3] for o in outcomes if o[3]]
    if errors:
        raise RuntimeError(f"{len(errors)} of {clients} raw clients failed; first: {errors[0]}")
    seconds = max(o[1] for o in outcomes) - min(o[0] for o in outcomes)
    objects = sum(o[2] for o in outcomes)
    return {"clients": clients, "jobs": len(jobs), "objects": objects, "seconds": round(seconds, 3),
            "jobs_per_s": round(len(jobs) / seconds, 1), "objects_per_s": round(objects / seconds, 1)}


def _paced_client(cluster, barrier, start_at, root_ref, jobs: list, results) -> None:
    """One paced client process: connect, wait at `barrier`, then create each job of `jobs` ([(index, [(ObjectRef,
    body)])]) at its turn (`start_at.value` + index / rate, the parent's epoch seconds), putting (index, first
    create's epoch, last create answered's epoch, error or None) on `results` per job."""
    try:
        from kubernetes import client

        from scheduling.kube import client as kube_client
        from scheduling.kube import throttle

        from .common import create_owned

        # Forked while the parent's pod-watch threads use the same (unsaved: pk None) cluster's bucket: its lock
        # may have been copied held. A bucket of this process's own, never shared with a thread of the parent's.
        throttle._buckets.clear()
        api = kube_client.build_client(cluster)
        client.VersionApi(api).get_code()
        barrier.wait(READY_TIMEOUT)
        while start_at.value == 0:
            time.sleep(0.001)
        for index, due, job_objects in jobs:
            delay = start_at.value + due - time.time()
            if delay > 0:
                time.sleep(delay)
            began = time.time()
            create_owned(api, root_ref, job_objects)
            results.put((index, began, time.time(), None))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        try:
            barrier.abort()
        except Exception:  # noqa: BLE001, S110 - already broken or passed
            pass
        results.put((-1, 0.0, 0.0, f"{type(exc).__name__}: {exc}"[:500]))


def run_paced(cluster, root_ref, jobs: list, clients: int, rate: float) -> list[tuple[float, float]]:
    """Create `jobs` ([[(ObjectRef, body)] per job]) at `rate` jobs per second, the i-th due at start + i / rate,
    from `clients` forked processes (job i by process i mod clients), each job root first and then the rest with
    its ownerReference (`common.create_owned`). Returns [(epoch seconds of the job's first create, of its last
    create answered)] in job order. Raises RuntimeError naming the first client error."""
    clients = max(1, min(clients, len(jobs)))
    context = multiprocessing.get_context("fork")
    barrier, results, start_at = context.Barrier(clients + 1), context.Queue(), context.Value("d", 0.0)
    from scheduling.kube import throttle

    raw = unthrottled(cluster)
    throttle.bucket_for(raw)
    share = [[(i, i / rate, jobs[i]) for i in range(k, len(jobs), clients)] for k in range(clients)]
    procs = [context.Process(target=_paced_client, args=(raw, barrier, start_at, root_ref, share[k], results),
                             daemon=True) for k in range(clients)]
    _start_all(procs, barrier)
    start_at.value = time.time() + 0.05
    out: dict[int, tuple[float, float]] = {}
    error = None
    deadline = time.monotonic() + RUN_TIMEOUT
    while len(out) < len(jobs) and error is None and time.monotonic() < deadline:
        index, began, ended, failure = results.get(timeout=max(1.0, deadline - time.monotonic()))
        if failure:
            error = failure
        else:
            out[index] = (began, ended)
    for proc in procs:
        proc.join(timeout=30)
    if error or len(out) < len(jobs):
        raise RuntimeError(f"paced raw clients: {error or f'{len(out)} of {len(jobs)} jobs created'}")
    return [out[i] for i in range(len(jobs))]


def _start_all(procs, barrier) -> None:
    """Start the client processes and wait until all are ready at `barrier` (a client that failed before it sends
    its error on the results queue, read by the caller)."""
    for proc in procs:
        proc.start()
    try:
        barrier.wait(READY_TIMEOUT)
    except Exception:  # noqa: BLE001, S110 - a client failed before the start: its error comes on the queue
        pass
