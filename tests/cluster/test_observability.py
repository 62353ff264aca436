"""A job's timeline, why-pending, watch freshness and metrics, against the real control plane.

The watcher runs in a thread of the test process (as `manage.py watch_clusters` runs it), so every phase after
the first reconcile pass reaches the job only through the watch: no resync, no second reconcile.
"""
from __future__ import annotations

import time
from datetime import datetime

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

# Until the local control plane and the backends are both on this branch, there is nothing to collect here.
localcluster = pytest.importorskip("localcluster")
pytest.importorskip("scheduling.kube.objects")

from scheduling.backends import kai_v2alpha2  # noqa: E402
from scheduling.choices import GangPhase as P  # noqa: E402
from scheduling.models import ClusterNodes, GangJob  # noqa: E402
from scheduling.reconcile import waiting_events, watching  # noqa: E402
from scheduling.reconcile.cluster_watcher import POD  # noqa: E402
from tests import builders  # noqa: E402
from tests.kube_objects import kai_over_limit  # noqa: E402

from .conftest import POOL_LABEL  # noqa: E402
from .reconcile_support import wait_for  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def api_job(api, job) -> dict:
    r = api.get(f"/api/v1/jobs/{job.id}/")
    assert r.status_code == 200
    return r.data


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def pods_of(world, job) -> list[dict]:
    return world.gang(job, POD)


def test_k8s_workload_gang_waits_unschedulable_then_schedules_runs_and_succeeds(world, watcher, pool_nodes, api):
    """Through gangweb's API, with the plugin chosen by discovery (v1beta1 on 1.37, v1alpha2 on 1.36): 3 pods with
    room for 2 -> none bound; a node added -> all 3 Running; Scheduled at the cluster's time (v1beta1: the PodGroup's
    `PodGroupInitiallyScheduled`, written once when the gang was placed; v1alpha2: the third pod's bind)."""
    pool_nodes(2)  # room for 2 of the 3 pods, each asking a whole 8-GPU node
    job = world.submit(backend="k8s-workload", replicas=3, node_selector={POOL_LABEL: world.namespace},
                       containers=[builders.container(cpu="1", memory="1Gi", gpu=8)])
    assert world.reconcile(job).error is None

    data = wait_for(lambda: (d := api_job(api, job))["phase"] == P.QUEUED and d["phase_reason"] == "Unschedulable"
                    and d, timeout=60, what="Queued/Unschedulable")
    assert [e["phase"] for e in data["timeline"]] == [P.SUBMITTED, P.DISPATCHED, P.QUEUED]
    queued = data["timeline"][2]
    assert queued["reason"] == "Unschedulable" and "0 of 3 bound" in queued["message"]
    assert "0 of 3 bound" in data["phase_message"]
    why = data["why_pending"]
    assert (why["reason"], why["pods"]["bound"], why["pods"]["required"]) == ("Unschedulable", 0, 3)
    assert why["job_requests"]["nvidia.com/gpu"] == 24

    # The watch survives a dropped connection: it lists again and keeps delivering.
    before = watcher.restarts
    watcher.interrupt()
    wait_for(lambda: watcher.restarts > before, timeout=10, what="a counted watch restart")

    pool_nodes(1)  # room for the whole gang
    data = wait_for(lambda: (d := api_job(api, job))["phase"] == P.RUNNING and d, timeout=90, what="Running")
    assert data["why_pending"] is None
    pods = pods_of(world, job)
    scheduled_at = sorted(when(next(c["lastTransitionTime"] for c in p["status"]["conditions"]
                                    if c["type"] == "PodScheduled")) for p in pods)[2]
    started_at = max(when(cs["state"]["running"]["startedAt"]) for p in pods for cs in p["status"]["containerStatuses"])
    created_at = min(when(p["metadata"]["creationTimestamp"]) for p in pods)
    gang_name = world.names(job).gang_name
    pg = world.get(world.k8s.POD_GROUP, gang_name)
    admitted = next(c for c in pg["status"]["conditions"] if c["type"] == world.k8s.SCHEDULED)
    assert (admitted["status"], admitted["reason"]) == ("True", "Scheduled")

    for pod in pods:
        client.CoreV1Api(world.api).patch_namespaced_pod(
            pod["metadata"]["name"], world.namespace,
            {"metadata": {"annotations": {localcluster.SIM_EXIT_ANNOTATION: "0"}}})
    data = wait_for(lambda: (d := api_job(api, job))["phase"] == P.SUCCEEDED and d, timeout=90, what="Succeeded")

    timeline = data["timeline"]
    assert [e["phase"] for e in timeline] == [P.SUBMITTED, P.DISPATCHED, P.QUEUED, P.SCHEDULED, P.RUNNING,
                                              P.SUCCEEDED]
    times = [when(e["at"]) for e in timeline]
    assert times == sorted(times)
    at = {e["phase"]: when(e["at"]) for e in timeline}
    assert abs((at[P.QUEUED] - created_at).total_seconds()) <= 1
    if world.k8s.SCHEDULED == "PodGroupInitiallyScheduled":
        assert at[P.SCHEDULED] == when(admitted["lastTransitionTime"])
        assert timeline[3]["source"] == f"PodGroup {world.namespace}/{gang_name}"
        assert timeline[3]["reason"] == "Scheduled"
    else:
        assert abs((at[P.SCHEDULED] - scheduled_at).total_seconds()) <= 1
    assert abs((at[P.RUNNING] - started_at).total_seconds()) <= 1
    durations = data["durations"]
    # Durations are spans between the entries, each checked against the cluster's own times just above (adding two
    # one-second tolerances here failed under load: v1alpha2 admits the gang up to a second before the last bind).
    for name, start, end in [("time_in_queue", P.QUEUED, P.SCHEDULED), ("time_to_running", P.SUBMITTED, P.RUNNING),
                             ("run_time", P.RUNNING, P.SUCCEEDED)]:
        assert durations[name]["duration_s"] == pytest.approx((at[end] - at[start]).total_seconds(), abs=1e-3)
    assert not any(d["ongoing"] for d in durations.values())  # the job finished: nothing counts on
    assert timeline[5]["source"].startswith("Job ")

    scrape = api.get("/metrics")
    samples = {(s.name, s.labels.get("queue")): s.value
               for f in text_string_to_metric_families(scrape.content.decode()) for s in f.samples}
    assert samples[("gangweb_job_time_in_queue_seconds_count", "team-a")] >= 1
    assert samples[("gangweb_job_time_to_running_seconds_count", "team-a")] >= 1
    assert sum(v for (name, _), v in samples.items() if name == "gangweb_watch_restarts_total") >= 1

    r = api.get(f"/api/v1/jobs/{job.id}/events/")
    assert r.status_code == 200, r.data
    assert {"Scheduled"} <= {e["reason"] for e in r.data["events"]}


