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

from ...choices import ACTIVE_PHASES, PodSecurityLevel, QueueFamily
from ...kube.kai_units import UNLIMITED, to_kai
from ...models import Cluster, GangJob, QueueClusterState, QueuePolicy
from ...podspec import rules as pod_rules
from ...queueing.tree import QUOTA_FIELDS, ROW_FIELDS, WEIGHT_FIELDS, QueueRow, QueueTree, unlimited  # noqa: F401
from ...work import dispatch
from .. import validation as v
from ..access import audit
from ..access import roles as access
from ..access import tokens as token_service
from ..errors import Conflict, PermissionDenied
from .warnings import warnings_for

WRITABLE = ("name", "display_name", "parent", "priority", *QUOTA_FIELDS, *WEIGHT_FIELDS, "preempt_min_runtime",
            "reclaim_min_runtime", "clusters", "allowed_namespaces", "allowed_service_accounts", "pod_security_level",
            "move_after_seconds")
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
    if "move_after_seconds" in data:  # gangweb's own: reconcile/moves.py (docs/queues.md, "Where a job runs")
        value = data["move_after_seconds"]
        policy.move_after_seconds = None if value is None else v.integer(
            value, "move_after_seconds", minimum=30, maximum=30 * 24 * 3600)


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
            pod_rules.check_allowed_namespace(ns, f"allowed_namespaces[{i}]")
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
    ancestor: podspec/rules.py), has active jobs."""
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
        QueueClusterState.objects.filter(policy=policy, family=QueueFamily.KAI).values_list("cluster_id", flat=True)))
    with transaction.atomic():
        audit.record(user, "queue.delete", policy)
        token_service.revoke_scoped_only_to(policy)
        policy.delete()
        dispatch.sync_queue_clusters_on_commit(cluster_ids or None)
