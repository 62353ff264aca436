"""Rate limits on job submission (single, bulk and resubmit), per API token and per user.

Rates are read from settings at request time ("<n>/<second|minute|hour|day>", or None for no limit):
GANGWEB_SUBMIT_RATE_PER_TOKEN and GANGWEB_SUBMIT_RATE_PER_USER. A bulk submit counts as one request.

Semantics are DRF's ``SimpleRateThrottle``: a sliding window. A request is allowed when fewer than n requests were
allowed in the `period` seconds before it; refused requests are not recorded; the 429's Retry-After is DRF's
``wait()`` (seconds until the oldest recorded request leaves the window). Where the counters live:

- When the default cache is Redis (``django.core.cache.backends.redis.RedisCache``, i.e. REDIS_URL is set), on that
  Redis server, in one sorted set per key (scores: request times), read and updated by one Lua script: one round
  trip per throttle and request, atomic across web workers. DRF's own implementation reads the history list and
  writes it back (two round trips, and two concurrent requests can both pass on the same last slot).
- Otherwise (a laptop without Redis, the tests' local-memory cache) in the default cache, by DRF's code unchanged.
"""
from __future__ import annotations

import os
import time

import redis
from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import SimpleRateThrottle

from ..models import ApiToken

REDIS_CACHE_BACKEND = "django.core.cache.backends.redis.RedisCache"

# KEYS[1]: the throttle's key; ARGV: now (Unix seconds, float), period (seconds), n (allowed per period), a member
# unique to this request. Drops the times at or before now - period (DRF drops `t <= now - duration`), then
# records now if fewer than n remain. Returns {1, count including this request, ""} when allowed,
# {0, count, oldest time as a string} when refused (Lua numbers become integers in replies; strings do not).
SLIDING_WINDOW_LUA = """
local key, now, period, limit = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
local count = redis.call('ZCARD', key)
if count < limit then
  redis.call('ZADD', key, ARGV[1], ARGV[4])
  redis.call('PEXPIRE', key, math.ceil(period * 1000))
  return {1, count + 1, ''}
end
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return {0, count, oldest[2]}
"""

_scripts: dict = {}  # redis:// URL -> redis-py Script bound to a client for it


def _sliding_window_script(location: str):
    """The registered Lua script on a redis-py client for `location` (a redis:// URL), one per process and URL.
    redis-py's Script sends EVALSHA and loads the script once if the server does not know it yet."""
    script = _scripts.get(location)
    if script is None:
        script = _scripts[location] = redis.Redis.from_url(location).register_script(SLIDING_WINDOW_LUA)
    return script


def _redis_location() -> str | None:
    """The default cache's Redis URL when it is Django's Redis cache (its first server), else None."""
    default = settings.CACHES.get("default", {})
    if default.get("BACKEND") != REDIS_CACHE_BACKEND:
        return None
    location = default.get("LOCATION")
    if isinstance(location, list | tuple):
        location = location[0]
    return location.split(",")[0].split(";")[0] if location else None


class SlidingWindowThrottle(SimpleRateThrottle):
    """DRF's ``SimpleRateThrottle`` (same rate strings, keys and sliding-window semantics) counting in Redis with
    one atomic round trip when the default cache is Redis; DRF's cache-based history otherwise.

    Subclasses set `scope` and implement ``get_rate()`` and ``get_cache_key(request, view)`` as for DRF. Raises
    redis-py's ``ConnectionError``/``TimeoutError`` if Redis is down (as DRF's cache calls would)."""

    def allow_request(self, request, view):
        location = _redis_location()
        if location is None:
            return super().allow_request(request, view)
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        member = f"{self.now!r}:{os.urandom(6).hex()}"  # two requests in the same microsecond are two entries
        allowed, self.count, oldest = _sliding_window_script(location)(
            keys=[cache.make_key(self.key)], args=[repr(self.now), self.duration, self.num_requests, member])
        self.oldest = float(oldest) if oldest else self.now
        return bool(allowed)

    def wait(self):
        """Seconds until a request may pass: DRF's ``SimpleRateThrottle.wait()`` over the Redis counters."""
        if _redis_location() is None:
            return super().wait()
        available = self.num_requests - self.count + 1
        if available <= 0:
            return None
        return (self.duration - (self.now - self.oldest)) / float(available)


