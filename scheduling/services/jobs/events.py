"""The Kubernetes Events of a job's objects (gang objects, Jobs, pods), fetched live from its cluster.

Why live and not recorded: Events are the cluster's own short-lived log (kube-apiserver keeps them for
`--event-ttl`, one hour by default) and a busy gang emits one per pod per scheduling cycle. Copying them into
gangweb's database would multiply writes for information that is only interesting while it is fresh; what must
outlive them is already kept: every phase change is a timeline entry with its reason and message, and the
why-pending object keeps the scheduler's latest explanation. So the API reads them when asked.

Cost per request: one LIST of the job's pods by its job-UID label, then the namespace's Events (paged) filtered
to the UIDs of the job's objects. Field selectors cannot OR several UIDs, and the API server filters Events by
field in memory anyway, so one paged LIST costs the server no more than one call per object would.
"""
from __future__ import annotations

import json

from kubernetes import client

from ...constants import LABEL_JOB_UID
from ...models import GangJob
from ...observe import events as event_rows

PAGE = 500
MAX_EVENTS = 2000  # newest kept when a namespace holds more for one job


def job_events(job: GangJob, api: client.ApiClient | None = None) -> list[dict]:
    """Rows (see observe.events) of the Events about `job`'s objects, one per (reason, object) with the count,
    first and last seen summed over its Events (`observe.events.fold`), oldest last-seen first, at most
    MAX_EVENTS.

    Raises kubernetes ApiException or urllib3 errors when the cluster cannot be asked (the view turns them into
    502 responses).
    """
    if api is None:
        from ...kube.client import api_client

        api = api_client(job.cluster)
    core = client.CoreV1Api(api)
    uids = {(o.get("metadata") or {}).get("uid") for o in (job.observed or {}).get("objects") or []} - {None}
    pods = json.loads(core.list_namespaced_pod(job.namespace, label_selector=f"{LABEL_JOB_UID}={job.uid}",
                                               _preload_content=False, _request_timeout=(5, 30)).data)
    uids |= {p["metadata"]["uid"] for p in pods.get("items") or []}
    if not uids:
        return []
    found, token = [], None
    while True:
        page = json.loads(core.list_namespaced_event(job.namespace, limit=PAGE, _continue=token,
                                                     _preload_content=False, _request_timeout=(5, 30)).data)
        # Folded page by page: memory follows the distinct (reason, object) pairs, not the Events.
        found = event_rows.fold(found + event_rows.select(page.get("items") or [], uids))
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            break
    # One entry per (reason, object), with its count and first and last seen (observe/events.py `fold`).
    return event_rows.fold(found)[-MAX_EVENTS:]
