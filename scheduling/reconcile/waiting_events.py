"""What the cluster keeps saying about a waiting job: the Warning Events of its gang objects and of one waiting pod,
folded with their count and first/last seen, for the why-pending answer (`why_pending["said"]`).

A scheduler that cannot place a gang says so again and again: kube-scheduler writes `FailedScheduling` on each pod
(events.k8s.io/v1, one Event whose `series.count` grows), Volcano and KAI write `Unschedulable` on the PodGroup, a
recorder that cannot merge writes a new Event each time. The pods' conditions carry only the latest words; the
Events carry how often and since when (issue 33: 6,667 identical Events were 2,000 rows with no count).

Cost: only for a pending job with a live pod that is not bound and carries a `PodScheduled=False` condition (a
scheduler has spoken: a silent one writes no Events either), one field-selected LIST (`involvedObject.uid`,
`type=Warning`) per object read: the job's live gang objects (at most MAX_GANG_OBJECTS) and its first such pod by
name (the pods of one gang share one scheduler verdict; reading each would cost a call per pod). Each LIST is paged
(PAGE) and stops after MAX_PAGES pages: beyond that many Events per object the count is a floor. Read by reconcile
passes only (a task's pass or the resync's, every GANGWEB_RESYNC_SECONDS), not by the watcher, whose observations of
a busy cluster must stay cheap; remembered GANGWEB_WAITING_EVENTS_SECONDS per job (0: never read). Read before the
job row is locked (a cluster call never holds it). Events are hostile input (observe.events cleans and caps them); a
failure to read them is logged and means "not read" (None): the stored answer keeps what an earlier read found, as
does an observation that does not read them (the watch).
"""
from __future__ import annotations

import json
import logging
import re

from django.conf import settings
from kubernetes import client

from ..observe import events as event_rows
from ..observe import objects as o
from ..observe.why_pending import PENDING_PHASES
from .event_reads import cached as event_rows_cached

log = logging.getLogger(__name__)
PAGE = 500
MAX_PAGES = 10  # 5,000 Event objects per object at most
MAX_GANG_OBJECTS = 2
TIMEOUT = (5, 10)
# What a UID may look like before it goes into a field selector (a hostile one with "," or "=" would add terms).
UID = re.compile(r"[A-Za-z0-9-]{1,64}")


def _uid(obj: dict) -> str:
    """The object's UID when it is fit for a field selector (`UID`), else ""."""
    uid = o.meta(obj).get("uid")
    return uid if isinstance(uid, str) and UID.fullmatch(uid) else ""


def _spoken_to(pod: dict) -> bool:
    """True when a scheduler wrote the pod's `PodScheduled=False` condition."""
    return (o.condition(pod, "PodScheduled") or {}).get("status") == "False"


def wanted(job, gang: list[dict], pods: list[dict]) -> list[str]:
    """UIDs of the objects whose Events are worth reading: none unless the job is pending and has a live pod not
    bound to a node whose `PodScheduled=False` condition a scheduler wrote; then its live gang objects (at most
    MAX_GANG_OBJECTS) and its first such pod by name."""
    if job.phase not in PENDING_PHASES:
        return []
    waiting = sorted((p for p in pods if isinstance(p, dict) and not o.is_terminating(p)
                      and not ((p.get("spec") or {}).get("nodeName")) and _uid(p) and _spoken_to(p)),
                     key=lambda p: str(o.meta(p).get("name") or ""))
    if not waiting:
        return []
    objects = [g for g in gang if isinstance(g, dict) and not o.is_terminating(g) and _uid(g)]
    return [_uid(g) for g in objects[:MAX_GANG_OBJECTS]] + [_uid(waiting[0])]


def _rows_of(core: client.CoreV1Api, namespace: str, uid: str) -> list[dict]:
    """The Warning Events of the object `uid`, folded (observe.events.fold), page by page: memory follows the
    distinct reasons, not the Events."""
    rows, token = [], None
    for _ in range(MAX_PAGES):
        body = json.loads(core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.uid={uid},type=Warning", limit=PAGE, _continue=token,
            _preload_content=False, _request_timeout=TIMEOUT).data) or {}
        items = body.get("items") if isinstance(body.get("items"), list) else []
        rows = event_rows.fold(rows + event_rows.select(items, {uid}))
        token = (body.get("metadata") or {}).get("continue") if isinstance(body.get("metadata"), dict) else None
        if not token:
            break
    return rows


def read(job, gang: list[dict], pods: list[dict], api: client.ApiClient | None = None) -> list[dict] | None:
    """`observe.events.said` of the Warning Events about `job`'s objects (`wanted`: its gang objects and first
    waiting pod, dicts as the API server serializes them): newest last-seen first, each with `count`, `first_at`
    and `last_at`; [] when nothing is worth reading or nothing was said; None when the cluster could not be asked
    (logged) or reading is off (GANGWEB_WAITING_EVENTS_SECONDS 0). `api`: the cluster's client (default:
    `kube.client.api_client(job.cluster)`)."""
    remember = settings.GANGWEB_WAITING_EVENTS_SECONDS
    if remember <= 0:
        return None
    uids = wanted(job, gang, pods)
    if not uids:
        return []
    return event_rows_cached(
        job, f"gangweb:waiting-events:{job.uid}:{','.join(uids)}", remember,
        lambda core: event_rows.said([row for uid in uids for row in _rows_of(core, job.namespace, uid)]),
        "Warning events", api)
