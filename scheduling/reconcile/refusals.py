"""The FailedCreate events of a waiting job's owner Jobs: why the API server refuses to create its pods.

The Job controller records a Warning event with reason `FailedCreate` on the batch/v1 Job for each refused pod
creation (`pkg/controller/job/job_controller.go`), quoting the API server (a missing PriorityClass or RuntimeClass,
ResourceQuota, LimitRange, an admission webhook). Nothing else says so: the Job's status stays silent. gangweb reads
those events only for a pending job with live owner Jobs older than GRACE_SECONDS and fewer live pods than the job
has: one LIST per owner Job
(`involvedObject.uid` and `reason` field selectors, at most MAX_EVENTS each), remembered REMEMBER_SECONDS per job so
the watcher's observations of a burst ask once. Read before the job row is locked (a cluster call never holds it).

Events are hostile input: rows keep the server's message as text (observe.causes.quote cuts and cleans it); a
failure to read them is logged and means "nothing known" (None), never a failed observation.
"""
from __future__ import annotations

import json
import logging
from datetime import datetime

from django.utils import timezone
from kubernetes import client

from ..observe import events as event_rows
from ..observe import objects as o
from ..observe.why_pending import PENDING_PHASES
from .event_reads import cached as event_rows_cached

log = logging.getLogger(__name__)
FAILED_CREATE = "FailedCreate"
MAX_OWNERS = 4
MAX_EVENTS = 20
REMEMBER_SECONDS = 10
GRACE_SECONDS = 3
TIMEOUT = (5, 10)


def wanted(job, owners: list[dict], pods: list[dict], now: datetime) -> list[dict]:
    """The owner Jobs whose events are worth reading: the job is pending with fewer live pods than it has, and
    these owners are live and older than GRACE_SECONDS (a Job's pods normally exist within a second: a younger
    Job costs no call). At most MAX_OWNERS; [] otherwise."""
    total = sum(int(ps.get("replicas") or 0) for ps in (job.resolved_spec or {}).get("podSets") or []
                if isinstance(ps, dict))
    if job.phase not in PENDING_PHASES or sum(1 for p in pods if not o.is_terminating(p)) >= total:
        return []
    return [w for w in owners if not o.is_terminating(w) and o.meta(w).get("uid")
            and (now - (o.created_at(w) or now)).total_seconds() >= GRACE_SECONDS][:MAX_OWNERS]


def read(job, owners: list[dict], pods: list[dict], api: client.ApiClient | None = None,
         now: datetime | None = None) -> list[dict] | None:
    """FailedCreate event rows (observe.events.row) of `job`'s live owner Jobs (dicts; `pods`: the job's Pod
    dicts), newest first; [] when none, or when the job is not waiting for pods (`wanted`); None when the cluster
    could not be asked (logged). `api`: the cluster's client (default: `kube.client.api_client(job.cluster)`)."""
    live = wanted(job, owners, pods, now or timezone.now())
    if not live:
        return []
    uids = sorted(o.meta(w)["uid"] for w in live)

    def read_rows(core: client.CoreV1Api) -> list[dict]:
        rows = []
        for uid in uids:
            body = core.list_namespaced_event(
                job.namespace, field_selector=f"involvedObject.uid={uid},reason={FAILED_CREATE}", limit=MAX_EVENTS,
                _preload_content=False, _request_timeout=TIMEOUT).data
            items = (json.loads(body) or {}).get("items") or []
            rows += [event_rows.row(e) for e in items[:MAX_EVENTS] if isinstance(e, dict)]
        return sorted(rows, key=lambda r: (r["last_at"] or "", r["first_at"] or ""), reverse=True)

    return event_rows_cached(job, f"gangweb:failed-create:{job.uid}:{','.join(uids)}", REMEMBER_SECONDS, read_rows,
                             "FailedCreate events", api)
