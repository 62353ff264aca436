"""Why a queue policy is accepted but probably not what the admin meant: each queue's warnings (QueueWarning),
from its own fields and its place in the tree (docs/upstream.md, KAI Queue).
"""
from __future__ import annotations

import operator

from ...choices import QueueWarning
from ...kube.kai_units import RESOURCES, display
from ...models import QueuePolicy
from ...queueing.tree import QUOTA_FIELDS, ROW_FIELDS, WEIGHT_FIELDS, QueueRow, QueueTree, unlimited  # noqa: F401

# Sums and comparisons of fractional GPUs (0.1 + 0.2 vs 0.3) must not warn on float rounding.
TOLERANCE = {"gpu": 1e-6, "cpu": 0, "memory": 0}

# (resource, quota field, limit field, weight field): per-queue loops read these instead of formatting the names.
RESOURCE_FIELDS = tuple((r, f"{r}_quota", f"{r}_limit", f"{r}_over_quota_weight") for r in RESOURCES)

SHARE_FIELDS = tuple(f for _r, *fields in RESOURCE_FIELDS for f in fields)  # what a queue's own warnings read
_share_values = operator.attrgetter(*SHARE_FIELDS)  # a tuple of them (9 fields): one call per queue of a tree

def _over(resource: str, a, b) -> bool:
    """a > b for finite KAI amounts, with the GPU tolerance."""
    return a > b + TOLERANCE[resource]

def _fmt(resource: str, amount) -> str:
    """An amount for messages: "4 GPUs", "4000 millicores (4 cores)", "68720 MB", "unlimited"."""
    if unlimited(amount):
        return "unlimited"
    shown = display(resource, amount)
    if resource == "gpu":
        return f"{shown} GPUs"
    if resource == "cpu":
        return f"{int(amount)} millicores ({shown} cores)" if not shown.endswith("m") else f"{int(amount)} millicores"
    return f"{int(amount)} MB" + (f" ({shown})" if shown.endswith(("G", "Gi")) else "")

NAMES_SHOWN = 5

def _some_names(names: list[str]) -> str:
    """``"a, b"``; past `NAMES_SHOWN` names, the first ones and a count (``"a, b, c, d, e and 85 more"``), so a
    warning that every child of a wide queue carries stays one line instead of growing with the square of its
    width (90 children repeating 90 names was 60% of the whole queue tree's answer)."""
    if len(names) <= NAMES_SHOWN + 1:
        return ", ".join(names)
    return f"{', '.join(names[:NAMES_SHOWN])} and {len(names) - NAMES_SHOWN} more"

def _children_sum_warning(resource: str, parent: QueuePolicy, kids: list[QueuePolicy], on: str,
                          visible: set[int] | None = None) -> dict | None:
    """The CHILDREN_OVER_PARENT warning of `parent` when its `kids`' quotas add up to more than its own, else None.
    With `visible` (queue ids the reader may see), queues outside it are only counted: neither their names nor the
    total their quotas make is said."""
    pquota = getattr(parent, f"{resource}_quota")
    if unlimited(pquota) or not kids:
        return None
    quotas = [getattr(k, f"{resource}_quota") for k in kids]
    hidden = 0 if visible is None else sum(1 for k in kids if k.id not in visible and k.id is not None)
    if hidden:
        if not (any(unlimited(q) for q in quotas) or _over(resource, sum(quotas), pquota)):
            return None
        shown = [k.name for k in kids if k.id in visible or k.id is None]
        others = f"{hidden} other queue{'s' if hidden != 1 else ''} you cannot see"
        names = f"{_some_names(shown)} and {others}" if shown else others
        return {"code": QueueWarning.CHILDREN_OVER_PARENT, "field": f"{resource}_quota",
                "message": f"the {resource} quotas of the children of '{parent.name}' ({names}) add up to more than "
                           f"the {_fmt(resource, pquota)} quota of '{parent.name}'; {on}"}
    unlimited_kids = [k.name for k, q in zip(kids, quotas, strict=True) if unlimited(q)]
    if unlimited_kids:
        total = f"unlimited ({_some_names(unlimited_kids)} {'has' if len(unlimited_kids) == 1 else 'have'} quota -1)"
    elif _over(resource, sum(quotas), pquota):
        total = _fmt(resource, sum(quotas))
    else:
        return None
    names = _some_names([k.name for k in kids])
    return {"code": QueueWarning.CHILDREN_OVER_PARENT, "field": f"{resource}_quota",
            "message": f"the {resource} quotas of {names} (children of '{parent.name}') add up to {total}, more "
                       f"than the {_fmt(resource, pquota)} quota of '{parent.name}'; {on}"}

