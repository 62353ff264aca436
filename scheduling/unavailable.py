"""What gangweb answers while one of its dependencies is down: 503 with `Retry-After`, never a 500.

A dependency is down when a request fails with one of DEPENDENCY_ERRORS:

- PostgreSQL (Django's ``OperationalError`` / ``InterfaceError``: the server restarting, refusing connections, a
  connection cut mid-request; SQLite's "database is locked" is an OperationalError too and also passes with time);
- Redis as the cache and the submit throttle's counter (redis-py ``ConnectionError`` / ``TimeoutError``, which
  include ``BusyLoadingError`` while a restarted Redis loads its data);
- Redis as the Celery broker (kombu ``OperationalError`` after its own publish retries).

The API answers JSON ``{"detail": "...", "dependency": "database"|"redis"|"broker"}`` (the same ``detail`` key
DRF uses) and pages a small HTML page, both with status 503 and ``Retry-After: RETRY_AFTER_SECONDS`` (RFC 9110
§15.6.4, §10.2.3). Nothing was created by such a request: PostgreSQL rolled its transaction back, the submit
throttle runs before any write, and an enqueue after a commit that the broker refuses is logged, not raised
(`work/dispatch.py`: the periodic resync and queue sync do that work instead). A client retries the same
request, with its Idempotency-Key when it sent one, and it is answered once the dependency is back.

Three places catch these errors, so that none ends as Django's 500 page: the DRF exception handler
(`scheduling.api.errors`) for API views, `DependencyUnavailableMiddleware.process_exception` for the dashboard's
views, and `server_error` (Django's ``handler500``) for what fails outside any view, e.g. the session middleware
saving a session while PostgreSQL is down.
"""
from __future__ import annotations

import logging
import sys

import redis.exceptions
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.template import loader
from django.views import defaults
from kombu.exceptions import OperationalError as BrokerOperationalError

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5  # seconds a client should wait; a PostgreSQL or Redis restart takes a few
API_PREFIX = "/api/"
DEPENDENCY_ERRORS = (OperationalError, InterfaceError, redis.exceptions.ConnectionError,
                     redis.exceptions.TimeoutError, BrokerOperationalError)


def dependency_of(exc: BaseException | None) -> str | None:
    """"database", "redis" or "broker" when `exc` says that dependency is down (also when it is the cause or
    context of `exc`, e.g. wrapped by a library), else None."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, (OperationalError, InterfaceError)):
            return "database"
        if isinstance(exc, BrokerOperationalError):
            return "broker"
        if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
            return "redis"
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def message(dependency: str) -> str:
    """The human sentence of a 503 for `dependency`."""
    what = {"database": "the database", "redis": "Redis (cache and rate limits)", "broker": "the task broker"}
    # A failed database transaction was rolled back and the throttle runs before any write; a broker error can come
    # after a commit (gangweb's own enqueues after a commit never fail the request: work/dispatch.py).
    changed = "" if dependency == "broker" else "; nothing was changed"
    return (f"{what.get(dependency, dependency)} is unavailable{changed}. Retry in {RETRY_AFTER_SECONDS} s "
            "(with the same Idempotency-Key, if you sent one).")


def response_for(request, exc: BaseException) -> HttpResponse | None:
    """The 503 answer for `request` failed by `exc` (JSON under /api/, an HTML page elsewhere), or None when
    `exc` is not a dependency being down. Logged as a warning, without the traceback a bug would deserve."""
    dependency = dependency_of(exc)
    if dependency is None:
        return None
    log.warning("%s %s: %s unavailable (%s: %s); answered 503", request.method, request.path, dependency,
                type(exc).__name__, exc)
    if request.path.startswith(API_PREFIX):
        response = JsonResponse({"detail": message(dependency), "dependency": dependency}, status=503)
    else:
        response = HttpResponse(loader.render_to_string("503.html", {"detail": message(dependency)}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def server_error(request, *args, **kwargs):
    """Django's handler500: a 503 (`response_for`) when the error being handled is a dependency being down,
    else Django's own 500 page."""
    response = response_for(request, sys.exc_info()[1])
    return response if response is not None else defaults.server_error(request, *args, **kwargs)
