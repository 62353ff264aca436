"""API routes under /api/v1/."""
from rest_framework.routers import DefaultRouter

from .views import audit as audit_views
from .views import clusters as cluster_views
from .views import jobs as job_views
from .views import queues as queue_views
from .views import templates as template_views
from .views import tokens as token_views
from .views import webhooks as webhook_views

router = DefaultRouter()
router.register("clusters", cluster_views.ClusterViewSet, basename="cluster")
router.register("queues", queue_views.QueuePolicyViewSet, basename="queue")
router.register("templates", template_views.RuntimeTemplateViewSet, basename="template")
router.register("jobs", job_views.GangJobViewSet, basename="job")
router.register("tokens", token_views.ApiTokenViewSet, basename="token")
router.register("webhooks", webhook_views.WebhookSubscriptionViewSet, basename="webhook")
router.register("audit", audit_views.AuditEventViewSet, basename="audit")

urlpatterns = router.urls
