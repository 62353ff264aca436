"""Retention of finished jobs' database rows (issue 23): drop, optionally archiving first, the jobs that finished
more than N days ago, in small transactions, without locking the table.

Not the retention of a finished job's cluster objects (reconcile/retention.py): a row goes only once those are gone
(`objects_removed_at` set), so nothing in a cluster is left without the row that would clean it up.

- Eligible: phase Succeeded, Failed or Cancelled; `finished_at` before now − `older_than`; `objects_removed_at`
  set.
- Batches walk the jobs by id (a keyset on the primary key, `id > last`), up to the largest id created before
  the cutoff (a job finishes after it is created), `batch` jobs per transaction. Each batch deletes its jobs with
  Django's collector: their history (PhaseTransition), reconcile attempts and webhook subscriptions go with them
  (CASCADE), deliveries of those, and resubmits made from them keep their row with `resubmitted_from` NULL. Row
  locks only, on at most `batch` jobs, for one short transaction: submits, status writes and reads of other jobs
  go on (PostgreSQL and SQLite alike; SQLite serialises writers anyway).
- `archive`: a text file; each job is written first as one JSON line, ``{"job": {columns}, "timeline":
  [{columns}, ...]}``, in the same transaction as its delete.
- The audit log keeps its events: they name jobs by id and are the record of what was done.

Entry points: `manage.py prune_jobs --older-than-days N` and, when GANGWEB_JOB_HISTORY_DAYS > 0, the daily beat
task `scheduling.prune_job_history`.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from ..choices import TERMINAL_PHASES
from ..models import GangJob, PhaseTransition

DEFAULT_BATCH = 500


@dataclass
class PruneResult:
    """What a prune did: jobs deleted (or that would be, with dry_run), batches, the cutoff used, and the longest
    batch's transaction in seconds (how long its row locks were held)."""

    jobs: int
    batches: int
    cutoff: datetime
    longest_batch_s: float = 0.0


def eligible(cutoff: datetime):
    """The finished jobs whose rows may go: ended before `cutoff`, their cluster objects removed."""
    return GangJob.objects.filter(phase__in=sorted(TERMINAL_PHASES), finished_at__lt=cutoff,
                                  objects_removed_at__isnull=False)


def _archive(ids: list[int], out: IO[str]) -> None:
    timelines: dict[int, list] = {}
    for row in PhaseTransition.objects.filter(job_id__in=ids).order_by("job_id", "at", "id").values():
        timelines.setdefault(row["job_id"], []).append(row)
    for row in GangJob.objects.filter(pk__in=ids).order_by("id").values():
        out.write(json.dumps({"job": row, "timeline": timelines.get(row["id"], [])}, cls=DjangoJSONEncoder) + "\n")


def prune(older_than: timedelta, *, batch: int = DEFAULT_BATCH, archive: IO[str] | None = None,
          dry_run: bool = False, now: datetime | None = None, limit: int | None = None) -> PruneResult:
    """Delete (after archiving, with `archive`) the eligible jobs older than `older_than`, `batch` per
    transaction, stopping after `limit` jobs when given (the next run goes on from the start: what is left
    are the same jobs). `dry_run`: count them only. Raises ValueError for a negative age or a batch below 1."""
    if older_than < timedelta(0) or batch < 1:
        raise ValueError("older_than must be >= 0 and batch >= 1")
    cutoff = (now or timezone.now()) - older_than
    bound = GangJob.objects.filter(created_at__lt=cutoff).aggregate(m=Max("id"))["m"]
    jobs = batches = last = 0
    longest = 0.0
    while bound is not None and (limit is None or jobs < limit):
        size = batch if limit is None else min(batch, limit - jobs)
        ids = list(eligible(cutoff).filter(id__gt=last, id__lte=bound).order_by("id")
                   .values_list("id", flat=True)[:size])
        if not ids:
            break
        last = ids[-1]
        batches += 1
        if dry_run:
            jobs += len(ids)
            continue
        t0 = time.perf_counter()
        with transaction.atomic():
            ids = list(eligible(cutoff).filter(id__in=ids).select_for_update().values_list("id", flat=True))
            if archive is not None:
                _archive(ids, archive)
            _, per_model = GangJob.objects.filter(id__in=ids).delete()
        jobs += per_model.get(GangJob._meta.label, 0)
        longest = max(longest, time.perf_counter() - t0)
    return PruneResult(jobs, batches, cutoff, round(longest, 3))
