"""A pending job's start-time estimate: what the API (`estimated_start`, GET /api/v1/jobs/<id>/estimate/), the job
page and the CLI show.

Gathers gangweb's data and hands it to the pure model `scheduling.queueing.estimate` (the replay, its sources and
its simplifications are in that module's docstring):

- capacity: the cluster's schedulable nodes' allocatable (`Cluster.capacity`, written by the cluster watcher with
  `ClusterNodes`), in KAI units (`services.queues.fair_share.capacity_of`);
- the queues: every queue policy (`QueueTree.load_rows`) with its quota, limit, over-quota weight and priority;
- the cluster's placed jobs (Scheduled, Running) with how long each has run (its latest Running entry, inferred or
  not: the best time there is; a Scheduled job has run 0 s), and its pending jobs (`services.queues.line`'s
  pending set and order, at most MAX_PENDING of them, the target always included);
- recent submissions (the arrival model, queueing/arrivals.py): the cluster's jobs created in the last
  `arrivals.WINDOW` seconds (at most ARRIVAL_ROWS, newest first; the target and jobs waiting on a scheduler that is
  not there left out), with their queue, line priority (`services.queues.line`), requests, template and backend
  family: the replays expect jobs like them at the rate they came, in every queue;
- history: the run times (Running to Succeeded/Failed of one attempt, both times the cluster's own, never
  inferred) of the most recent HISTORY_SCAN finished jobs of the templates and queues those jobs use, in any
  cluster. Cancelled jobs are left out: their run time says when someone gave up, not how long the work takes.

Caching: a replay costs up to about a second of CPU (300 queues, 500 pending jobs) and the job page polls the
estimate every 2 s, so `payload` keeps each answer in Django's cache for ESTIMATE_SECONDS, keyed by the job, what
the reader may see (every name, or their queues: `_viewer`) and the cluster's **state version** (`state_version`:
per phase and desired state of the cluster's pending and placed jobs, their count, id sum, spec revision sum and
latest phase change; and the cluster's capacity). A job that starts, ends, is submitted, edited (queue, priority
class) or cancelled in the cluster changes the version, so the next read computes afresh at once; otherwise an
answer is reused up to ESTIMATE_SECONDS (so the running jobs' elapsed times, queue policy edits and new history show
within that long).

Queries: one for the state version on every read; on a miss up to five more whatever the number of jobs (the queue
tree, the placed jobs, the pending jobs, the recent submissions, the history). The placed and pending jobs are read
once per cluster and state version and shared by all of its jobs and readers (`_shared`): a first look at another
waiting job of the same cluster state replays from them without reading them again. The history is read at most
once per HISTORY_SECONDS for the same templates and queues, the recent submissions at most once per
ARRIVAL_SECONDS per cluster, and the reader's queue roles (memoized per request) when names must be hidden.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from datetime import timedelta

from django.core.cache import cache
from django.db.models import Count, F, Max, OuterRef, Q, Subquery, Sum
from django.utils import timezone

from ...choices import DesiredState, GangPhase
from ...kube.kai_units import RESOURCES
from ...models import GangJob, PhaseTransition
from ...observe import causes, presence
from ...observe.causes import NODES_FRAGMENTED
from ...observe.why_pending import QUEUE_OVER_LIMIT, QUEUE_OVER_QUOTA
from ...queueing import allocation, arrivals
from ...queueing import estimate as model
from ...queueing import estimate_words as words
from ...reconcile.jobs.common import ERROR_REASONS
from ...unavailable import DEPENDENCY_ERRORS
from ..access import roles as access
from ..queues import line as queue_line
from ..queues.fair_share import capacity_of
from ..queues.policies import QueueTree
from ..queues.usage import BYTES_PER_MB, RUNNING_PHASES

FINISHED = (GangPhase.SUCCEEDED, GangPhase.FAILED)
HISTORY_SCAN = 3000  # most recent finished jobs read for the history
HISTORY_SECONDS = 60
ESTIMATE_SECONDS = 15  # an answer is reused this long while its cluster's state version is unchanged
MAX_PENDING = 300  # the cluster's pending jobs replayed, first in line order (the target always): bounds its cost
HIDDEN = "a job of another queue"
ARRIVAL_ROWS = 2000  # most recent submissions of the cluster read for the arrival model (its window's busiest hour)
ARRIVAL_SECONDS = 60  # the recent submissions are read once per cluster per this long
logger = logging.getLogger(__name__)
METHOD = ("replay of the running jobs' expected ends (run times of finished jobs of the same template and queue, "
          "else template, else queue, given how long each has run) against queue limits, fair-share queue order "
          "and the cluster's capacity, with jobs submitted meanwhile expected at each queue's rate and mix of the "
          f"last {int(arrivals.WINDOW // 60)} min; p50/p90 over {model.SAMPLES} seeded replays; no preemption, "
          "reclaim or node packing modelled")


def _asks(gpu, cpu_millicores, memory_bytes) -> dict[str, float]:
    return {"gpu": float(gpu or 0), "cpu": float(cpu_millicores or 0),
            "memory": float(memory_bytes or 0) / BYTES_PER_MB}


def _queues(tree: QueueTree) -> list[allocation.QueueSpec]:
    specs = []
    for q in tree.by_id.values():
        parent = tree.by_id.get(q.parent_id)
        specs.append(allocation.QueueSpec(
            name=q.name, parent=parent.name if parent is not None else None, priority=q.priority,
            quota={r: getattr(q, f"{r}_quota") for r in RESOURCES},
            limit={r: getattr(q, f"{r}_limit") for r in RESOURCES},
            weight={r: getattr(q, f"{r}_over_quota_weight") for r in RESOURCES}))
    return specs


def _namer(user):
    """name(queue id, job name) -> the name the reader may see (access.visible_jobs: a role on the queue)."""
    if user is None or access.is_platform_admin(user):
        return lambda queue_id, name: name
    roles = access.queue_roles(user)
    return lambda queue_id, name: name if queue_id in roles else HIDDEN


def _shared(kind: str, cluster_id: int, version: str, load):
    """The rows `load()` reads for cluster `cluster_id` at state version `version`, read once and shared by every
    job and reader of that cluster while the version holds (kept ESTIMATE_SECONDS): they hold no reader-dependent
    value (names are hidden after, `_namer`) and no clock-dependent one (elapsed times are taken after, from
    `now`). A random first look at each of a cluster's waiting jobs read its placed and pending jobs anew each
    time: ~0.3 s per look at 4,000 running jobs (bench/README.md, "What users get")."""
    key = f"gangweb:estimate-{kind}:{cluster_id}:{version}"
    rows = cache.get(key)
    if rows is None:
        rows = load()
        cache.set(key, rows, ESTIMATE_SECONDS)
    return rows


def _running_rows(cluster_id: int) -> list[tuple]:
    started = (PhaseTransition.objects.filter(job_id=OuterRef("pk"), phase=GangPhase.RUNNING)
               .order_by("-attempt", "-at").values("at")[:1])
    return list(GangJob.objects.filter(cluster_id=cluster_id, phase__in=RUNNING_PHASES)
                .annotate(template_id=F("template_version__template_id"), run_at=Subquery(started)).order_by()
                .values_list("id", "name", "queue_id", "template_id", "phase", "desired_state", "requested_gpu",
                             "requested_cpu_millicores", "requested_memory_bytes", "run_at", "phase_changed_at"))


def _running(cluster_id: int, now, name, queue_names, version: str) -> list[allocation.Job]:
    rows = _shared("placed", cluster_id, version, lambda: _running_rows(cluster_id))
    out = []
    for jid, jname, qid, tid, phase, desired, gpu, cpu, mem, run_at, changed in rows:
        since = (run_at or changed) if phase == GangPhase.RUNNING else None
        elapsed = max((now - since).total_seconds(), 0.0) if since is not None else 0.0
        out.append(allocation.Job(id=jid, queue=queue_names.get(qid, str(qid)), asks=_asks(gpu, cpu, mem), template=tid,
                             name=name(qid, jname),
                             elapsed=elapsed, ending=desired == DesiredState.CANCEL))
    return out


def _pending_job(jid, jname, qid, tid, prio, created, gpu, cpu, mem, family, name, queue_names) -> allocation.Job:
    return allocation.Job(id=jid, queue=queue_names.get(qid, str(qid)), asks=_asks(gpu, cpu, mem), template=tid,
                     name=name(qid, jname), priority=prio, queued_at=created.timestamp(), line=family or "")


def silent_families(cluster) -> list[str]:
    """The backend families whose scheduler the probe looked for on `cluster` and did not see acting
    (observe/presence.py): their jobs wait for a scheduler that is not there, so they start at no predictable time
    and take no room from anyone in a replay."""
    return sorted(f for f, p in presence.all_presence(cluster).items() if p.silent)


def _pending_rows(cluster_id: int, silent: list[str]) -> list[tuple]:
    return list(queue_line.pending(cluster_id).annotate(family=queue_line.family_expr())
                .exclude(family__in=silent)
                .annotate(prio=queue_line.priority_expr(), template_id=F("template_version__template_id"))
                .order_by("-prio", "created_at", "id")
                .values_list("id", "name", "queue_id", "template_id", "prio", "created_at", "requested_gpu",
                             "requested_cpu_millicores", "requested_memory_bytes", "family")[:MAX_PENDING])


def _pending(job: GangJob, name, queue_names, version: str) -> list[allocation.Job]:
    silent = silent_families(job.cluster)
    rows = _shared(f"pending-{'-'.join(silent)}", job.cluster_id, version,
                   lambda: _pending_rows(job.cluster_id, silent))
    out = [_pending_job(*row, name, queue_names) for row in rows]
    if not any(j.id == job.id for j in out):  # behind the first MAX_PENDING: replayed with those ahead of it
        out.append(_pending_job(job.id, job.name, job.queue_id, job.template_version.template_id,
                                queue_line.rank_of(job), job.created_at,
                                job.requested_gpu, job.requested_cpu_millicores, job.requested_memory_bytes,
                                queue_line.family_of(job), name, queue_names))
    return out


def recent_arrivals(job: GangJob, queue_names: dict[int, str], now) -> arrivals.ArrivalModel:
    """The submissions of `job`'s cluster in the last `arrivals.WINDOW` seconds before `now` (module docstring) as
    an `arrivals.ArrivalModel`, `job` itself left out; queues by name (`queue_names`: {id: name}), templates by id,
    requests in KAI units. One query, remembered ARRIVAL_SECONDS per cluster."""
    key = f"gangweb:estimate-arrivals:{job.cluster_id}"
    rows = cache.get(key)
    if rows is None:
        rows = _arrival_rows(job.cluster_id, now)
        cache.set(key, rows, ARRIVAL_SECONDS)
    silent = set(silent_families(job.cluster))
    return arrivals.ArrivalModel(
        arrivals.Arrival(ago=(now - created).total_seconds(), queue=queue_names.get(qid, str(qid)), priority=prio,
                         asks=_asks(gpu, cpu, mem), template=tid, line=family or "")
        for jid, qid, tid, prio, created, gpu, cpu, mem, family in rows if jid != job.id and family not in silent)


def _arrival_rows(cluster_id: int, now) -> list[tuple]:
    since = now - timedelta(seconds=arrivals.WINDOW)
    return list(GangJob.objects.filter(cluster_id=cluster_id, created_at__gte=since, created_at__lte=now)
                .annotate(family=queue_line.family_expr())
                .annotate(prio=queue_line.priority_expr(), template_id=F("template_version__template_id"))
                .order_by("-created_at", "-id")
                .values_list("id", "queue_id", "template_id", "prio", "created_at", "requested_gpu",
                             "requested_cpu_millicores", "requested_memory_bytes", "family")[:ARRIVAL_ROWS])


def history(template_ids, queue_ids, queue_names: dict[int, str]) -> model.RunTimes:
    """The finished runs of `template_ids` or `queue_ids` (module docstring) as `model.RunTimes` keyed by template
    id and queue name (`queue_names`: {id: name}), newest first; one query, remembered HISTORY_SECONDS per set of
    ids."""
    template_ids, queue_ids = sorted({t for t in template_ids if t is not None}), sorted(set(queue_ids))
    digest = hashlib.sha256(repr((template_ids, queue_ids)).encode()).hexdigest()[:32]
    key = f"gangweb:estimate-history:{digest}"
    rows = cache.get(key)
    if rows is None:
        rows = _history_rows(template_ids, queue_ids)
        cache.set(key, rows, HISTORY_SECONDS)
    return model.RunTimes((tid, queue_names.get(qid, str(qid)), seconds) for tid, qid, seconds in rows)


def _history_rows(template_ids, queue_ids) -> list[tuple[int, int, float]]:
    recent = (GangJob.objects.filter(phase__in=FINISHED)
              .filter(Q(template_version__template_id__in=template_ids) | Q(queue_id__in=queue_ids))
              .order_by("-phase_changed_at", "-id").values("id")[:HISTORY_SCAN])
    end = PhaseTransition.objects.filter(job_id=OuterRef("pk"), phase=OuterRef("phase"), inferred=False)
    start = PhaseTransition.objects.filter(job_id=OuterRef("pk"), phase=GangPhase.RUNNING, inferred=False,
                                           attempt=OuterRef("end_attempt"))
    rows = (GangJob.objects.filter(id__in=recent)
            .annotate(end_at=Subquery(end.order_by("-attempt").values("at")[:1]),
                      end_attempt=Subquery(end.order_by("-attempt").values("attempt")[:1]))
            .annotate(start_at=Subquery(start.values("at")[:1]))
            .filter(end_at__isnull=False, start_at__isnull=False)
            .order_by("-phase_changed_at", "-id")
            .values_list("template_version__template_id", "queue_id", "start_at", "end_at"))
    return [(tid, qid, (end_at - start_at).total_seconds()) for tid, qid, start_at, end_at in rows]


def _blocking_codes(job: GangJob) -> list[str]:
    """The codes of the blocking facts of `job`'s why_pending (observe.why_pending), [] when none."""
    why = job.why_pending if isinstance(job.why_pending, dict) else {}
    facts = why.get("blocking") if isinstance(why.get("blocking"), list) else []
    return [str(f.get("code") or "") for f in facts if isinstance(f, dict)]


