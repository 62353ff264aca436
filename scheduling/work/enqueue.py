"""The one port through which code below `scheduling/tasks.py` queues Celery work: by the task's stable name.

`services/` (a submit, a queue change, a webhook) and `reconcile/` (the watch) never import `scheduling.tasks`: the
worker's entry points import them, so an import the other way closed a circle that only function-level imports kept
from breaking the worker at start-up. Here a task is looked up by its name in the Celery app's registry
(`app.signature(name)`: the registered task's `apply_async`, so its options, the app's routes and eager mode
apply as to `task.delay`). A process that has not loaded its task modules yet (the web) loads them through the
Celery app's own discovery (`autodiscover_tasks`), not an import of `scheduling.tasks`; should a name still be
unknown, Celery sends it by name (`app.send_task`) for a worker to run.

Tests replace `send` with a recorder (tests/conftest.py `enqueued`, `queue_syncs`, `sent_tasks`): the one seam.
"""
from __future__ import annotations

from celery import current_app

# Job ids per reconcile message of a bulk, and jobs per claimed batch of the worker (reconcile/jobs/coalesce.py).
# 50: small enough that a burst spreads over every worker process (a 100-job bulk is reconciled by two at once;
# bench/ measured 0.61x -> see bench/README.md), large enough that each batch's one snapshot of the cluster
# (a LIST per kind) is shared by many jobs.
BATCH = 50

# The tasks' stable names (scheduling/tasks.py registers them under these; routes and the dashboard key on them).
RECONCILE_JOB = "scheduling.reconcile_job"
RECONCILE_JOBS = "scheduling.reconcile_jobs"
RECONCILE_QUEUE = "scheduling.reconcile_queue"
SYNC_QUEUES = "scheduling.sync_queues"
DELIVER_WEBHOOK = "scheduling.deliver_webhook"


def send(name: str, *args, countdown: float | None = None, **options) -> None:
    """Queue task `name` with positional JSON `args` (primitive ids), after `countdown` seconds when given;
    `options` go to `apply_async` as they are (e.g. `queue`, when a caller must pick one the routes do not;
    `kwargs`, the task's keyword arguments).

    Raises what the broker raises when it cannot take the message (kombu's OperationalError after its publish
    retries); callers that must not fail on it (on-commit hooks, the watch) catch or register it robustly.
    """
    app = current_app
    if name not in app.tasks:  # a process that has not loaded its task modules yet (the web's): the app's own discovery
        app.loader.import_default_modules()
    app.signature(name, args=args).apply_async(countdown=countdown, **options)
