"""A queue's decayed usage: what its jobs held, each second weighed by how long ago it was, computed exactly.

Semantics of KAI Scheduler's time-based fair share (upstream: KAI `docs/time-based-fairshare/README.md`, the
SchedulingShard's `usageDBConfig.usageParams.halfLifePeriod`): a resource-second used `age` seconds ago counts
0.5^(age / halfLife) = exp(-λ·age), λ = ln 2 / halfLife. KAI samples its queues' allocation from Prometheus;
gangweb knows every job's requested totals (`GangJob.requested_*`, filled at submit) and when it ran (its
Running timeline entries, `PhaseTransition`), so it integrates in closed form with no sampling and no rounding.
A job of rate r (devices, cores, bytes) that held it over [start, end] contributes

    ∫ r·exp(-λ(now − t)) dt over [start, end] = r/λ · (exp(-λ(now − end)) − exp(-λ(now − start)))

Each attempt of a job (a re-queued gang starts a new one) runs from its Running entry until the next attempt's
Queued entry, else the job's `finished_at`, else now (still running). "Now" is the database's clock
(db/clock.py), so every host answers the same. A parent queue's usage is its own and its descendants' sum.

Half-life: settings.GANGWEB_USAGE_HALF_LIFE_SECONDS (default 7 days). Jobs that ended more than HORIZON_HALF_LIVES
half-lives ago weigh < 2^-HORIZON_HALF_LIVES of their use and are left out, which bounds the queries.
"""
from __future__ import annotations

import itertools
import math
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db.models import Q

from ...choices import TERMINAL_PHASES, GangPhase
from ...db import clock
from ...models.jobs import GangJob, PhaseTransition

ENTRY_CHUNK = 10_000  # job ids per statement of timeline entries
HORIZON_HALF_LIVES = 20  # left-out jobs weigh < 2^-20 (one part in a million) of what they used
MILLICORES_PER_CORE = 1000
RESOURCES = ("gpu", "cpu", "memory")  # the Held rates' names: devices, cores, bytes
JOB_FIELDS = ("id", "queue_id", "cluster_id", "phase", "phase_changed_at", "finished_at", "requested_gpu",
              "requested_cpu_millicores", "requested_memory_bytes")


def half_life_seconds() -> float:
    """The configured half-life in seconds (settings.GANGWEB_USAGE_HALF_LIFE_SECONDS, > 0)."""
    return float(settings.GANGWEB_USAGE_HALF_LIFE_SECONDS)


def decayed_integral(rate: float, start: datetime, end: datetime, now: datetime, half_life: float) -> float:
    """∫ rate·0.5^((now − t)/half_life) dt over [start, end], in rate·seconds; the interval is clipped to end at
    `now` and is 0 when empty. `half_life` in seconds (> 0)."""
    end = min(end, now)
    if not rate or end <= start:
        return 0.0
    lam = math.log(2) / half_life
    age_end = (now - end).total_seconds()
    length = (end - start).total_seconds()
    # exp(-λ·age_end) − exp(-λ·age_start) = exp(-λ·age_end)·(1 − exp(-λ·length)): expm1 keeps short intervals exact
    return rate / lam * math.exp(-lam * age_end) * -math.expm1(-lam * length)


class Held(NamedTuple):
    """One Running attempt of one job: what it held and when. `end` None = still running. Rates: `gpu` devices,
    `cpu` cores, `memory` bytes (the job's requested totals)."""

    queue_id: int
    cluster_id: int
    start: datetime
    end: datetime | None
    gpu: float
    cpu: float
    memory: float


def _intervals(jobs: dict[int, dict], entries) -> list[Held]:
    """A `Held` per Running attempt; `jobs` by id, `entries` (job id, phase, attempt, at) of their Running and
    re-queue (Queued, attempt > 0) timeline entries."""
    running: dict[int, dict[int, datetime]] = {}
    queued: dict[int, dict[int, datetime]] = {}
    for job_id, phase, attempt, at in entries:
        (running if phase == GangPhase.RUNNING else queued).setdefault(job_id, {})[attempt] = at
    out = []
    for job_id, attempts in running.items():
        job = jobs[job_id]
        ended = job["finished_at"]
        if ended is None and job["phase"] in TERMINAL_PHASES:
            ended = job["phase_changed_at"]  # rows finished before finished_at was written
        requeued = queued.get(job_id, {})
        rates = (float(job["requested_gpu"] or 0), (job["requested_cpu_millicores"] or 0) / MILLICORES_PER_CORE,
                 float(job["requested_memory_bytes"] or 0))
        for attempt, start in attempts.items():
            later = [at for a, at in requeued.items() if a > attempt]
            out.append(Held(job["queue_id"], job["cluster_id"], start, min(later) if later else ended, *rates))
    return out


