"""Benchmark 2: reconcile throughput against the raw Kubernetes client, on the local control plane.

gangweb: `jobs` jobs of 4 pods (backend k8s-workload: Workload + PodGroup, one Indexed Job, a headless Service)
are bulk-submitted over HTTP in rounds; the Celery worker dispatches them. A round's time runs from just before its
submit request to the moment the last of its jobs recorded Dispatched (gang objects and owners created: the
``recorded_at`` of its Dispatched transition); the objects are then counted in the cluster to confirm.

Baseline: a plain Python loop that creates the same objects (built by gangweb's own desired-state code, so they
are byte-for-byte the same shape) with an ApiClient built from the same Cluster row, one after the other.
One untimed warm-up round of full size per side first; then each round runs both sides, their order alternating,
each starting once the pods of everything created before exist, so background load (the Job controller creating
pods, other engineers) hits both alike. Goal: gangweb's jobs/s >= 0.8 x the baseline's over all rounds; the median
and range of the per-round ratios and p50 submit-to-dispatched latency are reported.
"""
from __future__ import annotations

import json
import time
import uuid

from .common import allow_namespaces, create_owned, logged_in_session, ms, percentile, ratio
from .stack import log

GOAL_RATIO = 0.8
TEMPLATE = "bench-reconcile"
GANG_NS, BASE_NS = "bench-gangweb", "bench-baseline"
BASELINE_INSTANCE = "bench-baseline"  # baseline objects stay out of gangweb's instance-labelled LISTs


