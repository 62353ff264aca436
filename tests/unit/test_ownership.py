"""Only the job's own objects count: in its namespace, owner Jobs by the UID gangweb recorded, pods by their
ownerReferences (issue 15, H4). Pure functions over object dicts: the resync snapshot, the per-job slice and the
watch's selection."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from scheduling.kube.objects import JOB, POD, SERVICE
from scheduling.kube.refs import ObjectRef
from scheduling.reconcile import ownership, watching
from scheduling.reconcile.observed import Observed, Snapshot

JOB_UID = "0f8fad5b-d9cb-469f-a165-70867728950e"
PODGROUP = ObjectRef("scheduling.k8s.io/v1alpha2", "PodGroup", "podgroups")
BACKEND = SimpleNamespace(gang_kinds=[PODGROUP])


def meta(name, ns, uid, job_uid=JOB_UID, owner=None):
    m = {"name": name, "namespace": ns, "uid": uid, "labels": {"gangweb.io/job-uid": job_uid}}
    if owner:
        m["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "x", "uid": owner,
                                 "controller": True}]
    return m


def a_job(name, ns, uid):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(name, ns, uid)}


def a_pod(name, ns, uid, owner, phase="Succeeded"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta(name, ns, uid, owner=owner),
            "status": {"phase": phase}}


def a_podgroup(name, ns, uid):
    return {"apiVersion": PODGROUP.api_version, "kind": "PodGroup", "metadata": meta(name, ns, uid)}


def a_service(name, ns, uid):
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta(name, ns, uid)}


def gangjob(ns="team", owner_uids=None):
    return SimpleNamespace(uid=JOB_UID, namespace=ns, owner_uids={} if owner_uids is None else owner_uids,
                           name="train", gang_generation=0)


# What gangweb recorded creating for the job in `team` (the Job by its name, other kinds by their object key).
RECORDED = {"train-w": "real-job", f"{PODGROUP.api_version}/PodGroup/train": "pg", "v1/Service/train": "svc"}


def the_real_job_and_a_spoof():
    """The job's Job train-w (uid real-job) with 2 running pods in `team`, and in `attacker` a Job of the same name
    with 2 Succeeded pods, a PodGroup and a Service, all labelled with the job's UID."""
    return {
        JOB: [a_job("train-w", "team", "real-job"), a_job("train-w", "attacker", "fake-job")],
        POD: [a_pod("train-w-0", "team", "p0", "real-job", "Running"), a_pod("train-w-1", "team", "p1", "real-job",
                                                                             "Running"),
              a_pod("train-w-0", "attacker", "f0", "fake-job"), a_pod("train-w-1", "attacker", "f1", "fake-job")],
        PODGROUP: [a_podgroup("train", "team", "pg"), a_podgroup("train", "attacker", "fake-pg")],
        SERVICE: [a_service("train", "team", "svc"), a_service("train", "attacker", "fake-svc")],
    }


def snapshot_of(objects: dict) -> Snapshot:
    snap = Snapshot()
    for ref in (PODGROUP, JOB, SERVICE, POD):  # the spoofs come last: with name-only keys they would win
        snap.add(objects.get(ref, []), ref)
    return snap


def uids(items) -> set[str]:
    return {o["metadata"]["uid"] for o in (items.values() if isinstance(items, dict) else items)}


def test_a_snapshot_slice_holds_only_the_jobs_namespace_and_recorded_owner():
    observed = snapshot_of(the_real_job_and_a_spoof()).for_job(gangjob(owner_uids=RECORDED), BACKEND)
    assert uids(observed.owners) == {"real-job"}
    assert uids(observed.pods) == {"p0", "p1"}
    assert uids(observed.gang_of(PODGROUP)) == {"pg"}
    assert uids(observed.services) == {"svc"}
    assert observed.from_snapshot


def test_objects_of_another_namespace_are_not_the_jobs_even_alone():
    spoof = the_real_job_and_a_spoof()
    only_spoof = {ref: [o for o in objs if o["metadata"]["namespace"] == "attacker"] for ref, objs in spoof.items()}
    observed = snapshot_of(only_spoof).for_job(gangjob(owner_uids={"train-w": "real-job"}), BACKEND)
    assert observed.is_empty()


