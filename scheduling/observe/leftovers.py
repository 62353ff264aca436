"""What keeps a cancel (or a clean-up) from ending, named: the job's objects still in the cluster, each with its
kind and name, whether it is being deleted, and the finalizers that hold it (hostile pass F4).

A cancel ends (Cancelled) only once nothing of the job is left (reconcile/jobs/cleanup.py). Pods held by a finalizer,
pods left running after their Indexed Job was deleted by hand, an object whose finalizer no controller removes:
until they go, the job reads `Cancelling`, and its message names them ("Pod ns/x (being deleted; held by finalizer
example.com/hold)"), so the user knows what to look at. The same words serve the pass (`JobCleanup`) and the watch's
observation (observe/phases.py), so the two never disagree about what blocks the end.
"""
from __future__ import annotations

from collections.abc import Iterable

from . import objects as o

MAX_NAMED = 5  # objects named in one message; the rest are counted
KIND_ORDER = {"Pod": 0, "Job": 1, "Service": 2}  # pods first: what runs; then owners, the Service, the gang objects


def describe(obj: dict) -> str:
    """One object as a cancel waits on it: "Pod ns/x (being deleted; held by finalizer a)", "Job ns/y (being
    deleted; held by finalizers a, b)", "Pod ns/z (being deleted)" or "PodGroup ns/w (not deleted yet)"."""
    where = o.ref(obj, "?")
    if not o.is_terminating(obj):
        return f"{where} (not deleted yet)"
    finalizers = [f for f in o.meta(obj).get("finalizers") or [] if isinstance(f, str)]
    if not finalizers:
        return f"{where} (being deleted)"
    word = "finalizer" if len(finalizers) == 1 else "finalizers"
    return f"{where} (being deleted; held by {word} {', '.join(finalizers)})"


def named(objs: Iterable[dict], limit: int = MAX_NAMED) -> str:
    """`describe` of each of `objs`, pods first, then Jobs, the Service, gang objects, each kind by name; at most
    `limit` named and the rest counted ("… and 3 more"). "" for none."""
    items = sorted((x for x in objs if isinstance(x, dict)),
                   key=lambda x: (KIND_ORDER.get(o.kind_of(x), 3), o.kind_of(x), o.meta(x).get("name") or ""))
    out = ", ".join(describe(x) for x in items[:limit])
    if len(items) > limit:
        out += f" and {len(items) - limit} more"
    return out


def waiting_for(objs: Iterable[dict], what: str = "deleting the job's cluster objects") -> str:
    """The message of a cancel or clean-up that is not over: `what`, then what is left ("...; waiting for Pod ns/x
    (being deleted; held by finalizer a)"); `what` alone when nothing is named."""
    left = named(objs)
    return f"{what}; waiting for {left}" if left else what
