"""The Celery app. Broker: Redis when REDIS_URL is set, else kombu's filesystem transport (no server)."""
import os

from celery import Celery
from celery.signals import task_failure

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gangweb.settings")

app = Celery("gangweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_failure.connect
def discard_broken_connections(**_kwargs) -> None:
    """After a task raised (a time limit may have landed inside a database call), close any database connection of
    the pool process that no longer answers, so the next task does not inherit it (scheduling/reconcile/dbconn.py).
    Celery's Django fixup only closes connections Django saw a database error on."""
    from scheduling.reconcile import dbconn

    dbconn.discard_if_broken(force=True)
