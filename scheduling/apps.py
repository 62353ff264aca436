"""The scheduling app: clusters, queue policies, runtime templates, gang jobs and their reconcile."""
from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    """App config; checks the backend registry at start-up (an unknown backend name is an error)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "scheduling"

    def ready(self):
        from .backends import registry
        from .observe import signals  # noqa: F401 - connects the reconcile metrics receiver

        registry.check_registry()
