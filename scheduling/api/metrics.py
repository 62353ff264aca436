"""GET /metrics: the Prometheus text exposition (see scheduling.observe.metrics for the series)."""
from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from ..observe import metrics


@require_GET
def metrics_view(request):
    """Serve every metric. When `GANGWEB_METRICS_TOKEN` is set, a scrape must send `Authorization: Bearer <token>`
    (401 otherwise); unset, the endpoint is open, as Prometheus scrape targets usually are inside a cluster."""
    token = getattr(settings, "GANGWEB_METRICS_TOKEN", "")
    if token:
        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return HttpResponse("metrics need 'Authorization: Bearer <GANGWEB_METRICS_TOKEN>'\n", status=401,
                                content_type="text/plain")
    return HttpResponse(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)
