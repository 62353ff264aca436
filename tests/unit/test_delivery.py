"""Delivery at least once, and soon (issue 16: a killed worker's batch came back only after an hour). The settings
hold together: Redis redelivers an unacknowledged message after the broker's visibility timeout, which must outlast
every hold of a healthy worker (else a task runs twice at once, and an ETA task again and again), stay well under
an hour, and the periodic resync takes a lost reconcile task's job over before that."""
from django.conf import settings

from gangweb.celery import app
from scheduling import tasks

VISIBILITY = settings.GANGWEB_BROKER_VISIBILITY_TIMEOUT
LONGEST_WAIT_COUNTDOWN = 300  # tasks.requeue_countdown: min(requeue_after * 2 ** waits, 300)
OURS = [t for name, t in app.tasks.items() if name.startswith("scheduling.")]


def test_the_visibility_timeout_outlasts_every_task_and_countdown_and_is_not_an_hour():
    assert len(OURS) >= 6
    assert max(t.time_limit or 0 for t in OURS) < VISIBILITY
    assert max(getattr(t, "retry_backoff_max", 0) or 0 for t in OURS) < VISIBILITY
    # A requeued reconcile_job is held (unacknowledged) through its countdown, then runs up to its hard limit.
    assert LONGEST_WAIT_COUNTDOWN + tasks.reconcile_job.time_limit < VISIBILITY < 3600  # an hour it was


def test_the_resync_takes_a_lost_reconcile_tasks_job_over_before_the_broker_redelivers_it():
    assert settings.GANGWEB_RESYNC_GRACE_SECONDS + settings.GANGWEB_RESYNC_SECONDS < VISIBILITY


def test_reconcile_tasks_are_acknowledged_late_and_put_back_when_their_process_dies():
    assert settings.CELERY_TASK_REJECT_ON_WORKER_LOST
    for task in (tasks.reconcile_job, tasks.reconcile_jobs, tasks.reconcile_queue, tasks.sync_queues):
        assert task.acks_late, task.name
    # Beat sends the next resync within a period; a redelivered one would only find the lease held.
    assert tasks.resync_all_clusters.acks_late is False and tasks.resync_cluster.acks_late is False
    assert tasks.resync_cluster.soft_time_limit > settings.GANGWEB_RESYNC_MAX_SECONDS
    # Every other task of ours: acknowledged after it ran (the app's default), so a lost worker's task comes back.
    for task in OURS:
        if task.name not in ("scheduling.resync_all_clusters", "scheduling.resync_cluster"):
            assert task.acks_late, task.name
