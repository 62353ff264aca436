"""GET /metrics: the Prometheus text exposition (see scheduling.observe.metrics for the series)."""
from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from ..observe import metrics

NEEDS_TOKEN = "metrics need 'Authorization: Bearer <GANGWEB_METRICS_TOKEN>'\n"
NO_TOKEN_SET = ("metrics are off: set GANGWEB_METRICS_TOKEN (and send it as 'Authorization: Bearer <token>'), or "
                "GANGWEB_METRICS_PUBLIC=1 to serve them to anyone\n")


@require_GET
def metrics_view(request):
    """Serve every metric to a scrape that sends `Authorization: Bearer <GANGWEB_METRICS_TOKEN>` (401 otherwise,
    compared in constant time). The series name every tenant's queues and job counts, so without a token set the
    endpoint answers 401 too, unless the install opted out with `GANGWEB_METRICS_PUBLIC` (issue 15, L6); a set
    token is required even then."""
    token = getattr(settings, "GANGWEB_METRICS_TOKEN", "")
    if token:
        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return HttpResponse(NEEDS_TOKEN, status=401, content_type="text/plain",
                                headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
    elif not getattr(settings, "GANGWEB_METRICS_PUBLIC", False):
        return HttpResponse(NO_TOKEN_SET, status=401, content_type="text/plain",
                            headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
    return HttpResponse(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)
