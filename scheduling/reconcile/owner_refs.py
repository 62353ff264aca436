"""ownerReferences from every object of a job to its root object, so the cluster's garbage collector can clean up
without gangweb.

Every job has one root object in its cluster: the gang object that lives longest, created first (`root_ref` of its
backend plugin: the Workload for Kubernetes workload-aware scheduling, the PodGroup for KAI, coscheduling and
Volcano). Every other object gangweb creates for the job (the other gang objects, the Indexed Jobs, the headless
Service) carries exactly one ownerReference, to that root by UID, with `blockOwnerDeletion: false` (nothing needs
the root to wait for them). Pods are owned by their Indexed Job (the Job controller's controller reference), so the
chain is root -> Job -> pod. If gangweb's database is lost, deleting the root (or the namespace) removes the rest
through kube-controller-manager's garbage collector; nothing is orphaned for ever.

Semantics: Kubernetes "Garbage Collection" (owners and dependents; `metadata.ownerReferences`, a namespaced
dependent may only name an owner in its own namespace) and `k8s.io/apimachinery/pkg/apis/meta/v1` OwnerReference.

What a pass does with an object's references (`verdict`):
- exactly the root's reference: in sync;
- a reference to an object of the root's kind and apiVersion with another UID: the root was deleted (by hand)
  and, maybe, created again since; the garbage collector is deleting this object or about to. gangweb deletes it
  too (UID precondition) and recreates the set after it is gone ("stale");
- anything else (no reference: removed by hand, or made by a gangweb before this one; extra references someone
  added; a reference to a root of an API version the cluster stopped serving): the list is put back to the root
  alone with a merge patch carrying the read resourceVersion ("patch").
"""
from __future__ import annotations

IN_SYNC, PATCH, STALE = "in-sync", "patch", "stale"


def reference(root: dict) -> dict:
    """The OwnerReference naming `root` (an object dict as the API server returned it, with metadata.uid):
    {apiVersion, kind, name, uid, blockOwnerDeletion: False}. Raises KeyError when `root` has no name or uid."""
    meta = root["metadata"]
    return {"apiVersion": root["apiVersion"], "kind": root["kind"], "name": meta["name"], "uid": meta["uid"],
            "blockOwnerDeletion": False}


def with_owner(want: dict, root_reference: dict) -> dict:
    """`want` (a desired object dict, changed in place and returned) with `metadata.ownerReferences` = [root]."""
    want.setdefault("metadata", {})["ownerReferences"] = [dict(root_reference)]
    return want


def _same(ref, root_reference: dict) -> bool:
    return isinstance(ref, dict) and all(ref.get(k) == root_reference[k] for k in ("apiVersion", "kind", "name", "uid"))


def verdict(obj: dict, root_reference: dict) -> str:
    """IN_SYNC, PATCH or STALE for an observed object of the job against the root's reference (module docstring).
    Observed values are untrusted: a reference that is not a mapping counts as foreign (PATCH)."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    if not isinstance(refs, list):
        return PATCH
    if len(refs) == 1 and _same(refs[0], root_reference):
        return IN_SYNC
    for ref in refs:
        if (isinstance(ref, dict) and ref.get("kind") == root_reference["kind"]
                and ref.get("apiVersion") == root_reference["apiVersion"] and ref.get("uid") != root_reference["uid"]):
            return STALE
    return PATCH


def patch_body(root_reference: dict) -> dict:
    """The merge patch putting back `metadata.ownerReferences` = [root] (a merge patch replaces the list whole)."""
    return {"metadata": {"ownerReferences": [dict(root_reference)]}}
