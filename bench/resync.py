"""Benchmark 3: one resync of a cluster whose jobs are all in sync ("nothing changed"), at ~1,000 and ~10,000 jobs.

Dataset (`build`, shared with the memory benchmark, which drives both): jobs of one pod with the KAI backend (a KAI
PodGroup, an Indexed Job and a headless Service each), in namespace ``bench-resync`` of the local control plane.
Their rows are inserted with SQL (phase Submitted, as a submit leaves them); their objects are created by a loop of
8 threads over gangweb's own desired objects (``reconcile/desired.py``, what its dispatch creates), so the API
server, not one Python loop, is what limits it. The Job controller creates each job's pod; no KAI scheduler runs,
so the pods stay Pending (a real, non-terminal state nothing changes under the resync). gangweb's job pass
(``run_pass``, fed from one snapshot, in threads) then records each job's first observation (Dispatched, pod
counts); every resync after it finds nothing to do.

Measured per size, with the resync run in this process (``scheduling.reconcile.resync.resync_cluster``) so the kube
client's request counter (``scheduling.kube.objects.requests``, which every API call goes through) sees every
request: the requests by verb and kind (goal: one per page of GANGWEB_LIST_PAGE_SIZE objects per kind, the
LISTs being paginated, no job acted on) and, from a pass under tracemalloc, the resync's peak Python allocation,
from which the allocation per job follows (difference between the sizes over the difference in jobs). Seconds:
an untraced pass at ~1,000; the Celery worker's own resync at ~10,000 (the memory benchmark has it run).
"""
from __future__ import annotations

import time
import tracemalloc

from .common import ratio
from .stack import log

GOAL_PER_KIND = 2
TEMPLATE = "bench-resync"
NAMESPACE = "bench-resync"
BATCH = 50  # jobs per thread task of the first pass