@pytest.mark.parametrize(("recorded", "owners", "pods"), [
    ({"train-w": "real-job"}, {"real-job"}, {"p0"}),  # the recorded Job and its pod
    ({}, set(), set()),  # nothing recorded yet (a new job): no Job is trusted by its label alone
    (None, {"real-job", "replaced"}, {"p0", "p9"}),  # a row from before UIDs were recorded: namespace and label
    ({"train-w": "gone-job"}, set(), {"p-gone"}),  # the recorded Job was deleted: its pods still count, no stand-in
])
def test_owner_jobs_by_recorded_uid_and_pods_by_owner_reference(recorded, owners, pods):
    observed = Observed(owners={"train-w": a_job("train-w", "team", "real-job"),
                                "train-v": a_job("train-v", "team", "replaced")},
                        pods=[a_pod("a", "team", "p0", "real-job"), a_pod("b", "team", "p9", "replaced"),
                              a_pod("c", "team", "p-gone", "gone-job"), a_pod("d", "team", "p-none", None),
                              a_pod("e", "elsewhere", "p-far", "real-job")])
    trusted = ownership.trust(observed, "team", recorded)
    assert uids(trusted.owners) == owners
    assert uids(trusted.pods) == pods


def test_a_pod_labelled_with_the_job_names_but_owned_by_nothing_does_not_count():
    pod = a_pod("train-w-0", "team", "p0", None)
    pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] = "train-w"
    assert not ownership.trusted_pod(pod, "team", {"real-job"})


def test_an_owner_reference_to_another_kind_does_not_count():
    pod = a_pod("train-w-0", "team", "p0", "real-job")
    pod["metadata"]["ownerReferences"][0]["kind"] = "ReplicaSet"
    assert not ownership.trusted_pod(pod, "team", {"real-job"})


@pytest.mark.parametrize(("recorded", "found_uid", "adopt"), [
    ({"train-w": "real-job"}, "real-job", True),
    ({"train-w": "real-job"}, "someone-elses", False),
    ({}, "created-then-crashed", True),
    (None, "legacy", True),
])
def test_a_job_found_on_create_is_adopted_only_under_its_recorded_uid(recorded, found_uid, adopt):
    assert ownership.adoptable("train-w", found_uid, recorded) is adopt


def test_record_keeps_what_a_legacy_row_trusted_and_adds_the_new_job():
    job = SimpleNamespace(owner_uids=None)
    ownership.record(job, {"train-w": a_job("train-w", "team", "u1"), "train-v": a_job("train-v", "team", "u2")})
    assert job.owner_uids == {"train-w": "u1", "train-v": "u2"}
    ownership.record(job, {"train-x": a_job("train-x", "team", "u3")})
    assert job.owner_uids == {"train-w": "u1", "train-v": "u2", "train-x": "u3"}


def test_the_watch_selects_the_same_objects_as_the_resync():
    spoof = the_real_job_and_a_spoof()
    cached = SimpleNamespace(gang=spoof[PODGROUP], owners=spoof[JOB], pods=spoof[POD])
    selected = watching.select(cached, BACKEND, gangjob(owner_uids=RECORDED))
    assert uids(selected.gang) == {"pg"} and uids(selected.owners) == {"real-job"}
    assert uids(selected.pods) == {"p0", "p1"}


def test_only_a_passs_own_new_uids_are_written_over_the_row():
    from scheduling.reconcile import status

    row_uids = {"train-w": "recreated"}
    watchers_copy = SimpleNamespace(owner_uids={"train-w": "first"})  # loaded before the recreate
    # The watch creates no Job, so it has no new UIDs: what the row holds stands, whatever its copy says.
    assert status.merged_owner_uids(row_uids, {}) == {"train-w": "recreated"} != watchers_copy.owner_uids

    reconciler = SimpleNamespace(owner_uids={"train-w": "first"})
    new = ownership.record(reconciler, {"train-v": a_job("train-v", "team", "created-now")})
    assert new == {"train-v": "created-now"}
    assert status.merged_owner_uids(row_uids, new) == {"train-w": "recreated", "train-v": "created-now"}
