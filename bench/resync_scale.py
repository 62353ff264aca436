"""Benchmark 3b: how one resync of in-sync jobs grows with the jobs: 1,000, 10,000 and 50,000 (issue 36).

    python -m bench.run_all --only resync_scale            (the sizes below, 3 rounds each)
    BENCH_RESYNC_SIZES=1000,10000 BENCH_RESYNC_OLD_CODE=/tmp/gangweb-old python -m bench.run_all --only resync_scale

Each size gets a local control plane of its own (started here, stopped at the end), registered as Cluster
``rs-<size>`` with the documented client rate limit (the row's `api_qps`/`api_burst` empty: kube/throttle.py's
default), holding exactly that many one-pod KAI jobs in sync: a PodGroup, an Indexed Job, a headless Service and the
Job controller's Pending pod each (`bench.resync.job_objects`, what gangweb's dispatch creates; no KAI scheduler
runs, so nothing changes under the resync). Set-up, not measured: rows inserted with SQL, objects created from
`CREATE_CLIENTS` processes of their own without a client rate limit (`raw_clients`, unsaved unthrottled copy of the
Cluster row: the saved row's limit is never raised), the owner Jobs' UIDs recorded from a paginated LIST, and the
first observation of each job written by gangweb's job pass (`bench.resync.first_pass`).

Measured per size and round: one resync of the cluster in a fresh process (`bench/resync_probe.py`): wall seconds,
ms per job, that process's peak RSS (VmHWM) and its RSS before the resync, requests by verb and kind, response bytes
read, the API server's and etcd's CPU seconds during the run (their /proc stat), and the load average (1 min)
before and after. With `BENCH_RESYNC_OLD_CODE` (a checkout of an older commit), the same probe runs that code's
resync too, alternating which goes first per round. Goals (issue 36): at 50,000 jobs peak RSS <= 1.2x and ms per job
<= 1.5x the 1,000-job figures (medians of the rounds).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .stack import REPO, log

SIZES = (1_000, 10_000, 50_000)
ROUNDS = 3
NAMESPACE = "bench-resync"
CREATE_CLIENTS = 4  # processes creating the dataset's objects
CREATE_CHUNK = 5_000  # jobs whose bodies are built and created at a time (bounds the set-up's own memory)
GOAL_RSS_RATIO = 1.2
GOAL_MS_PER_JOB_RATIO = 1.5
PROBE = Path(__file__).resolve().parent / "resync_probe.py"


def register(name: str, kubeconfig: str):
    """Cluster `name` for the control plane behind `kubeconfig` (a path), probed, in queue "default"'s clusters,
    its client rate limit at the default. Returns (cluster, queue)."""
    from scheduling.kube import client as kube_client
    from scheduling.models import Cluster, QueuePolicy
    from scheduling.reconcile import probe
    from scheduling.services.clusters import local as local_cluster

    from .common import allow_namespaces

    cluster, _ = Cluster.objects.update_or_create(name=name, defaults={
        "kubeconfig": Path(kubeconfig).read_text(), "context": "", "in_cluster": False,
        "description": "resync benchmark control plane", "api_qps": None, "api_burst": None})
    queue, _ = QueuePolicy.objects.get_or_create(name=local_cluster.DEFAULT_QUEUE,
                                                 defaults={"display_name": "Default"})
    queue.clusters.add(cluster)
    allow_namespaces([queue], [NAMESPACE])
    kube_client.forget(cluster.pk)
    return probe.probe_cluster(cluster), queue


def _record_owner_uids(api, first: int, last: int) -> None:
    """Set each job's `owner_uids` ({Job name: uid}, what the dispatch records) from a paginated LIST of the Jobs."""
    from kubernetes import client

    from scheduling.constants import LABEL_JOB_UID
    from scheduling.models import GangJob

    owners: dict[str, dict] = {}
    batch = client.BatchV1Api(api)
    token = None
    while True:
        page = batch.list_namespaced_job(NAMESPACE, limit=500, _continue=token, _request_timeout=60)
        for job in page.items:
            uid = (job.metadata.labels or {}).get(LABEL_JOB_UID)
            if uid:
                owners.setdefault(uid, {})[job.metadata.name] = job.metadata.uid
        token = page.metadata._continue
        if not token:
            break
    rows = list(GangJob.objects.filter(pk__range=(first, last)).only("pk", "uid"))
    for row in rows:
        row.owner_uids = owners.get(str(row.uid), {})
    GangJob.objects.bulk_update(rows, ["owner_uids"], batch_size=1000)