# Why a "now" is not said beside a why-pending that names a blocker: per blocking fact's code, the reason given
# instead (the estimate models free room and queue limits as gangweb counts them; the scheduler's own account wins).
BLOCKER_REASONS = {
    NODES_FRAGMENTED: "fragmented: the free room would hold it in all, but it is split over the nodes so that its "
                      "pods do not fit (see why it is pending); it starts once room frees on a node, which this "
                      "estimate does not model (it places no pod on a node)",
    causes.SCHEDULER_SILENT: "its scheduler has not acted on its pods (see why it is pending): it starts when the "
                             "scheduler does, which this estimate cannot tell",
    QUEUE_OVER_LIMIT: "its queue is at its limit as the scheduler counts it (see why it is pending): it starts "
                      "once the queue's jobs free room",
    QUEUE_OVER_QUOTA: "its queue is over its quota as the scheduler counts it (see why it is pending): it starts "
                      "once the queue's jobs free room",
    causes.POD_CREATE_REFUSED: "the cluster refuses to create its pods (see why it is pending): it starts once "
                               "the cause is removed",
    causes.FOREIGN_GATE: "a scheduling gate gangweb did not add holds its pods (see why it is pending): it starts "
                         "once the gate is removed",
}


def _placed_on_nodes(job: GangJob, est: model.Estimate) -> model.Estimate:
    """`est`, unless it says "now" while the job's why_pending names a blocker (any blocking fact: NodesFragmented,
    SchedulerSilent, QueueOverLimit, QueueOverQuota, ...): the model sums free room and places no pod on a node, so
    "could start now" would contradict the page's why-pending. Then unknown, naming the blocker
    (`BLOCKER_REASONS`, or the fact's code)."""
    codes = [c for c in _blocking_codes(job) if c]
    if est.status != model.NOW or not codes:
        return est
    code = next((c for c in codes if c in BLOCKER_REASONS), codes[0])
    reason = BLOCKER_REASONS.get(code) or (
        f"why it is pending names a blocker ({code}) this estimate does not model: it starts once that clears")
    return replace(est, status=model.UNKNOWN, p50=None, p90=None, reason=reason)


