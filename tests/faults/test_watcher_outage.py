"""`manage.py watch_clusters` outlives a PostgreSQL outage longer than its rescan period (no control plane needed).

Before issue 16 its rescan ran `Cluster.objects.all()` with no error handling: the first rescan after PostgreSQL
went away raised OperationalError, the command ended and every watch with it. Here a private PostgreSQL is stopped
for 20 s under a running watcher (a rescan every 15 s must fail at least once), started again, and a cluster
registered after that must be picked up by the same process: it reconnected.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

from bench.faultstack import FaultStack
from bench.stack import wait_for

pytestmark = [pytest.mark.faults]

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: {token: t}}]
"""


@pytest.fixture
def watcher_stack():
    """PostgreSQL, Redis, gunicorn and the watcher of our own, one cluster registered whose API cannot answer."""
    workdir = Path(tempfile.mkdtemp(prefix="gangweb-watch-outage-"))
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    with FaultStack(workdir) as stack:
        stack.start(kubeconfig=str(kubeconfig), workers=0, beat=False, watch=True)
        yield stack


def test_the_watcher_survives_a_postgresql_outage_and_reads_the_clusters_again(watcher_stack):
    stack = watcher_stack
    wait_for(lambda: "watching cluster local" in stack.log_text("watch"), 60, "the watcher's first rescan")
    stack.stop_postgres("fast")
    time.sleep(20)
    stack.start_postgres_again()
    assert stack.alive("watch"), stack.log_text("watch")[-3000:]
    assert "reading the clusters failed" in stack.log_text("watch")  # at least one rescan met the outage

    stack.manage("shell", "-c", "from scheduling.models import Cluster; "
                 f"Cluster.objects.create(name='after-outage', kubeconfig={KUBECONFIG!r})")
    wait_for(lambda: "watching cluster after-outage" in stack.log_text("watch"), 45, "a rescan after the outage")
    assert stack.alive("watch")
