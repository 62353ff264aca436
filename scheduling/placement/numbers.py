"""The numbers the placement rule (`placement.rule`) reads, gathered from what gangweb already recorded: no request
to any cluster.

- a cluster's size: `Cluster.capacity["allocatable"]` (its Ready, uncordoned nodes, written by the cluster watcher;
  base units: cores, bytes, devices);
- whether they can be trusted: `Cluster.health` and `last_probe_at` (the probe, every 60 s), `unreachable_since`;
- which backend families it serves: `Cluster.available_backends` (registry names, from the probe);
- what gangweb's jobs hold and will take there, and each queue's share: ONE `SUM ... GROUP BY cluster, move
  target, queue, phase` over the active jobs of the candidate clusters and those moving to one (`usage`),
  whatever the number of jobs placed with it.

Settings: `GANGWEB_PLACEMENT_STALE_SECONDS` (default 300: five probe periods): a cluster not probed for longer is
not chosen while another is known.
"""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.db.models import Count, Q, Sum

from ..backends import registry
from ..choices import ACTIVE_PHASES, PENDING_PHASES, ClusterHealth
from ..constants import GPU_RESOURCE
from ..kube.quantities import to_millicores
from ..models import Cluster, GangJob
from ..observe.capacity import pod_requests
from .rule import Amounts, QueueThere, Where

# The Cluster fields the placement reads (loaded with `only`: never the credentials).
FIELDS = ("id", "name", "capacity", "health", "health_message", "last_probe_at", "available_backends",
          "unreachable_since")


def stale_seconds() -> float:
    """GANGWEB_PLACEMENT_STALE_SECONDS (default 300)."""
    return float(getattr(settings, "GANGWEB_PLACEMENT_STALE_SECONDS", 300))


def allocatable(cluster: Cluster) -> Amounts | None:
    """The cluster's schedulable nodes' allocatable as Amounts (devices, millicores, bytes), or None when never
    read, empty (no schedulable node) or unreadable (a hostile or broken row)."""
    cap = cluster.capacity if isinstance(cluster.capacity, dict) else {}
    alloc = cap.get("allocatable")
    if not isinstance(alloc, dict) or not cap.get("nodes"):
        return None
    try:
        gpu = Decimal(str(alloc.get(GPU_RESOURCE, 0)))
        cpu = Decimal(str(alloc.get("cpu", 0)))
        memory = Decimal(str(alloc.get("memory", 0)))
    except (InvalidOperation, ValueError):
        return None
    if not all(x.is_finite() and x >= 0 for x in (gpu, cpu, memory)):
        return None
    return Amounts(gpu, to_millicores(cpu), int(memory))


def largest(cluster: Cluster) -> Amounts | None:
    """The most one schedulable node of the cluster offers of each resource (`Cluster.capacity["largest"]`, the
    watcher's), as Amounts; None when not recorded or unreadable."""
    cap = cluster.capacity if isinstance(cluster.capacity, dict) else {}
    big = cap.get("largest")
    if not isinstance(big, dict) or not cap.get("nodes"):
        return None
    try:
        gpu, cpu, memory = (Decimal(str(big.get(k, 0))) for k in (GPU_RESOURCE, "cpu", "memory"))
    except (InvalidOperation, ValueError):
        return None
    if not all(x.is_finite() and x >= 0 for x in (gpu, cpu, memory)):
        return None
    return Amounts(gpu, to_millicores(cpu), int(memory))


def pod_asks(resolved_spec: dict | None) -> Amounts | None:
    """The most any one pod of the job asks of each resource (devices, millicores, bytes; `observe.capacity.
    pod_requests`, without RuntimeClass overhead), None when the spec names no pod that can be read."""
    pods = pod_requests(resolved_spec or {}) if isinstance(resolved_spec, dict) else []
    if not any(pods):
        return None
    try:
        gpu = max(Decimal(str(p.get(GPU_RESOURCE, 0))) for p in pods)
        cpu = max(to_millicores(Decimal(str(p.get("cpu", 0)))) for p in pods)
        memory = max(int(Decimal(str(p.get("memory", 0)))) for p in pods)
    except (InvalidOperation, ValueError, OverflowError):
        return None
    return Amounts(gpu, cpu, memory)


def unknown_because(cluster: Cluster, now: datetime) -> str:
    """Why the cluster's numbers cannot be trusted now ("" when they can): not healthy at its last probe (with
    since when it is unreachable), not probed for GANGWEB_PLACEMENT_STALE_SECONDS, its nodes or backends never
    read."""
    if cluster.health == ClusterHealth.UNREACHABLE:
        since = f" since {cluster.unreachable_since:%H:%M:%S} UTC" if cluster.unreachable_since else ""
        return f"unreachable{since}"
    if cluster.health != ClusterHealth.HEALTHY:
        return f"health {cluster.health} at its last probe"
    if cluster.last_probe_at is None:
        return "never probed"
    age = (now - cluster.last_probe_at).total_seconds()
    if age > stale_seconds():
        return f"its numbers are stale (last probed {int(age)} s ago)"
    if allocatable(cluster) is None:
        return "no schedulable nodes seen yet"
    if not cluster.available_backends:
        return "its schedulers were never probed"
    return ""