def warnings_for(policy: QueuePolicy, tree: QueueTree) -> list[dict]:
    """Warnings for one queue (as it is in memory) against the others in `tree`: a list of
    ``{"code": QueueWarning, "field": "gpu_limit", "message": "..."}``. Pure: no queries.

    Constant work per queue in a read-only tree (`QueueTree.load_rows`): what depends only on the parent (the
    capping ancestor, the siblings' quota sum) is computed once per parent, and queues with the same parent and
    the same quotas, limits and weights (and no children) share one computation, so drawing the whole tree is
    linear with a small constant.
    """
    if tree.read_only and policy.id is not None and tree.by_id.get(policy.id) is policy:
        key = (policy.parent_id, policy.id if tree.children.get(policy.id) else None, _share_values(policy))
        found = tree._warnings.get(key)
        if found is None:
            found = tree._warnings[key] = _warnings(policy, tree)
        return [dict(w) for w in found]  # copies: a caller may change its own list
    return _warnings(policy, tree)

def _warnings(policy: QueuePolicy, tree: QueueTree) -> list[dict]:
    out = []
    in_tree = policy.id is not None and tree.by_id.get(policy.id) is policy
    parent = tree.by_id.get(policy.parent_id) if policy.parent_id else None
    for r, quota_field, limit_field, weight_field in RESOURCE_FIELDS:
        quota, limit = getattr(policy, quota_field), getattr(policy, limit_field)
        if limit == 0:
            out.append({"code": QueueWarning.ZERO_LIMIT, "field": limit_field,
                        "message": f"{r}_limit is 0: KAI allocates no {r} at all in this queue or its children; "
                                   "send -1 for no limit"})
        elif not unlimited(limit) and (unlimited(quota) or _over(r, quota, limit)):
            out.append({"code": QueueWarning.QUOTA_OVER_LIMIT, "field": quota_field,
                        "message": f"{r}_quota {_fmt(r, quota)} is above {r}_limit {_fmt(r, limit)}: the queue can "
                                   "never use its whole quota"})
        if getattr(policy, weight_field) == 0:
            out.append({"code": QueueWarning.NO_SURPLUS_SHARE, "field": weight_field,
                        "message": f"{r}_over_quota_weight is 0: the queue gets no share of unused {r} beyond its "
                                   "quota"})
        cap = tree.cap(parent, r, limit_field) if parent is not None else None
        if cap is not None:
            cap_limit = getattr(cap, limit_field)
            if unlimited(limit):
                out.append({"code": QueueWarning.UNLIMITED_UNDER_FINITE, "field": limit_field,
                            "message": f"{r}_limit is unlimited, but ancestor '{cap.name}' has {r}_limit "
                                       f"{_fmt(r, cap_limit)}; KAI checks every ancestor's limit, so at most "
                                       f"{_fmt(r, cap_limit)} can be allocated here"})
            elif _over(r, limit, cap_limit):
                out.append({"code": QueueWarning.LIMIT_OVER_ANCESTOR, "field": limit_field,
                            "message": f"{r}_limit {_fmt(r, limit)} is above ancestor '{cap.name}'s "
                                       f"{_fmt(r, cap_limit)}; at most {_fmt(r, cap_limit)} can be allocated here"})
        if parent is not None:
            if in_tree:  # its siblings are exactly children[parent]
                w = _tree_children_sum(tree, parent, r)
            else:
                siblings = [s for s in tree.children.get(parent.id, []) if s.id != policy.id] + [policy]
                siblings.sort(key=lambda q: q.name)
                w = _children_sum_warning(r, parent, siblings, "their guarantees cannot all be met", tree.visible)
            if w:
                out.append(dict(w))
        if in_tree:  # its children as stored
            w = _tree_children_sum(tree, policy, r)
        else:
            kids = [k for k in tree.children.get(policy.id, []) if k.id != policy.id] if policy.id else []
            w = _children_sum_warning(r, policy, kids, "their guarantees cannot all be met", tree.visible)
        if w:
            out.append(dict(w))
    return out

def _tree_children_sum(tree: QueueTree, parent, resource: str) -> dict | None:
    """The children-sum warning of `parent`'s children in `tree` (None if none), computed once per tree."""
    if parent.id not in tree.children:  # a leaf
        return None
    key = (parent.id, resource)
    if key not in tree.sibling_sums:
        kids = [k for k in tree.children[parent.id] if k.id != parent.id]
        tree.sibling_sums[key] = _children_sum_warning(resource, parent, kids, "their guarantees cannot all be met",
                                                       tree.visible)
    return tree.sibling_sums[key]
