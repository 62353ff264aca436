"""`manage.py watch_clusters`: keep a list-then-watch on every registered cluster and observe jobs on each change.

Any number of replicas may run: each cluster is watched by the one replica holding its lease `watch:cluster:<pk>`
(scheduling/work/election.py), the others stand by and take over within GANGWEB_WATCH_LEASE_SECONDS plus one tick after
the holder dies. `--max-clusters` (GANGWEB_WATCH_MAX_CLUSTERS) caps how many clusters one replica watches, so 50
clusters spread over several replicas."""
from __future__ import annotations

import functools
import hashlib
import logging
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections, connections

from scheduling.models import Cluster
from scheduling.reconcile import watching
from scheduling.work.election import Claims

log = logging.getLogger(__name__)

RESCAN_SECONDS = 5  # how often leases are renewed and the set of clusters (and their credentials) re-read
# After a failed rescan (PostgreSQL restarting, a network cut): wait this long, growing per failure in a row,
# then read again. The running watches are kept meanwhile; they need no database to keep their caches.
RESCAN_BACKOFF_SECONDS = (1, 2, 5, 10, 15)


def lease_name(cluster_pk: int) -> str:
    """The lease whose holder watches cluster `cluster_pk`."""
    return f"watch:cluster:{cluster_pk}"


def _fingerprint(cluster: Cluster) -> str:
    raw = f"{cluster.in_cluster}\0{cluster.context}\0{cluster.kubeconfig}\0{sorted(cluster.served_apis or [])}"
    return hashlib.sha256(raw.encode()).hexdigest()


class Command(BaseCommand):
    """Runs until SIGTERM/Ctrl-C. Adds a watcher for each new cluster, restarts it when the cluster's credentials
    or served APIs change, and stops it when the cluster is deleted. A cluster that cannot be reached keeps
    retrying inside its watcher (each loss counted in gangweb_watch_restarts_total).

    A database outage never ends the command: a rescan that fails (OperationalError, InterfaceError, or anything
    else) is logged, its broken connection closed, and retried after RESCAN_BACKOFF_SECONDS while every running
    watch keeps going; their observations wait for the database themselves (reconcile/watching.observe_job).

    Leases: a cluster is watched only under its lease. A watch whose lease was not renewed within the renew
    deadline keeps its cache but writes nothing (fenced) until a renewal succeeds; a lease found taken by another
    replica stops that watch."""

    help = "Watch every cluster's gangweb objects and record job phases within a second of a change."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="start, sync once, stop (for smoke tests)")
        parser.add_argument("--max-clusters", type=int, default=settings.GANGWEB_WATCH_MAX_CLUSTERS,
                            help="watch at most this many clusters in this replica (0: no limit)")

    def handle(self, *args, **options):
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        running: dict[int, tuple[str, object]] = {}
        self.claims = Claims(settings.GANGWEB_WATCH_LEASE_SECONDS)
        self.max_clusters = options["max_clusters"] or None
        failures = 0
        try:
            while not stop.is_set():
                if self._rescan_safely(running):
                    failures = 0
                    if options["once"]:
                        for _, watcher in running.values():
                            watcher.wait_synced(30)
                        break
                    stop.wait(RESCAN_SECONDS)
                else:
                    stop.wait(RESCAN_BACKOFF_SECONDS[min(failures, len(RESCAN_BACKOFF_SECONDS) - 1)])
                    failures += 1
        except KeyboardInterrupt:
            pass
        finally:
            for _, watcher in running.values():
                watcher.stop()
            self.claims.release()

    def _rescan_safely(self, running: dict) -> bool:
        """One rescan; False (logged, connection dropped) when it failed, so the caller backs off and tries again.
        Django closes a broken connection only at the end of a request; this loop is no request, so it does."""
        close_old_connections()
        try:
            self._rescan(running)
            return True
        except Exception as exc:  # a database outage above all; nothing may end the watches
            log.warning("watch_clusters: reading the clusters failed (%s: %s); keeping %d watch(es), retrying",
                        type(exc).__name__, exc, len(running))
            connections.close_all()
            return False

    def _rescan(self, running: dict) -> None:
        """Renew the leases held (stopping the watches of those lost), read the clusters, stop the watches of
        deleted ones, try to take the leases of unwatched ones, and (re)start the watches this replica holds."""
        for name in self.claims.renew():
            pk = int(name.rsplit(":", 1)[1])
            if pk in running:
                running.pop(pk)[1].stop()
                self.stdout.write(f"stopped watching cluster {pk}: its lease was taken over")
        clusters = {c.pk: c for c in Cluster.objects.all() if c.kubeconfig or c.in_cluster}
        gone = [lease_name(pk) for pk in running if pk not in clusters]
        for pk in [pk for pk in running if pk not in clusters]:
            running.pop(pk)[1].stop()
        self.claims.release(gone)
        self.claims.acquire([lease_name(pk) for pk in sorted(clusters)], limit=self.max_clusters)
        for pk, cluster in clusters.items():
            if lease_name(pk) not in self.claims.held:
                continue
            fp = _fingerprint(cluster)
            if pk in running and running[pk][0] == fp:
                continue
            if pk in running:
                running.pop(pk)[1].stop()
            try:
                watcher = watching.watcher_for(cluster, may_write=functools.partial(self.claims.valid, lease_name(pk)))
                watcher.start()
            except Exception as exc:  # a bad kubeconfig must not stop the other clusters' watches
                log.warning("cluster %s: not watched: %s", cluster.name, exc)
                continue
            running[pk] = (fp, watcher)
            self.stdout.write(f"watching cluster {cluster.name}")
