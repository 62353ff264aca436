"""Shared pieces of the benchmarks: percentiles, fixtures, logged-in HTTP sessions, resetting tables, profiles."""
from __future__ import annotations

import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of `values`, nearest-rank; 0.0 for an empty list."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


P99_MIN_SAMPLES = 200  # below this a p99 is one or two samples of the tail (with 20 it was the maximum): not reported


def latency_summary(seconds: list[float]) -> dict:
    """p50, p99 and max (ms, nearest-rank `percentile`) of latencies in seconds, with `n`. The p99 is None when
    there are fewer than P99_MIN_SAMPLES samples: nearest-rank p99 of 20 values is their maximum, of 200 the
    198th (two samples above it), which is what the page goal's p99 means."""
    n = len(seconds)
    return {"n": n, "p50_ms": ms(percentile(seconds, 50)),
            "p99_ms": ms(percentile(seconds, 99)) if n >= P99_MIN_SAMPLES else None,
            "max_ms": ms(max(seconds)) if seconds else 0.0}


def ms(seconds: float) -> float:
    """Seconds -> milliseconds, rounded to 0.1 ms."""
    return round(seconds * 1000, 1)


def ratio(value: float, baseline: float) -> float:
    """value / baseline rounded to 2 places (0.0 when the baseline is 0)."""
    return round(value / baseline, 2) if baseline else 0.0


def bench_fixtures(suffix: str = "", cluster_kwargs: dict | None = None):
    """The admin user, a cluster, a leaf queue (under a parent) and a 1-pod-set template that bench submits name.

    Returns (user, template_version, queue, cluster). Idempotent per suffix.
    """
    from django.contrib.auth import get_user_model

    from scheduling.models import Cluster, QueuePolicy, RuntimeTemplateVersion
    from scheduling.services.templates import versions as template_versions

    user_model = get_user_model()
    user = user_model.objects.filter(username="bench").first() or user_model.objects.create_superuser(
        "bench", "bench@example.com", secrets.token_hex(16))
    cluster, _ = Cluster.objects.get_or_create(name=f"bench{suffix}", defaults=cluster_kwargs or {})
    # A team queue under a department, as most installs have: submits check the limits of both.
    dept, _ = QueuePolicy.objects.get_or_create(name=f"bench-dept{suffix}")
    queue, _ = QueuePolicy.objects.get_or_create(name=f"bench{suffix}", defaults={"parent": dept})
    allow_namespaces([dept, queue], ["default"])
    dept.clusters.add(cluster)
    queue.clusters.add(cluster)
    name = f"bench{suffix}"
    version = RuntimeTemplateVersion.objects.filter(template__name=name).order_by("-version").first()
    if version is None:
        version = template_versions.create_template(user, name, "benchmark template", template_spec())
    return user, version, queue, cluster


TEAM_SUBMITTER = "bench-team-submitter"
TEAM_VIEWER = "bench-team-viewer"


def team_user(username: str, queue, role: str):
    """A plain user (not staff, not superuser) holding a QueueGrant of `role` ("viewer" or "submitter",
    scheduling.choices.GrantRole) on `queue` and nothing else: a team member, whose access checks
    (scheduling/services/access/roles.py) read the grants and the queue tree where a superuser's return at once.
    Idempotent; a grant left on another queue by an earlier run is replaced."""
    from django.contrib.auth import get_user_model

    from scheduling.models import QueueGrant

    user_model = get_user_model()
    user = user_model.objects.filter(username=username).first() or user_model.objects.create_user(
        username, f"{username}@example.com", secrets.token_hex(16))
    QueueGrant.objects.filter(user=user).exclude(queue=queue, role=role).delete()
    QueueGrant.objects.get_or_create(queue=queue, user=user, role=role)
    return user


def load_average() -> list[float]:
    """os.getloadavg() (1, 5, 15 minutes) rounded to 0.01: recorded before and after every figure."""
    return [round(x, 2) for x in os.getloadavg()]


