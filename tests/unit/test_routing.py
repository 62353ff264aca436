"""Each cluster's work goes to its own shard queue (issue 18, part 3): a job's reconcile, a batch, the cluster's
resync, probe and queue sync follow the cluster's shard; fan-out beats and cross-cluster work stay on the default
queue, webhooks on theirs; a worker's shard list is parsed strictly; the router never loses an enqueue."""
import pytest
from django.conf import settings

from gangweb.celery import app, consume_shard_queues
from scheduling.work import routing
from tests.builders import make_cluster, make_job, make_queue, make_template


def queue_of(task_name: str, args=(), kwargs=None) -> str:
    return app.amqp.router.route({}, task_name, args=args, kwargs=kwargs or {})["queue"].name


@pytest.fixture(autouse=True)
def fresh_caches():
    routing.forget()
    yield
    routing.forget()


@pytest.mark.parametrize("cluster_id, pinned, shards, shard", [
    (1, None, 8, 1), (8, None, 8, 0), (13, None, 8, 5),  # sequential ids: the first 8 clusters on 8 shards
    (13, 2, 8, 2),  # a pin wins
    (13, 9, 8, 1),  # a pin beyond a lowered shard count wraps around
    (5, None, 1, 0),  # one shard: everything on reconcile.0
])
def test_a_cluster_goes_to_its_pin_else_its_id_modulo_the_shards(cluster_id, pinned, shards, shard):
    assert routing.shard_of(cluster_id, pinned, shards) == shard


@pytest.mark.parametrize("spec, shards", [
    ("all", [0, 1, 2, 3, 4, 5, 6, 7]), ("*", [0, 1, 2, 3, 4, 5, 6, 7]), ("3", [3]), ("0-2,6", [0, 1, 2, 6]),
    (" 6 , 0-1 ,6", [0, 1, 6]),
])
def test_a_worker_shard_list_names_shards(spec, shards):
    assert routing.parse_shards(spec, 8) == shards


