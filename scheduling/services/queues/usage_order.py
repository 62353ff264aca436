"""Where decayed usage decides who goes first: sibling queues ordered by what they used, for the line and the
fair-share sentence.

Two schedulers weigh past use when they choose between queues that both wait:

- **KAI**, with time-based fair share on (its SchedulingShard's `spec.usageDBConfig`, `usageParams.halfLifePeriod`;
  KAI `docs/time-based-fairshare/README.md`): a queue's fair share shrinks with its decayed usage, and KAI serves
  the queue furthest below its fair share first;
- **Kueue**, with admission fair sharing (the `AdmissionFairSharing` feature gate, the manager's
  `admissionFairSharing.usageHalfLifeTime`, and a ClusterQueue with `spec.admissionScope.admissionMode:
  UsageBasedAdmissionFairSharing`; Kueue `site/content/en/docs/concepts/admission_fair_sharing.md`): the pending
  workloads of a ClusterQueue go by their LocalQueue's decayed usage (`status.fairSharing.admissionFairSharingStatus
  .consumedResources`), least first, before priority.

gangweb reads neither setting from a cluster: `settings.GANGWEB_USAGE_ORDERED_CLUSTERS` names the clusters where the
scheduler does it. There the line puts the jobs of the sibling queue with the least decayed usage (gangweb's own,
`decayed_usage`, on that cluster) first; elsewhere the order is unchanged and the sentences say gangweb does not
know. Siblings are compared by GPU decayed usage, then CPU, then memory (a simplification: KAI weighs each
resource's share, Kueue a weighted sum by `resourceWeights`).
"""
from __future__ import annotations

from django.conf import settings

from ...amounts import GIB, format_number
from . import decayed_usage as du

FAMILIES = ("kai", "kueue")  # backend families whose scheduler can order queues by decayed usage
DECAYED_UNITS = {"gpu": ("GPU·h", 1), "cpu": ("CPU core·h", 1), "memory": ("GiB·h", GIB)}
UNKNOWN = ("gangweb does not know whether this cluster's scheduler weighs it (KAI time-based fair share, Kueue "
           "admission fair sharing: GANGWEB_USAGE_ORDERED_CLUSTERS), so the line does not use it")


def ordered_clusters() -> set[str]:
    """Names of the clusters whose scheduler orders sibling queues by decayed usage (the setting)."""
    return set(getattr(settings, "GANGWEB_USAGE_ORDERED_CLUSTERS", []) or [])


def decayed_words(resource: str, amount: float) -> str:
    """A decayed usage (device-, core-, byte-seconds) for people: "1 GPU·h", "3.96 CPU core·h", "15.84 GiB·h"."""
    unit, size = DECAYED_UNITS[resource]
    return f"{format_number(amount / 3600 / size)} {unit}"


def half_life_words(half_life: float) -> str:
    """The half-life for people: "7 d", "12 h", "30 min"."""
    if half_life >= 86400:
        return f"{format_number(half_life / 86400)} d"
    if half_life >= 3600:
        return f"{format_number(half_life / 3600)} h"
    return f"{format_number(half_life / 60)} min"


def siblings(policy, tree) -> list:
    """`policy` and the queues under the same parent (the top-level queues for a top-level queue), by name."""
    return list(tree.children.get(policy.parent_id, [])) or [policy]


def ranks(usage: dict[int, dict]) -> dict[int, int]:
    """{queue id: rank} from {queue id: {"gpu", "cpu", "memory"}} decayed usages: 0 for the least used, equal
    usages share a rank; compared by GPU, then CPU, then memory."""
    keys = {q: (u["gpu"], u["cpu"], u["memory"]) for q, u in usage.items()}
    order = sorted(set(keys.values()))
    return {q: order.index(k) for q, k in keys.items()}


def line_ranks(groups: dict[int, list[int]], cluster_ids, *, now=None) -> dict[tuple[int, int], int]:
    """{(cluster id, leaf queue id): rank} for the clusters among `cluster_ids` (ids of clusters named in the
    setting) and each group of `groups` ({sibling queue id: the leaf ids it stands for}): every leaf gets its
    sibling's rank on that cluster (`ranks`). Two queries (`decayed_usage.held`); none when `cluster_ids` is
    empty."""
    cluster_ids = sorted(set(cluster_ids))
    if not cluster_ids or len(groups) < 2:
        return {}
    from ...db import clock

    half_life = du.half_life_seconds()
    now = now or clock.now()
    attempts = du.held({q for ids in groups.values() for q in ids}, du.horizon(now, half_life), cluster_ids)
    own = du.sums(attempts, now, half_life)
    out = {}
    for cid in cluster_ids:
        rank = ranks(du.rolled(own, groups, half_life, cluster_id=cid))
        for sibling, leaves in groups.items():
            for leaf in leaves:
                out[(cid, leaf)] = rank[sibling]
    return out


def sentence(name: str, resource: str, mine: float, others: list[tuple[str, float]], ordered: bool,
             half_life: float) -> str:
    """The clause the fair-share sentence ends with, where it matters: `mine` is the decayed usage of `resource`
    (base-unit-seconds) of queue `name` on one cluster, `others` its siblings' (name, usage) there, with the names
    the reader may not see already replaced. "" when the queue has no sibling or none of them used any.
    `ordered`: the cluster is named in the setting. E.g. " Its decayed usage is 1 GPU·h (half-life 7 d), the most
    of its siblings (team-b 0.5 GPU·h): its jobs go after team-b's when both wait."."""
    if not others or (mine <= 0 and all(v <= 0 for _, v in others)):
        return ""
    listed = sorted(others, key=lambda kv: (kv[1], kv[0]))
    shown = ", ".join(f"{n} {decayed_words(resource, v)}" for n, v in listed[:3])
    more = f" and {len(listed) - 3} more" if len(listed) > 3 else ""
    less = [n for n, v in listed if v < mine]
    greater = [n for n, v in listed if v > mine]
    if not less and not greater:
        where = "as much as its siblings"
    elif not less:
        where = "the least of its siblings"
    elif not greater:
        where = "the most of its siblings"
    else:
        where = f"more than {_names(less)}, less than {_names(greater)}"
    head = (f" Its decayed usage is {decayed_words(resource, mine)} (half-life {half_life_words(half_life)}), "
            f"{where} ({shown}{more})")
    if not ordered:
        return f"{head}: {UNKNOWN}."
    if not less and not greater:
        return f"{head}: it does not change who goes first."
    parts = []
    if less:
        parts.append(f"after {_names(less)}'s")
    if greater:
        parts.append(f"before {_names(greater)}'s")
    both = "both wait" if len(less) + len(greater) == 1 else "they wait"
    return f"{head}: its jobs go {' and '.join(parts)} when {both}."


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else (f"{', '.join(names[:2])} and others" if len(names) > 2
                                             else " and ".join(names))
