"""/api/v1/webhooks/: webhook subscriptions.
"""
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ...models import WebhookSubscription
from ...services.webhooks import subscriptions as notifications
from ...work import dispatch
from .. import serializers as s


class WebhookSubscriptionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
                                 viewsets.GenericViewSet):
    """Webhooks on job phase changes (Standard Webhooks signatures): yours only; managed with a password login.
    The create answer holds the signing secret, shown once. `deliveries` is the delivery log; `test` sends a test
    event."""

    serializer_class = s.WebhookSubscriptionSerializer

    def get_queryset(self):
        qs = WebhookSubscription.objects.select_related("owner", "queue")
        return notifications.visible_subscriptions(self.request.user, qs)

    @extend_schema(request=s.WebhookSubscriptionWriteSerializer,
                   responses={201: s.WebhookSubscriptionCreatedSerializer})
    def create(self, request):
        """Subscribe a receiver URL to phase changes of a job, a queue's jobs, or every job you submitted."""
        sub, secret = notifications.create_subscription(request.user, request.data)
        sub = self.get_queryset().get(pk=sub.pk)
        sub.secret = secret
        return Response(s.WebhookSubscriptionCreatedSerializer(sub).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.WebhookSubscriptionWriteSerializer, responses=s.WebhookSubscriptionSerializer)
    def partial_update(self, request, pk=None):
        """Change a subscription (fields sent only)."""
        sub = notifications.update_subscription(request.user, self.get_object(), request.data)
        return Response(s.WebhookSubscriptionSerializer(sub).data)

    def perform_destroy(self, instance):
        notifications.check_manage(self.request.user)
        instance.delete()

    @extend_schema(responses=s.WebhookDeliverySerializer(many=True))
    @action(detail=True, methods=["get"])
    def deliveries(self, request, pk=None):
        """The subscription's last 200 deliveries, newest first: status, attempts, last status code and error."""
        sub = self.get_object()
        return Response(s.WebhookDeliverySerializer(sub.deliveries.all()[:200], many=True).data)

    @extend_schema(request=None, responses={202: s.WebhookDeliverySerializer})
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        """Send a test event now (type `webhook.test`); the answer is its delivery row, Pending."""
        sub = self.get_object()
        notifications.check_manage(request.user)
        delivery = notifications.send_test(request.user, sub)
        dispatch.deliver_webhook_on_commit(delivery.pk)
        return Response(s.WebhookDeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)
