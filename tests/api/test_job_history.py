"""Retention of finished jobs' rows (reconcile/row_retention.py, `manage.py prune_jobs`): only finished jobs older than
the cutoff whose cluster objects are gone are deleted, with their history and attempts, in batches of one small
transaction each; `--archive` writes each first; `--dry-run` deletes nothing. SQLite and PostgreSQL alike."""
import io
import json
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduling.models import GangJob, PhaseTransition, ReconcileAttempt
from scheduling.reconcile import row_retention as job_history
from tests import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(setup, admin_user):
    """old-1..old-5: finished 40 days ago, objects removed (eligible); kept-objects: finished 40 days ago, objects
    still in the cluster; recent: finished 1 day ago; running: started 40 days ago; resubmit: made from old-1."""
    template, queue, cluster = setup
    long_ago = timezone.now() - timedelta(days=40)
    made = {}
    for name, phase, at, removed in [*((f"old-{i}", "Succeeded" if i % 2 else "Failed", long_ago, True)
                                       for i in range(1, 6)),
                                     ("kept-objects", "Succeeded", long_ago, False),
                                     ("recent", "Cancelled", timezone.now() - timedelta(days=1), True),
                                     ("running", "Running", long_ago, False)]:
        job = builders.make_job(template, queue, cluster, name=name, phase=phase, user=admin_user, at=at)
        GangJob.objects.filter(pk=job.pk).update(created_at=at, objects_removed_at=at if removed else None)
        ReconcileAttempt.objects.create(kind="job", job=job)
        made[name] = job
    resubmit = builders.make_job(template, queue, cluster, name="resubmit", user=admin_user)
    GangJob.objects.filter(pk=resubmit.pk).update(resubmitted_from=made["old-1"])
    return made


def test_prune_deletes_only_old_finished_jobs_whose_objects_are_gone_with_their_history(history):
    old_ids = [history[f"old-{i}"].pk for i in range(1, 6)]
    with CaptureQueriesContext(connection) as queries:
        result = job_history.prune(timedelta(days=30), batch=2)
    assert (result.jobs, result.batches) == (5, 3)
    assert set(GangJob.objects.values_list("name", flat=True)) == {"kept-objects", "recent", "running", "resubmit"}
    assert not PhaseTransition.objects.filter(job_id__in=old_ids).exists()
    assert not ReconcileAttempt.objects.filter(job_id__in=old_ids).exists()
    assert ReconcileAttempt.objects.count() == 3
    assert GangJob.objects.get(name="resubmit").resubmitted_from_id is None
    # One small transaction per batch: each DELETE of jobs names at most 2 of them.
    deletes = [q["sql"] for q in queries if q["sql"].startswith(f'DELETE FROM "{GangJob._meta.db_table}"')]
    sizes = [len(re.search(r"IN \(([^)]*)\)", q).group(1).split(",")) for q in deletes]
    assert sizes == [2, 2, 1]


def test_a_second_prune_finds_nothing_and_a_dry_run_deletes_nothing(history):
    assert job_history.prune(timedelta(days=30), dry_run=True).jobs == 5
    assert GangJob.objects.count() == 9
    assert job_history.prune(timedelta(days=30)).jobs == 5
    assert job_history.prune(timedelta(days=30)).jobs == 0


def test_the_command_archives_each_job_with_its_timeline_before_deleting_it(history, tmp_path):
    out = io.StringIO()
    archive = tmp_path / "jobs.jsonl"
    call_command("prune_jobs", "--older-than-days", "30", "--batch", "3", "--archive", str(archive), stdout=out)
    assert "deleted 5 jobs" in out.getvalue() and "in 2 batches" in out.getvalue()
    lines = [json.loads(line) for line in archive.read_text().splitlines()]
    assert sorted(r["job"]["name"] for r in lines) == [f"old-{i}" for i in range(1, 6)]
    assert [e["phase"] for e in lines[0]["timeline"]] == ["Submitted", "Dispatched", "Queued", "Scheduled",
                                                           "Running", "Succeeded"]


def test_the_beat_task_prunes_only_when_a_history_age_is_set(history, settings):
    from scheduling import tasks

    settings.GANGWEB_JOB_HISTORY_DAYS = 0
    tasks.prune_job_history()
    assert GangJob.objects.count() == 9
    settings.GANGWEB_JOB_HISTORY_DAYS = 30
    settings.GANGWEB_JOB_HISTORY_PRUNE_PER_RUN = 2
    tasks.prune_job_history()
    assert GangJob.objects.count() == 7  # a run stops after its limit; the next goes on
    tasks.prune_job_history()
    tasks.prune_job_history()
    assert GangJob.objects.count() == 4
