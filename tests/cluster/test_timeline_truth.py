"""Phase times come from the cluster's objects, never from the moment gangweb first saw them (issue 19, part 3;
kueue #11870), against the real control plane.

The watcher runs in a thread of the test process (as `manage.py watch_clusters` runs it) and is stopped while jobs
are placed and started, then started again: what it records after the restart must be the pods' own times. A job
whose pods carry no such times (their `PodScheduled` condition and container statuses gone: what gangweb meets
when a cluster is added with jobs already running under an older or rewritten status) is marked inferred and left
out of the latency histograms.
"""
from __future__ import annotations

import threading
import time
from datetime import datetime

import pytest
from kubernetes import client

localcluster = pytest.importorskip("localcluster")

from scheduling.choices import GangPhase as P  # noqa: E402
from scheduling.kube import client as kube_client  # noqa: E402
from scheduling.models import GangJob  # noqa: E402
from scheduling.observe import metrics  # noqa: E402
from scheduling.reconcile import watching  # noqa: E402
from scheduling.reconcile.cluster_watcher import POD, resource_label  # noqa: E402
from tests import builders  # noqa: E402

from .conftest import POOL_LABEL  # noqa: E402
from .reconcile_support import wait_for  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def timeline(job) -> dict[str, tuple[datetime, bool, str]]:
    return {t.phase: (t.at, t.inferred, t.reason) for t in GangJob.objects.get(pk=job.pk).transitions.all()}


def pods_running(world, job, count: int) -> list[dict]:
    pods = world.gang(job, POD)
    ok = len(pods) == count and all((p.get("status") or {}).get("phase") == "Running"
                                    and (p["status"].get("containerStatuses") or []) for p in pods)
    return pods if ok else []


def cluster_times(pods: list[dict], min_member: int) -> tuple[datetime, datetime]:
    """(the min_member-th PodScheduled time, the latest container start) as the cluster says."""
    binds = sorted(when(next(c["lastTransitionTime"] for c in p["status"]["conditions"] if c["type"] == "PodScheduled"))
                   for p in pods)
    starts = [when(cs["state"]["running"]["startedAt"]) for p in pods for cs in p["status"]["containerStatuses"]]
    return binds[min_member - 1], max(starts)


def at_cluster_precision(ours: datetime, theirs: datetime) -> bool:
    """Cluster times are whole seconds; gangweb clamps an entry to be no earlier than the one before it (its own
    Submitted time, with a fraction): ours is the cluster's time, or later by less than a second."""
    return theirs <= ours and (ours - theirs).total_seconds() < 1


def observed(histogram, cluster: str) -> float:
    return sum(s.value for m in histogram.collect() for s in m.samples
               if s.name.endswith("_count") and s.labels.get("cluster") == cluster)


def strip_cluster_times(world, job, pods: list[dict]) -> None:
    """Leave the pods bound and Running but without the times gangweb reads first: no PodScheduled condition, no
    container statuses (startTime and Ready stay)."""
    core = client.CoreV1Api(world.api)
    for pod in pods:
        def rewrite(name=pod["metadata"]["name"]):
            fresh = core.read_namespaced_pod_status(name, world.namespace)
            fresh.status.conditions = [c for c in fresh.status.conditions or [] if c.type != "PodScheduled"]
            fresh.status.container_statuses = None
            core.replace_namespaced_pod_status(name, world.namespace, fresh)
        for attempt in range(5):  # kwok writes the status too: retry our own edit on a conflict
            try:
                rewrite()
                break
            except client.ApiException as e:
                if e.status != 409 or attempt == 4:
                    raise
    wait_for(lambda: all(not any(c["type"] == "PodScheduled" for c in p["status"].get("conditions") or [])
                         and not p["status"].get("containerStatuses") for p in world.gang(job, POD)),
             timeout=30, what="the pods' times stripped")


def gang_scheduled(world, job) -> bool:
    """Whether the job's PodGroup carries its plugin's Scheduled condition, True."""
    pg = world.get(world.k8s.POD_GROUP, world.names(job).gang_name) or {}
    return any(c["type"] == world.k8s.SCHEDULED and c["status"] == "True"
               for c in (pg.get("status") or {}).get("conditions") or [])


