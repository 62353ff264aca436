"""`manage.py prune_jobs --older-than-days N`: drop (optionally archive) finished jobs' rows older than N days."""
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from scheduling.reconcile import row_retention as job_history


class Command(BaseCommand):
    """Deletes, in batches of `--batch` jobs per transaction, the jobs that finished more than N days ago and whose
    cluster objects are gone, with their history (reconcile/row_retention.py). `--archive FILE` appends each job and
    its timeline as one JSON line before deleting it; `--dry-run` only counts."""

    help = "Delete finished jobs older than N days, with their history, in small batches (no table lock)."

    def add_arguments(self, parser):
        parser.add_argument("--older-than-days", type=float, required=True, help="age of finished_at, in days")
        parser.add_argument("--batch", type=int, default=job_history.DEFAULT_BATCH, help="jobs per transaction")
        parser.add_argument("--archive", help="append each job and its timeline as a JSON line to this file first")
        parser.add_argument("--dry-run", action="store_true", help="count the jobs, delete nothing")

    def handle(self, *args, older_than_days, batch, archive, dry_run, **options):
        if older_than_days < 0 or batch < 1:
            raise CommandError("--older-than-days must be >= 0 and --batch >= 1")
        age = timedelta(days=older_than_days)
        if archive:
            with open(archive, "a", encoding="utf-8") as out:
                result = job_history.prune(age, batch=batch, archive=out, dry_run=dry_run)
        else:
            result = job_history.prune(age, batch=batch, dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(f"{verb} {result.jobs} jobs finished before {result.cutoff.isoformat()} "
                          f"in {result.batches} batches")
