"""Each queue's fair share per cluster and resource, explained: what the API and the queue page both show.

Feeds gangweb's data into the pure model `scheduling.queueing.fair_share_model` (KAI's division; see its docstring for
the algorithm, its sources and where it simplifies):

- capacity: the cluster's schedulable nodes' allocatable (`Cluster.capacity`, written by the cluster watcher);
- the queues: every queue policy that targets the cluster (no clusters = every cluster) and their ancestors, with
  quota, limit, over-quota weight and priority;
- requested / allocated: gangweb's estimate from its own active jobs (`services.queues.usage`: requested = every
  active job, allocated = the Scheduled and Running ones), per cluster.

Four queries whatever the number of queues, jobs and clusters (the tree, the clusters, the queue-cluster links,
the usage grouped by cluster and queue); none when the caller passes what it already loaded.

Units are KAI's, as the queue's quota and limit: GPU devices (fractions allowed), CPU millicores, memory MB
(10^6 bytes); only the `text` sentence is in people's units (GPUs, CPU cores, GiB: `amounts`), as every page.
"""
from __future__ import annotations

from dataclasses import replace

from django.db.models import Count, Q, Sum

from ...amounts import PEOPLE_UNITS, for_api, for_people, in_people_units
from ...kube.kai_units import RESOURCES, UNITS
from ...models import Cluster, GangJob, QueuePolicy
from ...queueing import fair_share_model as model
from ..access import roles as access
from . import decayed_usage as du
from . import usage_order
from .policies import QueueTree
from .usage import ACTIVE, COLUMNS, RUNNING_PHASES, _kai

# Cluster.capacity["allocatable"] key of each queue resource, and the factor from its base unit to KAI's.
CAPACITY_KEYS = {"gpu": ("nvidia.com/gpu", 1), "cpu": ("cpu", 1000), "memory": ("memory", 1 / 10**6)}


def _fmt(resource: str):
    """fmt(KAI amount) -> the amount for people ("12 GPUs", "8 CPU cores", "4 GiB": amounts.for_people, as the
    queue tree)."""
    return lambda amount: for_people(resource, amount)


def _num(resource: str):
    """num(KAI amount) -> the bare number in the unit `PEOPLE_UNITS` names ("4" for 4294.97 MB: GiB)."""
    return lambda amount: in_people_units(resource, amount)


def capacity_of(cluster_capacity: dict | None) -> dict[str, float] | None:
    """{"gpu": devices, "cpu": millicores, "memory": MB} from `Cluster.capacity`; None until the watcher wrote it."""
    allocatable = (cluster_capacity or {}).get("allocatable")
    if not isinstance(allocatable, dict):
        return None
    out = {}
    for r, (key, factor) in CAPACITY_KEYS.items():
        try:
            out[r] = max(float(allocatable.get(key) or 0) * factor, 0.0)
        except (TypeError, ValueError):  # a hand-edited row: count the resource as absent, not a 500
            out[r] = 0.0
    return out


def usage_by_cluster(cluster_ids=None) -> dict[int, dict[int, dict]]:
    """{cluster id: {queue id: {"allocated": {r: amount}, "requested": {r: amount}}}} of gangweb's active jobs,
    KAI units. One `GROUP BY cluster_id, queue_id` query (read from the job_active_usage index)."""
    rows = GangJob.objects.filter(phase__in=ACTIVE)
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=sorted(cluster_ids))
    sums = {"jobs": Count("*")}
    running = Q(phase__in=RUNNING_PHASES)
    for r, column in COLUMNS.items():
        sums[f"req_{r}"] = Sum(column)
        sums[f"alloc_{r}"] = Sum(column, filter=running)
    out: dict[int, dict[int, dict]] = {}
    for row in rows.order_by().values("cluster_id", "queue_id").annotate(**sums):
        out.setdefault(row["cluster_id"], {})[row["queue_id"]] = {
            "allocated": {r: _kai(r, row[f"alloc_{r}"]) for r in RESOURCES},
            "requested": {r: _kai(r, row[f"req_{r}"]) for r in RESOURCES},
        }
    return out


