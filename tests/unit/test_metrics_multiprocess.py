"""With PROMETHEUS_MULTIPROC_DIR, a histogram observed in one process (a worker) is served by another (web)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

OBSERVE = """
import django; django.setup()
from scheduling.observe import metrics
metrics.TIME_IN_QUEUE.labels("local", "team-a").observe(42.0)
metrics.WATCH_RESTARTS.labels("local", "pods", "Gone").inc()
"""
SERVE = """
import django; django.setup()
from scheduling.observe import metrics
metrics.JobsCollector.collect = lambda self: iter(())  # no database in this process; not what is tested here
text = metrics.exposition().decode()
print([line for line in text.splitlines() if line.startswith(("gangweb_job_time_in_queue_seconds_sum",
                                                                "gangweb_watch_restarts_total"))])
"""


def run(code: str, multiproc_dir: Path) -> str:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(multiproc_dir), "GANGWEB_TESTING": "1",
           "DJANGO_SETTINGS_MODULE": "gangweb.settings"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True, timeout=60).stdout


def test_a_histogram_observed_in_a_worker_process_is_served_by_the_web_process(tmp_path):
    run(OBSERVE, tmp_path)
    run(OBSERVE, tmp_path)  # a second worker
    out = run(SERVE, tmp_path)
    assert 'gangweb_job_time_in_queue_seconds_sum{cluster="local",queue="team-a"} 84.0' in out
    assert 'gangweb_watch_restarts_total{cluster="local",reason="Gone",resource="pods"} 2.0' in out
