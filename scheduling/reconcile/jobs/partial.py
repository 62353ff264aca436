"""Releasing a partial gang gangweb did not cause.

Someone lowers a gang object's minimum by hand (a PodGroup's `minCount`, a KAI PodGroup's `minMember`); before the
pass puts it back, the scheduler binds some but not all of the gang's pods, which then hold their nodes and wait
for ever for the rest. The job reads `PartialGang` (observe/phases.py); once its bound pods have been bound for
`settings.GANGWEB_PARTIAL_GANG_GRACE_SECONDS` (None: never), the pass releases them by replacing the gang
(`JobReconciler.replace`: its Indexed Jobs are deleted with their pods, bound ones included, and the gang objects
are made again under a new generation). Deleting the Jobs rather than the bound pods: a pod deleted under its
Job counts as a failure against backoffLimit 0, and a gang object once admitted may let replacements through one
by one (v1beta1 `PodGroupInitiallyScheduled` never reverts), while a new PodGroup waits for the whole gang. The
job starts a new attempt from Dispatched, reason `PartialGangReleased` (a timeline entry naming the bound pods;
the pass's ReconcileAttempt lists what it deleted and created). Once the gang is whole, the mark of the edited
minimum comes off its gang objects (`unmark_when_whole`), so a member lost later reads as a re-queue.
"""
from __future__ import annotations

import math

from django.conf import settings
from django.utils import timezone
from kubernetes.client.rest import ApiException

from ...choices import GangPhase
from ...constants import ANNOTATION_MIN_EDITED
from ...kube import objects
from ...observe import phase_entries
from ...observe.pods import pod_facts
from .. import derive, status
from .common import Requeue

PARTIAL_GANG_RELEASED = "PartialGangReleased"


def partial_grace_left(rec) -> float | None:
    """Seconds until the partial gang of the pass's job may be released (<= 0: now), from the latest bind of its
    bound pods (PodScheduled time, cluster clock); None when the job is no partial gang (`phase_reason` as the
    pass's own observation derived it), has no bound pod, or releasing is off."""
    grace = getattr(settings, "GANGWEB_PARTIAL_GANG_GRACE_SECONDS", None)
    if rec.job.phase_reason != phase_entries.REASON_PARTIAL_GANG or grace is None or grace < 0:
        return None
    facts = [f for f in (pod_facts(p) for p in rec.observed.pods) if f.bound and not f.terminating]
    if not facts:
        return None
    since = max((f.scheduled_at for f in facts if f.scheduled_at is not None), default=None)
    return grace - (timezone.now() - since).total_seconds() if since is not None else 0.0


def release_partial(rec) -> bool:
    """After the pass observed its job (`JobReconciler.observe_now`): when the job is a partial gang, come back
    when its grace is over (Requeue, reason PartialGang), or, once it is, replace the gang and note the new
    attempt (module docstring). Returns True when it replaced the gang (the caller creates the new generation).
    `rec` is the JobReconciler."""
    left = partial_grace_left(rec)
    if left is None:
        unmark_when_whole(rec)
        return False
    job = rec.job
    if left > 0:
        raise Requeue(max(1, math.ceil(left)), phase_entries.REASON_PARTIAL_GANG, job.phase_message)
    bound = sorted(f.name for f in (pod_facts(p) for p in rec.observed.pods) if f.bound and not f.terminating)
    said = job.phase_message.split(";")[0]
    rec.replace([f"partial gang: {said}"], cause="partial")
    message = (f"released a partial gang: {said}; deleted its Jobs with the bound pods ({', '.join(bound)}) and "
               "replaced the gang, so it waits whole again")
    # What the pass observed before is history: the new attempt starts here (its objects are observed next).
    rec.update.sighting, rec.update.derived = None, None
    rec.update.restart_at(job, status.Decision(GangPhase.DISPATCHED, timezone.now(), "gangweb",
                                               PARTIAL_GANG_RELEASED, message))
    return True


def gang_is_whole(job, pods: list[dict] | None = None) -> bool:
    """True when at least the job's gang minimum (`derive.job_shape`) of pods is bound: counted from `pods` (the
    job's pods as the pass read them) when given, else from its last recorded observation (`observed.pod_counts`).
    Pods bound already cannot form a partial gang under a minimum put back now."""
    if pods is not None:
        bound = sum(1 for f in (pod_facts(p) for p in pods) if f.bound and not f.terminating)
    else:
        counts = (job.observed or {}).get("pod_counts") or {}
        bound = counts.get("bound", 0) if isinstance(counts, dict) else 0
    return isinstance(bound, int) and bound >= derive.job_shape(job).min_member


def unmark_when_whole(rec) -> None:
    """Take gangweb's edited-minimum mark (ANNOTATION_MIN_EDITED) off the job's current gang objects once the gang
    is whole (minMember pods bound, as the pass's own observation counted them): a later member lost to a
    disruption is a re-queue, not a partial gang. Merge patch with the read resourceVersion; a 404/409 (changed
    meanwhile) leaves it to the next pass."""
    job = rec.job
    if not gang_is_whole(job):
        return
    name = derive.current_gang_name(job)
    for ref in rec.backend.gang_kinds:
        have = rec.observed.gang_of(ref).get(name)
        if have is None or ANNOTATION_MIN_EDITED not in ((have.get("metadata") or {}).get("annotations") or {}):
            continue
        try:
            rec.observed.gang_of(ref)[name] = objects.merge_patch(
                rec.api, ref, rec.ns, name, {"metadata": {"annotations": {ANNOTATION_MIN_EDITED: None}}},
                have["metadata"].get("resourceVersion"))
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
            continue
        rec.actions.append(f"update {ref.kind} {rec.ns}/{name}: remove {ANNOTATION_MIN_EDITED} (the gang is whole)")
