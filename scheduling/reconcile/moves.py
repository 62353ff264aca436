"""Moving a waiting job to another cluster of its queue (issue 38): decided here, across clusters; carried out by
the job's own pass on the cluster it leaves (reconcile/jobs/moving.py), or here for a cluster that is lost.

Which jobs move (`decide`, from the beat's resync fan-out every GANGWEB_RESYNC_SECONDS; level-triggered, idempotent):

- only jobs gangweb placed (`GangJob.placement` set: their submit named no cluster, or several): a job whose submit
  named its cluster stays there;
- waiting: Submitted, Dispatched or Queued, never Scheduled or Running in any attempt (no such timeline entry), not
  being cancelled, no move under way, no task holding it now (`claims.held`);
- **on a live cluster**: its queue's `move_after_seconds` is set and the job has waited longer than that on this
  cluster (since its submit, or its last move), and another cluster of its queue (among the submit's list, if it
  gave one) fits it **now** (`placement.rule`, the same numbers as a submit): the move is claimed with one
  conditional UPDATE (`move_to`, `move_reason`; the conditions are re-checked in it, on the database's clock, so
  a job that started or was taken meanwhile is not claimed) and a pass of the job is queued on its cluster. That
  pass reads the job's objects afresh, leaves the move if anything of it started (a pod bound, the gang admitted),
  else deletes every object of it (UID preconditions, as a cancel) and, once its own LIST finds nothing left,
  switches the job (`switch`);
- **on a lost cluster** (unreachable for GANGWEB_CLUSTER_LOST_SECONDS, default 600, by its probe's
  `unreachable_since`): its waiting jobs are placed on another known cluster by the full rule (fits now, else the
  earliest start) at once. Nothing can be deleted there, so what gangweb recorded of the job there (its objects'
  keys and UIDs) is kept as `StrandedObjects`; when the cluster answers again, its resync deletes them first
  (reconcile/stranded.py). Its Scheduled and Running jobs are not moved (they may be running): their reason reads
  `ClusterLost` ("phase unknown: ...") until the cluster answers again.

`switch` is one transaction under the job's row lock: the row is checked again (still waiting on the cluster it
leaves, never started, the same move), the job's cluster changes, its gang generation goes up and what it recorded
of the old cluster (owner UIDs, backend, observed objects, why-pending) is cleared, and a new timeline attempt
starts with a Submitted entry from gangweb, reason `Moved`: "moved from c1 to c2 after 300 s waiting: c2 has 8 GPUs
free; ...". A pass is queued on the new cluster.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from ..choices import ACTIVE_PHASES, PENDING_PHASES, RUNNING_PHASES, DesiredState, GangPhase
from ..db import clock as dbclock
from ..models import Cluster, GangJob, PhaseTransition, QueuePolicy, StrandedObjects
from ..placement import numbers as placement_numbers
from ..placement import rule
from ..work import dispatch, routing
from . import status
from .jobs import claims
from .jobs.common import CLUSTER_LOST

log = logging.getLogger(__name__)

MOVED = "Moved"  # reason of the Submitted entry that starts a moved job's new attempt
MAX_MOVES = 500  # jobs looked at per run (the oldest first); the next run goes on


def lost_seconds() -> float:
    """GANGWEB_CLUSTER_LOST_SECONDS (default 600): how long a cluster is unreachable before it counts as lost."""
    return float(getattr(settings, "GANGWEB_CLUSTER_LOST_SECONDS", 600))


def started_entries():
    """An EXISTS over the job's timeline for a Scheduled or Running entry (any attempt): it started once."""
    return Exists(PhaseTransition.objects.filter(job_id=OuterRef("pk"), phase__in=list(RUNNING_PHASES)))


def arrived_at(job: GangJob) -> datetime:
    """When the job came to its cluster: its last move's time, else its submit."""
    moves = (job.placement or {}).get("moves") or []
    if moves and isinstance(moves[-1], dict):
        try:
            return datetime.fromisoformat(moves[-1]["at"])
        except (KeyError, TypeError, ValueError):
            pass
    return job.created_at


def _links() -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for qid, cid in QueuePolicy.clusters.through.objects.values_list("queuepolicy_id", "cluster_id"):
        out.setdefault(qid, set()).add(cid)
    return out


def _candidates(job: GangJob, clusters: list[Cluster], links: dict, taken: set, numbers) -> list[rule.Candidate]:
    """The other clusters the job may go to: its queue takes jobs there, the submit's list (if any) names it, its
    last probe did not find its backend missing, and no active job there has its namespace and name."""
    among = (job.placement or {}).get("among")
    family = (job.resolved_spec or {}).get("backend", "")
    out = []
    for c in clusters:
        if c.id == job.cluster_id or (job.queue_id in links and c.id not in links[job.queue_id]):
            continue
        if among and c.name not in among:
            continue
        if placement_numbers.serves(c, family) is False or (c.id, job.namespace, job.name) in taken:
            continue
        out.append(rule.Candidate(numbers.wheres[c.id], numbers.there(job.queue_id, c.id)))
    return out


