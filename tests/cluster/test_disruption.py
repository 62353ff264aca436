"""A running gang whose member is evicted is re-queued, not failed (owner Jobs ignore DisruptionTarget failures), and
the re-queue is on its timeline: a second attempt Queued -> Scheduled -> Running, seen by the watch."""
from __future__ import annotations

import pytest
from django.test import Client
from kubernetes import client

localcluster = pytest.importorskip("localcluster")

from scheduling.choices import GangPhase as P  # noqa: E402
from scheduling.models import GangJob  # noqa: E402
from scheduling.reconcile import desired  # noqa: E402
from scheduling.reconcile.cluster_watcher import POD  # noqa: E402
from scheduling.reconcile.desired import JOB  # noqa: E402
from tests import builders  # noqa: E402

from .reconcile_support import wait_for  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def running_pods(world, job) -> list[dict]:
    return [p for p in world.gang(job, POD) if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]


def timeline(job) -> list[tuple]:
    return list(GangJob.objects.get(pk=job.pk).transitions.order_by("attempt", "at", "id")
                .values_list("phase", "attempt", "reason", "source", "at"))


def test_an_evicted_member_is_replaced_and_the_owner_job_does_not_fail(world, watcher, api):
    job = world.submit(backend="k8s-workload", replicas=2,
                       containers=[builders.container(cpu="100m", memory="64Mi")])
    assert world.reconcile(job).error is None
    first = wait_for(lambda: len(pods := running_pods(world, job)) == 2 and pods, timeout=90, what="2 pods Running")
    victim = first[0]["metadata"]["name"]
    wait_for(lambda: GangJob.objects.get(pk=job.pk).phase == P.RUNNING, timeout=30, what="the job Running")
    assert [(phase, attempt) for phase, attempt, *_ in timeline(job)] == [
        (P.SUBMITTED, 0), (P.DISPATCHED, 0), (P.QUEUED, 0), (P.SCHEDULED, 0), (P.RUNNING, 0)]

    # What a preempting scheduler or a node drain does: the Eviction API (the pod gets DisruptionTarget).
    client.CoreV1Api(world.api).create_namespaced_pod_eviction(
        victim, world.namespace, client.V1Eviction(metadata=client.V1ObjectMeta(name=victim,
                                                                               namespace=world.namespace)))
    [owner_name] = [ps.owner_name for ps in world.names(job).pod_sets]

    def replaced():
        pods = running_pods(world, job)
        return len(pods) == 2 and victim not in {p["metadata"]["name"] for p in pods} and pods

    wait_for(replaced, timeout=60, what="the evicted member replaced and Running")
    owner = world.get(JOB, owner_name)
    status = owner.get("status") or {}
    assert not any(c["type"] == "Failed" and c["status"] == "True" for c in status.get("conditions") or [])
    assert status.get("failed", 0) == 0  # ignored by podFailurePolicy: not counted against backoffLimit 0
    assert owner["spec"]["podFailurePolicy"] == desired.IGNORE_DISRUPTIONS

    wait_for(lambda: GangJob.objects.get(pk=job.pk).transitions.filter(phase=P.RUNNING, attempt=1).exists(),
             timeout=30, what="the second attempt Running")
    assert world.reconcile(job).error is None
    job = GangJob.objects.get(pk=job.pk)
    assert job.phase == P.RUNNING
    entries = timeline(job)
    assert [(phase, attempt) for phase, attempt, *_ in entries] == [
        (P.SUBMITTED, 0), (P.DISPATCHED, 0), (P.QUEUED, 0), (P.SCHEDULED, 0), (P.RUNNING, 0),
        (P.QUEUED, 1), (P.SCHEDULED, 1), (P.RUNNING, 1)]
    times = [at for *_, at in entries]
    assert times == sorted(times)
    # The watch saw the evicted pod with its DisruptionTarget condition: the re-queue names that reason and pod.
    _, _, reason, source, requeued_at = entries[5]
    assert (reason, source) == ("EvictionByEvictionAPI", f"Pod {world.namespace}/{victim}")
    queued1 = job.transitions.get(phase=P.QUEUED, attempt=1)
    assert queued1.message.startswith("gang disrupted: 1 of 2 bound; ")
    assert requeued_at >= entries[4][4]  # after the first Running

    detail = api.get(f"/api/v1/jobs/{job.pk}/").data
    assert detail["requeues"] == 1
    assert [(e["phase"], e["attempt"]) for e in detail["timeline"]][5:] == [
        (P.QUEUED, 1), (P.SCHEDULED, 1), (P.RUNNING, 1)]
    # Durations read the latest attempt: its time in queue, its run time (counting); time to running the first.
    spans = detail["durations"]
    q1, s1, r1 = (job.transitions.get(phase=ph, attempt=1).at for ph in (P.QUEUED, P.SCHEDULED, P.RUNNING))
    assert spans["time_in_queue"] == {"duration_s": (s1 - q1).total_seconds(), "ongoing": False, "inferred": False}
    assert spans["run_time"]["ongoing"] is True
    first_running = job.transitions.get(phase=P.RUNNING, attempt=0).at
    submitted = job.transitions.get(phase=P.SUBMITTED).at
    assert spans["time_to_running"] == {"duration_s": (first_running - submitted).total_seconds(), "ongoing": False,
                                        "inferred": False}
    browser = Client()
    browser.force_login(world.user)
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert "requeued 1×" in page and "Attempt" in page
    assert P.FAILED not in set(job.transitions.values_list("phase", flat=True))