def compute(job: GangJob, user=None, now=None, version: str | None = None) -> model.Estimate | None:
    """The model's `Estimate` for `job`, None when it is not pending (Submitted, Dispatched or Queued, not being
    cancelled). `user`: the reader, whose invisible jobs are named HIDDEN (None: every name shown). `version`: the
    cluster's `state_version` when the caller has it (else read: one query); the placed and pending jobs read for
    it are shared by the cluster's jobs while it holds (`_shared`). A "now" that the job's why_pending
    contradicts (NodesFragmented) is unknown instead (`_placed_on_nodes`)."""
    if job.phase not in queue_line.PENDING or job.desired_state != DesiredState.RUN:
        return None
    now = now or timezone.now()
    if job.phase_reason in ERROR_REASONS:  # its objects were refused or not written: any time would be made up
        said = f": {job.phase_message}" if job.phase_message else ""
        return model.Estimate(status=model.UNKNOWN,
                              reason=f"gangweb could not make its objects in the cluster ({job.phase_reason}{said})")
    seen = presence.presence(job.cluster, queue_line.family_of(job), now)
    if seen.silent:  # nothing will place it: any time would be made up
        return model.Estimate(status=model.UNKNOWN, reason=f"no {seen.scheduler} seen on this cluster")
    name = _namer(user)
    tree = QueueTree.load_rows()
    names = {q.id: q.name for q in tree.by_id.values()}
    version = version or state_version(job)
    running = _running(job.cluster_id, now, name, names, version)
    pending = _pending(job, name, names, version)
    came = recent_arrivals(job, names, now)
    recent = [a for got in came.by_queue.values() for a in got]
    ids = {v: k for k, v in names.items()}
    runs = history({j.template for j in (*running, *pending, *recent)},
                   {ids[j.queue] for j in (*running, *pending, *recent) if j.queue in ids}, names)
    return _placed_on_nodes(job, model.estimate(job.id, capacity_of(job.cluster.capacity), _queues(tree), running,
                                                pending, runs, arrivals=came))


