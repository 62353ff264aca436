"""Benchmark 2: reconcile throughput against the API server's saturated create rate, on the local control plane.

gangweb: jobs of 4 pods (backend k8s-workload: Workload + PodGroup, one Indexed Job, a headless Service) are
bulk-submitted over HTTP, 100 a round; the Celery worker (concurrency 2, GANGWEB_RECONCILE_THREADS 4 threads a
batch, the cluster's default client rate limit) dispatches them. A round's time runs from just before its submit
request to the moment the last of its jobs recorded Dispatched (gang objects and owners created: the
``recorded_at`` of its Dispatched transition); the objects are counted in the cluster at the end to confirm.

Baseline (issue 23 part 3): the API server's create rate at saturation. The same objects (built by gangweb's own
desired-state code) are created by N concurrent raw clients, each a process with one ApiClient and no client rate
limit (bench/raw_clients.py). N is chosen by a ramp (1, 2, 4, 8, 16 clients, 64 jobs each): the best rate's N; the
ramp's 1-client step is the serial create loop, reported too. Then the timed rounds: each runs both sides, 100 jobs
each, their order alternating, each side starting once the pods of everything created before exist (`settle`).
One untimed warm-up round per side first. Goal: gangweb's jobs/s over all rounds >= 0.8 x the saturated rate over
the same rounds.

Where gangweb's time goes comes from the worker's per-batch log lines (bench/batch_log.py): each round's wait to
start, snapshot, passes, API requests and the client rate limit's waits. When the limit held requests back, one
more pair of rounds runs with the cluster's limit raised to 10,000 QPS, so the result says what the limit costs.
"""
from __future__ import annotations

import itertools
import json
import time
import uuid

from . import batch_log, cpu, raw_clients
from .common import allow_namespaces, logged_in_session, ms, percentile, ratio
from .stack import log

GOAL_RATIO = 0.8
RAMP = (1, 2, 4, 8, 16)  # concurrent raw clients tried; the best rate's count is the saturated baseline's
RAMP_JOBS = 64  # jobs per ramp step
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


def setup(stack, replicas: int = 4, namespaces: tuple[str, ...] | list[str] = (GANG_NS, BASE_NS)):
    """Register the local cluster (Cluster "local", queue "default"), the bench template and `namespaces` (allowed
    on the queue, created in the cluster). Returns (cluster, queue, template_version, api)."""
    from django.contrib.auth import get_user_model
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from scheduling.kube import client as kube_client
    from scheduling.models import QueuePolicy, RuntimeTemplateVersion
    from scheduling.services.clusters import local as local_cluster
    from scheduling.services.templates import versions as template_versions

    cluster = local_cluster.register(stack.cluster.kubeconfig)
    queue = QueuePolicy.objects.get(name=local_cluster.DEFAULT_QUEUE)
    allow_namespaces([queue], list(namespaces))
    version = RuntimeTemplateVersion.objects.filter(template__name=TEMPLATE).order_by("-version").first()
    if version is None:
        user = get_user_model().objects.filter(is_superuser=True).first()
        version = template_versions.create_template(user, TEMPLATE, "reconcile benchmark", template_spec(replicas))
    api = kube_client.build_client(cluster)
    core = client.CoreV1Api(api)
    for ns in namespaces:
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
    from scheduling.services.templates import specs as template_service

    job = GangJob(name=name, namespace=namespace, template_version=version, queue=queue, uid=uuid.uuid4(),
                  resolved_spec=template_service.render(version.spec, {}))
    # The plugin gangweb's worker picks for this cluster (discovery), e.g. v1alpha2 on 1.36, v1beta1 on 1.37.
    backend = registry.select(job.resolved_spec["backend"], served)()
    spec = desired.gang_spec(job)
    out = [(ref_of(backend, o), o) for o in backend.build_gang_objects(spec)]
    out += [(JOB, o) for o in desired.owners(backend, spec)] + [(SERVICE, desired.service(spec))]
    return [(ref, _relabel(body)) for ref, body in out]


def _gangweb_round(session, base_url: str, version, queue, cluster, start: int, count: int, timeout: float):
    """Bulk-submit `count` jobs; wait until each recorded Dispatched. Returns (seconds, job ids, epoch seconds of
    the submit request's start)."""
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
            return (last - t0).total_seconds(), ids, t0.timestamp()
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {done.count()} of {len(ids)} jobs dispatched after {timeout:.0f} s")
        time.sleep(0.25)


def settle(api, expected: dict[str, int], timeout: float = 180) -> float:
    """Wait until each namespace of `expected` has that many pods (the Job controller created them), so one
    side's pod creation does not land in the other side's timed round. (Not Running: the 4 nodes take 440 pods,
    and the benchmark makes 4,000.) Returns the seconds waited; gives up (and goes on) after `timeout`."""
    from scheduling.kube import objects
    from scheduling.reconcile.cluster_watcher import POD

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


