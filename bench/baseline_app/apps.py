"""App config of the benchmark baseline (installed only by bench.settings)."""
from django.apps import AppConfig


class BaselineAppConfig(AppConfig):
    """Baseline endpoints for the submit benchmark."""

    name = "bench.baseline_app"
    label = "bench_baseline"
    default_auto_field = "django.db.models.BigAutoField"
