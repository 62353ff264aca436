"""Benchmark (issue 30): time from a hand edit of a gang object to gangweb's repair of it.

    python -m bench.run_all --only repair            # in the bench stack (PostgreSQL, Redis, a worker, the watcher)

On the stack's local control plane, with the Celery worker (`reconcile_job`) and the cluster watcher
(`manage.py watch_clusters`) running as deployed and nothing else to do (no beat, so no resync: every repair comes
from the watch queueing a pass for the edit), three jobs are submitted over HTTP and dispatched: k8s-workload (on
1.37 its v1beta1 Workload + PodGroup), KAI and coscheduling. Then `edits` hand edits are made in turn, cycling
through four kinds, each with the kubernetes client as a cluster admin would:

- `minCount`: the k8s-workload PodGroup's `spec.schedulingPolicy.gang.minCount` patched to 1; repaired when it
  reads the job's minimum again;
- `minResources`: the coscheduling PodGroup's `spec.minResources` emptied; repaired when it holds the job's
  requests again;
- `subGroup`: the KAI PodGroup's first `spec.subGroups[].minMember` patched to 1; repaired when it reads the pod
  set's minimum again;
- `deletion`: the k8s-workload PodGroup deleted (it stays Terminating under the protection finalizer while the
  pods run); repaired when a live PodGroup of a new generation exists (the job's objects are replaced under new
  names).

After one untimed edit of each kind (the watcher has listed the jobs, the worker is warm), each edit is timed
from the PATCH's or DELETE's answer (the API server has stored the edit) to the first GET, polled every
`POLL_SECONDS`, that shows the repair: an upper bound (it includes up to one poll interval). p50, p99, max
over all edits and per kind; goal p99 <= 2 s. The load average is recorded with the figures.
"""
from __future__ import annotations

import copy
import os
import time

from .common import logged_in_session, percentile, reset_jobs
from .stack import log

NS = "bench-repair"
POLL_SECONDS = 0.05
REPAIR_TIMEOUT = 60.0
WARM_TIMEOUT = 120.0
KINDS = ("minCount", "minResources", "subGroup", "deletion")
GOAL_P99_S = 2.0
BACKENDS = ("k8s-workload", "kai", "coscheduling")


def _template(user, backend: str):
    from scheduling.models import RuntimeTemplateVersion
    from scheduling.services.templates import versions as template_versions

    from .common import template_spec

    name = f"bench-repair-{backend}"
    version = RuntimeTemplateVersion.objects.filter(template__name=name).order_by("-version").first()
    if version is None:
        spec = template_spec(2)
        spec["backend"] = backend
        res = spec["podSets"][0]["template"]["spec"]["containers"][0]["resources"]
        res["requests"] = {"cpu": "10m", "memory": "16Mi"}
        res.pop("limits", None)
        version = template_versions.create_template(user, name, "repair benchmark", spec)
    return version