def run(stack, base_url: str, jobs: int = 300, rounds: int = 3, replicas: int = 4, ramp=RAMP,
        ramp_jobs: int = RAMP_JOBS) -> dict:
    """Run the reconcile benchmark (module docstring); returns the figures.

    Before anything is timed, one untimed round per side: a freshly started worker (imports, connections, its
    client) and the API server's first creates in a namespace are slow, and whichever side went first paid for it.
    Both sides' times cover the same thing: from the first create (baseline) or the submit request (gangweb) until
    every gang object and owner of the round exists (gangweb: recorded Dispatched, which follows the creates)."""
    from scheduling.backends import registry
    from scheduling.constants import LABEL_INSTANCE
    from scheduling.kube import throttle
    from scheduling.reconcile.desired import instance_label

    from .common import bench_fixtures, load_average, reset_client_limits, reset_jobs

    load_before = load_average()
    reset_client_limits()  # measured at the documented client limit, whatever an earlier benchmark left
    purged = reset_jobs()  # the jobs of earlier benchmarks, and the reconcile tasks queued for them
    if "worker" not in stack.procs:
        stack.start_worker()
    user = bench_fixtures()[0]
    cluster, queue, version, api = setup(stack, replicas)
    session = logged_in_session(base_url, user)
    per_round = jobs // rounds
    served = served_apis_of(queue)
    root_ref = registry.select(version.spec["backend"], served)().root_ref
    made = {BASE_NS: 0, GANG_NS: 0}  # jobs created so far per side (the pods to wait for: x replicas)
    names = itertools.count()  # job i of the benchmark is base-i or gw-i: no name is used twice

    def settled() -> None:
        settle(api, {ns: n * replicas for ns, n in made.items()})

    def raw_side(count: int, clients: int) -> dict:
        settled()
        bodies = [baseline_objects(version, queue, BASE_NS, f"base-{i}", served) for i in _block(names, count)]
        before = cpu.snapshot(stack)
        figures = raw_clients.run(cluster, root_ref, bodies, clients)
        figures["cpu"] = cpu.spent(before, cpu.snapshot(stack))
        figures["load_average"] = load_average()
        made[BASE_NS] += count
        return figures

    def gangweb_side(timeout: float = 300) -> dict:
        settled()
        first = _block(names, per_round)[0]
        before = cpu.snapshot(stack)
        took, ids, t0 = _gangweb_round(session, base_url, version, queue, cluster, first, per_round, timeout)
        made[GANG_NS] += per_round
        return {"seconds": took, "ids": ids, "t0": t0, "cpu": cpu.spent(before, cpu.snapshot(stack)),
                "load_average": load_average()}

    gangweb_side()  # warm-up, untimed
    raw_side(per_round, 4)
    warm_ids = per_round
    steps = [raw_side(ramp_jobs, n) for n in ramp]
    log("reconcile ramp: " + ", ".join(f"{s['clients']} client(s) {s['jobs_per_s']} jobs/s" for s in steps))
    clients = max(steps, key=lambda s: s["jobs_per_s"])["clients"]
    pairs = []
    for r in range(rounds):
        if r % 2 == 0:
            pairs.append((raw_side(per_round, clients), gangweb_side(), "baseline"))
        else:
            gang = gangweb_side()
            pairs.append((raw_side(per_round, clients), gang, "gangweb"))
    limits = throttle.limits_for(cluster)
    batches = batch_log.read(stack.workdir / "worker.log")
    per = [_round_figures(sat, gang, first, per_round, batches) for sat, gang, first in pairs]
    for i, p in enumerate(per):
        log(f"reconcile round {i + 1}/{rounds} ({p['first']} first): saturated {p['saturated_jobs_per_s']} jobs/s, "
            f"gangweb {p['gangweb_jobs_per_s']} jobs/s, ratio {p['ratio']}; batches {p['batches']}")
    unthrottled = None
    if sum(p["batches"]["throttle_wait_s"] for p in per) > 0.5:
        unthrottled = _unthrottled_round(cluster, raw_side, gangweb_side, clients, per_round, batches_path=stack.workdir
                                         / "worker.log")
        warm_ids += per_round
    settled()
    gang_s = sum(p["gangweb_s"] for p in per)
    sat_s = sum(p["saturated_s"] for p in per)
    all_ids = [i for _, gang, _ in pairs for i in gang["ids"]]
    gang_rate, sat_rate = len(all_ids) / gang_s, len(all_ids) / sat_s
    backend_cls = registry.select("k8s-workload", served)
    in_cluster = count_objects(api, backend_cls, GANG_NS, f"{LABEL_INSTANCE}={instance_label()}")
    in_baseline = count_objects(api, backend_cls, BASE_NS, f"{LABEL_INSTANCE}={BASELINE_INSTANCE}")
    latencies = submit_to_dispatched_ms(all_ids)
    ratios = sorted(p["ratio"] for p in per)
    serial = steps[0] if steps and steps[0]["clients"] == 1 else None
    requests_per_job = _mean([p["batches"]["requests_per_job"] for p in per])
    result = {
        "jobs": len(all_ids), "pods_per_job": replicas, "rounds": rounds, "backend": backend_cls.name,
        "objects_per_job": len(baseline_objects(version, queue, BASE_NS, "count", served)),
        "server_version": cluster.server_version, "stale_tasks_purged": purged,
        "gangweb": {"seconds": round(gang_s, 2), "jobs_per_s": round(gang_rate, 1),
                    "objects_in_cluster": in_cluster, "worker_processes": WORKER_PROCESSES,
                    "threads_per_batch": _threads(),
                    "submit_to_dispatched_p50_ms": ms(percentile(latencies, 50) / 1000),
                    "submit_to_dispatched_p99_ms": ms(percentile(latencies, 99) / 1000)},
        "saturated": {"seconds": round(sat_s, 2), "jobs_per_s": round(sat_rate, 1), "clients": clients,
                      "objects_in_cluster": in_baseline},
        "ramp": steps,
        "serial": {"jobs_per_s": serial["jobs_per_s"], "jobs": serial["jobs"]} if serial else None,
        "client_limit": {"qps": limits.qps, "burst": limits.burst, "requests_per_job": requests_per_job,
                         "ceiling_jobs_per_s": round(WORKER_PROCESSES * limits.qps / requests_per_job, 1)
                         if requests_per_job else None,
                         "throttle_wait_s": round(sum(p["batches"]["throttle_wait_s"] for p in per), 2)},
        "unthrottled_round": unthrottled,
        "cpu_ms_per_job": {side: _cpu_per_job([p["cpu"][side] for p in per], len(all_ids))
                           for side in ("saturated", "gangweb")},
        "per_round": per,
        "ratio_median": ratios[len(ratios) // 2] if len(ratios) % 2 else
        round((ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2, 2),
        "ratio_min": ratios[0], "ratio_max": ratios[-1],
        "ratio": ratio(gang_rate, sat_rate), "goal_ratio_min": GOAL_RATIO,
        "ratio_to_serial": ratio(gang_rate, serial["jobs_per_s"]) if serial else None,
        "load_average": {"before": load_before, "after": load_average()},
    }
    result["ok"] = (result["ratio"] >= GOAL_RATIO
                    and all(n == len(all_ids) + warm_ids for n in in_cluster.values()))
    # Where the worker's time goes, whether or not the goal was met (every thread of the batch sampled).
    result["profile"] = profile_batch(stack, user, version, queue, cluster, per_round // 2)
    return result


WORKER_PROCESSES = 2  # bench.stack's worker: --concurrency=2


def _block(counter, count: int) -> list[int]:
    """The next `count` numbers of `counter` (an itertools.count)."""
    return [next(counter) for _ in range(count)]


def _threads() -> int:
    from django.conf import settings

    return settings.GANGWEB_RECONCILE_THREADS


def _cpu_per_job(spent: list[dict], jobs: int) -> dict:
    """Summed `cpu.spent` figures of one side over the rounds, as CPU milliseconds per job; the machine's busy share
    as the mean of the rounds'."""
    out = {k: round(1000 * sum(s[k] for s in spent) / jobs, 1) for k in spent[0] if k != "machine_busy_pct"}
    out["machine_busy_pct"] = round(sum(s["machine_busy_pct"] for s in spent) / len(spent), 1)
    return out


def _mean(values: list[float]) -> float:
    values = [v for v in values if v]
    return round(sum(values) / len(values), 2) if values else 0.0


def _round_figures(sat: dict, gang: dict, first: str, count: int, batches: dict) -> dict:
    """One timed round's figures: both sides' rates and seconds, their ratio, p50/p99 submit-to-dispatched and
    what the worker log says of the round's batches (`batch_log.for_jobs`)."""
    lat = submit_to_dispatched_ms(gang["ids"])
    return {"first": first, "saturated_jobs_per_s": sat["jobs_per_s"],
            "gangweb_jobs_per_s": round(count / gang["seconds"], 1),
            "ratio": ratio(sat["seconds"], gang["seconds"]), "saturated_s": sat["seconds"],
            "gangweb_s": round(gang["seconds"], 2),
            "submit_to_dispatched_p50_ms": ms(percentile(lat, 50) / 1000),
            "submit_to_dispatched_p99_ms": ms(percentile(lat, 99) / 1000),
            "batches": batch_log.for_jobs(batches, gang["ids"], gang["t0"]),
            "load_average": {"saturated": sat["load_average"], "gangweb": gang["load_average"]},
            "cpu": {"saturated": sat["cpu"], "gangweb": gang["cpu"]}}


def _unthrottled_round(cluster, raw_side, gangweb_side, clients: int, count: int, batches_path) -> dict:
    """One more pair of rounds with the cluster's client rate limit raised to raw_clients.RAW_QPS/RAW_BURST (the
    worker builds a new client with the new limit at its next batch), then the limit put back as it was."""
    from scheduling.models import Cluster

    before = Cluster.objects.filter(pk=cluster.pk).values("api_qps", "api_burst").first()
    Cluster.objects.filter(pk=cluster.pk).update(api_qps=raw_clients.RAW_QPS, api_burst=raw_clients.RAW_BURST)
    try:
        gang = gangweb_side()
        sat = raw_side(count, clients)
    finally:
        Cluster.objects.filter(pk=cluster.pk).update(**before)
    figures = _round_figures(sat, gang, "gangweb", count, batch_log.read(batches_path))
    log(f"reconcile round with the client limit raised: saturated {figures['saturated_jobs_per_s']} jobs/s, gangweb "
        f"{figures['gangweb_jobs_per_s']} jobs/s, ratio {figures['ratio']}; batches {figures['batches']}")
    return figures


def profile_batch(stack, user, version, queue, cluster, count: int) -> str:
    """Profile the worker's side in-process: with the worker stopped, submit `count` jobs through the service
    and run the bulk-reconcile task body (`reconcile_many`, its GANGWEB_RECONCILE_THREADS threads) on them under
    bench.sampler, which samples every thread, after an unprofiled batch of a fifth of the size."""
    from scheduling.reconcile import jobs as job_reconcile
    from scheduling.services.jobs import lifecycle as job_service

    from .common import profile_threads

    stack.stop("worker")

    def submit(n: int) -> list:
        return job_service.submit_many(user, [
            {"name": f"prof-{uuid.uuid4().hex[:8]}", "namespace": GANG_NS, "template": version.template.name,
             "queue": queue.name, "cluster": cluster.name} for _ in range(n)])

    # An unprofiled batch first, as a running worker has had: its threads, connections and client exist.
    job_reconcile.reconcile_many([j.pk for j in submit(max(4, count // 5))])
    created = submit(count)
    path = profile_threads("reconcile-batch-threads", lambda: job_reconcile.reconcile_many([j.pk for j in created]))
    stack.start_worker()  # the queued tasks for these jobs find them dispatched: no-ops
    return path


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    g, b, lim = result["gangweb"], result["saturated"], result["client_limit"]
    serial = result.get("serial") or {}
    lines = [
        f"reconcile     : {result['jobs']} jobs x {result['pods_per_job']} pods ({result['backend']}, "
        f"{result['objects_per_job']} objects/job); {result['stale_tasks_purged']} stale queued tasks purged first",
        f"  gangweb     : {g['jobs_per_s']:8.1f} jobs/s  submit-to-dispatched p50 {g['submit_to_dispatched_p50_ms']} ms"
        f"  p99 {g['submit_to_dispatched_p99_ms']} ms  in cluster {g['objects_in_cluster']}",
        f"  saturated   : {b['jobs_per_s']:8.1f} jobs/s  ({b['clients']} concurrent raw clients, no client limit; "
        "ramp " + ", ".join(f"{s['clients']}: {s['jobs_per_s']}" for s in result["ramp"]) + ")",
        f"  serial loop : {serial.get('jobs_per_s', 0):8.1f} jobs/s  (gangweb {result.get('ratio_to_serial')} x)",
        f"  ratio       : {result['ratio']:.2f} x saturated (goal >= {GOAL_RATIO}) "
        f"{'OK' if result['ok'] else 'BELOW GOAL'}; per round median {result['ratio_median']:.2f}, "
        f"{result['ratio_min']:.2f}-{result['ratio_max']:.2f} over {result['rounds']}",
        f"  client limit: {lim['qps']:g} QPS / burst {lim['burst']} per process x {g['worker_processes']}; "
        f"{lim['requests_per_job']} requests/job -> ceiling {lim['ceiling_jobs_per_s']} jobs/s; waited "
        f"{lim['throttle_wait_s']} s in the timed rounds",
        f"  load average: {result['load_average']['before']} before, {result['load_average']['after']} after",
    ]
    for side, c in result["cpu_ms_per_job"].items():
        lines.append(f"  cpu/job {side:9s}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    if result.get("unthrottled_round"):
        u = result["unthrottled_round"]
        lines.append(f"  limit raised: gangweb {u['gangweb_jobs_per_s']} jobs/s vs saturated "
                     f"{u['saturated_jobs_per_s']} jobs/s, ratio {u['ratio']}")
    return lines