def decide(now: datetime | None = None) -> dict:
    """One round of moves (module docstring). Returns {"claimed", "moved_from_lost", "lost_clusters", "reported"}.
    Costs, whatever the number of jobs: the clusters, the queues with a move setting, the candidate jobs (at most
    MAX_MOVES), the queue links, one GROUP BY of the jobs (`placement.numbers`) and the name clashes; then one
    UPDATE per claimed move (a transaction per lost-cluster move)."""
    now = now or timezone.now()
    clusters = list(Cluster.objects.only(*placement_numbers.FIELDS, "served_apis").order_by("name"))
    lost = {c.id for c in clusters if c.unreachable_since and c.unreachable_since <= now - timedelta(
        seconds=lost_seconds())}
    after = dict(QueuePolicy.objects.filter(move_after_seconds__isnull=False).values_list("id", "move_after_seconds"))
    stats = {"claimed": 0, "moved_from_lost": 0, "lost_clusters": len(lost), "reported": report_lost(lost, now)}
    if not after and not lost:
        return stats
    due = Q(pk__in=[])
    for queue_id, seconds in sorted(after.items()):  # each queue by its own setting, a moved job from its move
        cut = now - timedelta(seconds=seconds)
        due |= Q(queue_id=queue_id, created_at__lte=cut) & ~Exists(PhaseTransition.objects.filter(
            job_id=OuterRef("pk"), reason=MOVED, at__gt=cut))
    # A lost cluster's job is taken up even with a move claimed: that move's pass cannot delete anything there.
    waited = Q(cluster_id__in=lost) | (due & Q(move_to__isnull=True))
    jobs = list(GangJob.objects.filter(waited, phase__in=list(PENDING_PHASES), desired_state=DesiredState.RUN,
                                       placement__isnull=False, cleaned_up_at__isnull=True)
                .exclude(started_entries()).exclude(claims.held()).select_related("cluster")
                .defer("observed", "why_pending").order_by("created_at", "id")[:MAX_MOVES])
    if not jobs:
        return stats
    numbers = placement_numbers.Numbers(clusters, now)
    links = _links()
    taken = set(GangJob.objects.filter(name__in={j.name for j in jobs}, phase__in=list(ACTIVE_PHASES)).values_list(
        "cluster_id", "namespace", "name"))
    for job in jobs:
        from_lost = job.cluster_id in lost
        seconds = (now - arrived_at(job)).total_seconds()
        if not from_lost and seconds < after.get(job.queue_id, float("inf")):
            continue
        demand, pod = placement_numbers.demand_of(job), placement_numbers.pod_asks(job.resolved_spec)
        if job.move_to_id in numbers.wheres:  # its claimed move counted it there (placement.numbers): not twice
            numbers.wheres[job.move_to_id].waiting -= demand
            there = numbers.there(job.queue_id, job.move_to_id)
            there.asks, there.waiting_jobs = there.asks - demand, there.waiting_jobs - 1
        candidates = _candidates(job, clusters, links, taken, numbers)
        if not from_lost:
            candidates = [c for c in candidates if not c.where.unknown and c.where.fits(demand)
                          and not c.where.pod_too_big(pod)]
        try:
            decision = rule.choose(demand, candidates, pod)
        except rule.Unplaceable:
            continue  # nowhere to go now: the next round looks again
        target = next(c for c in candidates if c.where.id == decision.cluster_id)
        why = f"{decision.cluster} has {rule.room_words(target.where, demand)}"
        if from_lost:
            text = (f"moved from {job.cluster.name} to {decision.cluster}: {job.cluster.name} has been unreachable "
                    f"for {int((now - job.cluster.unreachable_since).total_seconds())} s ({why})")
            done = switch(job, numbers.clusters[decision.cluster_id], text, stranded=True)
            stats["moved_from_lost"] += done
        else:
            here = rule.room_words(numbers.wheres[job.cluster_id], demand)  # its own ask counted there
            text = (f"moved from {job.cluster.name} to {decision.cluster} after {int(seconds)} s waiting: {why}; "
                    f"{job.cluster.name} has {here}")
            done = claim(job, decision.cluster_id, text)
            stats["claimed"] += done
        if done:
            rule.take(target, demand)
            taken.add((decision.cluster_id, job.namespace, job.name))
    return stats


def claim(job: GangJob, target_id: int, text: str) -> bool:
    """Claim the move of `job` to cluster `target_id` (one conditional UPDATE: still waiting on its cluster, never
    started, no move under way, no task holding it), and queue a pass of it on its cluster, which carries it out.
    Returns True when claimed."""
    done = GangJob.objects.filter(pk=job.pk, cluster_id=job.cluster_id, phase__in=list(PENDING_PHASES),
                                  desired_state=DesiredState.RUN, move_to__isnull=True).exclude(
        started_entries()).exclude(claims.held()).update(move_to_id=target_id, move_reason=text,
                                                         task_queued_at=dbclock.now())
    if done:
        log.info("job %s: move to cluster %s claimed (%s)", job.pk, target_id, text)
        dispatch.reconcile_jobs_on_commit([job.pk])
    return bool(done)


