"""The queue tree: per queue and resource, quota, limit, allocated and requested as bars, with the warnings and
per-cluster sync state (drift) from `services.queues.payloads.queue_tree`, the same data as GET /api/v1/queues/tree/.

The page draws the top-level queues only; a queue's children are fetched when it is expanded (htmx, one
request per level), so the page costs the same with 10 queues or 1,000 (bench/: drawing every queue with three
bars took seconds). A search box finds a queue anywhere in the tree by name, server-side."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render

from ..choices import QueueWarning
from ..forms.queues import QueueForm
from ..kube.kai_units import RESOURCES
from ..models import Cluster, QueueClusterState, QueuePolicy
from ..services.access import roles as access
from ..services.queues import fair_share as fair_share_service
from ..services.queues import kueue_usage, usage_order
from ..services.queues import line as queue_line
from ..services.queues import payloads as queue_payloads
from ..services.queues import per_cluster as per_cluster_service
from ..services.queues import policies as queue_service
from . import queue_usage
from .common import allowed, page_or_fragment
from .display import for_people, quota_bar

UNIT_LABELS = {"gpu": "GPU", "cpu": "millicores", "memory": "MB"}
SEARCH_SHOWN = 50
CHILDREN_SHOWN = 50


def decorate(nodes: list[dict]) -> None:
    """Add `bars` (a QuotaBar per resource) and `estimated` to each node of a `queue_tree()` forest, in place.

    A bar shows what the scheduler reported in the Queue's status (KAI) when a cluster did; otherwise
    (`estimated` True: no report yet, or a scheduler that reports no per-queue use) gangweb's own estimate from
    its active jobs, which the page labels as such. `node["estimate_summary"]` keeps the estimate next to a
    reported figure, so both can be compared. `shown_warnings` leaves out the children-sum warning a child shares
    with its siblings (`sibling_warning` is then True: the parent shows it once)."""
    for node in nodes:
        res = node["resources"]
        node["estimated"] = all(res[r]["allocated"] is None for r in RESOURCES)
        node["bars"], node["estimate_summary"] = [], []
        for r in RESOURCES:
            x = res[r]
            allocated = x["estimated_allocated"] if node["estimated"] else x["allocated"]
            requested = x["estimated_requested"] if node["estimated"] else x["requested"]
            node["bars"].append(quota_bar(r, UNIT_LABELS[r], x["quota"], x["limit"], allocated, requested))
            node["estimate_summary"].append(
                f"{r} {for_people(r, x['estimated_allocated'])} allocated, "
                f"{for_people(r, x['estimated_requested'])} requested")
        # A parent's children-sum warning is shown on the parent; each child repeated it (with every sibling's
        # name: 90 copies of a 90-name sentence in a department's list). Children point at it instead.
        own = f"(children of '{node['name']}')"
        node["shown_warnings"], node["sibling_warning"] = [], False
        for w in node["warnings"]:
            if w["code"] == QueueWarning.CHILDREN_OVER_PARENT and own not in w["message"]:
                node["sibling_warning"] = True
            else:
                node["shown_warnings"].append(w)
        decorate(node["children"])


def search(tree, text: str, visible: set[int] | None) -> tuple[list[int], int]:
    """Ids of the queues whose name or display name contains `text` (case-insensitive), by name, at most
    SEARCH_SHOWN of them, and how many matched in all. Reads the loaded tree: no query."""
    text = text.lower()
    found = sorted((p for p in tree.by_id.values() if (visible is None or p.id in visible)
                    and (text in p.name.lower() or text in (p.display_name or "").lower())), key=lambda p: p.name)
    return [p.id for p in found[:SEARCH_SHOWN]], len(found)


def _cluster_param(request) -> str | None:
    return request.GET.get("cluster") or None


@login_required
def queue_tree(request):
    """GET /queues/[?cluster=name][&q=text]: the top-level queues, each with its children loaded on expand
    (`queue_children`), or the queues whose name contains `q`, each with its jobs pending, running and finished
    in 24 hours (services/queues/counts.py). Seven queries whatever the number of queues and jobs."""
    cluster = _cluster_param(request)
    query = (request.GET.get("q") or "").strip()[:63]
    visible = access.queue_tree_filter(request.user)
    tree = queue_service.QueueTree.load_rows()
    matched = None
    if query:
        ids, matched = search(tree, query, visible)
        roots = queue_payloads.queue_tree(cluster, ids=ids, depth=0, visible=visible, tree=tree, with_counts=True)
    else:
        roots = queue_payloads.queue_tree(cluster, depth=0, visible=visible, tree=tree, with_counts=True)
    decorate(roots)
    return page_or_fragment(request, "scheduling/queues.html", "scheduling/partials/queue_tree.html", {
        "section": "queues", "roots": roots, "cluster": cluster, "q": query, "matched": matched,
        "search_shown": SEARCH_SHOWN, "total_queues": len(tree.by_id),
        "cluster_names": list(access.visible_clusters(request.user, Cluster.objects.all()).values_list("name",
                                                                                                        flat=True)),
    })


@login_required
def queue_children(request, name: str):
    """GET /queues/<name>/children/[?cluster=][&offset=n]: the child queues of one queue, as list items for the
    tree page (fetched by htmx when the queue is expanded; each child's own children load the same way).
    CHILDREN_SHOWN at a time, by name, then a "show more" item fetching the next ones: a department with
    hundreds of teams costs the same to expand as one with ten. A fixed number of queries; 404 for a queue the
    user cannot see."""
    cluster = _cluster_param(request)
    visible = access.queue_tree_filter(request.user)
    tree = queue_service.QueueTree.load_rows()
    parent = tree.by_name.get(name)
    if parent is None or (visible is not None and parent.id not in visible):
        raise Http404(f"no queue named '{name}'")
    offset = request.GET.get("offset", "")
    offset = int(offset) if offset.isascii() and offset.isdigit() else 0
    kids = [k for k in tree.children.get(parent.id, []) if visible is None or k.id in visible]
    shown = kids[offset:offset + CHILDREN_SHOWN]
    nodes = queue_payloads.queue_tree(cluster, ids=[k.id for k in shown], depth=0, visible=visible, tree=tree,
                                      with_counts=True)
    decorate(nodes)
    rest = len(kids) - offset - len(shown)
    return render(request, "scheduling/partials/queue_children.html", {
        "nodes": nodes, "cluster": cluster, "parent": parent.name, "rest": max(rest, 0),
        "next_offset": offset + len(shown), "page_only": offset > 0, "next_count": min(max(rest, 0), CHILDREN_SHOWN),
    })


@login_required
def queue_detail(request, name: str):
    """GET /queues/<name>/[?window=7d&cluster=]: one queue's bars, warnings, sync and job counts; its use per cluster
    (in use, quota, limit per resource, running and waiting jobs: services/queues/per_cluster.py); its fair share
    per cluster and resource as a bar next to its quota and limit; its wait order (for a parent, its subtree's);
    and its allocation and decayed usage over 24 h / 7 d / 30 d per resource (views/queue_usage.py), with KAI's
    reported GPU allocation where a cluster reports it, against its quota and limit."""
    policy = get_object_or_404(QueuePolicy.objects.select_related("parent"), name=name)
    allowed(access.check_read_queue, request.user, policy)
    cluster = request.GET.get("cluster") or None
    visible = access.queue_tree_filter(request.user)  # its warnings name only queues the reader may see
    tree = queue_service.QueueTree.load_rows()
    node = queue_payloads.queue_tree(cluster, ids=[policy.id], depth=0, visible=visible, tree=tree,
                                     with_counts=True)[0]
    decorate([node])
    # Allocation and decayed usage over the window (the same service as GET .../usage-history/), with KAI's
    # reported allocation on the GPU panel: views/queue_usage.py. Its read of what the jobs held covers the
    # queue's siblings too, for the fair-share sentences.
    siblings = [q.id for q in usage_order.siblings(tree.by_id[policy.id], tree)]
    usage = queue_usage.usage_context(policy, tree, request.GET.get("window"), cluster, also=siblings)
    # Fair share per cluster (the same service as GET /api/v1/queues/<name>/fair-share/) and the wait order (as
    # .../line/): a fixed number of queries whatever the number of queues and jobs.
    shares = fair_share_service.seen_by(request.user, fair_share_service.fair_shares(
        [policy.id], cluster, tree=tree, visible=visible, attempts=usage["attempts"])[policy.id])
    for c in shares:  # each resource's bar: quota, limit and fair share marked over what is allocated and requested
        for r, x in (c["resources"] or {}).items():
            x["bar"] = quota_bar(r, UNIT_LABELS[r], x["quota"], x["limit"], x["allocated"], x["requested"],
                                 x["fair_share"])
    cluster_ids = [c.id for c in Cluster.objects.filter(name=cluster)] if cluster else None
    waiting = queue_line.line_payload(request.user, policy, cluster_ids, tree=tree)
    # Kueue's own report where the queue is a Kueue ClusterQueue or Cohort (one query; the API's `kueue`).
    # The states alone (an index read on the policy), then their clusters only when there are any: joined with the
    # clusters, the planner walked every cluster and scanned the state table once per cluster when its statistics
    # are empty (tests/dashboard/test_stale_statistics.py); a queue that is no Kueue queue pays one query.
    states = QueueClusterState.objects.filter(policy=policy, family=kueue_usage.FAMILY)
    if cluster_ids is not None:
        states = states.filter(cluster_id__in=cluster_ids)
    states = list(states)
    if states:
        clusters = Cluster.objects.in_bulk({s.cluster_id for s in states})
        for state in states:
            state.cluster = clusters[state.cluster_id]
    kueue = [kueue_usage.kueue_payload(s) for s in sorted(states, key=lambda s: s.cluster.name)]
    kueue = fair_share_service.seen_by(request.user, kueue) if kueue else []  # only the clusters it may see
    # Its use per cluster (the API detail's `per_cluster`): a fixed number of queries whatever the jobs.
    per_cluster = per_cluster_service.per_cluster(policy, tree, request.user)
    return render(request, "scheduling/queue_detail.html", {
        "section": "queues", "policy": policy, "node": node, "shares": shares, "line": waiting,
        "line_order": queue_line.ORDER, "line_shown": queue_line.LINE_SHOWN, "kueue": kueue,
        "per_cluster": per_cluster, **usage,
    })


@login_required
def queue_create(request):
    """GET/POST /queues/new/: create a queue through `services.queues.policies.create_queue`, as POST
    /api/v1/queues/."""
    form = QueueForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        result = form.save(request.user)
        if result is not None:
            queue, warnings = result
            messages.success(request, f"Queue '{queue.name}' created.")
            for w in warnings:
                messages.warning(request, w["message"])
            return redirect("scheduling:queues")
    return render(request, "scheduling/queue_form.html", {"section": "queues", "form": form})
