"""What blocks a cancel, named (hostile pass F4, scheduling/observe/leftovers.py): kind, name, state and the
finalizers that hold each object, pods first, at most five named."""
from __future__ import annotations

from scheduling.observe import leftovers


def obj(kind: str, name: str, terminating: bool = False, finalizers=()) -> dict:
    meta = {"name": name, "namespace": "team"}
    if terminating:
        meta["deletionTimestamp"] = "2026-12-06T10:00:00Z"
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {"kind": kind, "metadata": meta}


def test_each_object_says_whether_it_is_being_deleted_and_what_holds_it():
    assert leftovers.describe(obj("Pod", "a", True, ["example.com/hold"])) == (
        "Pod team/a (being deleted; held by finalizer example.com/hold)")
    assert leftovers.describe(obj("Job", "w", True, ["foregroundDeletion", "x/y"])) == (
        "Job team/w (being deleted; held by finalizers foregroundDeletion, x/y)")
    assert leftovers.describe(obj("Pod", "b", True)) == "Pod team/b (being deleted)"
    assert leftovers.describe(obj("PodGroup", "g")) == "PodGroup team/g (not deleted yet)"


def test_pods_come_first_then_jobs_the_service_and_gang_objects_and_past_five_the_rest_are_counted():
    objs = [obj("PodGroup", "g"), obj("Service", "s"), obj("Job", "w", True, ["foregroundDeletion"]),
            obj("Pod", "p2", True), obj("Pod", "p1", True, ["example.com/hold"]), obj("Workload", "g"),
            obj("Pod", "p3")]
    assert leftovers.waiting_for(objs) == (
        "deleting the job's cluster objects; waiting for Pod team/p1 (being deleted; held by finalizer "
        "example.com/hold), Pod team/p2 (being deleted), Pod team/p3 (not deleted yet), Job team/w (being deleted; "
        "held by finalizer foregroundDeletion), Service team/s (not deleted yet) and 2 more")
    assert leftovers.waiting_for([]) == "deleting the job's cluster objects"