def template_spec() -> dict:
    """One pod of 10m CPU / 16Mi for KAI's scheduler (not running here: the pod stays Pending)."""
    return {
        "backend": "kai",
        "gang": {"scheduleTimeoutSeconds": 60},
        "podSets": [{"name": "worker", "replicas": 1, "template": {"metadata": {}, "spec": {"containers": [{
            "name": "main", "image": "registry.example/train:1",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}],
        "overridable": [],
    }


def setup(stack):
    """The local cluster registered (Cluster "local", queue "default"), the template and the namespace.
    Returns (cluster, queue, template_version, user, api)."""
    from scheduling.kube import client as kube_client
    from scheduling.models import Cluster, QueuePolicy
    from scheduling.services.clusters import local as local_cluster

    from . import raw_clients
    from .common import allow_namespaces, bench_fixtures, ensure_namespace

    user = bench_fixtures()[0]
    if stack.cluster is None:
        stack.start_cluster()
    cluster = Cluster.objects.filter(name=local_cluster.LOCAL_CLUSTER).first()
    if cluster is None or not cluster.kubeconfig or cluster.kubeconfig != _kubeconfig(stack):
        cluster = local_cluster.register(stack.cluster.kubeconfig)
    queue = QueuePolicy.objects.get(name=local_cluster.DEFAULT_QUEUE)
    allow_namespaces([queue], [NAMESPACE])
    version = template_version()
    # The row keeps the documented client rate limit (both fields empty: kube/throttle.py's default): a run that
    # raised it left it raised for every benchmark after it. The dataset's 30,000 creates from 8 threads are
    # set-up, not what is measured: they go through an unsaved unthrottled copy of the row (`raw_clients`); the
    # client rate limit (50 QPS by default) would make them take 10 minutes.
    Cluster.objects.filter(pk=cluster.pk).update(api_qps=None, api_burst=None)
    cluster.refresh_from_db()
    api = kube_client.build_client(raw_clients.unthrottled(cluster))
    ensure_namespace(api, NAMESPACE)
    return cluster, queue, version, user, api


def template_version():
    """The benchmark's template (`template_spec`), created when missing; its newest version."""
    from django.contrib.auth import get_user_model

    from scheduling.models import RuntimeTemplateVersion
    from scheduling.services.templates import versions as template_versions

    version = RuntimeTemplateVersion.objects.filter(template__name=TEMPLATE).order_by("-version").first()
    if version is None:
        version = template_versions.create_template(get_user_model().objects.filter(is_superuser=True).first(),
                                                   TEMPLATE, "resync benchmark", template_spec())
    return version


def _kubeconfig(stack) -> str:
    from pathlib import Path

    return Path(stack.cluster.kubeconfig).read_text()


def count_pods(api) -> int:
    """Pods in the benchmark namespace (one LIST with limit=1: the server counts the rest)."""
    from kubernetes import client

    page = client.CoreV1Api(api).list_namespaced_pod(NAMESPACE, limit=1, _request_timeout=30)
    return len(page.items) + (page.metadata.remaining_item_count or 0)


def job_objects(backend, job) -> list[tuple[object, dict]]:
    """[(ObjectRef, body)] gangweb's dispatch creates for `job`, in its order: gang objects, Indexed Jobs, Service
    (built by gangweb's desired-state code; `common.create_owned` adds the root's OwnerReference as the dispatch
    does, so a resync finds them exactly as it wants them and patches nothing)."""
    from scheduling.kube.objects import JOB, SERVICE
    from scheduling.reconcile import desired
    from scheduling.reconcile.jobs import ref_of

    spec = desired.gang_spec(job)
    out = [(ref_of(backend, o), o) for o in backend.build_gang_objects(spec)]
    return out + [(JOB, o) for o in desired.owners(backend, spec)] + [(SERVICE, desired.service(spec))]


def _create_all(api, backend, jobs: list, threads: int) -> None:
    """Create every job's objects from `threads` threads (one shared ApiClient; its pool holds 10+ connections)."""
    from concurrent.futures import ThreadPoolExecutor

    from scheduling.kube.objects import JOB
    from scheduling.models import GangJob

    from .common import create_owned

    def create(job):
        created = create_owned(api, backend.root_ref, job_objects(backend, job))
        # What the dispatch records (`reconcile.ownership.record`): the UID of each owner Job it created, by name.
        # Without it a pass trusts none of the Jobs (ownership.trust) and takes each for someone else's.
        job.owner_uids = {obj["metadata"]["name"]: obj["metadata"]["uid"] for ref, obj in created if ref == JOB}
        return job

    with ThreadPoolExecutor(threads) as pool:
        done = list(pool.map(create, jobs))
    GangJob.objects.bulk_update(done, ["owner_uids"], batch_size=500)


def build(stack, upto: int, threads: int = 8, timeout: float = 900) -> dict:
    """Grow the dataset to `upto` in-sync jobs: insert the missing rows (SQL), create their objects (a create
    loop of `threads` threads over gangweb's desired objects: what its bulk dispatch creates, without the
    dispatch's per-job bookkeeping, which the reconcile benchmark measures), wait for every pod, then let
    gangweb's job pass record each new job's first observation (Dispatched, pod counts).
    Returns {"jobs", "added", "create_s", "pods_s", "first_pass_s"}."""
    from scheduling.backends import registry
    from scheduling.choices import GangPhase
    from scheduling.models import GangJob

    from . import seed

    cluster, queue, version, user, api = setup(stack)
    have = GangJob.objects.filter(cluster=cluster, namespace=NAMESPACE).count()
    added = max(0, upto - have)
    out = {"jobs": upto, "added": added}
    if not added:
        return out
    backend_cls = registry.select(version.spec["backend"], set(cluster.served_apis))
    first, last = seed.insert_jobs(added, version, [queue], cluster, user, prefix=f"rs{have}",
                                   phases=[GangPhase.SUBMITTED], spacing_seconds=0.01)
    # As the dispatch's backend choice leaves them (`jobs.backend_for`).
    GangJob.objects.filter(pk__range=(first, last)).update(namespace=NAMESPACE, backend_plugin=backend_cls.name)
    t0 = time.monotonic()
    _create_all(api, backend_cls(), list(GangJob.objects.filter(pk__range=(first, last)).select_related("queue")),
                threads)
    out["create_s"] = round(time.monotonic() - t0, 1)
    log(f"resync dataset: objects of {added} jobs created in {out['create_s']} s; waiting for their pods")
    t0 = time.monotonic()
    while (n := count_pods(api)) < upto:
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"only {n} of {upto} pods after {timeout:.0f} s")
        time.sleep(1)
    out["pods_s"] = round(time.monotonic() - t0, 1)
    # The first observation of every new job (Dispatched, pod counts, why pending) is written by the resync's own
    # job pass (`run_pass` fed from one cluster-wide snapshot, as `resync_cluster` does) from `threads` threads:
    # the writes wait on PostgreSQL, so threads overlap them. (`reconcile_many` in batches of 50 would make 8
    # label-selected LISTs per batch: 1,440 LISTs, each filtering 10,000 objects of a kind in the API server.)
    t0 = time.monotonic()
    failed = first_pass(api, cluster, first, last, max(2, threads * 3 // 4))
    out["first_pass_s"] = round(time.monotonic() - t0, 1)
    if failed:
        raise RuntimeError(f"the first pass over the dataset failed for {failed} jobs")
    log(f"resync dataset: {upto} jobs; first pass over the new ones in {out['first_pass_s']} s")
    return out


FIRST_PASS_CHUNK = 2_000  # jobs per snapshot of the first pass (a set-based selector of their UIDs)


def first_pass(api, cluster, first: int, last: int, threads: int) -> int:
    """One `run_pass` per job of ids first..last, from `threads` threads, fed from a snapshot of `FIRST_PASS_CHUNK`
    jobs at a time (their UIDs in the label selector), so the set-up's memory stays that of a chunk at any size.
    Returns the failures."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from scheduling.models import GangJob
    from scheduling.reconcile import jobs as job_reconcile
    from scheduling.reconcile import resync

    def one(chunk):
        try:
            failed = 0
            for job, observed in chunk:
                job.cluster = cluster
                failed += job_reconcile.run_pass(job, api=api, observed=observed).error is not None
            return failed
        finally:
            connection.close()

    failed = 0
    for start in range(first, last + 1, FIRST_PASS_CHUNK):
        jobs = list(GangJob.objects.filter(pk__range=(start, min(last, start + FIRST_PASS_CHUNK - 1)))
                    .select_related("queue"))
        if not jobs:
            continue
        snap = resync.snapshot(api, set(cluster.served_apis), uids=[str(j.uid) for j in jobs])
        backend = job_reconcile.backend_for(jobs[0], api)
        work = [(job, snap.take(job, backend)) for job in jobs]
        del snap
        with ThreadPoolExecutor(threads) as pool:
            failed += sum(pool.map(one, [work[i:i + BATCH] for i in range(0, len(work), BATCH)]))
    return failed


def measure(cluster_name: str = "local", untraced: bool = True) -> dict:
    """A resync pass under tracemalloc, its requests counted: {"jobs", "acted", "failed", "requests",
    "by_request", "max_per_kind", "peak_alloc_mib", "traced_seconds"}; with `untraced`, a pass without
    tracemalloc first gives "seconds" (tracemalloc slows a pass 2-3x). At 10,000 jobs the memory benchmark
    takes the seconds of the worker's own resync instead, which saves a pass of a minute or more."""
    from django.core.cache import cache

    from scheduling.kube import limit_ranges, objects
    from scheduling.models import Cluster, GangJob
    from scheduling.reconcile import resync

    cluster = Cluster.objects.get(name=cluster_name)
    # One pass over every job: production bounds a run (GANGWEB_RESYNC_MAX_JOBS, _MAX_SECONDS), which would make
    # "jobs" the bound, not the dataset.
    whole = {"max_jobs": 10**9, "budget_seconds": 10**6}
    out = {}
    if untraced:
        out["seconds"] = resync.resync_cluster(cluster, **whole)["seconds"]
    # Both sizes start from the same cache: every namespace's LimitRanges unread (a pass reads each once, kube/
    # limit_ranges.py), so the counts compare the resync, not what the minute-long cache held at the time.
    namespaces = set(GangJob.objects.filter(cluster=cluster).values_list("namespace", flat=True).distinct())
    cache.delete_many([limit_ranges.cache_key(cluster.pk, ns) for ns in namespaces])
    objects.requests.reset()
    tracemalloc.start()
    try:
        stats = resync.resync_cluster(cluster, **whole)
        out["peak_alloc_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
    finally:
        tracemalloc.stop()
    by_request = dict(sorted(objects.requests.counts.items()))
    per_kind: dict[str, int] = {}
    for key, n in by_request.items():
        kind = key.split(" ", 1)[1]
        per_kind[kind] = per_kind.get(kind, 0) + n
    out.update({"jobs": stats["jobs"], "acted": stats["acted"], "failed": stats["failed"],
                "requests": sum(by_request.values()), "by_request": by_request,
                "max_per_kind": max(per_kind.values() or [0]), "traced_seconds": stats["seconds"]})
    return out


def pages_per_kind(jobs: int) -> int:
    """The most LIST requests a kind may take for `jobs` one-object-per-kind jobs: one per page of
    settings.GANGWEB_LIST_PAGE_SIZE objects, plus the one empty last page a paginated LIST may end with."""
    from scheduling.kube import objects

    return -(-jobs // objects.page_size()) + 1


def summarize(small: dict, large: dict) -> dict:
    """Compare the two sizes against the goals: per kind at most `pages_per_kind` requests (the LISTs are paginated:
    kube/objects.py), nothing acted on."""
    goal = max(GOAL_PER_KIND, pages_per_kind(large["jobs"]))
    return {
        "baseline": small, "measured": large,
        "ratio": ratio(large["requests"], small["requests"]),
        "alloc_kib_per_job": round((large["peak_alloc_mib"] - small["peak_alloc_mib"]) * 1024
                                   / max(1, large["jobs"] - small["jobs"]), 1),
        "goal_max_per_kind": goal,
        "ok": (large["max_per_kind"] <= goal and small["max_per_kind"] <= max(GOAL_PER_KIND,
                                                                           pages_per_kind(small["jobs"]))
               and large["acted"] == 0 and large["failed"] == 0 and small["acted"] == 0),
    }


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    s, m = result["baseline"], result["measured"]
    return [
        f"resync        : {m['requests']} API requests for {m['jobs']:,} in-sync jobs (max {m['max_per_kind']} per "
        f"kind, {m['acted']} jobs acted on, {m['seconds']} s)",
        f"  baseline    : {s['requests']} API requests for {s['jobs']:,} jobs ({s['seconds']} s)   ratio "
        f"{result['ratio']:.2f} (goal: <= {result['goal_max_per_kind']} per kind, one per page of "
        f"GANGWEB_LIST_PAGE_SIZE) {'OK' if result['ok'] else 'BELOW GOAL'}",
        f"  requests    : {', '.join(f'{k} x{n}' for k, n in m['by_request'].items())}",
        f"  memory      : resync peak allocation {s['peak_alloc_mib']} MiB at {s['jobs']:,} jobs, "
        f"{m['peak_alloc_mib']} MiB at {m['jobs']:,} jobs ({result['alloc_kib_per_job']} KiB per job)",
    ]