def template_spec(replicas: int) -> dict:
    """4 small pods that run for an hour once bound (kwok's sim-duration): nothing finishes mid-benchmark."""
    return {
        "backend": "k8s-workload",
        "gang": {"scheduleTimeoutSeconds": 60},
        "podSets": [{"name": "worker", "replicas": replicas, "template": {
            "metadata": {"annotations": {"gangweb.io/sim-duration": "3600s"}},
            "spec": {"containers": [{"name": "main", "image": "registry.example/train:1",
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}],
        "overridable": ["podSets.*.replicas"],
    }


def setup(stack, replicas: int = 4):
    """Register the local cluster (Cluster "local", queue "default"), the bench template and the namespaces.
    Returns (cluster, queue, template_version, api)."""
    from django.contrib.auth import get_user_model
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from scheduling.kube import client as kube_client
    from scheduling.models import QueuePolicy, RuntimeTemplateVersion
    from scheduling.services import local_cluster
    from scheduling.services import templates as template_service

    cluster = local_cluster.register(stack.cluster.kubeconfig)
    queue = QueuePolicy.objects.get(name=local_cluster.DEFAULT_QUEUE)
    allow_namespaces([queue], [GANG_NS, BASE_NS])
    version = RuntimeTemplateVersion.objects.filter(template__name=TEMPLATE).order_by("-version").first()
    if version is None:
        user = get_user_model().objects.filter(is_superuser=True).first()
        version = template_service.create_template(user, TEMPLATE, "reconcile benchmark", template_spec(replicas))
    api = kube_client.build_client(cluster)
    core = client.CoreV1Api(api)
    for ns in (GANG_NS, BASE_NS):
        try:
            core.create_namespace({"metadata": {"name": ns}})
        except ApiException as exc:
            if exc.status != 409:
                raise
    return cluster, queue, version, api


def _relabel(obj: dict) -> dict:
    from scheduling.constants import LABEL_INSTANCE

    obj["metadata"]["labels"][LABEL_INSTANCE] = BASELINE_INSTANCE
    template = (obj.get("spec") or {}).get("template") or {}
    if "labels" in (template.get("metadata") or {}):
        template["metadata"]["labels"][LABEL_INSTANCE] = BASELINE_INSTANCE
    return obj


def served_apis_of(queue) -> list[str]:
    """The API groups/versions served by the queue's first cluster (as the probe recorded them), read once a round."""
    from scheduling.models import Cluster

    return Cluster.objects.get(pk=queue.clusters.values_list("pk", flat=True).first()).served_apis or []


def baseline_objects(version, queue, namespace: str, name: str, served: list[str]) -> list[tuple[object, dict]]:
    """[(ObjectRef, body)] gangweb would create for a job `name`: gang objects, Indexed Jobs, Service. `served` is
    `served_apis_of(queue)`."""
    from scheduling.backends import registry
    from scheduling.kube.objects import JOB, SERVICE
    from scheduling.models import GangJob
    from scheduling.reconcile import desired
    from scheduling.reconcile.jobs import ref_of
    from scheduling.services import templates as template_service

    job = GangJob(name=name, namespace=namespace, template_version=version, queue=queue, uid=uuid.uuid4(),
                  resolved_spec=template_service.render(version.spec, {}))
    # The plugin gangweb's worker picks for this cluster (discovery), e.g. v1alpha2 on 1.36, v1beta1 on 1.37.
    backend = registry.select(job.resolved_spec["backend"], served)()
    spec = desired.gang_spec(job)
    out = [(ref_of(backend, o), o) for o in backend.build_gang_objects(spec)]
    out += [(JOB, o) for o in desired.owners(backend, spec)] + [(SERVICE, desired.service(spec))]
    return [(ref, _relabel(body)) for ref, body in out]


def _baseline_round(api, version, queue, start: int, count: int) -> tuple[float, int]:
    from scheduling.backends import registry

    served = served_apis_of(queue)
    bodies = [baseline_objects(version, queue, BASE_NS, f"base-{i}", served) for i in range(start, start + count)]
    root_ref = registry.select(version.spec["backend"], served)().root_ref
    t0 = time.perf_counter()
    created = sum(len(create_owned(api, root_ref, job_objects)) for job_objects in bodies)
    return time.perf_counter() - t0, created


def _gangweb_round(session, base_url: str, version, queue, cluster, start: int, count: int, timeout: float):
    """Bulk-submit `count` jobs; wait until each recorded Dispatched. Returns (seconds, job ids)."""
    from django.utils import timezone

    from scheduling.choices import GangPhase
    from scheduling.models import PhaseTransition

    body = {"jobs": [{"name": f"gw-{i}", "namespace": GANG_NS, "template": version.template.name,
                      "queue": queue.name, "cluster": cluster.name} for i in range(start, start + count)]}
    t0 = timezone.now()
    response = session.post(f"{base_url}/api/v1/jobs/bulk/", data=json.dumps(body))
    if response.status_code != 201:
        raise RuntimeError(f"bulk submit -> {response.status_code}: {response.text[:300]}")
    ids = [j["id"] for j in response.json()["jobs"]]
    deadline = time.monotonic() + timeout
    while True:
        done = PhaseTransition.objects.filter(job_id__in=ids, phase=GangPhase.DISPATCHED)
        if done.count() == len(ids):
            last = max(done.values_list("recorded_at", flat=True))
            return (last - t0).total_seconds(), ids
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {done.count()} of {len(ids)} jobs dispatched after {timeout:.0f} s")
        time.sleep(0.25)


def settle(api, expected: dict[str, int], timeout: float = 180) -> float:
    """Wait until each namespace of `expected` has that many pods (the Job controller created them), so one
    side's pod creation does not land in the other side's timed round. (Not Running: the 4 nodes take 440 pods,
    and the benchmark makes 4,000.) Returns the seconds waited; gives up (and goes on) after `timeout`."""
    from scheduling.kube import objects
    from scheduling.kube.watches import POD

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        have = {ns: len(objects.list_objects(api, POD, ns, "", project=lambda pod: {})) for ns in expected}
        if all(have[ns] >= n for ns, n in expected.items()):
            break
        time.sleep(1)
    return time.monotonic() - t0


def count_objects(api, backend_cls, namespace: str, selector: str) -> dict[str, int]:
    """Objects per kind in `namespace` matching `selector` (one LIST each)."""
    from scheduling.kube import objects
    from scheduling.kube.objects import JOB, SERVICE

    return {ref.kind: len(objects.list_objects(api, ref, namespace, selector))
            for ref in [*backend_cls.gang_kinds, JOB, SERVICE]}


def submit_to_dispatched_ms(job_ids: list[int]) -> list[float]:
    """Per job: Dispatched recorded_at minus Submitted at (ms)."""
    from scheduling.choices import GangPhase
    from scheduling.models import PhaseTransition

    rows = PhaseTransition.objects.filter(job_id__in=job_ids, phase__in=[GangPhase.SUBMITTED, GangPhase.DISPATCHED])
    times: dict[int, dict] = {}
    for job_id, phase, at, recorded in rows.values_list("job_id", "phase", "at", "recorded_at"):
        times.setdefault(job_id, {})[phase] = recorded if phase == GangPhase.DISPATCHED else at
    return [(t[GangPhase.DISPATCHED] - t[GangPhase.SUBMITTED]).total_seconds() * 1000
            for t in times.values() if len(t) == 2]


def run(stack, base_url: str, jobs: int = 500, rounds: int = 5, replicas: int = 4, on_round=None) -> dict:
    """Run the reconcile benchmark; `on_round(round_index, job_ids_so_far)` is called after each gangweb round
    (the resync benchmark measures there). Returns the figures.

    Before the timed rounds, one untimed warm-up round of full size per side: a freshly started control plane (its
    caches, its controllers' first bursts), the worker (imports, connections, its client) and the baseline's client
    are all slow at first, and whichever side went first paid for it (the first round was 3.5 vs 5.1 jobs/s). The
    order of the sides alternates from round to round (baseline first in the odd rounds), and every timed side starts
    once the pods of everything created before exist (`settle`), so neither side always runs on a colder or busier
    control plane. Each side's time covers the same thing: from its first create (baseline) or its submit request
    (gangweb) until every gang object and owner of the round exists (gangweb: recorded Dispatched, which follows the
    creates)."""
    from scheduling.backends import registry
    from scheduling.constants import LABEL_INSTANCE
    from scheduling.reconcile.desired import instance_label

    from .common import bench_fixtures, reset_jobs

    reset_jobs()  # jobs of an earlier run point at a cluster that is gone
    if "worker" not in stack.procs:
        stack.start_worker()
    user = bench_fixtures()[0]
    cluster, queue, version, api = setup(stack, replicas)
    session = logged_in_session(base_url, user)
    per_round = jobs // rounds
    made = {BASE_NS: 0, GANG_NS: 0}  # jobs created so far per side (the pods to wait for: x replicas)

    def settled():
        settle(api, {ns: n * replicas for ns, n in made.items()})

    def baseline_side(first: int) -> float:
        settled()
        took, _ = _baseline_round(api, version, queue, first, per_round)
        made[BASE_NS] += per_round
        return took

    def gangweb_side(first: int, timeout: float = 300) -> tuple[float, list[int]]:
        settled()
        took, ids = _gangweb_round(session, base_url, version, queue, cluster, first, per_round, timeout=timeout)
        made[GANG_NS] += per_round
        return took, ids

    # Warm-up, untimed, a full round per side (named after the timed ones: indices jobs.. jobs + per_round).
    gangweb_side(jobs)
    baseline_side(jobs)
    warm_ids = per_round
    per: list[dict] = []
    all_ids: list[int] = []
    for r in range(rounds):
        first = r * per_round
        baseline_first = r % 2 == 0
        if baseline_first:
            base_took = baseline_side(first)
            gang_took, ids = gangweb_side(first)
        else:
            gang_took, ids = gangweb_side(first)
            base_took = baseline_side(first)
        all_ids += ids
        lat = submit_to_dispatched_ms(ids)
        per.append({"first": "baseline" if baseline_first else "gangweb",
                    "baseline_jobs_per_s": round(per_round / base_took, 1),
                    "gangweb_jobs_per_s": round(per_round / gang_took, 1),
                    "ratio": ratio(base_took, gang_took), "baseline_s": round(base_took, 2),
                    "gangweb_s": round(gang_took, 2),
                    "submit_to_dispatched_p50_ms": ms(percentile(lat, 50) / 1000)})
        log(f"reconcile round {r + 1}/{rounds} ({per[-1]['first']} first): baseline "
            f"{per[-1]['baseline_jobs_per_s']} jobs/s, gangweb {per[-1]['gangweb_jobs_per_s']} jobs/s, "
            f"ratio {per[-1]['ratio']}")
        if on_round:
            on_round(r, list(all_ids))
    settled()
    base_s, gang_s = sum(p["baseline_s"] for p in per), sum(p["gangweb_s"] for p in per)
    backend_cls = registry.plugins("k8s-workload")[0]
    in_cluster = count_objects(api, backend_cls, GANG_NS, f"{LABEL_INSTANCE}={instance_label()}")
    in_baseline = count_objects(api, backend_cls, BASE_NS, f"{LABEL_INSTANCE}={BASELINE_INSTANCE}")
    latencies = submit_to_dispatched_ms(all_ids)
    gang_rate, base_rate = len(all_ids) / gang_s, len(all_ids) / base_s
    ratios = sorted(p["ratio"] for p in per)
    result = {
        "jobs": len(all_ids), "pods_per_job": replicas, "rounds": rounds, "backend": backend_cls.name,
        "objects_per_job": len(baseline_objects(version, queue, BASE_NS, "count", served_apis_of(queue))),
        "gangweb": {"seconds": round(gang_s, 2), "jobs_per_s": round(gang_rate, 1),
                    "objects_in_cluster": in_cluster,
                    "submit_to_dispatched_p50_ms": ms(percentile(latencies, 50) / 1000),
                    "submit_to_dispatched_p99_ms": ms(percentile(latencies, 99) / 1000)},
        "baseline": {"seconds": round(base_s, 2), "jobs_per_s": round(base_rate, 1),
                     "objects_in_cluster": in_baseline},
        "per_round": per,
        "ratio_median": ratios[len(ratios) // 2] if len(ratios) % 2 else
        round((ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2, 2),
        "ratio_min": ratios[0], "ratio_max": ratios[-1],
        "ratio": ratio(gang_rate, base_rate), "goal_ratio_min": GOAL_RATIO,
        "ok": ratio(gang_rate, base_rate) >= GOAL_RATIO
        and all(n == len(all_ids) + warm_ids for n in in_cluster.values()),
    }
    if not result["ok"]:
        result["profile"] = profile_batch(stack, user, version, queue, cluster, per_round)
    return result


def profile_batch(stack, user, version, queue, cluster, count: int) -> str:
    """Profile the worker's side in-process: with the worker stopped, submit `count` jobs through the service
    and run the bulk-reconcile task body (`reconcile_many`) on them under pyinstrument."""
    from scheduling.reconcile import jobs as job_reconcile
    from scheduling.services import jobs as job_service

    from .common import profile

    stack.stop("worker")
    created = job_service.submit_many(user, [
        {"name": f"prof-{uuid.uuid4().hex[:8]}", "namespace": GANG_NS, "template": version.template.name,
         "queue": queue.name, "cluster": cluster.name} for _ in range(count)])
    path = profile("reconcile-batch", lambda: job_reconcile.reconcile_many([j.pk for j in created]))
    stack.start_worker()  # the queued tasks for these jobs find them dispatched: no-ops
    return path


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    g, b = result["gangweb"], result["baseline"]
    return [
        f"reconcile     : {result['jobs']} jobs x {result['pods_per_job']} pods ({result['backend']}, "
        f"{result['objects_per_job']} objects/job)",
        f"  gangweb     : {g['jobs_per_s']:8.1f} jobs/s  submit-to-dispatched p50 {g['submit_to_dispatched_p50_ms']} ms"
        f"  p99 {g['submit_to_dispatched_p99_ms']} ms  in cluster {g['objects_in_cluster']}",
        f"  baseline    : {b['jobs_per_s']:8.1f} jobs/s  (plain create loop, same client settings)",
        f"  ratio       : {result['ratio']:.2f} x baseline (goal >= {GOAL_RATIO}) "
        f"{'OK' if result['ok'] else 'BELOW GOAL'}; per round median {result['ratio_median']:.2f}, "
        f"{result['ratio_min']:.2f}-{result['ratio_max']:.2f} over {result['rounds']}",
    ]