def subtrees(queue_ids, tree) -> dict[int, list[int]]:
    """{queue id: [it and every queue below it]} (`tree`: a queueing.tree.QueueTree); an unknown id is alone."""
    out: dict[int, list[int]] = {}
    for qid in queue_ids:
        node = tree.by_id.get(qid)
        out[qid] = [qid, *(q.id for q in tree.descendants(node))] if node is not None else [qid]
    return out


def held(members, since: datetime, cluster_ids=None) -> list[Held]:
    """What the jobs of queues `members` (ids; not their descendants) held: a `Held` per Running attempt of every
    job unfinished or finished at or after `since` (of `cluster_ids` only, when given). Two queries (one more per
    ENTRY_CHUNK jobs), no join: the jobs (from the queue index), then their Running and re-queue entries (from the
    (job, phase, attempt) key); a join of the timeline with the jobs loops per row under stale statistics
    (issue 14)."""
    members = sorted(set(members))
    if not members:
        return []
    rows = GangJob.objects.order_by().filter(Q(finished_at__isnull=True) | Q(finished_at__gte=since),
                                             queue_id__in=members)
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=sorted(cluster_ids))
    jobs = {row["id"]: row for row in rows.values(*JOB_FIELDS)}
    # The ids go in chunks: a queue may have more jobs in the horizon than a statement takes parameters
    # (PostgreSQL 65,535; SQLite 32,766), so one statement per ENTRY_CHUNK jobs.
    ids = sorted(jobs)
    entries = itertools.chain.from_iterable(PhaseTransition.objects.order_by().filter(
        Q(phase=GangPhase.RUNNING) | Q(phase=GangPhase.QUEUED, attempt__gt=0),
        job_id__in=ids[i:i + ENTRY_CHUNK]).values_list("job_id", "phase", "attempt", "at")
        for i in range(0, len(ids), ENTRY_CHUNK))
    return _intervals(jobs, entries)


def horizon(now: datetime, half_life: float) -> datetime:
    """The oldest end a job may have and still count at `now` (HORIZON_HALF_LIVES half-lives before it)."""
    return now - timedelta(seconds=half_life * HORIZON_HALF_LIVES)


def sums(attempts, now: datetime, half_life: float) -> dict[tuple[int, int], dict[str, float]]:
    """{(queue id, cluster id): {"gpu": device-s, "cpu": core-s, "memory": byte-s}} decayed to `now` over
    `attempts` (`Held`s): each queue's own jobs, per cluster (no descendants)."""
    out: dict[tuple[int, int], dict[str, float]] = {}
    for h in attempts:
        end = now if h.end is None else h.end
        acc = out.setdefault((h.queue_id, h.cluster_id), {"gpu": 0.0, "cpu": 0.0, "memory": 0.0})
        for r in RESOURCES:
            acc[r] += decayed_integral(getattr(h, r), h.start, end, now, half_life)
    return out


def rolled(own: dict[tuple[int, int], dict[str, float]], subtree: dict[int, list[int]], half_life: float,
           cluster_id: int | None = None) -> dict[int, dict]:
    """`decayed_usage`'s answer from `sums` (`own`) and `subtrees` (`subtree`): each queue's and its
    descendants' sums, of every cluster or of `cluster_id` only."""
    by_queue: dict[int, list[dict[str, float]]] = {}
    for (q, c), s in own.items():
        if cluster_id is None or c == cluster_id:
            by_queue.setdefault(q, []).append(s)
    out = {}
    for qid, ids in subtree.items():  # linear in the subtrees' sizes, whatever the number of queues with use
        acc = {"gpu": 0.0, "cpu": 0.0, "memory": 0.0}
        for q in ids:
            for s in by_queue.get(q, ()):
                for r in RESOURCES:
                    acc[r] += s[r]
        out[qid] = {**acc, "half_life_seconds": half_life}
    return out


def decayed_usage(queue_ids, tree, *, now: datetime | None = None, half_life: float | None = None,
                  attempts: list[Held] | None = None) -> dict[int, dict]:
    """{queue id: {"gpu": device-seconds, "cpu": core-seconds, "memory": byte-seconds, "half_life_seconds": s}} for
    each of `queue_ids`, its descendants' included (`tree`: a queueing.tree.QueueTree). Queues with no use get 0.0.

    Two queries (`held`): the jobs of those queues that are unfinished or finished within HORIZON_HALF_LIVES
    half-lives, then their Running (and re-queue) timeline entries; none when the caller passes `attempts` it
    already read (`held` over at least these subtrees, since at most `horizon(now, half_life)`). `now` defaults
    to the database's clock; `half_life` to the setting."""
    half_life = half_life if half_life is not None else half_life_seconds()
    now = now or clock.now()
    subtree = subtrees(queue_ids, tree)
    if attempts is None:
        attempts = held({q for ids in subtree.values() for q in ids}, horizon(now, half_life))
    return rolled(sums(attempts, now, half_life), subtree, half_life)
