"""Settings used only while benchmarking: gangweb's own settings plus the baseline app and its URLs.

Selecting this module (DJANGO_SETTINGS_MODULE=bench.settings) is the switch that enables the baseline endpoints;
production settings and URLs never include them.
"""
from gangweb.settings import *  # noqa: F403 - the benchmark runs gangweb exactly as configured, plus the baseline
from gangweb.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench.baseline_app"]
ROOT_URLCONF = "bench.urls"
GANGWEB_BENCH = True
# The worker's per-batch start/end lines (scheduling/reconcile/jobs/batch.py) and a single submit's claim line
# (reconcile/jobs/coalesce.py) at INFO whatever LOG_LEVEL says: the reconcile and submit-to-Running benchmarks read
# them from the worker's log to say where each round's time went.
LOGGING = {**LOGGING, "loggers": {**LOGGING.get("loggers", {}),  # noqa: F405 - gangweb's own LOGGING
                                  "scheduling.reconcile.jobs.batch": {"level": "INFO"},
                                  "scheduling.reconcile.jobs.coalesce": {"level": "INFO"}}}
