"""Issue 32 row 10: an install whose throttles would count per process says so at start-up."""
from scheduling import checks


def test_row10_a_local_memory_cache_outside_debug_warns_that_limits_are_per_process(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.DEBUG, settings.TESTING = False, False
    [warning] = checks.shared_limit_counters()
    assert warning.id == "gangweb.W032" and "per process" in warning.msg and "REDIS_URL" in warning.hint
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": "redis://127.0.0.1:6379/0"}}
    assert checks.shared_limit_counters() == []
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.DEBUG = True  # make run: one process
    assert checks.shared_limit_counters() == []