def _at(now, seconds):
    return None if seconds is None else now + timedelta(seconds=seconds)


def _when(now, seconds) -> str:
    at = _at(now, seconds)
    return f"in {words.span(seconds)} ({at:%H:%M} UTC)" if seconds >= 60 else f"within a minute ({at:%H:%M} UTC)"


def state_version(job: GangJob) -> str:
    """A digest that changes when `job`'s cluster's pending or placed jobs change (one enters or leaves a phase, is
    being cancelled, a phase change is written, one is edited: its queue or priority class, which counts its
    `spec_revision` up) or its capacity does: per (phase, desired state) the count, the sum of ids, the sum of
    spec revisions and the latest `phase_changed_at`. One GROUP BY query over the cluster's active jobs."""
    rows = (GangJob.objects.filter(cluster_id=job.cluster_id, phase__in=(*queue_line.PENDING, *RUNNING_PHASES))
            .order_by().values("phase", "desired_state")
            .annotate(n=Count("id"), ids=Sum("id"), revisions=Sum("spec_revision"), changed=Max("phase_changed_at")))
    state = sorted((r["phase"], r["desired_state"], r["n"], r["ids"], r["revisions"], str(r["changed"]))
                   for r in rows)
    return hashlib.sha256(repr((state, job.cluster.capacity)).encode()).hexdigest()[:32]


