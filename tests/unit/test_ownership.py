"""Only the job's own objects count: in its namespace, owner Jobs by the UID gangweb recorded, pods by their
ownerReferences (issue 15, H4). Pure functions over object dicts: the resync snapshot, the per-job slice and the
watch's selection."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from scheduling.kube.objects import JOB, POD, SERVICE
from scheduling.kube.refs import ObjectRef
from scheduling.observe.evidence import JobObjects
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
    cached = JobObjects(gang=spoof[PODGROUP], owners=spoof[JOB], pods=spoof[POD])  # as `objects_of` hands them out
    selected = watching.select(cached, BACKEND, gangjob(owner_uids=RECORDED))
    assert uids(selected.gang) == {"pg"} and uids(selected.owners) == {"real-job"}
    assert uids(selected.pods) == {"p0", "p1"}


def test_the_kinds_the_watch_had_not_listed_go_along_with_its_selection():
    """derive.py marks the entries of such an observation inferred (`unlisted_marked`): it reads them after select."""
    spoof = the_real_job_and_a_spoof()
    cached = JobObjects(pods=spoof[POD], unlisted=("podgroups.scheduling.k8s.io",))
    assert watching.select(cached, BACKEND, gangjob(owner_uids=RECORDED)).unlisted == ("podgroups.scheduling.k8s.io",)


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


# ---- issue 30, items 5-7: gang objects and Services by recorded UID, pods by controller reference ----------------
PG_KEY = f"{PODGROUP.api_version}/PodGroup/train"


def test_object_keys_name_jobs_bare_and_every_other_kind_by_api_version_and_kind():
    assert ownership.object_key(a_job("train-w", "team", "u")) == "train-w"
    assert ownership.object_key(a_podgroup("train", "team", "u")) == PG_KEY
    assert ownership.object_key(a_service("train", "team", "u")) == "v1/Service/train"
    for key in ("train-w", PG_KEY, "v1/Service/train"):
        assert ownership.key_of(*ownership.split_key(key)) == key


def test_a_look_alike_carrying_the_jobs_labels_is_reported_never_taken():
    observed = Observed(gang={"g": {"train": a_podgroup("train", "team", "pg"),
                                    "copy": a_podgroup("copy", "team", "lookalike")}},
                        services={"copy": a_service("copy", "team", "svc-copy")})
    trusted = ownership.trust(observed, "team", RECORDED, JOB_UID)
    assert uids(trusted.gang["g"]) == {"pg"} and trusted.services == {}
    assert [(f["kind"], f["name"], f["reason"]) for f in trusted.foreign] == [
        ("PodGroup", "copy", ownership.LOOK_ALIKE), ("Service", "copy", ownership.LOOK_ALIKE)]
    assert not trusted.foreign_complete


def marked(obj: dict) -> dict:
    """`obj` as gangweb creates it: with its creation mark."""
    return ownership.stamp(obj, JOB_UID)


@pytest.mark.parametrize(("name", "recorded", "mark", "kept"), [
    ("train", {PG_KEY: "pg"}, False, True),  # the recorded one
    ("train", {PG_KEY: "another"}, True, False),  # another UID is recorded under its key: a stand-in, mark or not
    ("current", {}, True, True),  # nothing recorded, a current name, gangweb's mark: created, not recorded yet
    ("current", {}, False, False),  # ... without the mark: someone made it under the name gangweb uses (F3)
    ("current", {"train-w": "real-job"}, True, True),  # Jobs recorded, nothing else: made before gang records ...
    ("current", {"train-w": "real-job"}, False, True),  # ... carry no mark: the label adopts them once
    ("current", {"train-w": "real-job", PG_KEY: "pg"}, False, False),  # gang objects recorded: the mark is needed
    ("old", {}, True, False),  # nothing recorded, not a current name: never adopted
])
def test_a_gang_object_is_the_jobs_by_its_recorded_uid_or_adopted_only_with_gangwebs_mark(name, recorded, mark,
                                                                                           kept):
    obj = a_podgroup(name, "team", "pg")
    assert ownership.trusted_object(marked(obj) if mark else obj, "team", recorded, {"current"}, JOB_UID) is kept


def test_gangwebs_creation_mark_is_its_own_per_job_kind_and_name_and_cannot_be_moved():
    mine = marked(a_podgroup("train-gen1", "team", "pg"))
    assert ownership.made_by_gangweb(mine, JOB_UID)
    mark = mine["metadata"]["annotations"]["gangweb.io/created"]
    assert len(mark) == 32 and mark == ownership.creation_mark(JOB_UID, PG_KEY.replace("/train", "/train-gen1"))
    # The mark seen on one object is no mark for the next generation's name, another kind or another job.
    moved = a_podgroup("train-gen2", "team", "x")
    moved["metadata"]["annotations"] = {"gangweb.io/created": mark}
    assert not ownership.made_by_gangweb(moved, JOB_UID)
    assert not ownership.made_by_gangweb(mine, "another-job")
    service = a_service("train-gen1", "team", "s")
    service["metadata"]["annotations"] = {"gangweb.io/created": mark}
    assert not ownership.made_by_gangweb(service, JOB_UID)


def test_an_own_object_without_its_labels_is_found_by_its_uid_and_a_claimant_is_reported():
    mine = a_podgroup("train", "team", "pg")
    del mine["metadata"]["labels"]
    claimant = a_podgroup("claims", "team", "other")
    claimant["metadata"] = {"name": "claims", "namespace": "team", "uid": "other",
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train-w",
                                                 "uid": "real-job"}]}
    bystander = a_podgroup("bystander", "team", "b")
    bystander["metadata"]["labels"] = {}
    observed = Observed(owners={"train-w": a_job("train-w", "team", "real-job")})
    trusted = ownership.trust(observed, "team", RECORDED, JOB_UID, others={"g": [mine, claimant, bystander]})
    assert uids(trusted.gang["g"]) == {"pg"} and trusted.relabel == {PG_KEY}
    assert [(f["name"], f["reason"]) for f in trusted.foreign] == [("claims", ownership.CLAIMS_JOB)]
    assert trusted.foreign_complete


def test_only_a_pod_whose_controller_reference_names_the_job_and_matches_its_selector_counts():
    owner = a_job("train-w", "team", "real-job")
    owner["spec"] = {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "real-job"}}}
    real = a_pod("real", "team", "p0", "real-job")
    real["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = "real-job"
    not_controller = a_pod("plain-ref", "team", "p1", "real-job")
    not_controller["metadata"]["ownerReferences"][0]["controller"] = False
    unselected = a_pod("no-selector-labels", "team", "p2", "real-job")  # controller: true, but not selected
    by_uid = {"real-job": owner}
    assert ownership.trusted_pod(real, "team", {"real-job"}, by_uid)
    assert not ownership.trusted_pod(not_controller, "team", {"real-job"}, by_uid)
    assert not ownership.trusted_pod(unselected, "team", {"real-job"}, by_uid)
    observed = Observed(owners={"train-w": owner}, pods=[real, not_controller, unselected])
    assert uids(ownership.trust(observed, "team", RECORDED).pods) == {"p0"}


def test_record_keeps_gang_objects_under_their_keys_next_to_the_jobs():
    job = SimpleNamespace(owner_uids={"train-w": "u1"})
    new = ownership.record(job, {PG_KEY: a_podgroup("train", "team", "pg")})
    assert new == {PG_KEY: "pg"} and job.owner_uids == {"train-w": "u1", PG_KEY: "pg"}
    assert ownership.accepted_owner_uids([], job.owner_uids) == {"u1"}  # a gang object's UID owns no pod


@pytest.mark.parametrize(("key", "found_uid", "adopt"), [
    (PG_KEY, "pg", True), (PG_KEY, "someone-elses", False), ("v1/Service/other", "anything", True)])
def test_an_object_found_on_create_is_adopted_only_under_its_recorded_uid_per_key(key, found_uid, adopt):
    assert ownership.adoptable("train", found_uid, {PG_KEY: "pg"}, key) is adopt
