"""One cached read of a job's Events from its cluster, shared by the readers of optional facts (reconcile/refusals.py:
FailedCreate of its owner Jobs; reconcile/waiting_events.py: what a scheduler keeps saying about a waiting gang).

Events are optional facts: a failure to read them is logged and means "nothing known" (None), never a failed
observation. What was read is remembered in Django's cache under the caller's key, so the observations of a burst ask
the API server once.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from django.core.cache import cache
from kubernetes import client

from ..kube.errors import describe

log = logging.getLogger(__name__)


def cached(job, key: str, seconds: float, read: Callable[[client.CoreV1Api], list], what: str,
           api: client.ApiClient | None = None):
    """`read(core)` for `job` (a GangJob: its cluster, pk), or what it gave within the last `seconds` under cache
    `key`. `api`: the cluster's client (default: `kube.client.api_client(job.cluster)`). Returns None when the
    cluster could not be asked (logged at INFO, naming `what`, e.g. "FailedCreate events")."""
    remembered = cache.get(key)
    if remembered is not None:
        return remembered
    try:
        if api is None:
            from ..kube.client import api_client

            api = api_client(job.cluster)
        value = read(client.CoreV1Api(api))
    except Exception as exc:  # noqa: BLE001 - optional facts: an observation must not fail for them
        log.info("job %s: %s not read: %s", job.pk, what, describe(exc))
        return None
    cache.set(key, value, seconds)
    return value
