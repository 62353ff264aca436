"""API routes under /api/v1/."""
from rest_framework.routers import DefaultRouter

from . import views

router = DefaultRouter()
router.register("clusters", views.ClusterViewSet, basename="cluster")
router.register("queues", views.QueuePolicyViewSet, basename="queue")
router.register("templates", views.RuntimeTemplateViewSet, basename="template")
router.register("jobs", views.GangJobViewSet, basename="job")
router.register("tokens", views.ApiTokenViewSet, basename="token")
router.register("webhooks", views.WebhookSubscriptionViewSet, basename="webhook")
router.register("audit", views.AuditEventViewSet, basename="audit")

urlpatterns = router.urls
