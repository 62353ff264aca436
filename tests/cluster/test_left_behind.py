"""A finished job keeps nothing of its gang after its clean-up, whatever the interleaving (issue 31), on the real
control plane: a pass loaded before the job ended creates nothing after the clean-up (it reads the row again first:
`JobReconciler.refuse_when_over`), and a finished job marked cleaned up whose own objects the cluster still holds is
found and cleaned up again by one resync (reconcile/left_behind.py). The order of events is the test's own, never
the cluster's timing: each step waits for what it needs with a generous bound."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.choices import TERMINAL_PHASES, GangPhase
from scheduling.kube import objects
from scheduling.kube.objects import JOB, POD, SERVICE
from scheduling.models import GangJob, ReconcileAttempt
from scheduling.reconcile import desired, jobs, resync
from scheduling.reconcile.left_behind import LEFT_AFTER_CLEANUP

from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
FINISHES = {"gangweb.io/sim-exit": "0"}  # kwok ends the pod Succeeded (docs/local-cluster.md)


def live(objs: list[dict]) -> list[dict]:
    return [o for o in objs if not o["metadata"].get("deletionTimestamp")]


def pods_succeeded(world, job) -> bool:
    pods = world.gang(job, POD)
    return bool(pods) and all((p.get("status") or {}).get("phase") == "Succeeded" for p in pods)


def test_a_pass_loaded_before_its_job_ended_creates_nothing_after_the_clean_up(world):
    job = world.submit(backend="k8s-workload", replicas=1, annotations=FINISHES, retentionSeconds=0)
    assert world.reconcile(job).error is None  # dispatched: its gang, Service and Indexed Job exist
    late = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)  # a resync's row, loaded now
    assert late.phase not in TERMINAL_PHASES
    wait_for(lambda: pods_succeeded(world, job), 180, "the pod Succeeded")

    def removed():  # the job ends, its clean-up runs, then (retention 0) its Indexed Job and pod go too
        assert world.reconcile(job).error is None
        job.refresh_from_db()
        return job.objects_removed_at is not None
    wait_for(removed, 180, "the job Succeeded, cleaned up and its objects removed", interval=1)
    assert job.phase == GangPhase.SUCCEEDED and job.cleaned_up_at is not None
    marks = (job.cleaned_up_at, job.objects_removed_at)
    kinds = world.backend(job).gang_kinds

    # The late pass goes on: it reads the cluster now (nothing of the job), its row still says the job runs.
    result = jobs.run_pass(late)

    assert result.error is None
    assert any(a.startswith("the job is Succeeded since this pass loaded it: ") and a.endswith(" not created")
               for a in result.actions), result.actions
    assert not any(a.startswith("create ") for a in result.actions)
    for ref in (*kinds, JOB, SERVICE, POD):
        assert world.gang(job, ref) == [], ref.kind
    job.refresh_from_db()
    assert job.phase == GangPhase.SUCCEEDED and (job.cleaned_up_at, job.objects_removed_at) == marks


def test_one_resync_removes_what_a_finished_job_holds_after_its_clean_up(world):
    job = world.submit(backend="k8s-workload", replicas=1, annotations=FINISHES)
    assert world.reconcile(job).error is None
    kinds = world.backend(job).gang_kinds
    wait_for(lambda: pods_succeeded(world, job), 180, "the pod Succeeded")
    held = sorted(f"{o['kind']} {world.namespace}/{o['metadata']['name']}"
                  for ref in (*kinds, SERVICE) for o in world.gang(job, ref))
    assert len(held) == len(kinds) + 1  # every gang object gangweb made (UIDs recorded), and the Service
    # What the fault run found: the job Succeeded and marked cleaned up (a clean-up that listed before a late pass's
    # creates), its gang and Service still there. Retention an hour away: the Indexed Job stays.
    now = timezone.now()
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.SUCCEEDED, finished_at=now, cleaned_up_at=now,
                                             remove_after=now + timedelta(hours=1))
    # Someone else's Service carrying the job's labels (a look-alike): a hint by label, never the job's own.
    lookalike = objects.create(world.api, SERVICE, {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": f"lookalike-{job.uid.hex[:8]}", "namespace": world.namespace,
                     "labels": desired.job_labels_from(job.name, str(job.uid))},
        "spec": {"clusterIP": "None", "selector": {"app": "nothing"}}})

    stats = resync.resync_cluster(world.cluster)

    assert stats["reopened"] == 1 and stats["failed"] == 0
    for ref in (*kinds, SERVICE):
        assert [o["metadata"]["name"] for o in live(world.gang(job, ref))
                if o["metadata"]["uid"] != lookalike["metadata"]["uid"]] == [], ref.kind
    assert world.get(SERVICE, lookalike["metadata"]["name"])["metadata"]["uid"] == lookalike["metadata"]["uid"]
    assert len(world.gang(job, JOB)) == 1  # the retained Indexed Job: kept for inspection
    attempt = ReconcileAttempt.objects.get(job=job, reason=LEFT_AFTER_CLEANUP)
    assert attempt.message.startswith(f"objects found after clean-up: {', '.join(held)};"), attempt.message
    assert lookalike["metadata"]["name"] not in attempt.message
    job.refresh_from_db()
    assert job.phase == GangPhase.SUCCEEDED and job.cleaned_up_at is None  # until a pass finds nothing left

    def clean_again():
        resync.resync_cluster(world.cluster)
        return GangJob.objects.get(pk=job.pk).cleaned_up_at
    wait_for(clean_again, 120, "the job marked cleaned up again", interval=1)
    # Marked clean, and the look-alike (not the job's) never reopens it.
    assert resync.resync_cluster(world.cluster)["reopened"] == 0
    assert ReconcileAttempt.objects.filter(job=job, reason=LEFT_AFTER_CLEANUP).count() == 1


def test_a_job_that_ends_while_a_pass_creates_is_handed_back_to_its_clean_up(world, monkeypatch):
    from scheduling.reconcile.jobs import fanout

    job = world.submit(backend="k8s-workload", replicas=1, annotations=FINISHES)
    sent = fanout.at_once

    def ended_first(calls):  # the job ends and its clean-up marks it between the pass's row read and its creates
        if GangJob.objects.filter(pk=job.pk, cleaned_up_at__isnull=True).exists():
            now = timezone.now()
            GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.SUCCEEDED, finished_at=now, cleaned_up_at=now,
                                                     objects_removed_at=now)
        return sent(calls)
    monkeypatch.setattr(fanout, "at_once", ended_first)

    result = world.reconcile(job)  # the root was made after its read; the rest goes out after the end
    monkeypatch.setattr(fanout, "at_once", sent)

    assert result.error is None
    assert any(a.startswith("create ") for a in result.actions)
    assert result.actions[-1] == ("the job is Succeeded since this pass loaded it: what it made is left to its "
                                  "clean-up")
    job.refresh_from_db()
    assert job.phase == GangPhase.SUCCEEDED and (job.cleaned_up_at, job.objects_removed_at) == (None, None)
    assert job in resync.jobs_to_resync(world.cluster)
    kinds = world.backend(job).gang_kinds
    assert all(world.gang(job, ref) for ref in (*kinds, SERVICE))

    def cleaned():  # its pod ends (kwok), then the resync's clean-up deletes the gang and Service
        resync.resync_cluster(world.cluster)
        return GangJob.objects.get(pk=job.pk).cleaned_up_at
    wait_for(cleaned, 180, "the job cleaned up again", interval=1)
    for ref in (*kinds, SERVICE):
        assert live(world.gang(job, ref)) == [], ref.kind
