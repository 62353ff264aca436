"""Shared fixtures: users, API clients, a recorder in place of the Celery broker for non-cluster tests, and a
real redis-server for the code that talks to Redis (broker transport, submit throttle)."""
import os
import shutil
import socket
import subprocess
import time

import pytest
from rest_framework.test import APIClient


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """pytest-django's hook on the test database's settings: after its xdist suffix ("test_gangweb_gw0"), the suffix
    `$GANGWEB_TEST_DB_SUFFIX`, so that pytests run side by side on one PostgreSQL (scripts/test-suite.sh: the fault
    runs and the other release's tests beside the xdist run) never create or drop each other's test database.
    SQLite test databases are a file per process already (gangweb/settings.py)."""
    from django.conf import settings

    suffix = os.environ.get("GANGWEB_TEST_DB_SUFFIX", "").strip()
    if not suffix:
        return
    for db in settings.DATABASES.values():
        if db["ENGINE"].endswith("sqlite3"):
            continue
        name = db.get("TEST", {}).get("NAME") or f"test_{db['NAME']}"
        db.setdefault("TEST", {})["NAME"] = f"{name}_{suffix}"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A redis-server of this test session on a free port, without persistence: "redis://127.0.0.1:<port>/0".
    Skips when redis-server is not installed (`make test` installs it: scripts/ensure-test-deps.sh)."""
    from localcluster.processes import free_port

    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; make test does it)")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path_factory.mktemp("redis"))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"redis-server did not start on port {port}") from None
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


class _Sent(list):
    """Tasks queued through `scheduling.work.enqueue.send` in a test, in order: [(task name, args)]; `options` holds
    each one's `apply_async` options (e.g. {"kwargs": {...}}) at the same index. Listeners (the fixtures below) see each
    one as it is sent."""

    def __init__(self):
        super().__init__()
        self.listeners = []
        self.options: list[dict] = []

    def __call__(self, name: str, *args, countdown=None, **options) -> None:
        self.append((name, args))
        self.options.append(options)
        for listen in self.listeners:
            listen(name, args)


@pytest.fixture
def sent_tasks(monkeypatch):
    """Record every task queued through `scheduling.work.enqueue` (the one seam to the broker) instead of sending it:
    a list of (task name, args). On-commit hooks run at once (test transactions never commit)."""
    from types import SimpleNamespace

    from scheduling.work import dispatch, enqueue

    sent = _Sent()
    monkeypatch.setattr(dispatch, "transaction", SimpleNamespace(on_commit=lambda fn, using=None, robust=False: fn()))
    monkeypatch.setattr(enqueue, "send", sent)
    return sent


@pytest.fixture
def enqueued(sent_tasks):
    """Record reconcile tasks instead of sending them to a broker: a list of job-id lists."""
    from scheduling.work import enqueue

    calls = []

    def listen(name, args):
        if name == enqueue.RECONCILE_JOB:
            calls.append([args[0]])
        elif name == enqueue.RECONCILE_JOBS:
            calls.append(list(args[0]))

    sent_tasks.listeners.append(listen)
    return calls


@pytest.fixture
def admin_user(db, django_user_model):
    """A platform admin (superuser)."""
    return django_user_model.objects.create_superuser("admin", "admin@example.com", "pw-admin-123")


@pytest.fixture
def api(admin_user, enqueued):
    """An API client logged in as the platform admin."""
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


@pytest.fixture
def analyze(db):
    """`tests.planner.analyze`: a test that bulk-loads rows calls analyze(Model, ...) (or analyze() for every table)
    afterwards, so PostgreSQL plans its queries from the rows it holds, not from the empty tables autovacuum last
    saw (issue 14: one such plan hung CI for 13 minutes). A no-op on SQLite."""
    from tests import planner

    return planner.analyze


@pytest.fixture
def setup(db):
    """A template, a leaf queue and a cluster that a submit can name."""
    from tests import builders

    cluster = builders.make_cluster("local")
    queue = builders.make_queue("team-a", clusters=[cluster])
    template = builders.make_template("llm")
    return template, queue, cluster


@pytest.fixture
def queue_syncs(sent_tasks):
    """Record queue sync tasks instead of sending them: ("reconcile_queue", policy_id) / ("sync_queues", id)."""
    from scheduling.work import enqueue

    calls = []

    def listen(name, args):
        if name == enqueue.RECONCILE_QUEUE:
            calls.append(("reconcile_queue", args[0]))
        elif name == enqueue.SYNC_QUEUES:
            calls.append(("sync_queues", args[0] if args else None))

    sent_tasks.listeners.append(listen)
    return calls


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test starts with an empty default cache (local memory in tests): what one test remembered, e.g. a
    cluster's in-use totals (db/cluster_usage.py, keyed by a cluster id the next test may reuse), must not
    answer for another."""
    from django.core.cache import cache

    from scheduling.db import clock as dbclock

    cache.clear()
    # The database clock's offset is measured once per process and kept (scheduling/db/clock.py): forgotten here, so
    # whether a test reads the database does not depend on which test ran before it in the same process.
    dbclock.forget()
    yield
    # The reconcile batch threads keep their database connections between batches (reconcile/jobs/batch.py): closed
    # after the test that used them, so none is left open on the test database when the suite drops it.
    from scheduling.reconcile.jobs import batch

    batch.close_threads()