def kai_status_patch(reasons: list[dict] | None) -> dict:
    conditions = [] if reasons is None else [{
        "type": "UnschedulableOnNodePool", "nodePool": "default", "reason": "Unschedulable", "status": "True",
        "message": reasons[0]["message"], "reasons": reasons, "transitionID": "0",
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]
    return {"status": {"schedulingConditions": conditions}}


def test_kai_over_limit_reaches_why_pending_through_the_watch_and_clears_when_the_gang_binds(world, watcher,
                                                                                            pool_nodes, api):
    pool_nodes(1)
    job = world.submit(backend="kai", replicas=3, node_selector={POOL_LABEL: world.namespace},
                       containers=[builders.container(cpu="1", memory="1Gi", gpu=1)])
    assert world.reconcile(job).error is None
    # No KAI scheduler runs here: its pods wait, and nobody has said why yet. The Job controller may create them
    # before the pass above recorded their owner Job's UID, and then the watch (rightly) does not count them and no
    # later event of theirs comes; so, as the resync would, a pass observes them once they all exist.
    wait_for(lambda: len(pods_of(world, job)) == 3, timeout=60, what="the Job controller's 3 pods")
    second = world.reconcile(job)
    assert second.error is None and second.actions == []
    data = wait_for(lambda: (d := api_job(api, job))["why_pending"] and d["why_pending"]["pods"]["created"] == 3
                    and d, timeout=60, what="3 pods created")
    assert data["why_pending"]["reason"] == "WaitingForScheduler"
    assert "kai-scheduler" in data["why_pending"]["summary"]

    custom = client.CustomObjectsApi(world.api)
    ref = kai_v2alpha2.POD_GROUP
    [pg] = world.gang(job, ref)
    over = kai_over_limit(queue="team-a", limit="8", allocated="6", requested="4")
    started = time.monotonic()
    custom.patch_namespaced_custom_object_status(ref.group, ref.version, world.namespace, ref.plural,
                                                 pg["metadata"]["name"], kai_status_patch([over]))
    # Only the watch can deliver it (no resync runs here); how fast is a benchmark's question, not a test's.
    data = wait_for(lambda: (d := api_job(api, job))["why_pending"]["reason"] == "OverLimit" and d,
                    timeout=60, interval=0.05, what="OverLimit in the API")
    print(f"watch latency: cluster status write -> API why_pending: {(time.monotonic() - started) * 1000:.0f} ms")
    why = data["why_pending"]
    gpu = why["queue"]["resources"]["nvidia.com/gpu"]
    assert (why["queue"]["name"], gpu["limit"], gpu["allocated"]) == ("team-a", 8, 6)
    assert why["job_requests"]["nvidia.com/gpu"] == 4
    assert why["summary"] == "Queue team-a: 6 of 8 GPUs in use, limit 8, this gang needs 4."
    assert data["phase"] == P.QUEUED and data["phase_reason"] == "OverLimit"

    # While nobody watches, KAI clears its condition and binds the gang; a new watcher's first list recovers it.
    watcher.stop()
    custom.patch_namespaced_custom_object_status(ref.group, ref.version, world.namespace, ref.plural,
                                                 pg["metadata"]["name"], kai_status_patch(None))
    node = next(n.metadata.name for n in client.CoreV1Api(world.api).list_node(
        label_selector=f"{POOL_LABEL}={world.namespace}").items)
    for pod in pods_of(world, job):
        client.CoreV1Api(world.api).create_namespaced_pod_binding(
            pod["metadata"]["name"], world.namespace,
            {"metadata": {"name": pod["metadata"]["name"]}, "target": {"kind": "Node", "name": node}},
            _preload_content=False)
    fresh = watching.watcher_for(world.cluster, api=world.api).start()
    try:
        data = wait_for(lambda: (d := api_job(api, job))["why_pending"] is None and d, timeout=30,
                        what="why-pending cleared")
    finally:
        fresh.stop()
    assert P.SCHEDULED in [e["phase"] for e in data["timeline"]]
    assert GangJob.objects.get(pk=job.pk).transitions.filter(phase=P.QUEUED).get().reason == "OverLimit"


def test_the_watch_clusters_command_watches_every_registered_cluster(world):
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("watch_clusters", "--once", stdout=out)
    assert "watching cluster local" in out.getvalue()


def _gpus_of_schedulable_nodes(api) -> tuple[int, int, int]:
    """(nodes, total GPUs, largest node's GPUs) of the Ready, uncordoned nodes, as the API server lists them."""
    gpus = [int(n.status.allocatable.get("nvidia.com/gpu", "0")) for n in client.CoreV1Api(api).list_node().items
            if not n.spec.unschedulable and any(c.type == "Ready" and c.status == "True"
                                                for c in n.status.conditions or [])]
    return len(gpus), sum(gpus), max(gpus, default=0)


def test_a_pod_bigger_than_every_node_is_explained_with_the_nodes_numbers_until_a_big_node_joins(
        world, watcher, kube_cluster, api):
    job = world.submit(backend="k8s-workload", replicas=1, node_selector={POOL_LABEL: world.namespace},
                       containers=[builders.container(cpu="1", memory="1Gi", gpu=16)])
    assert world.reconcile(job).error is None
    data = wait_for(lambda: (d := api_job(api, job))["why_pending"] and d["why_pending"].get("blocking") and d,
                    timeout=60, what="a blocking fact in why_pending")
    nodes, total, largest = _gpus_of_schedulable_nodes(world.api)
    assert largest < 16, "the session's nodes are expected to have fewer than 16 GPUs each"
    world.cluster.refresh_from_db()
    assert world.cluster.capacity["nodes"] == nodes
    assert world.cluster.capacity["allocatable"]["nvidia.com/gpu"] == total
    assert world.cluster.capacity["largest"]["nvidia.com/gpu"] == largest
    why = data["why_pending"]
    if total >= 16:
        assert why["blocking"][0] == {"code": "NoNodeFits", "resource": "nvidia.com/gpu", "per_pod": 16,
                                      "largest_node": largest, "nodes": nodes,
                                      "message": f"one pod needs 16 GPUs; the largest node has {largest} allocatable"}
        assert why["summary"].startswith(f"One pod needs 16 GPUs; the largest node has {largest} allocatable.")
    else:
        assert why["blocking"][0]["code"] == "ExceedsClusterCapacity"
        assert why["summary"].startswith(f"This job needs 16 GPUs; the cluster has {total} allocatable in total")

    # A 16-GPU node joins: the watch records the new capacity and the gang schedules on it.
    name = f"{world.namespace[:40]}-big"
    kube_cluster.add_node(name, gpus=16, labels={POOL_LABEL: world.namespace})
    try:
        wait_for(lambda: (world.cluster.refresh_from_db() or world.cluster.capacity["largest"]["nvidia.com/gpu"] == 16),
                 timeout=30, what="the new node in Cluster.capacity")
        data = wait_for(lambda: (d := api_job(api, job))["why_pending"] is None and d, timeout=60,
                        what="why_pending cleared once scheduled")
        assert data["phase"] in (P.SCHEDULED, P.RUNNING)
    finally:
        kube_cluster.remove_node(name, wait=False)


def test_a_gang_that_fits_the_cluster_but_not_now_says_how_much_gangwebs_running_jobs_hold(world, watcher, api):
    """Every 8-GPU node but one is taken by a running gang; a 2 x 8 GPU gang fits the cluster, not now: its
    why_pending says ClusterBusy with the cluster's numbers (needs 16; held total-8 of total; at most 8 free)."""
    nodes, total, largest = _gpus_of_schedulable_nodes(world.api)
    assert total == nodes * 8 and largest == 8, "the session's nodes are expected to have 8 GPUs each"
    # An earlier test's node (the 16-GPU one above) may still be in gangweb's record of the cluster: the numbers
    # below are the cluster's only once the node watch has caught up with the list just read.
    wait_for(lambda: (world.cluster.refresh_from_db() or (world.cluster.capacity or {}).get("nodes") == nodes
                      and world.cluster.capacity["allocatable"].get("nvidia.com/gpu") == total),
             timeout=60, what=f"Cluster.capacity at {nodes} nodes and {total} GPUs")
    big = world.submit(backend="k8s-workload", replicas=nodes - 1,
                       containers=[builders.container(cpu="1", memory="1Gi", gpu=8)])
    assert world.reconcile(big).error is None
    wait_for(lambda: GangJob.objects.get(pk=big.pk).phase == P.RUNNING, timeout=60, what="the big gang running")
    small = world.submit(backend="k8s-workload", replicas=2,
                         containers=[builders.container(cpu="1", memory="1Gi", gpu=8)])
    assert world.reconcile(small).error is None
    seen = []  # the last answer, for the failure message
    data = wait_for(lambda: (d := seen.append(api_job(api, small)) or seen[-1])["why_pending"]
                    and d["why_pending"].get("blocking") and d,
                    timeout=60, what=lambda: f"a blocking fact in why_pending; last: {seen[-1:]}")
    why = data["why_pending"]
    assert why["blocking"] == [{
        "code": "ClusterBusy", "resource": "nvidia.com/gpu", "needs": 16, "allocatable": total,
        "in_use": total - 8, "free": 8,
        "message": f"needs 16 GPUs; gangweb's running jobs hold {total - 8} of the cluster's {total} allocatable, "
                   "so at most 8 are free now"}]
    assert why["summary"].startswith("This job needs 16 GPUs; gangweb's running jobs hold")


def test_a_gang_the_scheduler_refuses_before_its_pass_writes_gets_its_pods_words_once_the_pass_has_written(
        world, watcher, pool_nodes, api, monkeypatch):
    """kube-scheduler refuses a new gang while the pass that created it is still reading: the watch records the
    PodGroup's Unschedulable (the Job's pods are not the job's until the pass records the Job's UID, at its write),
    then the pass writes what it read before the pods existed. The pods' PodScheduled=False is written once (not
    rewritten on retries), so no later event comes: the watcher looks again until the Job is recorded, and
    why_pending then counts and quotes both pods (before the fix it said WaitingForPods, 0 of 2 created, for good)."""
    pool_nodes(1)
    node = f"{world.namespace[:40]}-n0"
    wait_for(lambda: node in {n["name"] for n in (ClusterNodes.objects.filter(cluster=world.cluster)
                                                   .values_list("nodes", flat=True).first() or [])},
             timeout=60, what="the pool's node in ClusterNodes")  # no capacity change re-observes the job later
    job = world.submit(backend="k8s-workload", replicas=2, node_selector={POOL_LABEL: world.namespace},
                       containers=[builders.container(cpu="1", memory="1Gi", gpu=8)])
    read = waiting_events.read

    def slow_read(row, *args, **kwargs):  # the pass's last read, before its write: held until the watch said Queued
        wait_for(lambda: GangJob.objects.get(pk=job.pk).phase == P.QUEUED, timeout=60,
                 what="the watch recording Queued before the pass writes")
        return read(row, *args, **kwargs)

    monkeypatch.setattr(waiting_events, "read", slow_read)
    assert world.reconcile(job).error is None
    monkeypatch.setattr(waiting_events, "read", read)
    seen = []  # the last answer, for the failure message
    data = wait_for(lambda: (d := seen.append(api_job(api, job)) or seen[-1])["why_pending"]
                    and d["why_pending"]["pods"]["created"] == 2 and d, timeout=60,
                    what=lambda: f"both pods in why_pending; last: {seen[-1:]}")
    why = data["why_pending"]
    assert (why["reason"], why["pods"]) == ("Unschedulable", {"bound": 0, "required": 2, "total": 2, "created": 2})
    assert sum(c["pods"] for c in why["pod_conditions"]) == 2
    assert {c["reason"] for c in why["pod_conditions"]} == {"Unschedulable"}
    assert sorted(p["name"] for p in data["observed"]["pods"]) == sorted(
        p["metadata"]["name"] for p in pods_of(world, job))
