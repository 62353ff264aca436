"""A cluster whose API server hangs holds only its own pool's slots (issue 18, part 3): with a worker pool per shard,
a job for the healthy cluster is dispatched while the hung cluster's tasks wait on their read timeouts.

The hung cluster is a TCP listener that never accepts: the connection is made (kernel backlog) and the TLS handshake
waits for an answer that never comes, as against a SIGSTOPped kube-apiserver. It is pinned to shard 7; for the test
the stack's worker is replaced by two pools (the production layout, docs/operations.md): one on `celery` + shards
0-6, one of a single process on `reconcile.7` only. Everything is put back afterwards (the hung cluster and its
jobs deleted, its queue emptied, the stack's worker started again), so later tests see the stack as before.
"""
from __future__ import annotations

import socket
import sys
import textwrap
import time
import uuid

import pytest

from bench.stack import wait_for

pytestmark = [pytest.mark.faults]

HUNG_SHARD = 7
PAST_SUBMITTED = ("Dispatched", "Queued", "Scheduled", "Running", "Succeeded")


def run_django(stack, code: str) -> str:
    """Run `code` (after django.setup()) in the stack's environment; its last stdout line."""
    program = "import django\ndjango.setup()\n" + textwrap.dedent(code)
    return stack.manage_output([sys.executable, "-c", program])


@pytest.fixture
def hung_cluster(stack, namespace):
    """Register "hung-<id>" (a listener that never answers) in queue "default", pinned to shard 7; yields its name.
    Afterwards: its jobs and the cluster are deleted and its shard queue emptied."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    port = listener.getsockname()[1]
    name = f"hung-{uuid.uuid4().hex[:6]}"
    kubeconfig = (f"apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
                  "users: [{name: u, user: {token: 't'}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                  "current-context: x\n")
    run_django(stack, f"""
        from scheduling.models import Cluster, QueuePolicy
        hung = Cluster.objects.create(name={name!r}, kubeconfig={kubeconfig!r}, work_shard={HUNG_SHARD})
        QueuePolicy.objects.get(name="default").clusters.add(hung)
        print(hung.pk)
    """)
    try:
        yield name
    finally:
        run_django(stack, f"""
            from scheduling.models import Cluster, GangJob
            GangJob.objects.filter(cluster__name={name!r}).delete()
            Cluster.objects.filter(name={name!r}).delete()
            import redis, os
            redis.Redis.from_url(os.environ["REDIS_URL"]).delete("reconcile.{HUNG_SHARD}")
            print("ok")
        """)
        listener.close()


@pytest.fixture
def pools(stack, hung_cluster):
    """Replace the stack's worker by two pools: "celery" + shards 0-6, and shard 7 alone; put it back after."""
    stack.stop("worker")
    stack.env["GANGWEB_WORKER_SHARDS"] = f"0-{HUNG_SHARD - 1}"
    try:
        stack.start_worker(2, name="pool-main", loglevel="INFO", queues="celery")
    finally:
        stack.env.pop("GANGWEB_WORKER_SHARDS")
    stack.start_worker(1, name="pool-hung", loglevel="INFO", queues=f"reconcile.{HUNG_SHARD}")
    for name in ("pool-main", "pool-hung"):
        stack.wait_for_process(name, lambda n=name: "ready." in stack.log_text(n), name)
    try:
        yield
    finally:
        stack.kill("pool-hung")
        stack.stop("pool-main")
        stack.start_worker(2, name="worker", loglevel="INFO")


def submit(client, name: str, namespace: str, cluster: str) -> dict:
    body = {"name": name, "namespace": namespace, "template": "fault-long", "queue": "default", "cluster": cluster}
    r = client.request("POST", "/api/v1/jobs/", json=body, headers={"Idempotency-Key": uuid.uuid4().hex})
    assert r.status_code == 201, (r.status_code, r.text[:300])
    return r.json()


def test_a_hung_clusters_tasks_do_not_hold_up_another_clusters_jobs(stack, client, namespace, hung_cluster, pools):
    import redis

    hung = [submit(client, f"hung-{i}", namespace, hung_cluster) for i in range(4)]
    wait_for(lambda: "scheduling.reconcile_job" in stack.log_text("pool-hung"), 30, "the hung pool taking a task")
    started = time.monotonic()
    healthy = [submit(client, f"ok-{i}", namespace, "local") for i in range(8)]

    def dispatched():
        return all(client.job(j["id"])["phase"] in PAST_SUBMITTED for j in healthy)

    wait_for(dispatched, 90, "8 jobs of the healthy cluster dispatched", interval=0.5)
    took = time.monotonic() - started
    backlog = redis.Redis.from_url(stack.env["REDIS_URL"]).llen(f"reconcile.{HUNG_SHARD}")
    print(f"healthy cluster: 8 jobs dispatched in {took:.1f} s; the hung cluster's queue still holds {backlog}")
    # The healthy cluster's jobs went while the hung cluster's work was still queued behind its one slot (in one
    # FIFO queue for every cluster they would have waited until it drained), and none of it is done or failed.
    assert backlog >= 1
    assert [client.job(j["id"])["phase"] for j in hung] == ["Submitted"] * 4
