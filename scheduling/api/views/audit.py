"""/api/v1/audit/: the audit log.
"""
from rest_framework import viewsets

from ...filtersets import AuditEventFilterSet
from ...models import AuditEvent
from .. import serializers as s
from ..permissions import IsPlatformAdmin


class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """The audit log, newest first: who created, changed, submitted or cancelled what. Platform admins only."""

    queryset = AuditEvent.objects.select_related("token")
    serializer_class = s.AuditEventSerializer
    filterset_class = AuditEventFilterSet
    permission_classes = [IsPlatformAdmin]
