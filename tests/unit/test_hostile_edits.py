"""The pure rules behind issue 30 items 1-4: what counts as an edit for the watch, the server's Retry-After, and
what a job says while its gang object set is broken, half made, or partly bound after a minimum was edited."""
import pytest

from scheduling.backends.base import GangStatus
from scheduling.choices import GangPhase as P
from scheduling.kube.errors import THROTTLED, classify, retry_after
from scheduling.observe import phases
from scheduling.observe.evidence import Evidence
from scheduling.observe.pods import owner_facts, pod_facts
from scheduling.reconcile.cluster_watcher import edited
from scheduling.reconcile.derive import declared_minimum
from scheduling.reconcile.jobs.writes import minimum_edited
from tests.kube_objects import T0, batch_job, pod, t, v1alpha2_podgroup

LATER = t(100)


def observe(shape, gang, pods=(), owners=(), gang_objects=(), current=P.SUBMITTED, recorded=None):
    evidence = Evidence(shape, gang, list(gang_objects), [pod_facts(p) for p in pods],
                        [owner_facts(w) for w in owners], LATER)
    return phases.observe(evidence, current, dict(recorded or {P.SUBMITTED: T0}))


def obj(generation=1, spec=None, deleting=False, rv="1"):
    meta = {"name": "g", "resourceVersion": rv}
    if generation is not None:
        meta["generation"] = generation
    if deleting:
        meta["deletionTimestamp"] = "2026-12-06T07:00:00Z"
    return {"metadata": meta, "spec": spec or {"minMember": 3}, "status": {}}


@pytest.mark.parametrize("previous, now, is_edit", [
    (None, obj(), False),  # first seen: the pass that made it knows
    (obj(rv="1"), obj(rv="2"), False),  # status only
    (obj(generation=1), obj(generation=2), True),  # a spec edit (minCount, minResources, a subGroup)
    (obj(), obj(deleting=True), True),  # deleted by hand, held by a finalizer
    (obj(deleting=True), obj(deleting=True, rv="3"), False),  # already terminating: seen before
    (obj(generation=None), obj(generation=None, spec={"minMember": 1}), True),  # no generation kept: the spec says
])
def test_the_watch_queues_a_pass_for_spec_edits_and_deletions_only(previous, now, is_edit):
    assert edited(previous, now) is is_edit


def throttled(headers=None, body=None):
    import json

    from kubernetes.client.rest import ApiException

    exc = ApiException(status=429, reason="Too Many Requests")
    exc.headers = headers or {}
    exc.body = json.dumps(body or {"kind": "Status", "message": "slow down"})
    return exc


