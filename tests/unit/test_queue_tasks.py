"""Queue sync entry points: beat fans out one task per cluster; an unreachable cluster is a transient error that
leaves an attempt row."""
import pytest
from django.conf import settings

from scheduling import tasks
from scheduling.choices import ReconcileOutcome
from scheduling.models import ReconcileAttempt
from scheduling.reconcile import queues as sync
from tests import builders

pytestmark = pytest.mark.django_db

UNREACHABLE = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_beat_queues_one_sync_per_cluster(queue_syncs):
    a, b = builders.make_cluster("east"), builders.make_cluster("west")
    tasks.sync_queues()
    assert queue_syncs == [("sync_queues", a.id), ("sync_queues", b.id)]


def test_a_missing_cluster_or_policy_is_logged_and_skipped():
    assert sync.sync_cluster_id(987654) is None
    assert sync.policy_cluster_ids(987654, []) == []
    assert ReconcileAttempt.objects.count() == 0


def test_a_policy_write_queues_one_sync_per_cluster_it_concerns_each_on_that_clusters_shard(queue_syncs):
    from gangweb.celery import app
    from scheduling.work import routing

    routing.forget()  # the router's copy of the pins may predate west's
    east, west, dropped = (builders.make_cluster(n) for n in ("east", "west", "dropped"))
    builders.make_cluster("elsewhere")
    west.work_shard = 6
    west.save()
    policy = builders.make_queue("team-a", clusters=[east, west])
    tasks.reconcile_queue(policy.id, [dropped.id])
    assert queue_syncs == [("sync_queues", east.id), ("sync_queues", west.id), ("sync_queues", dropped.id)]
    assert ReconcileAttempt.objects.count() == 0  # the fan-out talks to no cluster: the syncs do, on their shards
    shards = settings.GANGWEB_RECONCILE_SHARDS
    assert [app.amqp.router.route({}, "scheduling.sync_queues", args=(cid,), kwargs={})["queue"].name
            for _, cid in queue_syncs] == [f"reconcile.{east.id % shards}", "reconcile.6",
                                           f"reconcile.{dropped.id % shards}"]


def test_an_unreachable_cluster_is_a_transient_error_with_an_attempt_row():
    cluster = builders.make_cluster("down", kubeconfig=UNREACHABLE)
    with pytest.raises(sync.TransientSyncError):
        sync.sync_cluster(cluster)
    attempt = ReconcileAttempt.objects.get(cluster=cluster)
    assert (attempt.kind, attempt.outcome, attempt.reason) == ("queue", ReconcileOutcome.TRANSIENT_ERROR, "ListFailed")


def test_a_cluster_without_credentials_is_a_terminal_error():
    cluster = builders.make_cluster("blank")
    with pytest.raises(sync.TerminalSyncError):
        sync.sync_cluster(cluster)
    assert ReconcileAttempt.objects.get(cluster=cluster).outcome == ReconcileOutcome.TERMINAL_ERROR