def spread(values: list[float], digits: int = 1) -> dict:
    """min / median / max of `values` (the run-to-run spread of per-round figures)."""
    if not values:
        return {"min": 0.0, "median": 0.0, "max": 0.0}
    ordered = sorted(values)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return {"min": round(ordered[0], digits), "median": round(median, digits), "max": round(ordered[-1], digits)}


def rotated(items: list, round_index: int) -> list:
    """`items` rotated left by `round_index`: who goes first changes every round (alternating order)."""
    k = round_index % len(items) if items else 0
    return items[k:] + items[:k]


def reset_client_limits() -> int:
    """Put every Cluster row's client rate limit back to the documented default (`api_qps` and `api_burst` empty:
    kube/throttle.py's 50 QPS): what a benchmark that raised it for its set-up leaves behind is not the next one's
    state. Returns the rows changed."""
    from django.db.models import Q

    from scheduling.models import Cluster

    return Cluster.objects.filter(Q(api_qps__isnull=False) | Q(api_burst__isnull=False)).update(api_qps=None,
                                                                                                  api_burst=None)


def allow_namespaces(queues, names) -> None:
    """Add `names` to each queue's allowed_namespaces (a queue allows none until listed; docs/security.md)."""
    for queue in queues:
        missing = [n for n in names if n not in queue.allowed_namespaces]
        if missing:
            queue.allowed_namespaces = [*queue.allowed_namespaces, *missing]
            queue.save(update_fields=["allowed_namespaces"])


def template_spec(replicas: int = 4) -> dict:
    """A one-pod-set template: `replicas` workers of 1 CPU, 1Gi and 1 GPU each (the shape docs/api.md documents)."""
    return {
        "backend": "k8s-workload",
        "gang": {"scheduleTimeoutSeconds": 60},
        "podSets": [{
            "name": "worker", "replicas": replicas,
            "template": {"metadata": {}, "spec": {"containers": [{
                "name": "main", "image": "registry.example/train:1",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                              "limits": {"nvidia.com/gpu": "1"}}}]}},
        }],
        "overridable": ["podSets.*.replicas", "podSets.*.resources"],
    }


def logged_in_session(base_url: str, user):
    """A requests.Session authenticated like a browser: Django session cookie plus CSRF cookie and header."""
    import requests
    from django.test import Client

    client = Client()
    client.force_login(user)
    csrf = secrets.token_hex(16)  # 32 alphanumerics: an unmasked CSRF secret Django accepts as-is
    session = requests.Session()
    host = base_url.split("//", 1)[1].split(":")[0]
    session.cookies.set("sessionid", client.cookies["sessionid"].value, domain=host)
    session.cookies.set("csrftoken", csrf, domain=host)
    session.headers.update({"X-CSRFToken": csrf, "Content-Type": "application/json"})
    return session


def run_concurrently(items: Iterable, worker: Callable, states: list):
    """Call worker(state, item) for every item from one thread per entry of `states` (e.g. one keep-alive
    requests.Session each). Returns (latencies in seconds, wall seconds). Exceptions propagate."""
    items = list(items)
    lock = threading.Lock()
    cursor = iter(items)
    latencies: list[float] = []

    def loop(state):
        mine = []
        while True:
            with lock:
                item = next(cursor, None)
            if item is None:
                break
            t0 = time.perf_counter()
            worker(state, item)
            mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)

    start = time.perf_counter()
    with ThreadPoolExecutor(len(states)) as pool:
        for f in [pool.submit(loop, state) for state in states]:
            f.result()
    return latencies, time.perf_counter() - start