def serves(cluster: Cluster, family: str) -> bool | None:
    """True when the cluster's last probe found a plugin of backend `family`, False when it found others only, None
    when it found none at all (never probed: unknown, not "no")."""
    names = cluster.available_backends or []
    if not names:
        return None
    for name in names:
        try:
            if registry.by_name(name).family == family:
                return True
        except KeyError:  # a plugin this version no longer has
            continue
    return False


def usage(cluster_ids: list[int], sizes: dict[int, Amounts | None] | None = None,
          ) -> tuple[dict[int, tuple[Amounts, Amounts]], dict[tuple[int, int], QueueThere]]:
    """({cluster id: (held, waiting)}, {(queue id, cluster id): QueueThere}) from gangweb's active jobs in those
    clusters: held = what Scheduled and Running jobs request, waiting = what Submitted, Dispatched and Queued ones
    request (they will take it), a waiting job with a move under way counted both where it is (its objects are
    there until the move deletes them) and where it goes. A waiting job that asks for more of a resource than its
    cluster's whole allocatable (`sizes`: {cluster id: Amounts}, None when unknown) is left out: it never takes any
    room there. One statement."""
    ids = sorted(cluster_ids)
    never = Q()
    for cid, size in (sizes or {}).items():
        if size is not None:
            never |= Q(cluster_id=cid, phase__in=sorted(PENDING_PHASES)) & (
                Q(requested_gpu__gt=float(size.gpu)) | Q(requested_cpu_millicores__gt=size.cpu)
                | Q(requested_memory_bytes__gt=size.memory))
    active = GangJob.objects.filter(Q(cluster_id__in=ids) | Q(move_to_id__in=ids), phase__in=sorted(ACTIVE_PHASES))
    rows = ((active.exclude(never) if never else active).order_by()
            .values("cluster_id", "move_to_id", "queue_id", "phase")
            .annotate(n=Count("id"), gpu=Sum("requested_gpu"), cpu=Sum("requested_cpu_millicores"),
                      memory=Sum("requested_memory_bytes")))
    per_cluster: dict[int, tuple[Amounts, Amounts]] = {}
    per_queue: dict[tuple[int, int], QueueThere] = {}

    def count(cluster_id: int, row: dict, asks: Amounts, pending: bool) -> None:
        held, waiting = per_cluster.get(cluster_id, (Amounts(), Amounts()))
        per_cluster[cluster_id] = (held, waiting + asks) if pending else (held + asks, waiting)
        there = per_queue.setdefault((row["queue_id"], cluster_id), QueueThere())
        there.asks = there.asks + asks
        there.waiting_jobs += row["n"] if pending else 0

    wanted = set(ids)
    for row in rows:
        asks = Amounts(Decimal(str(row["gpu"] or 0)), int(row["cpu"] or 0), int(row["memory"] or 0))
        pending = row["phase"] in PENDING_PHASES
        if row["cluster_id"] in wanted:
            count(row["cluster_id"], row, asks, pending)
        # A move under way (reconcile/moves.py) will take its room at the target too: counted there as waiting
        # from its claim, so the next round or a submit meanwhile does not give that room away a second time.
        if pending and row["move_to_id"] in wanted and row["move_to_id"] != row["cluster_id"]:
            count(row["move_to_id"], row, asks, True)
    return per_cluster, per_queue


class Numbers:
    """The numbers of a set of clusters for one placement run (a submit, a bulk, a pass of moves): each cluster's
    `Where` and each queue's `QueueThere`, loaded with one statement (`usage`) and updated in memory as jobs are
    placed (`rule.take`)."""

    def __init__(self, clusters: list[Cluster], now: datetime):
        self.clusters = {c.id: c for c in clusters}
        held_waiting, self.theres = usage(list(self.clusters), {c.id: allocatable(c) for c in clusters})
        self.wheres = {}
        for c in clusters:
            held, waiting = held_waiting.get(c.id, (Amounts(), Amounts()))
            self.wheres[c.id] = Where(c.id, c.name, allocatable(c), held, waiting, unknown_because(c, now),
                                      largest(c))

    def there(self, queue_id: int, cluster_id: int) -> QueueThere:
        """The queue's use of the cluster (created empty the first time)."""
        return self.theres.setdefault((queue_id, cluster_id), QueueThere())


def demand_of(job: GangJob) -> Amounts:
    """A job's gang totals (its `requested_*` columns) as Amounts."""
    return Amounts(Decimal(str(job.requested_gpu or 0)), int(job.requested_cpu_millicores or 0),
                   int(job.requested_memory_bytes or 0))
