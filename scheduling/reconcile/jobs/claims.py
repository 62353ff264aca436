"""Claims: which task is working on a job now, so the resync leaves it alone while that task lives and takes it at
once when the task is gone or gave up (issue 31, parts 1 and 2).

A claim is `GangJob.claimed_by` (the task's id) and `claimed_until`, written with the database's `now()` in the
statement (never this host's clock: hosts' clocks differ). It is short (CLAIM_SECONDS) and a heartbeat thread
renews every claim of the task every RENEW_SECONDS while the task works (`holding`), so:

- a worker killed mid-batch (kill -9 of its process group: nothing is released, the broker gives the message back
  only after its visibility timeout) lets go of its jobs CLAIM_SECONDS after its last renewal, and the next resync
  takes them;
- a task that ends, however it ends (done, or gave up because the API server is down: "not attempted"), releases
  its claims, and the job has no `task_queued_at` any more (a claim clears it): the next resync takes it at once,
  instead of believing its task still queued.

A claim also keeps two batches from taking the same waiting job (reconcile/jobs/coalesce.py). A task's full pass
over one job (a cancel, an edit, the watch's) claims it regardless of another holder: what it must do is never
skipped. Claims are only a hint for who does the work: every pass is idempotent, so two passes of one job at once
(the resync and a task whose claim lapsed under load) are harmless.
"""
from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.db.models import Q
from django.db.models.functions import Now

from ...models import GangJob, leases

log = logging.getLogger(__name__)

CLAIM_SECONDS = 20  # a claim not renewed for this long has lapsed (its worker died)
RENEW_SECONDS = 5  # a working task renews its claims this often


def token_for(task_id: str = "") -> str:
    """The claim token of a task: its Celery task id (a redelivered or retried task keeps it, so it takes its own
    claims back), else one unique to this call (a pass run outside Celery)."""
    return task_id or f"local-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def expiry():
    """The SQL expression of a new claim's end: the database's now() + CLAIM_SECONDS."""
    return Now() + timedelta(seconds=CLAIM_SECONDS)


def held() -> Q:
    """Rows whose claim is live (on the database's clock)."""
    return Q(claimed_until__isnull=False, claimed_until__gte=Now())


def free(token: str) -> Q:
    """Rows no live task but `token`'s holds a claim on."""
    return ~held() | Q(claimed_by=token)


def claim(job_ids: list[int], token: str, *, force: bool = False) -> list[int]:
    """Claim jobs `job_ids` for task `token` (those free of other live claims; all of them with `force`), clearing
    their `task_queued_at` (the task took them). Returns the ids now claimed by `token`, ascending (with `force`,
    `job_ids` sorted, without reading them back). Two statements (one with `force`):
    one UPDATE (its WHERE is evaluated again on a row another transaction changed meanwhile, so two claimants
    never both win a row), one SELECT."""
    if not job_ids:
        return []
    rows = GangJob.objects.filter(pk__in=job_ids)
    (rows if force else rows.filter(free(token))).update(claimed_by=token, claimed_until=expiry(),
                                                         task_queued_at=None)
    if force:  # every existing row is the token's now (releasing a missing one is a no-op)
        return sorted(job_ids)
    return sorted(rows.filter(claimed_by=token).values_list("pk", flat=True))


def renew(token: str) -> int:
    """Push every claim of task `token` to the database's now() + CLAIM_SECONDS; returns how many it renewed."""
    return GangJob.objects.filter(claimed_by=token).update(claimed_until=expiry())


def release(job_ids: list[int], token: str) -> int:
    """Drop task `token`'s claims on `job_ids` (another task's are left); returns how many it dropped."""
    return GangJob.objects.filter(pk__in=job_ids, claimed_by=token).update(claimed_by="", claimed_until=None)


@contextmanager
def renewing(token: str) -> Iterator[None]:
    """While the block runs, a heartbeat thread renews task `token`'s claims every RENEW_SECONDS (none inside a
    test's transaction: `leases.Heartbeat`)."""
    with leases.Heartbeat(f"claims:{token}", lambda: renew(token) >= 0, RENEW_SECONDS):
        yield


@contextmanager
def holding(job_ids: list[int], token: str, *, force: bool = False) -> Iterator[list[int]]:
    """Claim `job_ids` for `token` (`claim`), keep the claims renewed while the block runs, release them after it
    however it ends. Yields the ids claimed."""
    ids = claim(job_ids, token, force=force)
    try:
        with renewing(token):
            yield ids
    finally:
        try:
            release(ids, token)
        except Exception:  # noqa: BLE001 - the database is gone: the claims lapse after CLAIM_SECONDS anyway
            log.warning("claims of task %s on %d jobs not released; they lapse in %s s", token, len(ids),
                        CLAIM_SECONDS, exc_info=True)
