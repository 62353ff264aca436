"""Turn service errors into API responses with the same {field: [message]} shape DRF uses."""
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from ..services.errors import ServiceError


def exception_handler(exc, context):
    """DRF exception handler: Django ValidationError -> 400, ServiceError -> its status; else DRF's default."""
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            return Response(exc.message_dict, status=status.HTTP_400_BAD_REQUEST)
        return Response({"detail": exc.messages}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ServiceError):
        return Response({k: [v] for k, v in exc.errors.items()}, status=exc.status)
    return drf_exception_handler(exc, context)
