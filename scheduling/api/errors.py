"""Turn service errors into API responses with the same {field: [message]} shape DRF uses."""
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from .. import unavailable
from ..services.errors import ServiceError


def exception_handler(exc, context):
    """DRF exception handler: Django ValidationError -> 400, ServiceError -> its status, a delete blocked by
    PROTECT -> 409, a dependency down (PostgreSQL, Redis, broker) -> 503 with Retry-After; else DRF's default."""
    dependency = unavailable.dependency_of(exc)
    if dependency is not None:
        request = context.get("request")
        if request is not None:
            unavailable.log.warning("%s %s: %s unavailable (%s: %s); answered 503", request.method, request.path,
                                    dependency, type(exc).__name__, exc)
        return Response({"detail": unavailable.message(dependency), "dependency": dependency},
                        status=status.HTTP_503_SERVICE_UNAVAILABLE,
                        headers={"Retry-After": str(unavailable.RETRY_AFTER_SECONDS)})
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            return Response(exc.message_dict, status=status.HTTP_400_BAD_REQUEST)
        return Response({"detail": exc.messages}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ServiceError):
        retry = getattr(exc, "retry_after", None)
        return Response({k: [v] for k, v in exc.errors.items()}, status=exc.status,
                        headers={"Retry-After": str(retry)} if retry else None)
    if isinstance(exc, Http404):
        return Response({"detail": not_found_message(context.get("view"))}, status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, RequestDataTooBig):
        return Response({"detail": [f"request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes"]},
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, DataError):  # a value the database cannot store or compare (PostgreSQL: NUL, out of range)
        return Response({"detail": ["a value in the request is out of range for the database"]},
                        status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, (ProtectedError, RestrictedError)):  # deleting a queue or cluster that jobs still use
        names = sorted({str(type(o)._meta.verbose_name_plural) for o in exc.protected_objects} if hasattr(
            exc, "protected_objects") else set())
        return Response({"detail": [f"still in use by {', '.join(names) or 'other objects'}; delete those first"]},
                        status=status.HTTP_409_CONFLICT)
    return drf_exception_handler(exc, context)


def not_found_message(view) -> str:
    """"no job '12' that you can see": one wording for an object that does not exist and one the caller may not
    see (services.errors.NotFound), built from the view alone so the two can never differ."""
    model = getattr(getattr(view, "queryset", None), "model", None)
    if model is None and hasattr(view, "get_serializer_class"):
        try:
            model = getattr(getattr(view.get_serializer_class(), "Meta", None), "model", None)
        except Exception:  # noqa: BLE001 - a view without one: the message says "object"
            model = None
    noun = {"GangJob": "job", "QueuePolicy": "queue", "RuntimeTemplate": "template"}.get(
        getattr(model, "__name__", ""), str(model._meta.verbose_name) if model is not None else "object")
    kwargs = getattr(view, "kwargs", None) or {}
    key = getattr(view, "lookup_url_kwarg", None) or getattr(view, "lookup_field", None) or "pk"
    lookup = kwargs.get(key)
    if lookup is None and len(kwargs) == 1:
        lookup = next(iter(kwargs.values()))
    return f"no {noun} '{lookup}' that you can see" if lookup is not None else f"no such {noun} that you can see"