def _members(tree: QueueTree, cluster_id: int, links: dict[int, set[int]]) -> list:
    """The queues KAI would have in this cluster: those targeting it (or every cluster), with their ancestors."""
    chosen: dict[int, object] = {}
    for q in tree.by_id.values():
        targets = links.get(q.id)
        if not targets or cluster_id in targets:
            for p in (q, *tree.ancestors(q)):
                chosen[p.id] = p
    return list(chosen.values())


HIDDEN = "another queue"


def _payload(share: model.Share, resource: str, hidden: set[str], history: str = "") -> dict:
    if hidden:  # the sentence never names a queue the reader may not see (as warnings, issue 15 L5)
        def seen(names):
            shown = [n for n in names if n not in hidden]
            return shown + [HIDDEN] if len(shown) < len(names) else shown
        share = replace(share, siblings=seen(share.siblings), borrowers=seen(share.borrowers))
    a = for_api  # amounts as every API amount (2, not 2.0); weights are plain numbers
    return {"quota": a(share.quota), "limit": a(share.limit), "over_quota_weight": share.weight,
            "fair_share": a(share.fair_share), "deserved": a(share.deserved), "over_quota": a(share.over_quota),
            "allocated": a(share.allocated), "requested": a(share.requested), "borrowed": a(share.borrowed),
            "lent": a(share.lent), "idle_after_quotas": a(share.surplus), "weight_total": share.weight_total,
            "divided": a(share.pool), "oversubscribed": share.oversubscribed,
            "text": model.explain(share, _fmt(resource), PEOPLE_UNITS[resource][0], _num(resource)) + history}


def _sibling_usage(wanted, tree: QueueTree, cluster_ids, attempts=None):
    """What the fair-share sentences need of decayed usage: ({queue id: [its siblings' ids, itself included]},
    {(queue id, cluster id): its and its subtree's {"gpu", "cpu", "memory"} decayed usage}, half-life) for the
    `wanted` queues that have siblings. Two queries (decayed_usage.held), none when no wanted queue has a sibling
    or when `attempts` (held over at least those subtrees and clusters, since at most the horizon) are given."""
    groups = {}
    for qid in wanted:
        sibs = usage_order.siblings(tree.by_id[qid], tree)
        if len(sibs) > 1:
            groups[qid] = [q.id for q in sibs]
    half_life = du.half_life_seconds()
    if not groups:
        return groups, {}, half_life
    from ...db import clock

    now = clock.now()
    needed = {q for ids in groups.values() for q in ids}
    subtree = du.subtrees(needed, tree)
    if attempts is None:
        attempts = du.held({q for ids in subtree.values() for q in ids}, du.horizon(now, half_life), cluster_ids)
    own = du.sums(attempts, now, half_life)
    usage = {}
    for cid in cluster_ids:
        for qid, u in du.rolled(own, subtree, half_life, cluster_id=cid).items():
            usage[(qid, cid)] = u
    return groups, usage, half_life


def _history(qid: int, cid: int, cname: str, resource: str, members: set[int], tree: QueueTree, groups, usage,
             half_life: float, hidden: set[str]) -> str:
    """The decayed-usage clause of queue `qid`'s sentence on cluster `cid` (usage_order.sentence)."""
    sibs = [s for s in groups.get(qid, []) if s != qid and s in members]
    if not sibs:
        return ""
    zero = {"gpu": 0.0, "cpu": 0.0, "memory": 0.0}

    def name(s):
        n = tree.by_id[s].name
        return HIDDEN if n in hidden else n
    return usage_order.sentence(
        tree.by_id[qid].name, resource, usage.get((qid, cid), zero)[resource],
        [(name(s), usage.get((s, cid), zero)[resource]) for s in sibs],
        cname in usage_order.ordered_clusters(), half_life)


