"""A bare Celery app for tests/faults/test_broker_recovery.py: gangweb's broker settings (acks late, prefetch 1,
reject on worker lost, gangweb.broker's transport) without Django, so a worker starts in a second.

Configured from the environment: BROKER_RECOVERY_URL (redis://...), BROKER_RECOVERY_TRANSPORT (a kombu transport
path; gangweb's by default) and BROKER_RECOVERY_DIR (where `touch` writes its files).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from celery import Celery

app = Celery("broker_recovery", broker=os.environ.get("BROKER_RECOVERY_URL", "redis://127.0.0.1:6379/15"))
app.conf.update(
    broker_transport=os.environ.get("BROKER_RECOVERY_TRANSPORT", "gangweb.broker:Transport"),
    task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1, task_ignore_result=True,
    broker_connection_retry_on_startup=True, broker_connection_max_retries=None,
)


@app.task(name="broker_recovery.touch")
def touch(name: str, seconds: float = 0) -> None:
    """Sleep `seconds`, then create file `name` in BROKER_RECOVERY_DIR (the test reads what ran)."""
    time.sleep(seconds)
    (Path(os.environ["BROKER_RECOVERY_DIR"]) / name).touch()
