"""Hand edits and deletions of a running job's objects: the next pass puts the desired state back."""
from __future__ import annotations

import pytest

from scheduling.backends import kai_v2alpha2
from scheduling.kube import objects
from scheduling.kube.objects import JOB, SERVICE

from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
KAI_PG = kai_v2alpha2.POD_GROUP


def test_a_gang_object_deleted_by_hand_is_recreated(world):
    job = world.submit(backend="kai", replicas=3)
    assert world.reconcile(job).error is None
    [pg] = world.gang(job, KAI_PG)
    objects.delete(world.api, KAI_PG, world.namespace, pg["metadata"]["name"])
    wait_for(lambda: not world.gang(job, KAI_PG), 30, "the PodGroup to be gone")

    result = world.reconcile(job)

    assert result.error is None, result.message
    [again] = world.gang(job, KAI_PG)
    assert again["spec"]["minMember"] == 3 and again["metadata"]["uid"] != pg["metadata"]["uid"]


def test_an_indexed_job_and_service_deleted_by_hand_are_recreated(world):
    job = world.submit(backend="kai", replicas=3)
    assert world.reconcile(job).error is None
    [owner], [svc] = world.gang(job, JOB), world.gang(job, SERVICE)
    objects.delete(world.api, JOB, world.namespace, owner["metadata"]["name"])
    objects.delete(world.api, SERVICE, world.namespace, svc["metadata"]["name"])
    wait_for(lambda: not world.gang(job, JOB) and not world.gang(job, SERVICE), 30, "the Job and Service gone")

    result = world.reconcile(job)

    assert result.error is None, result.message
    [again] = world.gang(job, JOB)
    assert again["spec"]["parallelism"] == again["spec"]["completions"] == 3
    assert len(world.gang(job, SERVICE)) == 1


def test_an_indexed_job_scaled_down_by_hand_is_put_back(world):
    job = world.submit(backend="kai", replicas=3)
    assert world.reconcile(job).error is None
    [owner] = world.gang(job, JOB)
    objects.merge_patch(world.api, JOB, world.namespace, owner["metadata"]["name"], {"spec": {"parallelism": 1}},
                        None)  # as `kubectl patch` does: the Job controller writes status meanwhile

    result = world.reconcile(job)

    assert result.error is None, result.message
    [now] = world.gang(job, JOB)
    assert now["spec"]["parallelism"] == 3, result.actions
    assert now["metadata"]["uid"] == owner["metadata"]["uid"]  # patched, not recreated
    assert world.reconcile(job).actions == []


def test_an_indexed_job_suspended_by_hand_is_resumed(world):
    job = world.submit(backend="kai", replicas=3)
    assert world.reconcile(job).error is None
    [owner] = world.gang(job, JOB)
    objects.merge_patch(world.api, JOB, world.namespace, owner["metadata"]["name"], {"spec": {"suspend": True}},
                        None)  # as `kubectl patch` does: the Job controller writes status meanwhile

    result = world.reconcile(job)

    assert result.error is None, result.message
    [now] = world.gang(job, JOB)
    assert not now["spec"].get("suspend"), result.actions


def test_a_terminating_indexed_job_of_ours_is_waited_for_not_counted_as_present(world):
    job = world.submit(backend="kai", replicas=3)
    assert world.reconcile(job).error is None
    [owner] = world.gang(job, JOB)
    name = owner["metadata"]["name"]
    objects.merge_patch(world.api, JOB, world.namespace, name, {"metadata": {"finalizers": ["gangweb.test/hold"]}},
                        None)
    objects.delete(world.api, JOB, world.namespace, name)
    try:
        result = world.reconcile(job)
        assert result.requeue_after is not None, (result.reason, result.actions)
        assert result.reason == "WaitingForDeletion"
    finally:
        objects.merge_patch(world.api, JOB, world.namespace, name, {"metadata": {"finalizers": None}}, None)
    wait_for(lambda: not [o for o in world.gang(job, JOB) if o["metadata"]["uid"] == owner["metadata"]["uid"]],
             30, "the held Job to go")
    assert world.reconcile(job).error is None
    [again] = world.gang(job, JOB)
    assert again["metadata"]["uid"] != owner["metadata"]["uid"]