@pytest.mark.parametrize("spec, message", [
    ("x", "'x' is not a number"), ("3-1", "empty or negative"), ("8", "shard 8 does not exist"),
    ("0-9", "GANGWEB_RECONCILE_SHARDS is 8 (0-7)"), ("", "no shard named"), (",", "no shard named"),
])
def test_a_bad_shard_list_is_refused_naming_the_part(spec, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        routing.parse_shards(spec, 8)


def test_a_worker_of_every_shard_consumes_the_default_queue_and_each_shard_queue():
    assert routing.worker_queues("all")[:2] == ["celery", "reconcile.0"]
    assert len(routing.worker_queues("all")) == 1 + 2 * settings.GANGWEB_RECONCILE_SHARDS
    assert routing.worker_queues("1,3", default=False) == ["reconcile.1", "cleanup.1", "reconcile.3", "cleanup.3"]


@pytest.mark.django_db
def test_one_clusters_work_is_routed_to_that_clusters_shard_and_other_work_is_not(admin_user, enqueued):
    a, b = make_cluster("a"), make_cluster("b", work_shard=6)
    template, queue = make_template(user=admin_user), make_queue(clusters=[a, b])
    job_a, job_b = (make_job(template, queue, c, user=admin_user) for c in (a, b))
    shard_a = f"reconcile.{a.pk % settings.GANGWEB_RECONCILE_SHARDS}"

    assert queue_of("scheduling.reconcile_job", (job_a.pk,)) == shard_a
    assert queue_of("scheduling.reconcile_job", (job_b.pk,), {"waits": 2}) == "reconcile.6"  # the requeue
    assert queue_of("scheduling.reconcile_job", (), {"job_id": job_b.pk}) == "reconcile.6"
    assert queue_of("scheduling.reconcile_jobs", ([job_b.pk, job_a.pk],)) == "reconcile.6"  # the first job's
    assert queue_of("scheduling.reconcile_job", (job_b.pk,), {"cleanup": True}) == "cleanup.6"  # beside, not behind
    assert queue_of("scheduling.reconcile_job", (job_b.pk,), {"waits": 1, "cleanup": True}) == "cleanup.6"
    assert queue_of("scheduling.resync_cluster", (a.pk,)) == shard_a
    assert queue_of("scheduling.probe_cluster", (b.pk,)) == "reconcile.6"
    assert queue_of("scheduling.sync_queues", (b.pk,)) == "reconcile.6"
    for fan_out in ("scheduling.resync_all_clusters", "scheduling.probe_all_clusters"):
        assert queue_of(fan_out) == "celery"
    assert queue_of("scheduling.sync_queues") == "celery"  # the beat's "every cluster" run
    assert queue_of("scheduling.reconcile_queue", (queue.pk, [a.pk])) == "celery"  # spans clusters
    assert queue_of("scheduling.deliver_webhook", (1,)) == "webhooks"


@pytest.mark.django_db
def test_a_submitted_jobs_task_is_routed_without_reading_its_cluster(admin_user, enqueued):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from scheduling.services.jobs import lifecycle as job_service
    from tests.builders import submit_body

    cluster = make_cluster("c", work_shard=3)
    template, queue = make_template(user=admin_user), make_queue(clusters=[cluster])
    job, _ = job_service.submit(admin_user, submit_body(template, queue, cluster))
    routing._pins_now()  # the pins are read once per PIN_TTL, not per task
    with CaptureQueriesContext(connection) as queries:
        assert queue_of("scheduling.reconcile_job", (job.pk,)) == "reconcile.3"
    assert queries.captured_queries == []  # the submit told the router the job's cluster


@pytest.mark.django_db
def test_a_job_that_is_gone_goes_to_the_default_queue_where_its_task_logs_and_returns():
    assert queue_of("scheduling.reconcile_job", (987654,)) == "celery"


def test_a_failing_lookup_never_fails_the_enqueue(monkeypatch, caplog):
    def broken(_job_id):
        raise RuntimeError("database down")

    monkeypatch.setattr(routing, "cluster_of_job", broken)
    assert queue_of("scheduling.reconcile_job", (1,)) == "celery"
    assert "routing scheduling.reconcile_job to the default queue: RuntimeError: database down" in caplog.text


@pytest.mark.django_db
def test_a_pin_changed_by_an_operator_is_followed_after_the_pin_cache_lapses(monkeypatch):
    cluster = make_cluster("a", work_shard=1)
    assert routing.queue_for_cluster(cluster.pk) == "reconcile.1"
    cluster.work_shard = 2
    cluster.save()
    assert routing.queue_for_cluster(cluster.pk) == "reconcile.1"  # cached for PIN_TTL
    monkeypatch.setattr(routing, "PIN_TTL", -1.0)
    assert routing.queue_for_cluster(cluster.pk) == "reconcile.2"


class FakeWorker:
    def __init__(self, queues):
        self.app = app
        app.amqp.queues.select(queues)


@pytest.fixture
def restore_queues():
    yield
    app.amqp.queues.select(None)


@pytest.mark.parametrize("queues, spec, consumed", [
    # `-Q celery`: everything, as before, with each shard's clean-up queue
    (["celery"], "", ["celery", *[f"{q}.{n}" for n in range(8) for q in ("reconcile", "cleanup")]]),
    (["webhooks"], "", ["webhooks"]),  # the webhook worker takes no shard
    (["celery"], "0-1", ["celery", "reconcile.0", "cleanup.0", "reconcile.1", "cleanup.1"]),  # a pool's share
    (["reconcile.5"], "", ["reconcile.5", "cleanup.5"]),  # a pool given its queues by -Q takes their clean-ups
    (["celery"], "none", ["celery"]),
])
def test_a_worker_consumes_the_shards_it_is_given(settings, restore_queues, queues, spec, consumed):
    settings.GANGWEB_RECONCILE_SHARDS = 8
    settings.GANGWEB_WORKER_SHARDS = spec
    worker = FakeWorker(queues)
    consume_shard_queues(sender="w@h", instance=worker)
    assert sorted(app.amqp.queues.consume_from) == sorted(consumed)


def test_a_bad_worker_shard_list_stops_the_worker_with_the_reason(settings, restore_queues):
    settings.GANGWEB_WORKER_SHARDS = "0-99"
    with pytest.raises(ValueError, match="shard 99 does not exist"):
        consume_shard_queues(sender="w@h", instance=FakeWorker(["celery"]))
