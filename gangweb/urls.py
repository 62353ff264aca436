"""Top-level routes: dashboard, API, schema and docs, auth, admin, Prometheus metrics."""
from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from scheduling.api.metrics import metrics_view

# The Swagger UI page loads its bundle from the CDN drf-spectacular names (SWAGGER_UI_DIST); its own script is
# served by the split view from our origin, so no inline script is needed.
_SWAGGER_CSP = {"script-src": ["https://cdn.jsdelivr.net"], "style-src": ["https://cdn.jsdelivr.net"]}

urlpatterns = [
    path("", include("scheduling.urls")),
    path("api/v1/", include("scheduling.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", csp_update(_SWAGGER_CSP)(SpectacularSwaggerSplitView.as_view(url_name="schema")),
         name="api-docs"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
]
