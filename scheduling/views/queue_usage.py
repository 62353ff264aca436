"""The queue page's usage chart: per resource, what the queue (and its subtree) held over 24 h / 7 d / 30 d and its
decayed usage, from `services.queues.usage_history` (the numbers of GET /api/v1/queues/<name>/usage-history/), laid
out as server-rendered SVG (`display.step_chart`, as the page's other charts). The window selector swaps the
chart alone through htmx (`queue_usage`, GET /queues/<name>/usage/).

Queries: the cluster's id when `?cluster=` is given (1), the subtree's jobs and their Running entries (2,
`decayed_usage.held`), and KAI's reported readings for the GPU panel (2: the last before the window, those
inside it): five at most, whatever the number of jobs or buckets.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from ..amounts import GIB, format_number
from ..db import clock
from ..models import Cluster, QueuePolicy, QueueUsageSample
from ..services.access import roles as access
from ..services.queues import decayed_usage as du
from ..services.queues import usage_history
from ..services.queues.policies import QueueTree
from .common import allowed
from .display import StepChart, step_chart

MAX_SAMPLES = 5000
TITLES = {"gpu": "GPUs", "cpu": "CPU", "memory": "Memory"}
# Base units (devices, cores, bytes) per the unit the page writes; the decayed usage in unit-hours.
PEOPLE = {"gpu": (1, "GPU", "GPUs"), "cpu": (1, "CPU core", "CPU cores"), "memory": (GIB, "GiB", "GiB")}
DECAYED = {"gpu": "GPU·h", "cpu": "CPU core·h", "memory": "GiB·h"}
# A queue's quota and limit columns are KAI units; the chart is in base units: the factor from one to the other.
KAI_TO_BASE = {"gpu": 1, "cpu": 1 / 1000, "memory": 10**6}
UNLIMITED = -1
BUCKET_WORDS = {"24h": "15 minutes", "7d": "hour", "30d": "6 hours"}  # each window's bucket (usage_history.WINDOWS)


def held_for_people(resource: str, amount: float) -> str:
    """An amount held (devices, cores, bytes) for people: "2 GPUs", "0.5 GPU", "16 CPU cores", "64 GiB"."""
    size, one, many = PEOPLE[resource]
    value = amount / size
    return f"{format_number(value)} {one if value == 1 or 0 < value < 1 and resource == 'gpu' else many}"


def decayed_for_people(resource: str, amount: float) -> str:
    """A decayed usage (device-, core-, byte-seconds) in unit-hours: "0.998 GPU·h", "12 CPU core·h", "3.5 GiB·h"."""
    return f"{format_number(amount / 3600 / PEOPLE[resource][0])} {DECAYED[resource]}"


@dataclass
class Panel:
    """One resource's chart: `chart` (allocation, KAI's reported allocation for GPUs, quota and limit, on the
    left scale), `decayed` (an SVG `points` string on its own scale, `decayed_max` at the top), and the labels."""

    resource: str
    title: str
    chart: StepChart
    allocated_max: str
    decayed: str
    decayed_max: str
    decayed_now: str
    used: str
    peak: str
    reported: bool


def panels(history: dict, policy, reported: list | None = None) -> list[Panel]:
    """The three panels of a `usage_history` answer; `reported`: KAI's [(at, allocated GPUs)] in time order (the
    GPU panel draws it too)."""
    buckets = history["buckets"]
    out = []
    for r in du.RESOURCES:
        series = {"allocated": [(b["start"], b["allocated"][r]) for b in buckets]}
        if r == "gpu" and reported:
            series["reported"] = reported
        lines = {}
        for name in ("quota", "limit"):
            value = getattr(policy, f"{r}_{name}")
            if value is not None and value != UNLIMITED:
                lines[name] = value * KAI_TO_BASE[r]
        chart = step_chart(series, history["start"], history["end"], lines=lines, height=120)
        top = max([b["decayed"][r] for b in buckets] + [0.0])
        dmax = top * 1.1 or 1.0
        step = chart.width / max(len(buckets), 1)  # each value at its bucket's end
        points = " ".join(f"{step * (k + 1):g},{chart.height - b['decayed'][r] / dmax * chart.height:.2f}"
                          for k, b in enumerate(buckets))
        out.append(Panel(
            resource=r, title=TITLES[r], chart=chart, allocated_max=held_for_people(r, chart.vmax),
            decayed=points, decayed_max=decayed_for_people(r, dmax),
            decayed_now=decayed_for_people(r, buckets[-1]["decayed"][r] if buckets else 0.0),
            used=decayed_for_people(r, sum(b["used"][r] for b in buckets)),
            peak=held_for_people(r, max([b["allocated"][r] for b in buckets] + [0.0])),
            reported=bool(series.get("reported"))))
    return out


def reported_gpus(policy, cluster_ids, start, *, limit: int = MAX_SAMPLES) -> list:
    """KAI's readings of the queue's allocated GPUs (QueueUsageSample, from its Queue status) since `start`, summed
    over clusters (the latest of each at every reading), with the last reading before it setting the level at the
    start: [(at, GPUs)]. Two queries."""
    samples = QueueUsageSample.objects.filter(policy=policy)
    if cluster_ids is not None:
        samples = samples.filter(cluster_id__in=cluster_ids)
    fields = ("at", "cluster_id", "allocated_gpu")
    before = samples.filter(at__lt=start).order_by("-at").values_list(*fields)[:50]
    inside = samples.filter(at__gte=start).order_by("at").values_list(*fields)[:limit]
    latest: dict[int, float] = {}
    out = []
    for at, cluster_id, allocated in [*reversed(list(before)), *inside]:
        latest[cluster_id] = float(allocated or 0)
        out.append((at, sum(latest.values())))
    return out


def usage_context(policy, tree, window_key: str | None, cluster: str | None, also=()) -> dict:
    """The template context of the usage section (templates/scheduling/partials/queue_usage.html): `window`,
    `windows`, `cluster`, `history` (usage_history's answer), `panels`, `decayed` (the totals now, for people),
    `attempts` (what the jobs of the subtree and of the subtrees of `also`, queue ids, held: the page passes the
    queue's siblings so that the fair-share sentences reuse them). See the module docstring for the queries."""
    window = usage_history.window_of(window_key if window_key in usage_history.WINDOWS else None)
    half_life = du.half_life_seconds()
    now = clock.now()
    cluster_ids = list(Cluster.objects.filter(name=cluster).values_list("id", flat=True)) if cluster else None
    members = du.subtrees([policy.id], tree)[policy.id]
    loaded = {q for ids in du.subtrees({policy.id, *also}, tree).values() for q in ids}
    attempts = du.held(loaded, usage_history.since_for(window, now, half_life), cluster_ids)
    history = usage_history.answer(members, window, now=now, half_life=half_life, attempts=attempts)
    reported = reported_gpus(policy, cluster_ids, history["start"])
    last = history["buckets"][-1]["decayed"]
    half = "%g-day" % (half_life / 86400) if half_life >= 86400 else "%g-hour" % (half_life / 3600)
    return {"window": window.key, "windows": list(usage_history.WINDOWS), "cluster": cluster, "history": history,
            "below": len(members) > 1, "bucket": BUCKET_WORDS.get(window.key, window.key),
            "panels": panels(history, policy, reported), "attempts": attempts,
            "decayed": {"gpu": decayed_for_people("gpu", last["gpu"]), "cpu": decayed_for_people("cpu", last["cpu"]),
                        "memory": decayed_for_people("memory", last["memory"]), "half_life": half}}


@login_required
def queue_usage(request, name: str):
    """GET /queues/<name>/usage/?window=7d[&cluster=]: the usage section alone (htmx swaps it when the window
    changes); the same `usage_context` as the page."""
    policy = get_object_or_404(QueuePolicy, name=name)
    allowed(access.check_read_queue, request.user, policy)
    context = usage_context(policy, QueueTree.load_rows(), request.GET.get("window"),
                            request.GET.get("cluster") or None)
    return render(request, "scheduling/partials/queue_usage.html", {"policy": policy, **context})
