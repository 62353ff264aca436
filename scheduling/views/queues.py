"""The queue tree: per queue and resource, quota, limit, allocated and requested as bars, with warnings."""
from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from ..choices import GangPhase
from ..forms.queues import QueueForm
from ..models import GangJob, QueuePolicy
from .common import page_or_fragment
from .display import queue_warnings, quota_bar, requests_of_spec

RESOURCES = (("gpu", "GPU"), ("cpu", "millicores"), ("memory", "MB"))
RUNNING_PHASES = (GangPhase.SCHEDULED, GangPhase.RUNNING)
ACTIVE = (GangPhase.SUBMITTED, GangPhase.DISPATCHED, GangPhase.QUEUED, *RUNNING_PHASES)


@dataclass
class QueueNode:
    """A queue in the tree with its children, its bars and its warnings."""

    queue: QueuePolicy
    children: list = field(default_factory=list)
    allocated: dict = field(default_factory=lambda: {r: 0.0 for r, _ in RESOURCES})
    requested: dict = field(default_factory=lambda: {r: 0.0 for r, _ in RESOURCES})
    bars: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    jobs_active: int = 0


def build_tree(queues, usage_rows) -> list[QueueNode]:
    """Arrange queues as a forest and roll job usage up to every ancestor (KAI counts a child's allocation in
    its parent's). `usage_rows`: (queue_id, phase, resolved_spec) of active jobs."""
    nodes = {q.id: QueueNode(q) for q in queues}
    for queue_id, phase, spec in usage_rows:
        asks = requests_of_spec(spec)
        node = nodes.get(queue_id)
        if node:
            node.jobs_active += 1
        seen = set()
        while node is not None and node.queue.id not in seen:  # guard against a cycle in bad data
            seen.add(node.queue.id)
            for r, amount in asks.items():
                node.requested[r] += amount
                if phase in RUNNING_PHASES:
                    node.allocated[r] += amount
            node = nodes.get(node.queue.parent_id)
    roots = []
    for node in nodes.values():
        parent = nodes.get(node.queue.parent_id)
        (parent.children if parent else roots).append(node)
    for node in nodes.values():
        q = node.queue
        node.bars = [quota_bar(r, unit, getattr(q, f"{r}_quota"), getattr(q, f"{r}_limit"), node.allocated[r],
                               node.requested[r]) for r, unit in RESOURCES]
        node.warnings = queue_warnings(q, [c.queue for c in node.children])
    return roots


@login_required
def queue_tree(request):
    """GET /queues/: the tree, polled by htmx every 5 s. Two queries whatever the number of queues or jobs."""
    queues = list(QueuePolicy.objects.all())
    usage = GangJob.objects.filter(phase__in=ACTIVE).values_list("queue_id", "phase", "resolved_spec")
    roots = build_tree(queues, usage)
    return page_or_fragment(request, "scheduling/queues.html", "scheduling/partials/queue_tree.html",
                            {"section": "queues", "roots": roots, "count": len(queues)})


@login_required
def queue_create(request):
    """GET/POST /queues/new/: create a queue policy (validated by the same serializer as the API)."""
    form = QueueForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        queue = form.save(request.user)
        if queue is not None:
            messages.success(request, f"Queue '{queue.name}' created.")
            return redirect("scheduling:queues")
    return render(request, "scheduling/queue_form.html", {"section": "queues", "form": form})
