"""Liveness and readiness URLs for the kubelet and load balancers: ``/healthz`` and ``/readyz``.

They are answered by `HealthMiddleware`, first in ``MIDDLEWARE``, before the host check, HTTPS redirect, session
and authentication: a kubelet probe arrives with the pod IP as its Host header, over plain HTTP, with no cookie, and
must not need an ``ALLOWED_HOSTS`` entry or a login. Neither says anything beyond "up" or "not ready", so both are
public.

- ``GET /healthz``: 200 ``ok`` while the process answers HTTP (no dependency is checked: a PostgreSQL outage must not
  get every web pod restarted; the pages answer 503 meanwhile, scheduling/middleware.py).
- ``GET /readyz``: 200 ``ready`` when the default database answers ``SELECT 1`` (every page and API call needs it);
  else 503 ``database unavailable`` and the pod leaves the Service's endpoints until it answers again.
"""
from __future__ import annotations

import logging

from django.db import DatabaseError, connection
from django.http import HttpResponse

logger = logging.getLogger(__name__)

LIVENESS_PATH = "/healthz"
READINESS_PATH = "/readyz"


def database_ready() -> bool:
    """True when the default database answers ``SELECT 1`` on this thread's connection (reconnecting if it was
    closed); False on any database error, which is logged once per failed probe at WARNING."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        logger.warning("readiness: the database does not answer: %s", exc)
        # A broken connection would otherwise be reused by the next probe on this thread.
        connection.close_if_unusable_or_obsolete()
        return False
    return True


class HealthMiddleware:
    """Answers GET/HEAD ``/healthz`` and ``/readyz`` (module docstring) and passes every other request on."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        path = request.path_info.rstrip("/") or "/"
        if path == LIVENESS_PATH and request.method in ("GET", "HEAD"):
            return _plain(200, "ok")
        if path == READINESS_PATH and request.method in ("GET", "HEAD"):
            return _plain(200, "ready") if database_ready() else _plain(503, "database unavailable")
        return self.get_response(request)


def _plain(status: int, text: str) -> HttpResponse:
    response = HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")
    response["Cache-Control"] = "no-store"
    return response
