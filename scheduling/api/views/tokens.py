"""/api/v1/tokens/: API tokens.
"""
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ...models import ApiToken
from ...services.access import tokens as token_service
from .. import serializers as s
from ..permissions import NotWithToken


class ApiTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """API tokens for pipelines: create (the secret is shown once), list, revoke. Password logins only."""

    serializer_class = s.ApiTokenSerializer
    permission_classes = [NotWithToken]

    def get_queryset(self):
        qs = ApiToken.objects.select_related("owner").prefetch_related("queues")
        return token_service.visible(self.request.user, qs)

    @extend_schema(request=s.ApiTokenCreateSerializer, responses={201: s.ApiTokenCreatedSerializer})
    def create(self, request):
        """Create a token scoped to queues and actions. The response holds the token: it is never shown again."""
        token, plaintext = token_service.create(request.user, request.data)
        token = self.get_queryset().get(pk=token.pk)
        token.token = plaintext
        return Response(s.ApiTokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=s.ApiTokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        """Revoke the token at once; requests with it then get 401."""
        token = token_service.revoke(request.user, self.get_object())
        return Response(s.ApiTokenSerializer(token).data)