def fair_shares(queue_ids=None, cluster: str | None = None, *, tree: QueueTree | None = None,
                visible: set[int] | None = None, attempts: list | None = None) -> dict[int, list]:
    """{queue id: [{"cluster": name, "capacity": {r: amount} | None, "resources": {r: {...}} | None}, ...]} for
    the queues `queue_ids` (every queue when None), in every cluster they are in (or only `cluster`, a name), by
    cluster name. Per resource::

        {"quota", "limit", "over_quota_weight", "fair_share", "deserved", "over_quota", "allocated", "requested",
         "borrowed", "lent", "idle_after_quotas", "weight_total", "divided", "oversubscribed", "text"}

    (model.Share's fields under API names; `text` is `model.explain`, then, where the queue has siblings that
    used anything, its decayed usage against theirs on that cluster and what it means for who goes first:
    `usage_order.sentence`). `resources` is None while the cluster's capacity is unknown (never probed).
    `visible` (queue ids, access.queue_tree_filter; None = all): the sentences say "another queue" for the
    others. At most six queries (five with `tree`; four more with `attempts`, `decayed_usage.held` of the
    siblings' subtrees and these clusters, which the queue page already read).
    """
    tree = tree or QueueTree.load_rows()
    clusters = Cluster.objects.order_by("name")
    if cluster:
        clusters = clusters.filter(name=cluster)
    clusters = list(clusters.values_list("id", "name", "capacity"))
    links: dict[int, set[int]] = {}
    for qid, cid in QueuePolicy.clusters.through.objects.values_list("queuepolicy_id", "cluster_id"):
        links.setdefault(qid, set()).add(cid)
    usage = usage_by_cluster([c[0] for c in clusters]) if clusters else {}
    wanted = set(tree.by_id) if queue_ids is None else {i for i in queue_ids if i in tree.by_id}
    groups, decayed, half_life = _sibling_usage(wanted, tree, [c[0] for c in clusters], attempts) if clusters \
        else ({}, {}, 0.0)
    out: dict[int, list] = {i: [] for i in wanted}
    hidden = set() if visible is None else {q.name for q in tree.by_id.values() if q.id not in visible}
    for cid, cname, capacity in clusters:
        members = _members(tree, cid, links)
        here = [q for q in members if q.id in wanted]
        if not here:
            continue
        cap = capacity_of(capacity)
        divisions = {}
        if cap is not None:
            used = usage.get(cid, {})
            for r in RESOURCES:
                inputs = [model.QueueInput(
                    name=q.name, parent=tree.by_id[q.parent_id].name if q.parent_id in tree.by_id else None,
                    priority=q.priority, quota=getattr(q, f"{r}_quota"), limit=getattr(q, f"{r}_limit"),
                    weight=getattr(q, f"{r}_over_quota_weight"),
                    requested=used.get(q.id, {}).get("requested", {}).get(r, 0),
                    allocated=used.get(q.id, {}).get("allocated", {}).get(r, 0)) for q in members]
                divisions[r] = model.divide(cap[r], inputs)
        ids = {m.id for m in members}
        for q in here:
            out[q.id].append({"cluster": cname, "capacity": None if cap is None else {r: for_api(x) for r, x in
                                                                                 cap.items()},
                              "resources": {r: _payload(divisions[r][q.name], r, hidden, _history(
                                  q.id, cid, cname, r, ids, tree, groups, decayed, half_life, hidden))
                                            for r in RESOURCES} if cap is not None else None})
    return out


def queue_fair_share(policy, cluster: str | None = None, visible: set[int] | None = None, user=None) -> dict:
    """`GET /api/v1/queues/<name>/fair-share/`: ``{"queue": name, "units": {...}, "clusters": [...]}`` with
    `fair_shares`' entries of this queue (`visible`: as there), only of the clusters `user` may see
    (`seen_by`) when a user is given."""
    entries = fair_shares([policy.id], cluster, visible=visible)[policy.id]
    return {"queue": policy.name, "units": UNITS, "clusters": entries if user is None else seen_by(user, entries)}


def seen_by(user, entries: list[dict]) -> list[dict]:
    """The per-cluster `entries` (dicts with "cluster": a name) of the clusters `user` may see
    (access.visible_clusters): a queue that spans clusters the reader has no part in does not name them. One
    query, none for a platform admin."""
    if access.sees_every_cluster(user):
        return entries
    names = set(access.visible_clusters(user, Cluster.objects.all()).values_list("name", flat=True))
    return [e for e in entries if e["cluster"] in names]