def test_a_watcher_restart_keeps_the_clusters_times_and_marks_what_it_could_only_infer(world, pool_nodes):
    pool_nodes(2)
    selector = {POOL_LABEL: world.namespace}
    gpu_pod = [builders.container(cpu="1", memory="1Gi", gpu=2)]
    name = world.cluster.name

    watcher = watching.watcher_for(world.cluster, api=world.api).start()
    assert watcher.wait_synced(30)
    seen = world.submit(replicas=2, node_selector=selector, containers=gpu_pod)
    assert world.reconcile(seen).error is None
    wait_for(lambda: GangJob.objects.get(pk=seen.pk).phase == P.RUNNING, timeout=90, what="first job Running")
    before_restart = timeline(seen)
    watcher.stop()

    # While the watch is away: one job is placed and started; another too, and its pods lose their times.
    unseen = world.submit(replicas=2, node_selector=selector, containers=gpu_pod)
    late = world.submit(replicas=2, node_selector=selector, containers=gpu_pod)
    assert world.reconcile(unseen).error is None and world.reconcile(late).error is None
    unseen_pods = wait_for(lambda: pods_running(world, unseen, 2), timeout=90, what="unseen job's pods running")
    late_pods = wait_for(lambda: pods_running(world, late, 2), timeout=90, what="late job's pods running")
    if world.k8s.SCHEDULED == "PodGroupInitiallyScheduled":
        # v1beta1: the scheduler writes the PodGroup's condition apart from the binds, and under load after the pods
        # already run; the restarted watch must find it written, as on a cluster the watch was away from for longer.
        wait_for(lambda: gang_scheduled(world, unseen) and gang_scheduled(world, late), timeout=60,
                 what=f"both PodGroups' {world.k8s.SCHEDULED}")
    strip_cluster_times(world, late, late_pods)
    assert GangJob.objects.get(pk=unseen.pk).phase in (P.DISPATCHED, P.QUEUED)  # gangweb has not seen them run
    queue_before, running_before = observed(metrics.TIME_IN_QUEUE, name), observed(metrics.TIME_TO_RUNNING, name)

    watcher = watching.watcher_for(world.cluster, api=world.api).start()
    try:
        assert watcher.wait_synced(30)
        wait_for(lambda: GangJob.objects.get(pk=unseen.pk).phase == P.RUNNING
                 and GangJob.objects.get(pk=late.pk).phase == P.RUNNING, timeout=60, what="both Running after restart")
    finally:
        watcher.stop()

    # The job gangweb watched: nothing rewritten by the restart.
    assert timeline(seen) == before_restart
    # The job that ran while the watch was away: its times are the cluster's, not the restart's.
    scheduled, started = cluster_times(unseen_pods, 2)
    got = timeline(unseen)
    if world.k8s.SCHEDULED == "PodGroupInitiallyScheduled":  # v1beta1: the PodGroup's own, written once
        pg = world.get(world.k8s.POD_GROUP, world.names(unseen).gang_name)
        scheduled = when(next(c["lastTransitionTime"] for c in pg["status"]["conditions"]
                              if c["type"] == world.k8s.SCHEDULED))
    assert at_cluster_precision(got[P.SCHEDULED][0], scheduled), (got[P.SCHEDULED], scheduled)
    assert at_cluster_precision(got[P.RUNNING][0], started), (got[P.RUNNING], started)
    assert not any(inferred for _, inferred, _ in got.values())
    assert got[P.QUEUED][2] in ("PlacedWithoutWait", "PlacedAfterWait")

    # The job whose pods kept no times: what only the pods could have said is marked inferred, and left out of
    # the histograms. On v1beta1 its Scheduled time is still the cluster's (the PodGroup's condition, untouched).
    guessed = timeline(late)
    from_gang = world.k8s.SCHEDULED == "PodGroupInitiallyScheduled"
    assert guessed[P.RUNNING][1], guessed
    assert guessed[P.SCHEDULED][1] is not from_gang, guessed
    assert guessed[P.QUEUED][2] == "PlacedUnseen" and not guessed[P.QUEUED][1]
    # The unseen job's wait and time to running; the late job's wait only when its end is the PodGroup's own time.
    assert observed(metrics.TIME_IN_QUEUE, name) - queue_before == (2 if from_gang else 1)
    assert observed(metrics.TIME_TO_RUNNING, name) - running_before == 1