def test_a_gang_evicted_twice_has_attempts_one_and_two_and_durations_of_the_last(world, watcher, api):
    job = world.submit(backend="k8s-workload", replicas=2,
                       containers=[builders.container(cpu="100m", memory="64Mi")])
    assert world.reconcile(job).error is None
    for attempt in (1, 2):
        pods = wait_for(lambda: len(p := running_pods(world, job)) == 2 and p, timeout=90, what="2 pods Running")
        wait_for(lambda: GangJob.objects.get(pk=job.pk).phase == P.RUNNING, timeout=30, what="the job Running")
        victim = pods[0]["metadata"]["name"]
        client.CoreV1Api(world.api).create_namespaced_pod_eviction(
            victim, world.namespace, client.V1Eviction(metadata=client.V1ObjectMeta(name=victim,
                                                                                   namespace=world.namespace)))
        wait_for(lambda a=attempt: GangJob.objects.get(pk=job.pk).transitions.filter(phase=P.RUNNING,
                                                                                     attempt=a).exists(),
                 timeout=90, what=f"attempt {attempt} Running")
    assert world.reconcile(job).error is None
    job = GangJob.objects.get(pk=job.pk)
    entries = timeline(job)
    assert [(phase, attempt) for phase, attempt, *_ in entries] == [
        (P.SUBMITTED, 0), (P.DISPATCHED, 0), (P.QUEUED, 0), (P.SCHEDULED, 0), (P.RUNNING, 0),
        (P.QUEUED, 1), (P.SCHEDULED, 1), (P.RUNNING, 1), (P.QUEUED, 2), (P.SCHEDULED, 2), (P.RUNNING, 2)]
    times = [at for *_, at in entries]
    assert times == sorted(times)
    detail = api.get(f"/api/v1/jobs/{job.pk}/").data
    assert detail["requeues"] == 2
    q2, s2 = (job.transitions.get(phase=ph, attempt=2).at for ph in (P.QUEUED, P.SCHEDULED))
    assert detail["durations"]["time_in_queue"] == {"duration_s": (s2 - q2).total_seconds(), "ongoing": False,
                                                    "inferred": False}
    timeline_api = api.get(f"/api/v1/jobs/{job.pk}/timeline/").data
    rows = timeline_api["timeline"] if isinstance(timeline_api, dict) else timeline_api
    assert [(e["phase"], e["attempt"]) for e in rows] == [(phase, attempt) for phase, attempt, *_ in entries]
    # Every entry but the last lasts until the next one; the last (Running#2) is ongoing.
    assert [e["ongoing"] for e in rows] == [False] * 10 + [True]
    assert all(e["duration_s"] >= 0 for e in rows)
    assert job.transitions.filter(phase=P.FAILED).count() == 0
