"""Webhook work runs on a Celery queue of its own, consumed by a worker of its own in every way gangweb is run
(`make run`'s runstack, docker compose), so a slow or failing receiver never holds a slot of the worker that
reconciles jobs (bench/webhooks.py measures it). The reconcile worker consumes the default queue and the cluster
shard queues, never the webhook queue."""
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from gangweb.celery import app
from scheduling.management.commands import runstack

ROOT = Path(__file__).resolve().parents[2]
WEBHOOK_TASKS = ["scheduling.deliver_webhook", "scheduling.notify_transitions"]
RECONCILE_TASKS = ["scheduling.reconcile_job", "scheduling.reconcile_jobs", "scheduling.resync_all_clusters",
                   "scheduling.probe_all_clusters", "scheduling.reconcile_queue", "scheduling.sync_queues",
                   "scheduling.resync_cluster", "scheduling.probe_cluster",
                   "scheduling.prune_job_history"]  # the history retention: no cluster, default queue


def queue_of(task_name: str) -> str:
    return app.amqp.router.route({}, task_name)["queue"].name


@pytest.mark.parametrize("task_name", WEBHOOK_TASKS)
def test_webhook_tasks_are_routed_to_the_webhook_queue(task_name):
    assert queue_of(task_name) == settings.GANGWEB_WEBHOOK_QUEUE == "webhooks"


# With a cluster, they go to its shard queue "reconcile.<n>" (tests/unit/test_routing.py), which the reconcile
# worker consumes too; without one (a beat's fan-out, a job that is gone), to the default queue.
@pytest.mark.parametrize("task_name", RECONCILE_TASKS)
def test_reconcile_tasks_of_no_cluster_stay_on_the_default_queue(task_name):
    assert queue_of(task_name) == settings.CELERY_TASK_DEFAULT_QUEUE == "celery"


def test_every_scheduling_task_is_in_one_of_the_two_lists():
    assert sorted(n for n in app.tasks if n.startswith("scheduling.")) == sorted(WEBHOOK_TASKS + RECONCILE_TASKS)


def _queues(argv: list[str]) -> str:
    return argv[argv.index("-Q") + 1]


def test_runstack_runs_a_reconcile_worker_and_a_webhook_worker_on_separate_queues():
    argvs = runstack.process_argvs(8000)
    assert _queues(argvs["worker"]) == "celery" and _queues(argvs["webhooks"]) == "webhooks"
    assert argvs["worker"][argvs["worker"].index("-n") + 1] != argvs["webhooks"][argvs["webhooks"].index("-n") + 1]


def test_compose_runs_a_reconcile_worker_and_a_webhook_worker_on_separate_queues():
    services = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]
    assert _queues(services["worker"]["command"]) == "celery"
    assert _queues(services["webhooks"]["command"]) == "webhooks"
    assert services["webhooks"]["restart"] == "unless-stopped"


def test_a_delivery_attempt_is_bounded_by_short_timeouts_and_the_task_by_time_limits():
    from scheduling import tasks
    from scheduling.services.webhooks import delivery as webhook_delivery

    connect, read = webhook_delivery.timeouts()
    assert (connect, read) == (3.0, 5.0)
    assert connect + read < tasks.deliver_webhook.soft_time_limit < tasks.deliver_webhook.time_limit <= 30
    assert tasks.deliver_webhook.autoretry_for == (webhook_delivery.DeliveryRetry,)
