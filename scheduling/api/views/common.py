"""Helpers the API viewsets share: the Idempotency-Key header, the changed fields of a write (for the audit log,
credentials redacted), integer query parameters, and the visibility check of a detail."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
    description="Retry a submit safely (draft-ietf-httpapi-idempotency-key-header; at most 255 characters, unique "
                "per user across single and bulk submits). A request repeating a key answers with what the first one "
                "created (same job ids, same 201) and `Idempotent-Replayed: true`, and creates nothing; the same key "
                "with a different body (or first used on the other submit endpoint) is 422 naming `Idempotency-Key`. "
                "A request that failed stores no key.")
REPLAYED_HEADER = "Idempotent-Replayed"  # as Stripe: this answer repeats the first request's, nothing was created


def changed_fields(instance, validated_data: dict) -> dict:
    """{field: new value} for the validated fields that differ from `instance` (M2M compared by primary keys)."""
    changed = {}
    for name, value in validated_data.items():
        current = getattr(instance, name, None)
        if hasattr(current, "all"):  # a many-to-many manager
            if {o.pk for o in current.all()} != {o.pk for o in value}:
                changed[name] = sorted(str(o) for o in value)
        elif current != value:
            changed[name] = _plain(value)
    return changed


def int_param(request, name: str, default: int, low: int, high: int | None, errors: dict) -> int:
    """Query parameter `name` as an int in [low, high] (`high` None: no upper bound), else `default` when absent;
    a bad value is added to `errors` as {name: reason}."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        errors[name] = "A valid integer is required."
        return default
    if value < low or (high is not None and value > high):
        errors[name] = f"must be {low} or more" + (f" and at most {high}" if high is not None else "")
    return value

class VisibleObjectMixin:
    """Lists show what services/access/roles.py lets the user see; a named object that exists but is not visible is 404,
    as one that does not exist (`check_read_*` raises access's NotFound)."""

    visible = None  # access.visible_* function
    check_read = None  # access.check_read_* function

    def base_queryset(self):
        """Every object, before visibility filtering."""
        return self.queryset.all()

    def get_queryset(self):
        return type(self).visible(self.request.user, self.base_queryset())

    def get_object(self):
        queryset = self.filter_queryset(self.base_queryset())
        lookup = self.kwargs[self.lookup_url_kwarg or self.lookup_field]
        obj = get_object_or_404(queryset, **{self.lookup_field: lookup})
        type(self).check_read(self.request.user, obj)
        self.check_object_permissions(self.request, obj)
        return obj


def _plain(value):
    """A JSON-safe form of a validated value for audit details: objects by name, lists item by item."""
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if isinstance(value, (int, float, str, bool, dict, type(None))):
        return value
    return str(value)


def redacted(data: dict) -> dict:
    """Audit details of a write: the fields set, with credentials replaced by "(changed)" or "(cleared)"."""
    out = {key: _plain(value) for key, value in data.items()}
    if "kubeconfig" in out:
        out["kubeconfig"] = "(changed)" if data["kubeconfig"] else "(cleared)"
    return out