class SubmitPerTokenThrottle(SlidingWindowThrottle):
    """Counts submissions made with one API token; requests without a token pass."""

    scope = "submit-token"

    def get_rate(self):
        return getattr(settings, "GANGWEB_SUBMIT_RATE_PER_TOKEN", None)

    def get_cache_key(self, request, view):
        if not isinstance(request.auth, ApiToken):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.auth.pk}


class SubmitPerUserThrottle(SlidingWindowThrottle):
    """Counts submissions by one user, whether through the session, basic auth or any of their tokens."""

    scope = "submit-user"

    def get_rate(self):
        return getattr(settings, "GANGWEB_SUBMIT_RATE_PER_USER", None)

    def get_cache_key(self, request, view):
        ident = request.user.pk if request.user and request.user.is_authenticated else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}


SUBMIT_THROTTLES = [SubmitPerTokenThrottle, SubmitPerUserThrottle]


class BulkJobsQuota:
    """A per-user quota of jobs created by bulk submits per minute: `settings.GANGWEB_BULK_JOBS_PER_MINUTE` (None
    or 0: no quota). The submit throttles count a bulk submit as one request, so without this a user could create
    5,000 jobs × 300 requests a minute (issue 15, L9).

    Fixed one-minute windows (a counter per user and minute in the default cache, `cache.incr`: atomic in Redis and
    in the local-memory cache), so at most twice the quota can pass around a window's edge. A bulk is charged its
    job count before it runs and refunded when it creates nothing (refused, or an idempotent replay); refused
    bulks are not counted. Over the quota: `exceptions.Throttled` (429) with `Retry-After` = seconds to the next
    window. A single bulk larger than the whole quota can never pass: ValidationError naming `jobs` (400).
    """

    scope = "bulk-jobs"
    period = 60
    clock = staticmethod(time.time)  # Unix seconds; tests replace it

    def __init__(self, request):
        self.limit = getattr(settings, "GANGWEB_BULK_JOBS_PER_MINUTE", None) or None
        self.now = self.clock()
        self.window = int(self.now // self.period)
        user = request.user
        ident = user.pk if user and user.is_authenticated else request.META.get("REMOTE_ADDR", "")
        self.key = f"throttle_{self.scope}_{ident}_{self.window}"
        self.charged = 0

    def charge(self, jobs: int) -> None:
        """Count `jobs` against the quota, or raise Throttled (429) / ValidationError (400) counting nothing."""
        from django.core.exceptions import ValidationError
        from rest_framework.exceptions import Throttled

        if self.limit is None or jobs <= 0:
            return
        if jobs > self.limit:
            raise ValidationError({"jobs": f"{jobs} jobs in one request is more than the quota of {self.limit} jobs "
                                           "per minute; split it into smaller requests"})
        cache.add(self.key, 0, timeout=self.period * 2)
        try:
            used = cache.incr(self.key, jobs)
        except ValueError:  # expired between add and incr: start the window again
            cache.set(self.key, jobs, timeout=self.period * 2)
            used = jobs
        if used > self.limit:
            cache.decr(self.key, jobs)
            wait = max(1, int((self.window + 1) * self.period - self.now + 0.999))
            raise Throttled(wait=wait, detail=f"bulk submits may create at most {self.limit} jobs per minute per "
                                              f"user; {used - jobs} were created in this minute")
        self.charged = jobs

    def refund(self) -> None:
        """Give back what `charge` counted (the bulk created nothing)."""
        if self.charged:
            try:
                cache.decr(self.key, self.charged)
            except ValueError:  # the window's counter expired meanwhile: nothing to give back
                pass
            self.charged = 0