def _viewer(user) -> str:
    """What the reader may see of other jobs' names (`_namer`): "all", or a digest of their queues."""
    if user is None or access.is_platform_admin(user):
        return "all"
    return hashlib.sha256(repr(sorted(access.queue_roles(user))).encode()).hexdigest()[:16]


def payload(job: GangJob, user=None, now=None) -> dict | None:
    """`estimated_start` (see `_payload` for the shape), reused from Django's cache for up to ESTIMATE_SECONDS
    while the job's cluster's `state_version` is unchanged (module docstring); then `computed_at` says when it was
    computed and `now` is not used. None when the job is not pending (no cache read). Never raises: when the
    estimate cannot be computed it reads "unknown" with the reason (`unknown_payload`), and the rest of the job's
    answer stands (issue 30: no read path answers 500)."""
    if job.phase not in queue_line.PENDING or job.desired_state != DesiredState.RUN:
        return None
    key = None
    try:
        blocking = "-".join(sorted(set(_blocking_codes(job))))  # why-pending's facts change the answer
        silent = "-".join(silent_families(job.cluster))  # so does a scheduler seen or gone
        version = state_version(job)
        key = f"gangweb:estimate:{job.pk}:{_viewer(user)}:{version}:{blocking}:{silent}"
        found = cache.get(key)
        if found is None:
            found = _payload(job, user, now, version)
            cache.set(key, found, ESTIMATE_SECONDS)
        return found
    except DEPENDENCY_ERRORS:
        raise  # a dependency down is the whole answer's 503 with Retry-After (scheduling/unavailable.py)
    except Exception as exc:  # noqa: BLE001 - a read path never answers 500 for a field it cannot compute
        logger.exception("start estimate of job %s could not be computed", job.pk)
        found = unknown_payload(exc, now)
        if key is not None:  # the page polls every 2 s: one traceback per state version, not one per poll
            cache.set(key, found, ESTIMATE_SECONDS)
        return found


