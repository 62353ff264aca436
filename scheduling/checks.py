"""Django system checks of the install's settings (`manage.py check --deploy` and every start-up)."""
from __future__ import annotations

from django.conf import settings
from django.core import checks

PER_PROCESS_LIMITS = "gangweb.W032"


@checks.register(checks.Tags.security)
def shared_limit_counters(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """A warning when the default cache is not shared between processes (no REDIS_URL, so Django's local-memory
    cache): the submit throttles and the bulk jobs-per-minute quota (scheduling/api/throttling.py) are then counted
    per web process, so N processes allow N times the configured rates (issue 32 row 10). The chart always sets
    REDIS_URL. Silent with DEBUG or under testing (`make run` and the tests run one web process)."""
    backend = (getattr(settings, "CACHES", {}).get("default") or {}).get("BACKEND", "")
    if "locmem" not in backend.lower() or getattr(settings, "DEBUG", False) or getattr(settings, "TESTING", False):
        return []
    return [checks.Warning(
        "throttles and the bulk jobs-per-minute quota are counted per process: the default cache is local memory",
        hint="set REDIS_URL (the chart always does) so every web process shares one count; docs/security.md, Web",
        id=PER_PROCESS_LIMITS)]
