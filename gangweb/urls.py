"""Top-level routes: dashboard, API, schema and docs, auth, admin, Prometheus metrics."""
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from scheduling.api.metrics import metrics_view

urlpatterns = [
    path("", include("scheduling.urls")),
    path("api/v1/", include("scheduling.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"),
         name="api-docs"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
]

# A dependency down outside any view (e.g. saving the session while PostgreSQL restarts): 503, not a 500 page.
handler500 = "scheduling.unavailable.server_error"
