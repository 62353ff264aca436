"""The queue policy tree: every QueuePolicy loaded in one query, with parent/children links (pure once loaded).

Below both the web's services (queue checks, warnings, pages) and the worker's reconcile (queue sync), so neither
imports the other for it. `QueueTree.load()` holds model instances (for writes); `QueueTree.load_rows()` is a
read-only tree of `QueueRow`s for pages and warnings.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from ..kube.kai_units import RESOURCES, UNLIMITED
from ..models import QueuePolicy

QUOTA_FIELDS = tuple(f"{r}_{k}" for r in RESOURCES for k in ("quota", "limit"))
WEIGHT_FIELDS = tuple(f"{r}_over_quota_weight" for r in RESOURCES)


def unlimited(value) -> bool:
    """True for KAI's -1 (unlimited quota or limit)."""
    return value is not None and value == UNLIMITED


ROW_FIELDS = ("id", "name", "display_name", "managed", "priority", "parent_id", *QUOTA_FIELDS, *WEIGHT_FIELDS)


class QueueRow(SimpleNamespace):
    """The fields of a QueuePolicy that the tree, its warnings and `policy_payload` read (`ROW_FIELDS`), without
    a model instance: building 1,000 model instances was most of the queue pages' time (bench/)."""


@dataclass
class QueueTree:
    """Every queue policy, loaded in one query, with parent/children links for checks that span the tree."""

    by_id: dict[int, QueuePolicy] = field(default_factory=dict)
    by_name: dict[str, QueuePolicy] = field(default_factory=dict)
    children: dict[int | None, list[QueuePolicy]] = field(default_factory=dict)
    # (parent id, resource) -> the children-sum warning of that parent's children, computed once per tree: every
    # sibling shows the same one, and recomputing it per sibling made the tree page quadratic (bench/, 1000 queues).
    sibling_sums: dict[tuple[int, str], dict | None] = field(default_factory=dict, repr=False)
    # (queue id, resource) -> the queue or ancestor whose finite limit caps that queue's children (read-only trees).
    _caps: dict[tuple[int, str], object] = field(default_factory=dict, repr=False)
    # (parent id, own id if it has children, its share fields) -> its warnings (read-only trees): the leaves of one
    # parent mostly share their values, and warnings depend on nothing else, so 1,000 queues compute a few dozen.
    _warnings: dict[tuple, list[dict]] = field(default_factory=dict, repr=False)
    # Read-only trees (load_rows) remember each queue's ancestors: the pages ask for them per queue, several times.
    read_only: bool = False
    # Ids of the queues the reader may see (access.queue_tree_filter), None for all: warnings never name a queue
    # outside it nor give its quota (issue 15, L5). Set once per tree, before any warning is computed.
    visible: set[int] | None = None
    _ancestors: dict[int, list] = field(default_factory=dict, repr=False)

    @classmethod
    def load_rows(cls) -> QueueTree:
        """A read-only tree for pages and warnings: every queue as a `QueueRow` (the fields warnings, payloads and
        the hierarchy read; no model instances, one query). Not for writes: rows cannot be saved."""
        tree = cls.load(QueueRow(**dict(zip(ROW_FIELDS, row, strict=True)))
                        for row in QueuePolicy.objects.order_by().values_list(*ROW_FIELDS))
        tree.read_only = True
        return tree

    @classmethod
    def load(cls, policies=None) -> QueueTree:
        """Build from `policies` (default: every QueuePolicy, one query)."""
        tree = cls()
        for p in (policies if policies is not None else QueuePolicy.objects.all()):
            tree.by_id[p.id] = p
            tree.by_name[p.name] = p
        for p in tree.by_id.values():
            tree.children.setdefault(p.parent_id, []).append(p)
        for kids in tree.children.values():
            kids.sort(key=lambda q: q.name)
        return tree

    def ancestors(self, policy: QueuePolicy) -> list[QueuePolicy]:
        """Parent, grandparent, ... (stops at a missing id or a cycle)."""
        if self.read_only and self.by_id.get(policy.id) is policy:
            if policy.id not in self._ancestors:
                self._ancestors[policy.id] = self._walk_up(policy)
            return self._ancestors[policy.id]
        return self._walk_up(policy)

    def _walk_up(self, policy) -> list:
        out, seen, pid = [], {policy.id}, policy.parent_id
        while pid is not None and pid in self.by_id and pid not in seen:
            seen.add(pid)
            out.append(self.by_id[pid])
            pid = self.by_id[pid].parent_id
        return out

    def cap(self, parent, resource: str, limit_field: str):
        """The queue that caps what a child of `parent` may use of `resource`: of `parent` and its ancestors, the
        one with the lowest finite limit (the nearest on a tie); None when all are unlimited. KAI checks every
        ancestor's limit (`max_allowed_check.go`). Remembered per parent in read-only trees, where every sibling
        asks for it."""
        key = (parent.id, resource)
        if key in self._caps:
            return self._caps[key]
        capping = [a for a in (parent, *self.ancestors(parent)) if not unlimited(getattr(a, limit_field))]
        cap = min(capping, key=lambda a: getattr(a, limit_field)) if capping else None
        if self.read_only and self.by_id.get(parent.id) is parent:
            self._caps[key] = cap
        return cap

    def descendants(self, policy: QueuePolicy) -> list[QueuePolicy]:
        """Children, grandchildren, ... (breadth first)."""
        out, todo = [], list(self.children.get(policy.id, []))
        while todo:
            q = todo.pop(0)
            out.append(q)
            todo.extend(self.children.get(q.id, []))
        return out

    def roots(self) -> list[QueuePolicy]:
        """Top-level queues, by name."""
        return self.children.get(None, [])