class HeldList:
    """A fresh ApiClient of the cluster whose LIST of one kind (`ref`) waits until `release` is set; `asked` is set
    when that LIST was asked for. Watches and every other request go through at once: an API server that
    answers one kind's LIST late (loaded, or its conversion webhook slow)."""

    def __init__(self, cluster, ref):
        self.api = kube_client.build_client(cluster)
        self.asked, self.release = threading.Event(), threading.Event()
        held_path = {"group": ref.group, "version": ref.version, "plural": ref.plural}
        call = self.api.call_api

        def held(resource_path, method, path_params=None, query_params=None, *args, **kwargs):
            is_watch = any(k == "watch" for k, _ in query_params or [])
            if {k: (path_params or {}).get(k) for k in held_path} == held_path and not is_watch:
                self.asked.set()
                self.release.wait(180)  # bounded: the test fails on what it then lacks, never hangs
            return call(resource_path, method, path_params, query_params, *args, **kwargs)

        self.api.call_api = held


def stays(predicate, seconds: float) -> bool:
    """True when `predicate()` holds throughout `seconds` (polled every 0.1 s)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            return False
        time.sleep(0.1)
    return predicate()


@pytest.mark.k8s_version("1.37")
def test_a_restarted_watcher_whose_podgroup_list_comes_late_records_scheduled_from_the_podgroup(world, pool_nodes):
    """issue 31: under load a restarted watcher observed a placed job from its pods before its PodGroups' LIST was
    in, and recorded Scheduled at the pods' bind instead of at the PodGroup's own condition (v1beta1 writes it once,
    apart from the binds); the entry is never rewritten. The watcher now observes nothing until every kind it
    watches is listed."""
    pool_nodes(1)
    job = world.submit(replicas=2, node_selector={POOL_LABEL: world.namespace},
                       containers=[builders.container(cpu="1", memory="1Gi", gpu=2)])
    assert world.reconcile(job).error is None
    wait_for(lambda: pods_running(world, job, 2), timeout=90, what="the job's pods running")
    wait_for(lambda: gang_scheduled(world, job), timeout=60, what=f"the PodGroup's {world.k8s.SCHEDULED}")
    before = GangJob.objects.get(pk=job.pk).phase
    assert before in (P.DISPATCHED, P.QUEUED)  # no watcher ran: gangweb has not seen it placed

    held = HeldList(world.cluster, world.k8s.POD_GROUP)
    watcher = watching.watcher_for(world.cluster, api=held.api).start()
    try:
        assert held.asked.wait(60)
        wait_for(lambda: watcher.unlisted() == (resource_label(world.k8s.POD_GROUP),), timeout=60,
                 what="every kind but PodGroups listed")
        # The pods, Jobs and Workload are in the cache, the job marked: before the fix it was recorded Scheduled
        # (from the pods) within a second.
        assert stays(lambda: GangJob.objects.get(pk=job.pk).phase == before, seconds=5)
        held.release.set()
        assert watcher.wait_synced(60)
        wait_for(lambda: GangJob.objects.get(pk=job.pk).phase == P.RUNNING, timeout=60, what="Running")
    finally:
        held.release.set()
        watcher.stop()
        held.api.close()

    pg = world.get(world.k8s.POD_GROUP, world.names(job).gang_name)
    said = when(next(c["lastTransitionTime"] for c in pg["status"]["conditions"] if c["type"] == world.k8s.SCHEDULED))
    entry = GangJob.objects.get(pk=job.pk).transitions.get(phase=P.SCHEDULED)
    assert entry.source == f"PodGroup {world.namespace}/{world.names(job).gang_name}", entry.source
    assert at_cluster_precision(entry.at, said), (entry.at, said)
    assert not any(inferred for _, inferred, _ in timeline(job).values()), timeline(job)
