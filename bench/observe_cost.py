"""CPU of one watch observation, in-process: `python -m bench.observe_cost [--observations 300] [--profile]`.

Not in `run_all` (no cluster, no server): a quick before/after figure for the watcher's per-observation cost
(bench/README.md, "Watch under churn"). One running job of 8 pods (k8s-workload, v1alpha2) in a database of its
own: SQLite in a temporary file by default, or the PostgreSQL database `DATABASE_URL` names (migrated here; use a
database of your own, never `gangweb`). Its objects are gangweb's desired ones (Workload, PodGroup, the Indexed Job)
as the API server returns them, and 8 Running pods. Each observation is what the churn benchmark makes the watcher
do: one pod's container flips between running and CrashLoopBackOff (so what the API shows changes and the job row
is written), then `reconcile.watching._observe` (the watcher's `observe_job` without its retry wrapper) records it:
the job read, the lock, deriving, the one UPDATE.

Prints ms of CPU (`time.process_time`) and wall time per observation over `--observations` observations, after
20 untimed ones, and the statements of one observation; `--profile` adds a cProfile of another run, sorted by
cumulative time, to stdout.
"""
from __future__ import annotations

import argparse
import base64
import cProfile
import io
import os
import pstats
import secrets
import tempfile
import time
import uuid

PODS = 8
WARMUP = 20


def _setup_django(workdir: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gangweb.settings")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{workdir}/observe-cost.sqlite3")
    os.environ.setdefault("GANGWEB_STATE_DIR", workdir)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("SECRET_KEY", secrets.token_hex(32))
    os.environ.setdefault("GANGWEB_ENCRYPTION_KEYS", base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())
    os.environ["DEBUG"] = "0"  # no query log: as deployed
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def _job():
    """A running 8-pod k8s-workload job (cluster, queue, template made as needed) and its backend plugin."""
    from django.contrib.auth import get_user_model

    from scheduling.backends.k8s_workload_v1alpha2 import K8sWorkloadV1alpha2
    from scheduling.models import Cluster, GangJob, QueuePolicy, RuntimeTemplateVersion
    from scheduling.services.jobs import lifecycle as job_service
    from scheduling.services.templates import versions as template_versions

    from .common import template_spec

    users = get_user_model()
    user = users.objects.filter(username="observe-cost").first() or users.objects.create_superuser(
        "observe-cost", "observe-cost@example.com", uuid.uuid4().hex)
    cluster, _ = Cluster.objects.get_or_create(name="observe-cost", defaults={
        "served_apis": [K8sWorkloadV1alpha2.api_version], "capacity": {"cpu": 64000}})
    queue, _ = QueuePolicy.objects.get_or_create(name="observe-cost", defaults={"allowed_namespaces": ["default"]})
    queue.clusters.add(cluster)
    version = RuntimeTemplateVersion.objects.filter(template__name="observe-cost").order_by("-version").first()
    if version is None:
        version = template_versions.create_template(user, "observe-cost", "", template_spec(replicas=PODS))
    job, _ = job_service.submit(user, {"name": f"obs-{uuid.uuid4().hex[:8]}", "namespace": "default",
                                       "template": "observe-cost", "queue": queue.name, "cluster": cluster.name})
    GangJob.objects.filter(pk=job.pk).update(backend_plugin=K8sWorkloadV1alpha2.name)
    job.refresh_from_db()
    return job, K8sWorkloadV1alpha2()


def _objects(job, backend):
    """(gang objects, owner Jobs, pods) of `job` as the watch cache holds them once its gang runs."""
    from scheduling.models import GangJob
    from scheduling.observe.evidence import JobObjects
    from scheduling.reconcile import desired

    spec = desired.gang_spec(job)
    created = "2026-12-02T12:00:00Z"

    def served(obj: dict, n: int) -> dict:
        obj["metadata"].update(uid=f"{job.uid}-{n}", creationTimestamp=created, resourceVersion=str(100 + n))
        return obj

    gang = [served(g, i) for i, g in enumerate(backend.build_gang_objects(spec))]
    pg = gang[-1]
    pg["status"] = {"conditions": [{"type": backend.SCHEDULED, "status": "True", "reason": "Scheduled",
                                    "lastTransitionTime": "2026-12-02T12:00:02Z"}]}
    owners = [served(w, 10 + i) for i, w in enumerate(desired.owners(backend, spec))]
    owner = owners[0]
    owner["status"] = {"active": PODS, "ready": PODS, "startTime": created}
    GangJob.objects.filter(pk=job.pk).update(owner_uids={owner["metadata"]["name"]: owner["metadata"]["uid"]})
    template = owner["spec"]["template"]
    pods = []
    for i in range(PODS):
        pods.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{owner['metadata']['name']}-{i}-x{i}", "namespace": "default",
                         "uid": f"{job.uid}-pod-{i}", "creationTimestamp": "2026-12-02T12:00:01Z",
                         "labels": dict(template["metadata"]["labels"]),
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "controller": True,
                                              "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]},
            "spec": {**template["spec"], "nodeName": f"kwok-node-{i % 3}"},
            "status": {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-02T12:00:02Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-02T12:00:03Z"}],
                "containerStatuses": [_running(0)]}})
    return JobObjects(gang, owners, pods)


def _running(restarts: int) -> dict:
    return {"name": "main", "image": "registry.example/train:1", "ready": True, "restartCount": restarts,
            "state": {"running": {"startedAt": "2026-12-02T12:00:03Z"}}}


def _crashing(restarts: int) -> dict:
    return {"name": "main", "image": "registry.example/train:1", "ready": False, "restartCount": restarts,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}


class Churn:
    """Flips one pod's container per step, as bench/churn.py does through the API server."""

    def __init__(self, objects):
        self.objects, self.step = objects, 0

    def next(self):
        pod = self.objects.pods[self.step % PODS]
        restarts = self.step // PODS + 1
        pod["status"]["containerStatuses"] = [_crashing(restarts) if restarts % 2 else _running(restarts)]
        self.step += 1
        return self.objects


def _observe_n(uid: str, churn: Churn, n: int) -> None:
    from scheduling.reconcile import watching

    for _ in range(n):
        watching._observe(uid, churn.next())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--observations", type=int, default=300)
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of one more run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        _setup_django(workdir)
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from scheduling.models import GangJob

        job, backend = _job()
        uid = str(job.uid)
        churn = Churn(_objects(job, backend))
        _observe_n(uid, churn, WARMUP)
        assert GangJob.objects.get(pk=job.pk).phase == "Running", "the job did not reach Running"
        with CaptureQueriesContext(connection) as queries:
            _observe_n(uid, churn, 1)
        cpu, wall = time.process_time(), time.perf_counter()
        _observe_n(uid, churn, args.observations)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        print(f"{connection.vendor}: {args.observations} observations of an {PODS}-pod job: "
              f"{cpu / args.observations * 1000:.2f} ms CPU, {wall / args.observations * 1000:.2f} ms wall each")
        print(f"statements of one observation ({len(queries.captured_queries)}):")
        for q in queries.captured_queries:
            print("  ", q["sql"][:160])
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            _observe_n(uid, churn, args.observations)
            profiler.disable()
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
            print(out.getvalue())
        GangJob.objects.filter(pk=job.pk).delete()


if __name__ == "__main__":
    main()
