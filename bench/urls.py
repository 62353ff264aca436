"""Benchmark URLconf: every gangweb route, plus the baseline endpoints under /bench/baseline/."""
from django.urls import include, path

from gangweb.urls import handler500  # noqa: F401 - the same 503-not-500 handler as production
from gangweb.urls import urlpatterns as gangweb_urlpatterns

urlpatterns = [
    path("bench/baseline/", include("bench.baseline_app.urls")),
    *gangweb_urlpatterns,
]