def unknown_payload(exc: BaseException, now=None) -> dict:
    """`estimated_start` when computing it failed (a defect in gangweb, logged with its traceback): status
    "unknown" with the reason, every other key present and empty, so the job's other fields still answer."""
    reason = f"the estimate could not be computed ({type(exc).__name__} in gangweb; the error is logged)"
    return {"status": model.UNKNOWN, "p50": None, "p90": None, "p50_seconds": None, "p90_seconds": None,
            "p50_in_minutes": None, "p90_in_minutes": None, "text": f"unknown: {reason}", "evidence": "",
            "reason": reason, "ahead_in_queue": None, "needs": None, "freed_by": None, "samples": 0,
            "computed_at": now or timezone.now(), "method": METHOD}


def _payload(job: GangJob, user=None, now=None, version: str | None = None) -> dict | None:
    """`estimated_start` of the job API and page, None when the job is not pending::

        {"status": "estimated" | "now" | "unknown" | "never",
         "p50": datetime | None, "p90": ..., "p50_seconds": float | None, "p90_seconds": ...,
         "p50_in_minutes": int | None, "p90_in_minutes": ...,     # whole minutes from now, rounded up
         "text": "p50 in 42 min (07:42 UTC); p90 in 1 h 20 min (08:20 UTC)",
         "evidence": "jobs like train-7 ... ; 2 jobs ahead in team-a; needs 8 GPUs, 4 free now, 8 once train-7 ends",
         "reason": "" | why unknown or never, "ahead_in_queue": int,
         "needs": {"resource": "gpu", "amount": 8, "free_now": 4},        # KAI units (GPUs, millicores, MB)
         "freed_by": {"name", "running": bool, "history": {"level", "runs", "p50_seconds"}} | None,
         "samples": int, "computed_at": datetime, "method": str}
    """
    now = now or timezone.now()
    est = compute(job, user, now, version)
    if est is None:
        return None
    queue = job.queue.name
    text = {
        model.ESTIMATED: lambda: f"p50 {_when(now, est.p50)}; p90 {_when(now, est.p90)}",
        model.NOW: lambda: "could start now: the room it needs is free (if it still waits, see why it is pending)",
        model.UNKNOWN: lambda: f"unknown: {est.reason}",
        model.NEVER: lambda: f"never as things stand: {est.reason}",
    }[est.status]()
    freed = None
    if est.freed_by is not None:
        # A job being cancelled frees its room when its pods go: no history is read for it (history None).
        history_of = None if est.freed_runs is None else {
            "level": model.LEVELS[est.freed_runs.level], "runs": len(est.freed_runs.seconds),
            "p50_seconds": est.freed_runs.p50}
        freed = {"name": est.freed_by.name, "running": est.freed_was_running, "history": history_of}
    timed = est.status in (model.ESTIMATED, model.NOW)
    return {
        "status": est.status, "p50": _at(now, est.p50), "p90": _at(now, est.p90),
        "p50_seconds": est.p50, "p90_seconds": est.p90,
        "p50_in_minutes": words.minutes(est.p50) if est.p50 is not None else None,
        "p90_in_minutes": words.minutes(est.p90) if est.p90 is not None else None,
        "text": text, "evidence": model.evidence(est, queue) if timed else "", "reason": est.reason,
        "ahead_in_queue": est.ahead,
        "needs": {"resource": est.resource, "amount": est.needs, "free_now": est.free_now},
        "freed_by": freed, "samples": est.samples, "computed_at": now, "method": METHOD,
    }