def build(name: str, kubeconfig: str, size: int, timeout: float = 3600) -> dict:
    """Cluster `name` holding `size` in-sync jobs (see the module docstring). Returns the set-up's seconds:
    {"jobs", "create_s", "pods_s", "first_pass_s", "objects_per_s"}."""
    from scheduling.backends import registry
    from scheduling.choices import GangPhase
    from scheduling.kube import client as kube_client
    from scheduling.models import GangJob

    from . import raw_clients, seed
    from .common import bench_fixtures, ensure_namespace
    from .resync import count_pods, first_pass, job_objects, template_version

    cluster, queue = register(name, kubeconfig)
    user = bench_fixtures()[0]
    version = template_version()
    api = kube_client.build_client(raw_clients.unthrottled(cluster))
    ensure_namespace(api, NAMESPACE)
    backend_cls = registry.select(version.spec["backend"], set(cluster.served_apis))
    backend = backend_cls()
    first, last = seed.insert_jobs(size, version, [queue], cluster, user, prefix=name,
                                   phases=[GangPhase.SUBMITTED], spacing_seconds=0.001)
    GangJob.objects.filter(pk__range=(first, last)).update(namespace=NAMESPACE, backend_plugin=backend_cls.name)
    out = {"jobs": size}
    t0 = time.monotonic()
    created = 0
    for start in range(first, last + 1, CREATE_CHUNK):
        jobs = GangJob.objects.filter(pk__range=(start, min(last, start + CREATE_CHUNK - 1))).select_related("queue")
        bodies = [job_objects(backend, job) for job in jobs]
        created += raw_clients.run(cluster, backend.root_ref, bodies, CREATE_CLIENTS)["objects"]
        log(f"resync_scale {name}: {created} objects created ({time.monotonic() - t0:.0f} s)")
    out["create_s"] = round(time.monotonic() - t0, 1)
    out["objects_per_s"] = round(created / max(out["create_s"], 0.001), 1)
    _record_owner_uids(api, first, last)
    t0 = time.monotonic()
    while (n := count_pods(api)) < size:
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"{name}: only {n} of {size} pods after {timeout:.0f} s")
        time.sleep(2)
    out["pods_s"] = round(time.monotonic() - t0, 1)
    t0 = time.monotonic()
    failed = first_pass(api, cluster, first, last, threads=4)
    out["first_pass_s"] = round(time.monotonic() - t0, 1)
    if failed:
        raise RuntimeError(f"{name}: the first pass failed for {failed} jobs")
    log(f"resync_scale {name}: {size} jobs in sync (creates {out['create_s']} s, pods {out['pods_s']} s, "
        f"first pass {out['first_pass_s']} s)")
    return out


