"""Retention of a finished job's Indexed Jobs and pods.

When a job ends Succeeded or Failed, gangweb deletes its gang objects and Service at once (they may hold quota;
`JobReconciler.clean_up_finished`), and keeps its Indexed Jobs with their finished pods for inspection (logs, exit
codes) for a retention period: the template's `retentionSeconds` (0..30 days) when set, else
`settings.GANGWEB_FINISHED_RETENTION_SECONDS` (default 3600). The job's `remove_after` (finished_at + retention) is
set by the pass that first sees it finished; a pass at or after that time deletes the Jobs (Foreground, so their
pods go first) and any pod of the job left without one, each with a UID precondition, and records
`objects_removed_at` once a LIST made by the pass finds none of the job's objects left. Level-triggered: the decision
reads only the row's times and the observed objects; the periodic resync looks at a finished job again once its
`remove_after` has passed (`resync.jobs_to_resync`). A cancelled job, or one the API server refused, keeps nothing:
its objects are deleted at once and `objects_removed_at` is its `cleaned_up_at`.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone


def retention_seconds(resolved_spec: dict | None) -> int:
    """Seconds a finished job's Jobs and pods are kept: the spec's `retentionSeconds` (validated at template save,
    services/templates/specs.py) when it is a non-negative int, else GANGWEB_FINISHED_RETENTION_SECONDS."""
    value = (resolved_spec or {}).get("retentionSeconds")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return max(0, int(settings.GANGWEB_FINISHED_RETENTION_SECONDS))


def remove_after(job) -> datetime:
    """When `job`'s retained objects are due for removal: its finished_at (or now, when unknown) + retention."""
    return (job.finished_at or timezone.now()) + timedelta(seconds=retention_seconds(job.resolved_spec))


def due(job, now: datetime | None = None) -> bool:
    """True when `job` (finished, `remove_after` set) has kept its objects long enough."""
    return job.remove_after is not None and (now or timezone.now()) >= job.remove_after
