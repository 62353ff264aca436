"""The scheduling app: clusters, queue policies, runtime templates, gang jobs and their reconcile."""
from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    """App config; checks the backend registry at start-up (an unknown backend name is an error) and the
    outbound address and trusted proxy settings (a network that does not parse is an error)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "scheduling"

    def ready(self):
        from django.core.exceptions import ImproperlyConfigured

        from . import checks  # noqa: F401 - checks: registers the system checks
        from .backends import registry
        from .kube.errors import install_log_redaction
        from .observe import signals  # noqa: F401 - connects the reconcile metrics receiver
        from .security import addresses

        registry.check_registry()
        install_log_redaction()  # no server body or credential in any log line's traceback
        try:
            addresses.cluster_policy()
        except ValueError as exc:
            raise ImproperlyConfigured(f"GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES: {exc}") from None
        from .security import client_address

        try:
            client_address.trusted_proxies()
        except ValueError as exc:
            raise ImproperlyConfigured(f"GANGWEB_TRUSTED_PROXIES: {exc}") from None