def _wait(check, timeout: float) -> float | None:
    """Poll `check()` every POLL_SECONDS until truthy; the seconds it took, or None after `timeout`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if check():
            return time.monotonic() - t0
        time.sleep(POLL_SECONDS)
    return None


def run(stack, base_url: str, edits: int = 60) -> dict:
    """Run the benchmark (module docstring); returns the figures."""
    from scheduling.backends import registry
    from scheduling.kube import objects
    from scheduling.models import Cluster, GangJob, Lease
    from scheduling.reconcile import desired

    from .common import bench_fixtures
    from .reconcile import setup

    reset_jobs()
    user = bench_fixtures()[0]
    cluster, queue_policy, _, api = setup(stack, 2, namespaces=[NS])
    if "worker" not in stack.procs:
        stack.start_worker()
    Lease.objects.filter(name__startswith="watch:").delete()
    # The watcher writes the cluster's node capacity only once every watched kind's first LIST is in
    # (reconcile/watch_dispatch.py): emptied first, it tells when the watcher has listed. The jobs are submitted
    # after that, so their objects reach its cache as watch events and every edit below finds an earlier copy to
    # compare with (an edit made before the watcher's first LIST is no edit to it: it waits for the resync).
    Cluster.objects.filter(pk=cluster.pk).update(capacity={})
    stack.start_watch()
    if _wait(lambda: bool(Cluster.objects.get(pk=cluster.pk).capacity), WARM_TIMEOUT) is None:
        raise RuntimeError(f"the watcher did not list the cluster within {WARM_TIMEOUT} s")
    session = logged_in_session(base_url, user)
    jobs = {}
    try:
        for backend in BACKENDS:
            version = _template(user, backend)
            r = session.post(f"{base_url}/api/v1/jobs/", json={
                "name": f"repair-{backend}", "namespace": NS, "template": version.template.name,
                "queue": queue_policy.name, "cluster": cluster.name})
            r.raise_for_status()
            jobs[backend] = r.json()["id"]
        served = set(cluster.served_apis or [])

        def refs(backend: str):
            cls = registry.select(backend, served) or registry.select(backend, None)
            return cls, {r.kind: r for r in cls.gang_kinds}

        def current(backend: str) -> tuple[GangJob, dict, dict]:
            job = GangJob.objects.select_related("queue").get(pk=jobs[backend])
            cls, kinds = refs(backend)
            spec = desired.gang_spec(job)
            want = {o["kind"]: o for o in cls().build_gang_objects(spec)}
            return job, kinds, want

        def live(ref, name):
            try:
                obj = objects.get(api, ref, NS, name)
            except Exception:  # noqa: BLE001 - 404 while it is being made: not there yet
                return None
            return None if obj["metadata"].get("deletionTimestamp") else obj

        def dispatched() -> bool:
            for backend in BACKENDS:
                _, kinds, want = current(backend)
                if any(live(kinds[k], w["metadata"]["name"]) is None for k, w in want.items()):
                    return False
            return True

        if _wait(dispatched, 180) is None:
            raise RuntimeError("the repair benchmark's jobs were not dispatched within 180 s")
        # Untimed: one edit of each kind, repaired, before timing: the worker is warm.
        for kind in KINDS:
            if _edit(kind, current, live, api, objects, timeout=WARM_TIMEOUT) is None:
                raise RuntimeError(f"the warm-up {kind} edit was not repaired within {WARM_TIMEOUT} s")
        times: dict[str, list[float]] = {k: [] for k in KINDS}
        missed: dict[str, list[int]] = {k: [] for k in KINDS}
        for i in range(edits):
            kind = KINDS[i % len(KINDS)]
            took = _edit(kind, current, live, api, objects)
            if took is None:
                missed[kind].append(i)
            else:
                times[kind].append(took)
    finally:
        stack.stop("watch")
    every = [t for ts in times.values() for t in ts]
    load = os.getloadavg()
    result = {
        "edits": edits, "repaired": len(every), "missed": missed,  # per kind: the indexes of the edits missed
        "p50_s": round(percentile(every, 50), 3) if every else None,
        "p99_s": round(percentile(every, 99), 3) if every else None,
        "max_s": round(max(every), 3) if every else None,
        "per_kind": {k: {"n": len(v), "p50_s": round(percentile(v, 50), 3) if v else None,
                         "p99_s": round(percentile(v, 99), 3) if v else None} for k, v in times.items()},
        "load_average": [round(x, 2) for x in load], "goal_p99_s": GOAL_P99_S,
        "server_version": cluster.server_version,
    }
    result["ok"] = bool(every) and result["p99_s"] <= GOAL_P99_S and not any(missed.values())
    log(f"repair: {len(every)}/{edits} edits repaired, p50 {result['p50_s']} s, p99 {result['p99_s']} s")
    return result


def _edit(kind: str, current, live, api, objects, timeout: float = REPAIR_TIMEOUT) -> float | None:
    """Make one edit of `kind` and return the seconds until it was seen repaired (None: not within `timeout`)."""
    if kind == "minCount":
        _, kinds, want = current("k8s-workload")
        ref, name = kinds["PodGroup"], want["PodGroup"]["metadata"]["name"]
        goal = want["PodGroup"]["spec"]["schedulingPolicy"]["gang"]["minCount"]
        objects.merge_patch(api, ref, NS, name, {"spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}})
        return _wait(lambda: ((live(ref, name) or {}).get("spec") or {}).get("schedulingPolicy", {}).get(
            "gang", {}).get("minCount") == goal, timeout)
    if kind == "minResources":
        _, kinds, want = current("coscheduling")
        ref, name = kinds["PodGroup"], want["PodGroup"]["metadata"]["name"]
        objects.merge_patch(api, ref, NS, name, {"spec": {"minResources": None}})
        return _wait(lambda: bool(((live(ref, name) or {}).get("spec") or {}).get("minResources")), timeout)
    if kind == "subGroup":
        _, kinds, want = current("kai")
        ref, name = kinds["PodGroup"], want["PodGroup"]["metadata"]["name"]
        groups = copy.deepcopy(want["PodGroup"]["spec"]["subGroups"])
        goal = groups[0]["minMember"]
        groups[0]["minMember"] = 1
        objects.merge_patch(api, ref, NS, name, {"spec": {"subGroups": groups}})
        return _wait(lambda: (((live(ref, name) or {}).get("spec") or {}).get("subGroups") or [{}])[0].get(
            "minMember") == goal, timeout)
    job, kinds, want = current("k8s-workload")
    ref, name = kinds["PodGroup"], want["PodGroup"]["metadata"]["name"]
    generation = job.gang_generation
    objects.delete(api, ref, NS, name)

    def replaced() -> bool:
        fresh, _, now = current("k8s-workload")
        return fresh.gang_generation > generation and live(ref, now["PodGroup"]["metadata"]["name"]) is not None
    return _wait(replaced, timeout)


def report(result: dict) -> list[str]:
    """The benchmark's lines for the run's summary."""
    lines = [f"repair after a hand edit: {result['repaired']}/{result['edits']} repaired; p50 {result['p50_s']} s, "
             f"p99 {result['p99_s']} s, max {result['max_s']} s (goal p99 <= {GOAL_P99_S} s); load "
             f"{result['load_average']}"]
    for kind, figures in result["per_kind"].items():
        lines.append(f"  {kind}: n={figures['n']} p50 {figures['p50_s']} s, p99 {figures['p99_s']} s, "
                     f"missed {len(result['missed'][kind])} {result['missed'][kind] or ''}")
    return lines
