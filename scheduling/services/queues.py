"""Create, update and delete KAI queue policies, with the checks and warnings the API and the dashboard share.

Semantics are KAI's (`QueueSpec` / `QueueResource`; docs/upstream.md, KAI Queue):

- quota and limit per resource (gpu devices, cpu millicores, memory decimal MB; see scheduling.kube.kai_units for
  what users may type); ``-1`` is unlimited; quota 0 is no guarantee; an omitted limit is 0 in KAI and blocks
  allocation, so gangweb always stores and sends limits and defaults them to ``-1``;
- overQuotaWeight 0 gets no share of the surplus; the limit is checked for the queue **and every ancestor**;
- only leaf queues take jobs; a parent must exist; no cycles.

Refusals raise ValidationError({field: message}) (400), Conflict (409: name taken, queue in use, imported queue)
or PermissionDenied (403: not a platform admin). Everything is validated before anything is written, so a refused
request changes nothing. Accepted but doubtful input gives warnings (``[{"code", "field", "message"}]``) which
the API returns on the queue and the dashboard shows.

Write body (JSON; every field optional on update, which merges)::

    {"name": "team-a", "display_name": "Team A", "parent": "research" | null, "priority": 100,
     "gpu_quota": 4 | "4", "gpu_limit": 8 | -1, "gpu_over_quota_weight": 1,
     "cpu_quota": 16000 | "16", "cpu_limit": "unlimited", "cpu_over_quota_weight": 1,
     "memory_quota": 64000 | "64G" | "64Gi", "memory_limit": -1, "memory_over_quota_weight": 1,
     "preempt_min_runtime": "10m", "reclaim_min_runtime": "30m",
     "clusters": ["local"], "allowed_namespaces": ["team-a"]}

`clusters` empty means every registered cluster (as job submit already treats it).
"""
from __future__ import annotations

import re
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import OuterRef, Subquery

from ..amounts import for_api, in_answer, in_people_units, unit_of, unit_words
from ..choices import ACTIVE_PHASES, PodSecurityLevel, QueueWarning
from ..kube import resources, runtime_classes
from ..kube.kai_units import RESOURCES, UNITS, UNLIMITED, display, kai_amounts, to_kai
from ..models import Cluster, GangJob, QueueClusterState, QueuePolicy
from ..queueing.tree import QUOTA_FIELDS, ROW_FIELDS, WEIGHT_FIELDS, QueueRow, QueueTree, unlimited  # noqa: F401
from . import access, audit, dispatch, related
from . import policy as pod_policy
from . import tokens as token_service
from . import validation as v
from .errors import Conflict, PermissionDenied
from .queue_allocation import SOURCE_WORDS

# Sums and comparisons of fractional GPUs (0.1 + 0.2 vs 0.3) must not warn on float rounding.
TOLERANCE = {"gpu": 1e-6, "cpu": 0, "memory": 0}
# (resource, quota field, limit field, weight field): per-queue loops read these instead of formatting the names.
RESOURCE_FIELDS = tuple((r, f"{r}_quota", f"{r}_limit", f"{r}_over_quota_weight") for r in RESOURCES)
SHARE_FIELDS = tuple(f for _r, *fields in RESOURCE_FIELDS for f in fields)  # what a queue's own warnings read
WRITABLE = ("name", "display_name", "parent", "priority", *QUOTA_FIELDS, *WEIGHT_FIELDS, "preempt_min_runtime",
            "reclaim_min_runtime", "clusters", "allowed_namespaces", "allowed_service_accounts", "pod_security_level")
