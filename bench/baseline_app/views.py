"""Minimal DRF endpoints: create one row, or bulk-create many in one INSERT.

They run behind the same middleware, authentication (session + CSRF) and permission classes as the jobs API, so
the ratio against them isolates what gangweb's own submit path costs.
"""
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from .models import BaselineRow


class BaselineRowSerializer(serializers.ModelSerializer):
    """Name plus the whole body."""

    class Meta:
        model = BaselineRow
        fields = ["id", "name", "body", "created_at"]
        read_only_fields = ["id", "body", "created_at"]

    def to_internal_value(self, data):
        values = super().to_internal_value(data)
        values["body"] = data
        return values


class BaselineCreate(generics.CreateAPIView):
    """POST one job body -> 201 with the stored row (one INSERT)."""

    serializer_class = BaselineRowSerializer


class BaselineBulkCreate(APIView):
    """POST {"jobs": [body, ...]} -> 201 {"count": n} (one bulk INSERT)."""

    def post(self, request):
        items = request.data.get("jobs") or []
        rows = BaselineRow.objects.bulk_create([BaselineRow(name=str(i.get("name", "")), body=i) for i in items])
        return Response({"count": len(rows), "ids": [r.id for r in rows]}, status=status.HTTP_201_CREATED)
