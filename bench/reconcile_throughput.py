"""Reconcile throughput and resync request count against a running cluster.

    python -m bench.reconcile_throughput --kubeconfig var/localcluster/kubeconfig [--jobs 50] [--backend kai]

Uses a throw-away SQLite database in a temporary state directory. Submits N jobs (bulk, one namespace per run),
reconciles them with `reconcile_many` (the bulk-submit task body) and reports jobs/s and API requests per job;
then runs two resyncs over the now in-sync jobs and reports their API requests (which must not depend on N)
and duration. Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--backend", default="k8s-workload",
                        choices=["k8s-workload", "kai", "coscheduling", "volcano"])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--single", action="store_true",
                        help="one reconcile_job task body per job (per-job LISTs) instead of one bulk batch")
    args = parser.parse_args(argv)

    state = tempfile.mkdtemp(prefix="gangweb-bench-")
    os.environ.update(GANGWEB_STATE_DIR=state, DEBUG="1", DJANGO_SETTINGS_MODULE="gangweb.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from kubernetes import client

    call_command("migrate", verbosity=0)
    from scheduling import tasks
    from scheduling.kube import client as kube_client
    from scheduling.kube import objects
    from scheduling.models import GangJob
    from scheduling.reconcile import jobs, resync
    from scheduling.services.clusters import local as local_cluster
    from scheduling.services.jobs import lifecycle as job_service
    from scheduling.services.templates import versions as template_versions
    from scheduling.work import dispatch

    dispatch.reconcile_jobs_on_commit = lambda ids: None  # the bench drives reconcile itself
    cluster = local_cluster.register(args.kubeconfig)
    api = kube_client.api_client(cluster)
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    spec = json.loads(json.dumps(local_cluster.SAMPLE_SPEC))
    spec["backend"] = args.backend
    spec["podSets"][0]["replicas"] = args.replicas
    template_versions.create_template(None, f"bench-{args.backend}", "", spec)
    user = get_user_model().objects.create_superuser("bench", "bench@localhost", "bench-pw-123")
    body = [{"name": f"b-{i}", "namespace": namespace, "template": f"bench-{args.backend}", "queue": "default",
             "cluster": "local"} for i in range(args.jobs)]
    created = job_service.submit_many(user, body)

    objects.requests.reset()
    start = time.monotonic()
    if args.single:
        for job in created:
            tasks.reconcile_job(job.pk)  # the task body, called directly
        counts = {"ok": GangJob.objects.exclude(backend_plugin="").count()}
    else:
        counts = jobs.reconcile_many([j.pk for j in created])
    took = time.monotonic() - start
    reconcile_requests = objects.requests.total()

    resyncs = []
    for _ in range(2):
        objects.requests.reset()
        stats = resync.resync_cluster(cluster)
        resyncs.append({"jobs": stats["jobs"], "acted": stats["acted"], "requests": objects.requests.total(),
                        "seconds": stats["seconds"]})
    phases = sorted({j.phase for j in GangJob.objects.all()})
    client.CoreV1Api(api).delete_namespace(namespace)
    result = {
        "backend": args.backend, "mode": "single" if args.single else "bulk", "jobs": args.jobs,
        "replicas": args.replicas, "outcome": counts,
        "reconcile_seconds": round(took, 2), "jobs_per_second": round(args.jobs / took, 1),
        "requests_per_job": round(reconcile_requests / args.jobs, 1), "resyncs": resyncs, "phases": phases,
    }
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return result


if __name__ == "__main__":
    main()