def drop(job: GangJob, why: str) -> None:
    """Give up the move under way of `job` (it started meanwhile, or its name is taken there): it stays."""
    GangJob.objects.filter(pk=job.pk, move_to__isnull=False).update(move_to=None, move_reason="")
    log.info("job %s: not moved: %s", job.pk, why)
    job.move_to_id, job.move_reason = None, ""


def switch(job: GangJob, target: Cluster, text: str, *, stranded: bool = False) -> bool:
    """Move `job` to `target` (module docstring) if its row, locked, still agrees: on the cluster `job` has in
    memory, waiting, never started, not being cancelled, and (unless `stranded`) with this move claimed; with
    `stranded`, its cluster still lost now (`still_lost`). With
    `stranded` (a lost cluster) what it recorded there is kept as StrandedObjects first. Returns False, changing
    nothing, when the row disagrees or the target has an active job of the same namespace and name."""
    try:
        with transaction.atomic():
            with status.locked_row(job) as row:
                if (row.cluster_id != job.cluster_id or row.phase not in PENDING_PHASES or row.is_terminal
                        or row.desired_state != DesiredState.RUN
                        or (not stranded and row.move_to_id != target.pk)
                        or PhaseTransition.objects.filter(job_id=row.pk, phase__in=list(RUNNING_PHASES)).exists()
                        or (stranded and not still_lost(row.cluster_id))):
                    return False
                if stranded and row.backend_plugin:
                    StrandedObjects.objects.create(cluster_id=row.cluster_id, job=row, namespace=row.namespace,
                                                   owner_uids=row.owner_uids or {}, backend_plugin=row.backend_plugin)
                _switch_row(row, target, text)
    except IntegrityError:  # an active job of that name in that namespace there (uniq_active_job_name)
        drop(job, f"an active job named {job.name} is in namespace {job.namespace} of {target.name}")
        return False
    routing.remember({job.pk: target.pk})
    job.cluster_id, job.move_to_id = target.pk, None
    return True


def still_lost(cluster_id: int) -> bool:
    """True when the cluster's probe still finds it unreachable for GANGWEB_CLUSTER_LOST_SECONDS (read now: a round
    of moves read its clusters at its start, and a cluster that answered again meanwhile must not lose its jobs to
    another while their objects there may start)."""
    return Cluster.objects.filter(pk=cluster_id, unreachable_since__lte=timezone.now() - timedelta(
        seconds=lost_seconds())).exists()


def _switch_row(row: GangJob, target: Cluster, text: str) -> None:
    """Under the row lock: the job's row points at `target`, starts a new attempt with a Moved entry, and a pass is
    queued there once the transaction commits."""
    now = timezone.now()
    attempt = 1 + max(PhaseTransition.objects.filter(job_id=row.pk).values_list("attempt", flat=True), default=0)
    placement = dict(row.placement or {})
    placement["moves"] = [*(placement.get("moves") or []),
                          {"from": row.cluster.name, "to": target.name, "at": now.isoformat(), "text": text}]
    placement.update({"cluster": target.name, "text": text})
    GangJob.objects.filter(pk=row.pk).update(
        cluster=target, move_to=None, move_reason="", owner_uids={}, backend_plugin="",
        gang_generation=row.gang_generation + 1, phase=GangPhase.SUBMITTED, phase_reason=MOVED, phase_message=text,
        phase_changed_at=now, why_pending=None, observed={}, repairs={}, placement=placement,
        task_queued_at=dbclock.now(), updated_at=dbclock.now())
    PhaseTransition.objects.create(job_id=row.pk, phase=GangPhase.SUBMITTED, at=now, attempt=attempt,
                                   source="gangweb", reason=MOVED, message=text)
    dispatch.reconcile_jobs_on_commit([row.pk])
    log.info("job %s: %s", row.pk, text)


def report_lost(lost: set[int], now: datetime) -> int:
    """Say on the Scheduled and Running jobs of lost clusters that their phase is unknown, and why (reason
    ClusterLost); they are never moved (they may be running there). Returns how many rows changed."""
    changed = 0
    for cluster in Cluster.objects.filter(pk__in=lost).only("id", "name", "unreachable_since"):
        seconds = int((now - cluster.unreachable_since).total_seconds()) if cluster.unreachable_since else 0
        changed += GangJob.objects.filter(cluster=cluster, phase__in=list(RUNNING_PHASES)).exclude(
            phase_reason=CLUSTER_LOST).update(
            phase_reason=CLUSTER_LOST, phase_message=f"phase unknown: cluster {cluster.name} has been unreachable "
                                                     f"for {seconds} s, so gangweb cannot see this job's pods; it is "
                                                     "not started elsewhere (it may be running there)")
    return changed
