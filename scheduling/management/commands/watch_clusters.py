"""`manage.py watch_clusters`: keep a list-then-watch on every registered cluster and observe jobs on each change."""
from __future__ import annotations

import hashlib
import logging
import signal
import threading

from django.core.management.base import BaseCommand

from scheduling.models import Cluster
from scheduling.reconcile import watching

log = logging.getLogger(__name__)

RESCAN_SECONDS = 15  # how often the set of clusters (and their credentials) is re-read


def _fingerprint(cluster: Cluster) -> str:
    raw = f"{cluster.in_cluster}\0{cluster.context}\0{cluster.kubeconfig}\0{sorted(cluster.served_apis or [])}"
    return hashlib.sha256(raw.encode()).hexdigest()


class Command(BaseCommand):
    """Runs until SIGTERM/Ctrl-C. Adds a watcher for each new cluster, restarts it when the cluster's credentials
    or served APIs change, and stops it when the cluster is deleted. A cluster that cannot be reached keeps
    retrying inside its watcher (each loss counted in gangweb_watch_restarts_total)."""

    help = "Watch every cluster's gangweb objects and record job phases within a second of a change."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="start, sync once, stop (for smoke tests)")

    def handle(self, *args, **options):
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        running: dict[int, tuple[str, object]] = {}
        try:
            while not stop.is_set():
                self._rescan(running)
                if options["once"]:
                    for _, watcher in running.values():
                        watcher.wait_synced(30)
                    break
                stop.wait(RESCAN_SECONDS)
        except KeyboardInterrupt:
            pass
        finally:
            for _, watcher in running.values():
                watcher.stop()

    def _rescan(self, running: dict) -> None:
        clusters = {c.pk: c for c in Cluster.objects.all()}
        for pk in [pk for pk in running if pk not in clusters]:
            running.pop(pk)[1].stop()
        for pk, cluster in clusters.items():
            if not (cluster.kubeconfig or cluster.in_cluster):
                continue
            fp = _fingerprint(cluster)
            if pk in running and running[pk][0] == fp:
                continue
            if pk in running:
                running.pop(pk)[1].stop()
            try:
                watcher = watching.watcher_for(cluster).start()
            except Exception as exc:  # a bad kubeconfig must not stop the other clusters' watches
                log.warning("cluster %s: not watched: %s", cluster.name, exc)
                continue
            running[pk] = (fp, watcher)
            self.stdout.write(f"watching cluster {cluster.name}")