def _cpu_seconds(pids: list[int]) -> float:
    """utime + stime of `pids` (seconds; /proc/<pid>/stat fields 14 and 15)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (FileNotFoundError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def server_pids(state_dir: Path) -> list[int]:
    """The pids of the kube-apiserver and etcd of the control plane in `state_dir`."""
    import localcluster

    return [c.pid for c in localcluster.status(state_dir).components
            if c.name in ("kube-apiserver", "etcd") and c.alive]


def probe(name: str, code: str | None = None, server: list[int] | None = None, timeout: float = 3600) -> dict:
    """One resync of cluster `name` in a fresh process (`resync_probe.py`, with `code` as the checkout whose resync
    runs): its figures, plus "ms_per_job", "load_before", "load_after" and (with `server` pids) "server_cpu_s"."""
    argv = [sys.executable, str(PROBE), "--cluster", name] + (["--code", code] if code else [])
    load_before = round(os.getloadavg()[0], 2)
    cpu0 = _cpu_seconds(server or [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    cpu1 = _cpu_seconds(server or [])
    if done.returncode:
        raise RuntimeError(f"resync probe of {name} ({code or 'this tree'}) failed: {done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out.update({"ms_per_job": round(out["seconds"] * 1000 / max(1, out["jobs"]), 3),
                "cpu_ms_per_job": round(out.get("cpu_s", 0) * 1000 / max(1, out["jobs"]), 3),
                "load_before": load_before,
                "load_after": round(os.getloadavg()[0], 2), "server_cpu_s": round(cpu1 - cpu0, 2)})
    return out


def spread(rounds: list[dict], key: str) -> dict:
    """{"min", "median", "max"} of `key` over `rounds`."""
    values = [r[key] for r in rounds]
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summarize(rounds: list[dict]) -> dict:
    """The rounds of one size and code, with the spread of each figure (of those every round has)."""
    keys = ("seconds", "ms_per_job", "cpu_s", "cpu_ms_per_job",
            "peak_rss_mib", "rss_before_mib", "requests", "bytes_listed", "server_cpu_s",
            "load_before", "load_after")
    last = rounds[-1]
    return {"jobs": last["jobs"], "acted": max(r["acted"] for r in rounds), "failed": max(r["failed"] for r in rounds),
            "by_request": last["by_request"], "rounds": rounds,
            **{k: spread(rounds, k) for k in keys if all(k in r for r in rounds)}}


def measure(name: str, rounds: int, old_code: str | None, server: list[int] | None) -> dict:
    """`rounds` probes of cluster `name` with this tree's resync (and `old_code`'s, alternating which goes first)."""
    runs: dict[str, list[dict]] = {"new": [], **({"old": []} if old_code else {})}
    for i in range(rounds):
        order = ["new", "old"] if i % 2 == 0 else ["old", "new"]
        for which in order:
            if which in runs:
                runs[which].append(probe(name, old_code if which == "old" else None, server))
                r = runs[which][-1]
                log(f"resync_scale {name} {which} round {i + 1}: {r['jobs']} jobs {r['seconds']} s "
                    f"({r['ms_per_job']} ms/job, CPU {r['cpu_ms_per_job']} ms/job), peak RSS {r['peak_rss_mib']} MiB, "
                    f"{r['requests']} requests, "
                    f"{r['bytes_listed']:,} bytes, load {r['load_before']}")
    return {which: summarize(rs) for which, rs in runs.items()}


def _hold(size: int) -> None:
    """With BENCH_RESYNC_HOLD_DIR set, wait until the file `measure-<size>` exists in it before measuring (a
    developer's run: the dataset builds while the code to measure is finished)."""
    folder = os.environ.get("BENCH_RESYNC_HOLD_DIR")
    if not folder:
        return
    flag = Path(folder) / f"measure-{size}"
    log(f"resync_scale: waiting for {flag}")
    while not flag.exists():
        time.sleep(5)


def run(stack, sizes=SIZES, rounds: int = ROUNDS, old_code: str | None = None, old_max: int = 10_000) -> dict:
    """Build each size on a control plane of its own, measure it, stop it. Returns {"sizes": {size: {"build",
    "new", ["old"]}}, "goals": ...}. Control planes and their Cluster rows' client limits are left as found: the
    rows are reset to the default at the start and the control planes stopped in a finally."""
    import localcluster

    out: dict = {"sizes": {}}
    for size in sizes:
        name = f"rs-{size}"
        forget(name)  # a run stopped midway left its rows
        state_dir = stack.workdir / f"localcluster-{name}"
        log(f"resync_scale: starting a control plane for {size} jobs")
        plane = localcluster.up(localcluster.ClusterConfig(state_dir=state_dir))
        try:
            built = build(name, str(plane.kubeconfig), size)
            _hold(size)
            out["sizes"][size] = {"build": built, **measure(name, rounds, old_code if size <= old_max else None,
                                                            server_pids(state_dir))}
            log("resync_scale: " + " | ".join(report({"sizes": {size: out["sizes"][size]}})))
        finally:
            localcluster.down(state_dir)
            forget(name)
    out["goals"] = goals(out["sizes"])
    return out


FORGET_CHUNK = 5_000  # jobs per DELETE: Django's cascade lists their ids as parameters (PostgreSQL takes <= 65,535)


def forget(name: str) -> None:
    """Delete Cluster `name` and its jobs (their history and attempts by cascade), if any, FORGET_CHUNK jobs at a
    time (50,000 at once failed: "number of parameters must be between 0 and 65535")."""
    from scheduling.models import Cluster, GangJob

    ids = list(GangJob.objects.filter(cluster__name=name).order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), FORGET_CHUNK):
        GangJob.objects.filter(pk__in=ids[start:start + FORGET_CHUNK]).delete()
    Cluster.objects.filter(name=name).delete()