# Fields the API returns; a client that PUTs back what it read is not refused for them.
READ_ONLY = ("id", "managed", "created_at", "updated_at", "warnings", "quantities", "sync", "units")
# Go `time.ParseDuration` as metav1.Duration accepts it: "0", "20s", "1h30m", "1.5h".
GO_DURATION = re.compile(r"0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+")
GO_DURATION_PART = re.compile(r"([0-9]+(\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
GO_DURATION_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
# Go's time.Duration is an int64 of nanoseconds (`maxDuration` in time/time.go): ~2562047h47m16.85s.
GO_DURATION_MAX_NS = 2**63 - 1
GO_DURATION_MAX_HOURS = GO_DURATION_MAX_NS // GO_DURATION_UNITS["h"]
INT32 = (-(2**31), 2**31 - 1)


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
        key = (policy.parent_id, policy.id if tree.children.get(policy.id) else None,
               *[getattr(policy, f) for f in SHARE_FIELDS])
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


def _snapshot(policy: QueuePolicy) -> dict:
    """The writable fields of `policy` (clusters by id), to tell which ones a write changes."""
    values = {f: getattr(policy, f) for f in WRITABLE if f not in ("clusters", "parent")}
    values["parent"] = policy.parent_id
    values["clusters"] = set(policy.clusters.values_list("id", flat=True)) if policy.pk else set()
    return values


def _audit_details(before: dict, after: dict) -> dict:
    return {k: (sorted(v) if isinstance(v, set) else v) for k, v in after.items() if before.get(k) != v}


def duration_nanoseconds(text: str) -> int:
    """The length of a Go duration string (already matched by GO_DURATION) in nanoseconds, exactly (Decimal
    arithmetic: "1.5h" is 5,400,000,000,000). Go's `time.ParseDuration` truncates fractions to whole nanoseconds."""
    total = Decimal(0)
    for number, _fraction, unit in GO_DURATION_PART.findall(text):
        total += Decimal(number) * GO_DURATION_UNITS[unit]
    return int(total)


def _duration(value, field_name: str) -> str:
    """A Go duration string for a KAI Queue's `preemptMinRuntime`/`reclaimMinRuntime` (metav1.Duration), or "".
    Raises ValidationError naming `field_name` for another shape, and for a length beyond Go's `time.Duration`
    (int64 nanoseconds, about 2562047h): the API server refuses the Queue then, and every sync of it fails."""
    if value in (None, ""):
        return ""
    if not isinstance(value, str) or not GO_DURATION.fullmatch(value.strip()):
        raise ValidationError({field_name: f"'{str(value)[:40]}' is not a duration such as '20s', '10m' or '1h30m'"})
    if duration_nanoseconds(value.strip()) > GO_DURATION_MAX_NS:
        raise ValidationError({field_name: f"'{value.strip()[:40]}' is longer than a Go duration can hold (at most "
                                           f"{GO_DURATION_MAX_HOURS}h)"})
    return value.strip()


def _apply(policy: QueuePolicy, data: dict, tree: QueueTree, user=None) -> tuple[list[Cluster] | None, bool]:
    """Validate `data` and set it on the unsaved/in-memory `policy`. Returns (clusters or None, parent changed).
    A `parent` that `user` cannot see is refused as one that does not exist (access.named_queue). The steps run in
    this order, so the first field a request gets wrong is the one named: keys, share fields, access fields,
    clusters, parent."""
    v.mapping(data, "body")
    unknown = sorted(set(data) - set(WRITABLE) - set(READ_ONLY))
    if unknown:
        raise ValidationError({unknown[0]: f"unknown field; writable fields are {', '.join(WRITABLE)}"})
    _apply_shares(policy, data)
    _apply_access(policy, data)
    clusters = _clusters_named(data["clusters"]) if "clusters" in data else None
    parent_changed = _apply_parent(policy, data["parent"], tree, user) if "parent" in data else False
    return clusters, parent_changed


def _apply_shares(policy: QueuePolicy, data: dict) -> None:
    """display_name, priority, quotas and limits (KAI units), over-quota weights, minimum runtimes."""
    if "display_name" in data:
        policy.display_name = v.string(data["display_name"] or "", "display_name", allow_empty=True, max_length=200)
    if "priority" in data:
        policy.priority = v.integer(data["priority"], "priority", minimum=INT32[0], maximum=INT32[1])
    for name in QUOTA_FIELDS:
        if name in data:
            setattr(policy, name, to_kai(name.split("_")[0], data[name], name))
    for name in WEIGHT_FIELDS:
        if name in data:
            setattr(policy, name, _weight(data[name], name))
    for name in ("preempt_min_runtime", "reclaim_min_runtime"):
        if name in data:
            setattr(policy, name, _duration(data[name], name))


def _weight(value, field_name: str) -> float:
    """An over-quota weight: a number in 0..1e9 (0 = no share of the surplus). Raises ValidationError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0 or value > 1e9:
        raise ValidationError({field_name: f"must be a number of at least 0 (0 = no share of the surplus), "
                                           f"got {str(value)[:40]}"})
    return float(value)


def _apply_access(policy: QueuePolicy, data: dict) -> None:
    """allowed_namespaces, allowed_service_accounts (deduplicated, order kept), pod_security_level."""
    if "allowed_namespaces" in data:
        namespaces = data["allowed_namespaces"] or []
        if not isinstance(namespaces, list):
            raise ValidationError({"allowed_namespaces": "must be a list of namespace names"})
        for i, ns in enumerate(namespaces):
            v.dns_label(ns, f"allowed_namespaces[{i}]")
            pod_policy.check_allowed_namespace(ns, f"allowed_namespaces[{i}]")
        policy.allowed_namespaces = list(dict.fromkeys(namespaces))
    if "allowed_service_accounts" in data:
        accounts = data["allowed_service_accounts"] or []
        if not isinstance(accounts, list):
            raise ValidationError({"allowed_service_accounts": "must be a list of service account names"})
        for i, name in enumerate(accounts):
            v.dns_subdomain(name, f"allowed_service_accounts[{i}]")
        policy.allowed_service_accounts = list(dict.fromkeys(accounts))
    if "pod_security_level" in data:
        if data["pod_security_level"] not in PodSecurityLevel.values:
            raise ValidationError({"pod_security_level": f"must be {' or '.join(PodSecurityLevel.values)}"})
        policy.pod_security_level = data["pod_security_level"]


def _clusters_named(names) -> list[Cluster]:
    """The clusters `names` (a list of names; None or empty = every cluster), deduplicated in order (one query).
    Raises ValidationError naming the first unknown one."""
    names = names or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValidationError({"clusters": "must be a list of cluster names"})
    found = {c.name: c for c in Cluster.objects.filter(name__in=names)}
    missing = [n for n in names if n not in found]
    if missing:
        raise ValidationError({"clusters": f"no cluster named '{missing[0][:63]}'"})
    return [found[n] for n in dict.fromkeys(names)]


def _apply_parent(policy: QueuePolicy, pname, tree: QueueTree, user) -> bool:
    """Set `policy.parent` from the parent's name (None or "" = top level). Returns whether it changed. Refuses a
    parent `user` cannot see (as missing), one that would make the hierarchy loop, and a new parent that has
    active jobs (only leaf queues take jobs)."""
    if pname in (None, ""):
        parent = None
    else:
        v.string(pname, "parent", max_length=63)
        parent = tree.by_name.get(pname)
        if parent is None or user is not None:
            parent = access.named_queue(user, parent, pname, "parent")
        if policy.id is not None and (parent.id == policy.id or policy in tree.ancestors(parent)):
            path = " → ".join([*_loop_path(policy, parent, tree), policy.name])
            raise ValidationError({"parent": f"'{pname}' is this queue or one of its descendants; the hierarchy "
                                             f"would loop ({path})"})
    parent_changed = (parent.id if parent else None) != policy.parent_id
    if parent_changed and parent is not None:
        active = GangJob.objects.filter(queue=parent, phase__in=list(ACTIVE_PHASES)).count()
        if active:
            raise ValidationError({"parent": f"queue '{parent.name}' has {active} active jobs; only leaf queues "
                                             "take jobs, so it cannot get child queues until they finish"})
    policy.parent = parent
    return parent_changed


def _loop_path(policy: QueuePolicy, parent, tree: QueueTree) -> list[str]:
    """The queues from `policy` down to `parent` when `parent` is `policy` or one of its descendants."""
    if parent.id == policy.id:
        return [policy.name]
    between = []
    for a in tree.ancestors(parent):
        if a.id == policy.id:
            break
        between.append(a.name)
    return [policy.name, *reversed(between), parent.name]


def name_taken(user, kind: str, name: str, queue_id: int | None) -> str:
    """The 409 message for a `kind` ("queue", "runtime template") `name` already taken by an object of queue
    `queue_id` (None: shared). Names are global, so a taken name must be refused; but when `user` may not see the
    owner, the answer names nothing about it (not that it is a queue, nor whose), the same for every hidden clash
    (issue 15, L5; docs/security.md)."""
    if queue_id is None and kind == "runtime template" or access.is_platform_admin(user) or (
            queue_id is not None and queue_id in access.visible_queue_ids(user)):
        return f"a {kind} named '{name}' already exists"
    return f"'{name}' is not available as a {kind} name; choose another"


def _reflect(tree: QueueTree, policy: QueuePolicy) -> QueueTree:
    """`tree` with `policy`'s in-memory values in place of its stored row (for warnings before saving)."""
    policies = [p for p in tree.by_id.values() if p.id != policy.id] + [policy]
    return QueueTree.load(policies)


def create_queue(user, data) -> tuple[QueuePolicy, list[dict]]:
    """Create a managed queue policy and queue its sync to its clusters. Returns (policy, warnings).

    Limits not given are stored as -1 (unlimited), never left to KAI's default of 0.
    Raises ValidationError (400), Conflict (409: name taken), PermissionDenied (403).
    """
    if not access.is_platform_admin(user) and not access.queue_roles(user):
        raise PermissionDenied({"detail": "only platform admins and queue admins may create queues"})
    v.mapping(data, "body")
    name = v.dns_label(data.get("name"), "name")
    tree = QueueTree.load()
    policy = QueuePolicy(name=name, managed=True, gpu_limit=UNLIMITED, cpu_limit=UNLIMITED, memory_limit=UNLIMITED)
    clusters, _ = _apply(policy, data, tree, user)
    access.check_create_queue(user, policy.parent)
    access.check_queue_scope(user, policy.parent, clusters or [], policy.allowed_namespaces,
                             policy.allowed_service_accounts)
    # Queue names are global (a KAI Queue is cluster-scoped), so a taken name is told, but only after the permission
    # checks: before them, anyone with a role on some queue could probe for the names of queues they cannot see.
    if name in tree.by_name:
        raise Conflict({"name": name_taken(user, "queue", name, tree.by_name[name].id)})
    with transaction.atomic():
        policy.save()
        if clusters:
            policy.clusters.set(clusters)
        audit.record(user, "queue.create", policy, _audit_details({}, _snapshot(policy)))
        dispatch.reconcile_queue_on_commit(policy.id)
    return policy, warnings_for(policy, _reflect(tree, policy))


def update_queue(user, policy: QueuePolicy, data) -> tuple[QueuePolicy, list[dict]]:
    """Change a managed queue policy (fields not given keep their value) and queue its sync.

    Clusters dropped from `clusters` get the Queue CR deleted there by the next sync. Returns (policy, warnings).
    Raises ValidationError (400: bad value, missing parent, cycle, name change), Conflict (409: imported queue; a
    `clusters` or `allowed_namespaces` change that drops a cluster or namespace where the queue (or, for
    namespaces, a queue below it) has active jobs, naming them), PermissionDenied (403). A refused request
    changes nothing.
    """
    access.check_manage_queue(user, policy)
    v.mapping(data, "body")
    if not policy.managed:
        raise Conflict({"managed": f"queue '{policy.name}' was imported from a cluster; gangweb shows it but does "
                                   "not change it"})
    if "name" in data and data["name"] != policy.name:
        raise ValidationError({"name": "cannot be changed; KAI queues are referenced by name: create a new queue"})
    tree = QueueTree.load()
    policy = tree.by_id[policy.id]
    original_parent = policy.parent
    snapshot = _snapshot(policy)
    before = snapshot["clusters"]
    clusters, parent_changed = _apply(policy, data, tree, user)
    after = dict(_snapshot(policy), clusters={c.id for c in clusters} if clusters is not None else before)
    changed = _audit_details(snapshot, after)
    # Share fields are checked against the queue's place before the move; a move also needs admin on the new parent.
    moved_from = QueuePolicy(pk=policy.pk, name=policy.name, parent=original_parent)
    access.check_manage_queue(user, moved_from, set(changed), policy.parent if parent_changed else None,
                              moved=parent_changed)
    if parent_changed:
        _check_moved_scope(user, policy, clusters, tree)
    else:
        access.check_queue_scope(user, policy.parent, clusters if "clusters" in changed else None,
                                 policy.allowed_namespaces if "allowed_namespaces" in changed else None,
                                 policy.allowed_service_accounts if "allowed_service_accounts" in changed else None)
    if "clusters" in changed:
        _check_no_stranded_clusters(policy, clusters or [])
    if "allowed_namespaces" in changed:
        _check_no_stranded_namespaces(policy, tree)
    with transaction.atomic():
        policy.save()
        if clusters is not None:
            policy.clusters.set(clusters)
        audit.record(user, "queue.update", policy, changed)
        dispatch.reconcile_queue_on_commit(policy.id, extra_cluster_ids=sorted(before))
    return policy, warnings_for(policy, _reflect(tree, policy))


JOBS_NAMED = 5  # active jobs a refusal names before "and N more"


def _job_names(jobs) -> str:
    """``"ns/a, ns/b and 3 more"`` for a queryset of jobs (at most JOBS_NAMED + 1 rows read, plus a count)."""
    rows = list(jobs.order_by("namespace", "name").values_list("namespace", "name")[:JOBS_NAMED + 1])
    names = [f"{ns}/{name}" for ns, name in rows]
    if len(names) <= JOBS_NAMED:
        return ", ".join(names)
    return f"{', '.join(names[:JOBS_NAMED])} and {jobs.count() - JOBS_NAMED} more"


def _check_no_stranded_clusters(policy: QueuePolicy, clusters: list[Cluster]) -> None:
    """Refuse (Conflict, 409 on `clusters`, naming the jobs) a `clusters` edit that drops a cluster where the queue
    has active jobs: the next sync would delete its Queue there (reconcile/queue_sync.py `delete_stale`) under
    running jobs, as DELETE of the queue would, which is refused too. `clusters` empty = every cluster (nothing is
    dropped). Only the queue's own jobs count: a parent's Queue stays wherever a child still targets
    (`queue_sync.desired_in`)."""
    if not clusters:
        return
    kept = {c.id for c in clusters}
    active = GangJob.objects.filter(queue=policy, phase__in=list(ACTIVE_PHASES)).exclude(cluster_id__in=kept)
    dropped = sorted(Cluster.objects.filter(id__in=active.values("cluster_id")).values_list("name", flat=True))
    if dropped:
        raise Conflict({"clusters": f"queue '{policy.name}' has active jobs in cluster"
                                    f"{'s' if len(dropped) > 1 else ''} {', '.join(dropped)}, which this change "
                                    f"drops (its Queue there would be deleted under them): {_job_names(active)}; "
                                    "cancel them or wait for them to finish first"})


def _check_no_stranded_namespaces(policy: QueuePolicy, tree: QueueTree) -> None:
    """Refuse (Conflict, 409 on `allowed_namespaces`, naming the jobs) an `allowed_namespaces` edit that drops a
    namespace where the queue, or a queue below it (a job's namespace must be allowed by its queue and every
    ancestor: services/policy.py), has active jobs."""
    allowed = set(policy.allowed_namespaces or [])
    queue_ids = [policy.id, *(q.id for q in tree.descendants(policy))]
    active = GangJob.objects.filter(queue_id__in=queue_ids, phase__in=list(ACTIVE_PHASES)).exclude(
        namespace__in=allowed)
    dropped = sorted(set(active.values_list("namespace", flat=True).distinct()))
    if dropped:
        raise Conflict({"allowed_namespaces": f"queue '{policy.name}' has active jobs in namespace"
                                              f"{'s' if len(dropped) > 1 else ''} {', '.join(dropped)}, which this "
                                              f"change drops: {_job_names(active)}; cancel them or wait for them "
                                              "to finish first"})


def _check_moved_scope(user, policy: QueuePolicy, clusters: list[Cluster] | None, tree: QueueTree) -> None:
    """A queue moved under a new parent must fit inside it as a new child would, with every queue below it: each
    one's clusters and namespaces (as they will be after this request) within the new parent's. Raises
    PermissionDenied naming the field (`clusters`/`allowed_namespaces` for the queue itself, `parent` for a queue
    below it). Platform admins pass (access.check_queue_scope)."""
    if access.is_platform_admin(user):
        return
    own = clusters if clusters is not None else list(policy.clusters.all())
    access.check_queue_scope(user, policy.parent, own, policy.allowed_namespaces, policy.allowed_service_accounts)
    below = tree.descendants(policy)
    if not below:
        return
    links: dict[int, list[Cluster]] = {}
    for link in QueuePolicy.clusters.through.objects.filter(
            queuepolicy_id__in=[q.id for q in below]).select_related("cluster"):
        links.setdefault(link.queuepolicy_id, []).append(link.cluster)
    for queue in below:
        try:
            access.check_queue_scope(user, policy.parent, links.get(queue.id, []), queue.allowed_namespaces,
                                     queue.allowed_service_accounts)
        except PermissionDenied as exc:
            (field_name, message), = list(exc.errors.items())[:1]
            raise PermissionDenied({"parent": f"queue '{queue.name}' below '{policy.name}' does not fit in "
                                              f"'{policy.parent.name}': {field_name}: {message}"}) from None


def delete_queue(user, policy: QueuePolicy) -> None:
    """Delete a managed queue policy; the next sync deletes its Queue CR in every cluster (children first).

    Refused with Conflict (409), changing nothing, while the queue has child queues or active jobs, while
    finished jobs still reference it (their history would be lost), or when it was imported from a cluster.
    """
    access.check_delete_queue(user, policy)
    if not policy.managed:
        raise Conflict({"managed": f"queue '{policy.name}' was imported from a cluster; delete it there"})
    children = list(QueuePolicy.objects.filter(parent=policy).values_list("name", flat=True))
    if children:
        raise Conflict({"children": f"queue '{policy.name}' has child queues ({', '.join(children)}); delete or "
                                    "move them first"})
    jobs = GangJob.objects.filter(queue=policy)
    active = jobs.filter(phase__in=list(ACTIVE_PHASES)).count()
    if active:
        raise Conflict({"jobs": f"queue '{policy.name}' has {active} active jobs; cancel them or wait for them "
                                "to finish"})
    finished = jobs.count()
    if finished:
        raise Conflict({"jobs": f"{finished} finished jobs keep queue '{policy.name}' in their history; "
                                "it cannot be deleted"})
    cluster_ids = sorted(set(policy.clusters.values_list("id", flat=True)) | set(
        QueueClusterState.objects.filter(policy=policy).values_list("cluster_id", flat=True)))
    with transaction.atomic():
        audit.record(user, "queue.delete", policy)
        token_service.revoke_scoped_only_to(policy)
        policy.delete()
        dispatch.sync_queue_clusters_on_commit(cluster_ids or None)


def policy_payload(policy: QueuePolicy) -> dict:
    """Per resource: quota, limit and weight in KAI units plus the same as display strings (``"64Gi"``)."""
    out = {}
    for r, quota_field, limit_field, weight_field in RESOURCE_FIELDS:
        q, lim = getattr(policy, quota_field), getattr(policy, limit_field)
        out[r] = {"unit": UNITS[r], "quota": for_api(q), "limit": for_api(lim),
                  "over_quota_weight": getattr(policy, weight_field),
                  "quota_display": display(r, q), "limit_display": display(r, lim)}
    return out


def _usage_sum(states: list[QueueClusterState], key: str) -> dict | None:
    readings = [s.status.get(key) for s in states if s.status and s.status.get(key)]
    if not readings:
        return None
    return {r: sum(x.get(r, 0) for x in readings) for r in RESOURCES}


def queue_tree(cluster: str | None = None, *, parent: str | None = None, depth: int | None = None,
               ids: list[int] | None = None, visible: set[int] | None = None, tree: QueueTree | None = None,
               usage: dict[int, dict] | None = None, rolled: dict[int, dict] | None = None) -> list[dict]:
    """The queue hierarchy for the tree pages and `GET /api/v1/queues/tree/`, in four queries whatever its size
    (fewer when `tree` (a read-only QueueTree.load_rows()) and `usage` (queue_usage.estimated_usage(cluster)) or
    `rolled` (queue_usage.rolled_up of it) are given).

    Which nodes: the top-level queues, or the children of `parent` (a queue name; ValidationError({"parent"})
    when there is none), or exactly the queues `ids` in that order (search results, the overview's busiest
    queues: each a root of its own, at its real depth). `depth` levels below those are included (0 = the nodes
    alone, with `children: []`; None = everything); `children_count` tells how many a node has either way.
    `visible` (queue ids) hides every other queue, children counts included; None shows all.

    Returns root nodes (by name), each::

        {"id", "name", "display_name", "managed", "priority", "parent": name | None, "depth": 0, "leaf": bool,
         "path": ["research", "team-nlp"],           # ancestors' names, top first
         "children_count": 2,
         "clusters": ["local"],                      # names it targets; [] = every cluster
         "resources": {"gpu": {"unit": "devices", "quota": 8.0, "limit": -1, "over_quota_weight": 1.0,
                               "quota_display": "8", "limit_display": "unlimited",
                               "allocated": 2.0 | None, "requested": 3.0 | None,
                               "estimated_allocated": 2.0, "estimated_requested": 3.0}, "cpu": {...}, ...},
         "jobs": 3,                                  # active jobs in this queue itself
         "subtree_jobs": 12,                         # ... and in every queue below it
         "warnings": [{"code", "field", "message"}],
         "sync": [{"cluster", "state", "message", "last_synced_at", "last_drift", "last_drift_at", "status_at"}],
         "children": [...]}

    `allocated` / `requested` come from the Queue CR status KAI writes (KAI units; GPU devices, CPU millicores,
    memory MB): for `cluster` when given (a cluster name), else summed over the clusters that reported; None when
    no cluster has reported yet (and with schedulers that report no per-queue use). `estimated_*` are gangweb's
    own estimate from its active jobs (services/queue_usage.py), the queue's and its descendants'.
    """
    from . import queue_usage

    tree = tree or QueueTree.load_rows()
    if visible is not None and tree.visible != visible:  # warnings say nothing of the queues hidden from the reader
        tree.visible = set(visible)
        tree.sibling_sums.clear()
        tree._warnings.clear()
    shown = (lambda q: True) if visible is None else (lambda q: q.id in visible)

    def kids_of(policy_id):
        kids = tree.children.get(policy_id, [])
        return kids if visible is None else [k for k in kids if shown(k)]

    if ids is not None:
        tops = [tree.by_id[i] for i in ids if i in tree.by_id and shown(tree.by_id[i])]
    elif parent:
        top = tree.by_name.get(parent)
        if top is None or not shown(top):
            raise ValidationError({"parent": f"no queue named '{str(parent)[:63]}'"})
        tops = kids_of(top.id)
    else:
        tops = kids_of(None)

    # The policies drawn, to read their clusters and sync state only.
    drawn: list = []
    todo = [(p, 0) for p in tops]
    while todo:
        p, level = todo.pop()
        drawn.append(p)
        if depth is None or level < depth:
            todo.extend((k, level + 1) for k in kids_of(p.id))
    # Cluster names by a lookup per row, not a join (services/related.py: stale statistics, issue 14).
    by_name = {"cluster": ["name"]}
    links = QueuePolicy.clusters.through.objects.annotate(cluster_name=Subquery(
        Cluster.objects.filter(pk=OuterRef("cluster_id")).values("name")[:1]))
    states_qs = related.annotate(QueueClusterState.objects.all(), by_name).order_by(related.alias("cluster", "name"))
    if len(drawn) < len(tree.by_id):  # a part of the tree: read only its rows (an IN of every id costs more)
        drawn_ids = [p.id for p in drawn]
        links = links.filter(queuepolicy_id__in=drawn_ids)
        states_qs = states_qs.filter(policy_id__in=drawn_ids)
    names: dict[int, list[str]] = {}
    for pid, cname in links.values_list("queuepolicy_id", "cluster_name"):
        names.setdefault(pid, []).append(cname)
    if cluster:
        states_qs = states_qs.filter(cluster_id=related.key_of(Cluster, name=cluster))
    states: dict[int, list[QueueClusterState]] = {}
    for st in related.attach(states_qs, by_name):
        states.setdefault(st.policy_id, []).append(st)
    if rolled is None and usage is None:
        # Only the jobs below the drawn queues: expanding one queue reads its subtree's jobs, not every job.
        scope = set()
        todo = list(tops)
        while todo:
            p = todo.pop()
            if p.id not in scope:
                scope.add(p.id)
                todo.extend(tree.children.get(p.id, []))
        usage = queue_usage.estimated_usage(cluster, queue_ids=scope if len(scope) < len(tree.by_id) else None)
    estimates = rolled if rolled is not None else queue_usage.rolled_up(tree, usage)

    nothing = {**queue_usage.empty(), "own_jobs": 0}  # read only: shared by the queues without jobs

    def node(policy, level: int, here: int) -> dict:
        mine = states.get(policy.id, [])
        allocated = _usage_sum(mine, "allocated") if mine else None
        requested = _usage_sum(mine, "requested") if mine else None
        est = estimates.get(policy.id) or nothing
        resources = policy_payload(policy)
        for r in RESOURCES:
            resources[r]["allocated"] = for_api(allocated[r]) if allocated else None
            resources[r]["requested"] = for_api(requested[r]) if requested else None
            resources[r]["estimated_allocated"] = for_api(est["allocated"][r])
            resources[r]["estimated_requested"] = for_api(est["requested"][r])
        kids = kids_of(policy.id)
        ancestors = tree.ancestors(policy)
        return {"id": policy.id, "name": policy.name, "display_name": policy.display_name, "managed": policy.managed,
                "priority": policy.priority, "parent": ancestors[0].name if ancestors else None, "depth": here,
                "leaf": not tree.children.get(policy.id), "path": [a.name for a in reversed(ancestors)],
                "children_count": len(kids), "clusters": sorted(names.get(policy.id, [])), "resources": resources,
                "jobs": est["own_jobs"], "subtree_jobs": est["jobs"],
                "warnings": warnings_for(policy, tree), "sync": [sync_payload(s) for s in mine],
                "children": [node(k, level + 1, here + 1) for k in kids] if depth is None or level < depth else []}

    return [node(p, 0, len(tree.ancestors(p))) for p in tops]


def sync_payload(state: QueueClusterState) -> dict:
    """One cluster's sync state of a queue, as the API and the pages show it (status in KAI units)."""
    return {"cluster": state.cluster.name, "state": state.state, "message": state.message,
            "last_synced_at": state.last_synced_at, "last_drift": state.last_drift,
            "last_drift_at": state.last_drift_at, "status": state.status, "status_at": state.status_at}


def volcano_sync_payload(state) -> dict:
    """One cluster's Volcano Queue state of a queue (models.VolcanoQueueState): sync_payload's keys plus
    `warnings` (what Volcano cannot express, ``[{"code", "field", "message"}]``); `status` holds Volcano's state,
    counters and `allocated` in KAI units."""
    return {**sync_payload(state), "warnings": state.warnings}


def job_request(resolved_spec: dict, cluster: Cluster | None = None) -> dict[str, float | int]:
    """What a job asks of its queue in KAI units (``{"gpu": 3.0, "cpu": 8500, "memory": 7785}``): the whole gang's
    requests as kube-scheduler counts them (`kube.resources.gang_requests`: sidecars, init peaks, pod-level
    resources, the overhead of `cluster`'s RuntimeClasses), converted by `kai_units.kai_amounts`."""
    return kai_amounts(resources.spec_requests(resolved_spec, runtime_classes.for_spec(cluster, resolved_spec)))


# Who keeps a job above its queue's limit from running, per backend family (the template's `backend`).
OVER_LIMIT_WORDS = {
    "kai": "so KAI can never schedule it (OverLimit)",
    "volcano": "so Volcano can never schedule it (the limit is its Volcano Queue's capability)",
}
NO_QUEUE_WORDS = "so it can never run in this queue (gangweb holds every job to its queue's limits: {} has no queues)"
NO_QUEUE_SCHEDULERS = {"k8s-workload": "kube-scheduler", "coscheduling": "the scheduler-plugins scheduler"}


def over_limit_words(resolved_spec: dict) -> str:
    """The end of the over-limit refusal, naming what enforces the limit for the job's backend: KAI (its Queue's
    limit, OverLimit), Volcano (its Queue's `capability`), else gangweb itself (kube-scheduler and the
    scheduler-plugins scheduler have no queues; docs/queues.md "Who enforces quota and limit")."""
    family = (resolved_spec or {}).get("backend") or ""
    return OVER_LIMIT_WORDS.get(family) or NO_QUEUE_WORDS.format(NO_QUEUE_SCHEDULERS.get(family, "its scheduler"))


def check_job_limits(queue: QueuePolicy, cluster: Cluster, resolved_spec: dict, tree: QueueTree,
                     allocations) -> list[dict]:
    """Check a job's request against the finite limits of its queue and every ancestor (KAI checks them all,
    `max_allowed_check.go`; Volcano its Queue's `capability`), in the target cluster.

    - The job alone is over a limit (including a limit of 0): it could never be scheduled, so this raises
      ValidationError({"queue": "job requests 8 GPUs; queue 'team-a' has gpu_limit 4 GPUs, so KAI can never ..."})
      (400), naming what enforces the limit for the job's backend (`over_limit_words`).
    - It fits the limit but not next to what the queue holds in that cluster, as its scheduler reports it (KAI or
      Volcano Queue status) or, where nothing is reported, as gangweb counts its running jobs
      (`queue_allocation.Allocations.of`, given as `allocations`): it would wait, so this returns a warning
      ``{"code": "OverQueueLimit", "queue", "cluster", "resource", "unit", "limit", "allocated", "requested",
      "source", "message"}``: amounts in the resource's people unit (`amounts.in_answer`: GPUs, CPU cores, GiB;
      `unit` names it), `source` "kai" | "volcano" | "gangweb", and the message says which source it used
      ("Volcano's Queue status says 4 of 8 GPUs allocated ...").
    Returns the warnings (empty when the job fits).
    """
    request = job_request(resolved_spec, cluster)
    family = (resolved_spec or {}).get("backend") or ""
    chain = [tree.by_id.get(queue.id, queue), *tree.ancestors(tree.by_id.get(queue.id, queue))]
    out = []
    for q in chain:
        reading = None
        for r in RESOURCES:
            limit, want = getattr(q, f"{r}_limit"), request[r]
            if unlimited(limit) or not want:
                continue
            role = "queue" if q.id == queue.id else "ancestor queue"
            if _over(r, want, limit):
                raise ValidationError({"queue": f"job requests {_fmt(r, want)}; {role} '{q.name}' has {r}_limit "
                                                f"{_fmt(r, limit)}, {over_limit_words(resolved_spec)}"})
            reading = reading or allocations.of(family, q.id, cluster.id)
            have = reading.allocated.get(r, 0)
            if _over(r, have + want, limit):
                unit = unit_of(r)
                said = (f"{SOURCE_WORDS[reading.source]} {in_people_units(r, have)} of {in_people_units(r, limit)} "
                        f"{unit_words(r, in_answer(r, limit))} allocated ({r}_limit)")
                out.append({"code": "OverQueueLimit", "queue": q.name, "cluster": cluster.name, "resource": r,
                            "unit": unit, "limit": in_answer(r, limit), "allocated": in_answer(r, have),
                            "requested": in_answer(r, want), "source": reading.source,
                            "message": f"{role} '{q.name}' in cluster '{cluster.name}': {said}; this job's "
                                       f"{in_people_units(r, want)} {unit_words(r, in_answer(r, want))} wait "
                                       "until enough is freed"})
    return out