@pytest.mark.parametrize("headers, body, seconds", [
    ({"Retry-After": "3"}, None, 3.0),
    ({}, {"kind": "Status", "details": {"retryAfterSeconds": 7}}, 7.0),
    ({}, None, None),
    ({"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}, None, None),  # a date: not what kube-apiserver writes
    ({"Retry-After": "99999"}, None, 300.0),  # capped
    ({"Retry-After": "-5"}, None, 0.0),
])
def test_a_429_carries_the_servers_retry_after(headers, body, seconds):
    exc = throttled(headers, body)
    assert retry_after(exc) == seconds
    err = classify(exc)
    assert (err.reason, err.retry_after) == (THROTTLED, seconds)


GANG3 = phases.JobShape(min_member=3, total=3)
RUNNING = {P.SUBMITTED: T0, P.DISPATCHED: t(1), P.QUEUED: t(2), P.SCHEDULED: t(3), P.RUNNING: t(4)}


def test_a_running_job_whose_podgroup_is_terminating_reads_replacing_not_running():
    shape = phases.JobShape(3, 3, gang_gone=("PodGroup ns/g is being deleted",))
    obs = observe(shape, GangStatus(), owners=[batch_job()], current=P.RUNNING, recorded=RUNNING)
    assert obs.phase == P.RUNNING  # never moved back without a cluster time
    assert (obs.reason, obs.message) == ("Replacing", "PodGroup ns/g is being deleted: gangweb replaces the gang "
                                                      "under new names (0 of 3 pods running)")


def test_half_a_gang_object_set_is_not_dispatched_and_waits_for_the_rest():
    shape = phases.JobShape(3, 3, gang_gone=("PodGroup ns/g is missing",))
    workload = {**v1alpha2_podgroup(), "kind": "Workload"}
    obs = observe(shape, GangStatus(), gang_objects=[workload])
    assert obs.entries == [] and obs.phase == P.SUBMITTED
    assert (obs.reason, obs.message) == ("WaitingForGangObject",
                                         "waiting for the gang object set: PodGroup ns/g is missing")


def test_pods_bound_below_an_edited_minimum_are_a_partial_gang_never_scheduled():
    shape = phases.JobShape(5, 5, min_edited=True, partial_release_s=30)
    pods = [pod(name=f"p-{i}", bound=3) for i in range(4)] + [pod(name="p-4", unschedulable="no room")]
    admitted = GangStatus(admitted=True, reason="Scheduled", at=t(3), source="PodGroup ns/g",
                          scheduled_at_admission=True)
    obs = observe(shape, admitted, pods, owners=[batch_job()], gang_objects=[v1alpha2_podgroup()])
    assert P.SCHEDULED not in [e.phase for e in obs.entries] and obs.phase == P.QUEUED
    assert obs.reason == "PartialGang"
    assert obs.message == ("4 of 5 bound after minCount was edited; gangweb deletes its bound pods 30 s after they "
                           "were bound, so the gang waits whole again")
    off = observe(phases.JobShape(5, 5, min_edited=True), admitted, pods, owners=[batch_job()])
    assert off.message.endswith("releasing partial gangs is turned off (GANGWEB_PARTIAL_GANG_GRACE_SECONDS)")


def test_a_gang_that_was_whole_in_its_attempt_and_lost_members_is_no_partial_gang():
    shape = phases.JobShape(5, 5, min_edited=True, partial_release_s=30)
    pods = [pod(name=f"p-{i}", bound=3) for i in range(4)] + [pod(name="p-4", unschedulable="no room")]
    running = {P.SUBMITTED: T0, P.DISPATCHED: t(1), P.QUEUED: t(2), P.SCHEDULED: t(3)}
    obs = observe(shape, GangStatus(), pods, owners=[batch_job()], current=P.SCHEDULED, recorded=running)
    assert obs.reason != "PartialGang"


def test_the_same_pods_without_an_edited_minimum_are_no_partial_gang():
    pods = [pod(name=f"p-{i}", bound=3) for i in range(4)] + [pod(name="p-4", unschedulable="no room")]
    obs = observe(phases.JobShape(5, 5), GangStatus(), pods, owners=[batch_job()])
    assert obs.reason != "PartialGang"


@pytest.mark.parametrize("spec, lowest", [
    ({"minMember": 4}, 4),
    ({"schedulingPolicy": {"gang": {"minCount": 1}}}, 1),
    ({"podGroupTemplates": [{"schedulingPolicy": {"gang": {"minCount": 2}}}]}, 2),
    ({"minMember": True}, None),
    ({}, None),
])
def test_the_declared_minimum_of_each_backends_gang_object(spec, lowest):
    assert declared_minimum([{"spec": spec}]) == lowest


@pytest.mark.parametrize("fields, is_minimum", [
    (["schedulingPolicy.gang.minCount"], True), (["podGroupTemplates[gang].schedulingPolicy.gang.minCount"], True),
    (["minMember"], True), (["subGroups"], True), (["minResources"], False), (["queue"], False),
])
def test_which_repaired_fields_are_the_gangs_minimum(fields, is_minimum):
    assert minimum_edited(fields) is is_minimum