def reset_jobs() -> int:
    """Delete every job (and, by cascade, its history and attempts) and baseline row, and drop the reconcile work
    queued for them (`purge_task_queues`); returns the number of queued tasks dropped.

    Job ids are not restarted. They were, and that slowed the reconcile benchmark's first timed round to 0.42x
    (p50 submit-to-dispatched 24 s, bench/README.md): the submit benchmark queues ~2,100 reconcile tasks that no
    worker runs (none is started for it), the reconcile benchmark's fresh worker then ran them first, in order, and
    with ids restarted some of them named the new benchmark's jobs (full single passes racing its batches); the
    gunicorn workers' job -> cluster routing cache (scheduling/work/routing.py, right while ids are never reused) also
    sent the new jobs' batches to the old cluster's shard queue, behind those tasks."""
    from django.db import connection

    from bench.baseline_app.models import BaselineRow
    from scheduling.models import GangJob

    tables = [GangJob._meta.db_table, BaselineRow._meta.db_table]
    with connection.cursor() as cur:
        cur.execute(f"TRUNCATE {', '.join(tables)} CASCADE")
    purged = purge_task_queues()
    if purged:
        from .stack import log

        log(f"dropped {purged} queued reconcile task(s) of the deleted jobs")
    return purged


def purge_task_queues() -> int:
    """Drop every message waiting in the reconcile queues (Celery's default queue and every cluster shard queue,
    scheduling/work/routing.py) of the bench's broker; returns how many there were. Messages a running worker holds
    already (unacknowledged, or waiting for their countdown) are not in the queues and stay."""
    from gangweb.celery import app
    from scheduling.work import routing

    with app.connection_for_write() as conn:
        channel = conn.default_channel
        return sum(channel.queue_purge(name) or 0 for name in routing.worker_queues("all"))


def profile(name: str, fn: Callable[[], object]) -> str:
    """Run fn() under pyinstrument; write the text report to results/profile-<name>.txt; return its path."""
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.001)
    profiler.start()
    try:
        fn()
    finally:
        profiler.stop()
    tree = profiler.output_text(unicode=True, color=False)
    flat = profiler.output_text(unicode=True, color=False, flat=True).splitlines()
    text = tree + "\nTop functions by self time:\n" + "\n".join(flat[:45]) + "\n"
    return _write_profile(name, text.replace(f"{RESULTS_DIR.parent.parent}/", ""))  # repository paths only


def profile_threads(name: str, fn: Callable[[], object]) -> str:
    """Run fn() under bench.sampler (every thread sampled, not only this one); write its report to
    results/profile-<name>.txt; return its path."""
    from .sampler import Sampler

    sampler = Sampler()
    sampler.start()
    try:
        fn()
    finally:
        sampler.stop()
    return _write_profile(name, sampler.report())


def _write_profile(name: str, text: str) -> str:
    """Write a profile report to results/profile-<name>.txt (BENCH_PROFILE_DIR instead, for --quick: its work
    directory); return its path, relative to the repository when it is under results/."""
    directory = Path(os.environ.get("BENCH_PROFILE_DIR") or RESULTS_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"profile-{name}.txt"
    path.write_text(text)
    return str(path.relative_to(RESULTS_DIR.parent.parent)) if directory == RESULTS_DIR else str(path)


def create_owned(api, root_ref, job_objects: list[tuple[object, dict]]) -> list[tuple[object, dict]]:
    """Create one job's objects as gangweb's dispatch leaves them: the root object (the item whose ObjectRef is
    `root_ref`, the backend plugin's root) first, then every other one carrying the root's OwnerReference
    (`reconcile.owner_refs`). `job_objects` is [(ObjectRef, body)]; bodies are changed in place. Returns
    [(ObjectRef, object as the server created it)], in creation order. Raises ApiException as
    `kube.objects.create` does (409 when a name is taken)."""
    from scheduling.kube import objects
    from scheduling.reconcile import owner_refs

    root = next(body for ref, body in job_objects if ref == root_ref)
    created = [(root_ref, objects.create(api, root_ref, root))]
    reference = owner_refs.reference(created[0][1])
    for ref, body in job_objects:
        if body is not root:
            created.append((ref, objects.create(api, ref, owner_refs.with_owner(body, reference))))
    return created


def ensure_namespace(api, name: str) -> None:
    """Create namespace `name` in the cluster behind `api` (a kubernetes ApiClient); one that exists already is
    fine (409). Other API errors raise `kubernetes.client.rest.ApiException`."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    try:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    except ApiException as exc:
        if exc.status != 409:
            raise