def goals(sizes: dict) -> dict:
    """The issue's goals, judged on the medians of the smallest and largest size measured (this tree's code)."""
    if len(sizes) < 2:
        return {}
    small, large = sizes[min(sizes)]["new"], sizes[max(sizes)]["new"]
    rss = round(large["peak_rss_mib"]["median"] / small["peak_rss_mib"]["median"], 2)
    per_job = round(large["ms_per_job"]["median"] / small["ms_per_job"]["median"], 2)
    cpu = (round(large["cpu_ms_per_job"]["median"] / max(small["cpu_ms_per_job"]["median"], 1e-9), 2)
           if "cpu_ms_per_job" in large and "cpu_ms_per_job" in small else None)
    return {"rss_ratio": rss, "ms_per_job_ratio": per_job, "cpu_ms_per_job_ratio": cpu, "rss_ok": rss <= GOAL_RSS_RATIO,
            "ms_per_job_ok": per_job <= GOAL_MS_PER_JOB_RATIO,
            "nothing_acted": all(s["new"]["acted"] == 0 and s["new"]["failed"] == 0 for s in sizes.values())}


def report(result: dict) -> list[str]:
    """Lines to print for this benchmark."""
    lines = ["resync by size (median [min-max] of the rounds; load = 1-min load average before each round):"]
    for size, entry in sorted(result["sizes"].items()):
        for which in ("old", "new"):
            if which not in entry:
                continue
            s = entry[which]
            lines.append(
                f"  {which} {size:>6,} jobs: {s['seconds']['median']} s [{s['seconds']['min']}-{s['seconds']['max']}],"
                f" {s['ms_per_job']['median']} ms/job (CPU {s['cpu_ms_per_job']['median']}), "
                f"peak RSS {s['peak_rss_mib']['median']} MiB "
                f"[{s['peak_rss_mib']['min']}-{s['peak_rss_mib']['max']}] (before {s['rss_before_mib']['median']}), "
                f"{s['requests']['median']} requests, {s['bytes_listed']['median']:,} bytes, API server + etcd CPU "
                f"{s['server_cpu_s']['median']} s, load {s['load_before']['min']}-{s['load_before']['max']}, "
                f"acted {s['acted']}")
    g = result.get("goals") or {}
    if g:
        lines.append(f"  goals: peak RSS x{g['rss_ratio']} (<= {GOAL_RSS_RATIO}) {'OK' if g['rss_ok'] else 'MISSED'}; "
                     f"ms/job x{g['ms_per_job_ratio']} (<= {GOAL_MS_PER_JOB_RATIO}) "
                     f"{'OK' if g['ms_per_job_ok'] else 'MISSED'} (CPU ms/job x{g['cpu_ms_per_job_ratio']})")
    return lines


def sizes_from_env() -> tuple[int, ...]:
    """BENCH_RESYNC_SIZES (comma-separated job counts), or SIZES."""
    raw = os.environ.get("BENCH_RESYNC_SIZES", "")
    return tuple(int(s) for s in raw.split(",") if s.strip()) or SIZES
