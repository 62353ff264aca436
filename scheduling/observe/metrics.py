"""Prometheus metrics served on /metrics (prometheus_client).

Series:
- `gangweb_jobs{phase, queue}` (gauge): jobs by phase and queue. A custom collector runs ONE grouped query per
  scrape, so the value is the database's truth whichever process serves the scrape.
- `gangweb_job_time_in_queue_seconds{cluster, queue}` (histogram): Queued (else Dispatched) -> Scheduled, observed
  when the Scheduled entry is recorded.
- `gangweb_job_time_to_running_seconds{cluster, queue}` (histogram): Submitted -> Running, observed when the
  Running entry is recorded.
  Neither histogram observes a span one of whose ends is an inferred time (`PhaseTransition.inferred`:
  `observe.timeline.durations` gives None for it): latencies are the cluster's, never gangweb's guesses.
- `gangweb_reconcile_duration_seconds{cluster, backend}` (histogram) and
  `gangweb_reconcile_errors_total{cluster, backend, reason}` (counter): one observation per job reconcile pass,
  fed from its ReconcileAttempt row (`observe.signals`).
- `gangweb_watch_restarts_total{cluster, resource, reason}` (counter): a watch was lost (410 Gone, connection
  dropped, API error) and resumed with a fresh list. `gangweb_watch_events_total{cluster, resource, type}` counts
  the events delivered.
- `gangweb_watch_observations_total{cluster}` (counter) and `gangweb_watch_delay_seconds{cluster}` (histogram): one
  per job observation the watch made (reconcile/cluster_watcher.py); the delay runs from the job's first change since
  its last observation reaching the watcher until that observation ended: how far the database trails the watch.

Across processes: histograms and counters are observed in whichever process does the work (a Celery worker, the
`watch_clusters` process, a gunicorn worker). When `PROMETHEUS_MULTIPROC_DIR` is set (runstack and the docker image
set it), prometheus_client's multiprocess mode writes every process's samples to files in that directory and
`/metrics` merges them (`MultiProcessCollector`), so any web process serves the sum. The directory must be empty
when the stack starts (runstack wipes it). Without it (tests, a single process) the default registry is served.
The jobs gauge never depends on this: it is read from the database.
"""
from __future__ import annotations

import os

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily

# Seconds: from "scheduled at once" to "waited a day", the range gang jobs actually see.
DURATION_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400, float("inf"))
RECONCILE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, float("inf"))
WATCH_DELAY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, float("inf"))

TIME_IN_QUEUE = Histogram("gangweb_job_time_in_queue_seconds",
                          "Time a job waited in the scheduler: Queued (else Dispatched) until Scheduled.",
                          ["cluster", "queue"], buckets=DURATION_BUCKETS)
TIME_TO_RUNNING = Histogram("gangweb_job_time_to_running_seconds",
                            "Time from submit until every pod of the job was running.",
                            ["cluster", "queue"], buckets=DURATION_BUCKETS)
RECONCILE_DURATION = Histogram("gangweb_reconcile_duration_seconds", "Wall time of one job reconcile pass.",
                               ["cluster", "backend"], buckets=RECONCILE_BUCKETS)
RECONCILE_ERRORS = Counter("gangweb_reconcile_errors_total", "Reconcile passes that ended in an error.",
                           ["cluster", "backend", "reason"])
WATCH_RESTARTS = Counter("gangweb_watch_restarts_total",
                         "Watches lost (410 Gone, connection drop, API error) and resumed with a fresh list.",
                         ["cluster", "resource", "reason"])
WATCH_EVENTS = Counter("gangweb_watch_events_total", "Watch events received.", ["cluster", "resource", "type"])
WATCH_OBSERVATIONS = Counter("gangweb_watch_observations_total", "Job observations made by the watch.",
                             ["cluster"])
WATCH_DELAY = Histogram("gangweb_watch_delay_seconds",
                        "From a job's first change since its last observation reaching the watch until the job's "
                        "next observation ended.", ["cluster"], buckets=WATCH_DELAY_BUCKETS)


def observe_durations(cluster: str, queue: str, new_phases: set[str], spans: dict[str, float | None]) -> None:
    """Observe the duration histograms for the phases just recorded (`spans` from observe.timeline.durations)."""
    from ..choices import GangPhase

    if GangPhase.SCHEDULED in new_phases and spans.get("time_in_queue") is not None:
        TIME_IN_QUEUE.labels(cluster, queue).observe(max(spans["time_in_queue"], 0.0))
    if GangPhase.RUNNING in new_phases and spans.get("time_to_running") is not None:
        TIME_TO_RUNNING.labels(cluster, queue).observe(max(spans["time_to_running"], 0.0))


class JobsCollector:
    """`gangweb_jobs{phase, queue}` from one `GROUP BY phase, queue` query per scrape."""

    def collect(self):
        """Yield the gauge family (prometheus_client collector protocol)."""
        from django.db.models import Count

        from ..models import GangJob

        family = GaugeMetricFamily("gangweb_jobs", "Jobs by phase and queue.", labels=["phase", "queue"])
        rows = GangJob.objects.values_list("phase", "queue__name").annotate(n=Count("id")).order_by()
        for phase, queue, n in rows:
            family.add_metric([phase, queue or ""], n)
        yield family


class _Default:
    """Proxy to the process's default registry (everything this process observed, plus process metrics)."""

    def collect(self):
        yield from REGISTRY.collect()


def exposition() -> bytes:
    """The text exposition of every series, for one scrape."""
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_Default())
    registry.register(JobsCollector())
    return generate_latest(registry)
