"""Releasing a partial gang gangweb did not cause.

Someone lowers a gang object's minimum by hand (a PodGroup's `minCount`, a KAI PodGroup's `minMember`); before the
pass puts it back, the scheduler binds some but not all of the gang's pods, which then hold their nodes and wait
for ever for the rest. The job reads `PartialGang` (observe/phases.py); once its bound pods have been bound for
`settings.GANGWEB_PARTIAL_GANG_GRACE_SECONDS` (None: never), the pass releases them: each bound pod is evicted
(the Eviction API marks it `DisruptionTarget`, so its Job replaces it without counting a failure:
reconcile/desired.py `IGNORE_DISRUPTIONS`), gangweb's mark of the edited minimum is taken off the gang objects,
and the job starts a new attempt from Dispatched, reason `PartialGangReleased`, naming the pods (a timeline
entry; the pass's ReconcileAttempt lists the evictions). The gang then waits whole again.
"""
from __future__ import annotations

import math

from django.conf import settings
from django.utils import timezone
from kubernetes.client.rest import ApiException

from ...backends.base import object_source
from ...choices import GangPhase
from ...constants import ANNOTATION_MIN_EDITED
from ...kube import objects
from ...observe import phases
from ...observe.pods import pod_facts
from .. import status
from .common import Requeue, is_terminating, ref_of

PARTIAL_GANG_RELEASED = "PartialGangReleased"


def release_partial(rec, wanted: list[dict]) -> None:
    """When the pass's own observation says the job is a partial gang (`phase_reason` PartialGang): come back when
    its grace is over (Requeue, reason PartialGang), or, once it is, release it (module docstring) and requeue.
    `rec` is the JobReconciler, `wanted` its desired gang objects (current generation). Nothing when the job is
    no partial gang or releasing is off."""
    job = rec.job
    grace = getattr(settings, "GANGWEB_PARTIAL_GANG_GRACE_SECONDS", None)
    if job.phase_reason != phases.REASON_PARTIAL_GANG or grace is None or grace < 0:
        return
    bound = [(p, f) for p, f in ((p, pod_facts(p)) for p in rec.observed.pods) if f.bound and not f.terminating]
    if not bound:
        return
    since = max((f.scheduled_at for _, f in bound if f.scheduled_at is not None), default=None)
    left = grace - (timezone.now() - since).total_seconds() if since is not None else 0
    if left > 0:
        raise Requeue(max(1, math.ceil(left)), phases.REASON_PARTIAL_GANG, job.phase_message)
    evicted = []
    for pod, facts in bound:
        meta = pod["metadata"]
        try:
            if objects.evict(rec.api, rec.ns, meta["name"], uid=meta.get("uid")):
                evicted.append(facts.name)
        except ApiException as exc:
            if exc.status != 409:  # 409: replaced meanwhile by a pod of the same name; not the one seen bound
                raise
    rec.actions += [f"evict Pod {rec.ns}/{name} (partial gang)" for name in evicted]
    unmark(rec, wanted)
    message = (f"released a partial gang: {job.phase_message.split(';')[0]}; evicted its bound pods "
               f"({', '.join(evicted) or 'none left'}) after {int(grace)} s so the gang waits whole again")
    source = next((object_source(g) for g in (rec.observed.gang_of(ref_of(rec.backend, w)).get(
        w["metadata"]["name"]) for w in wanted) if g is not None), "gangweb")
    # What the pass observed before the evictions is history: the new attempt starts from here.
    rec.update.sighting, rec.update.derived = None, None
    rec.update.restart_at(job, status.Decision(GangPhase.DISPATCHED, timezone.now(), source, PARTIAL_GANG_RELEASED,
                                               message))
    raise Requeue(5, PARTIAL_GANG_RELEASED, message)


def unmark(rec, wanted: list[dict]) -> None:
    """Take gangweb's edited-minimum mark (ANNOTATION_MIN_EDITED) off the job's current gang objects (merge patch;
    a 404/409 means the object changed meanwhile: the next pass looks again)."""
    for want in wanted:
        ref = ref_of(rec.backend, want)
        have = rec.observed.gang_of(ref).get(want["metadata"]["name"])
        if have is None or is_terminating(have):
            continue
        if ANNOTATION_MIN_EDITED not in ((have.get("metadata") or {}).get("annotations") or {}):
            continue
        try:
            objects.merge_patch(rec.api, ref, rec.ns, want["metadata"]["name"],
                                {"metadata": {"annotations": {ANNOTATION_MIN_EDITED: None}}},
                                have["metadata"].get("resourceVersion"))
            rec.actions.append(f"update {ref.kind} {rec.ns}/{want['metadata']['name']}: remove "
                               f"{ANNOTATION_MIN_EDITED}")
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
