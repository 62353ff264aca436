"""The Celery app. Broker: Redis when REDIS_URL is set, else kombu's filesystem transport (no server)."""
import os

from celery import Celery
from celery.signals import celeryd_after_setup, task_failure

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gangweb.settings")

app = Celery("gangweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_failure.connect
def discard_broken_connections(**_kwargs) -> None:
    """After a task raised (a time limit may have landed inside a database call), close any database connection of
    the pool process that no longer answers, so the next task does not inherit it (scheduling/db/connections.py).
    Celery's Django fixup only closes connections Django saw a database error on."""
    from scheduling.db import connections as dbconn

    dbconn.discard_if_broken(force=True)


@celeryd_after_setup.connect
def consume_shard_queues(sender, instance, **_kwargs) -> None:
    """Add the cluster shard queues (scheduling/work/routing.py) this worker consumes besides its -Q list:
    GANGWEB_WORKER_SHARDS = "all", a list like "0-3,6", or "none"; unset, a worker that consumes Celery's default
    queue takes every shard (so `-Q celery`, as every earlier deployment runs it, still does all reconcile work)
    and any other worker (webhooks, a pool started with -Q reconcile.N) none. Each shard consumed, by either way,
    brings its clean-up queue `cleanup.N`. A bad value stops the worker with the reason (ValueError), rather than
    leaving shards unconsumed."""
    from django.conf import settings

    from scheduling.work import routing

    spec = (settings.GANGWEB_WORKER_SHARDS or "").strip()
    queues = instance.app.amqp.queues
    names: list[str] = []
    if spec != "none":
        if spec:
            names = routing.worker_queues(spec, default=False)
        elif settings.CELERY_TASK_DEFAULT_QUEUE in queues.consume_from:
            names = routing.worker_queues("all", default=False)
    # A worker consuming a shard queue also takes that shard's clean-ups (`-Q reconcile.6` consumes cleanup.6 too):
    # a finished job's clean-up never waits behind the shard's dispatch backlog (scheduling/work/routing.py).
    for name in list(queues.consume_from):
        if name.startswith(routing.SHARD_QUEUE_PREFIX):
            shard = name[len(routing.SHARD_QUEUE_PREFIX):]
            if shard.isdigit():
                names.append(routing.cleanup_queue(int(shard)))
    for name in names:
        if name not in queues.consume_from:
            # queues[name] declares it as a producer routing there does (Celery's missing-queue rule: an exchange
            # of the queue's own name), so both sides bind the same exchange.
            queues.select_add(queues[name])
