"""Map service and API validation errors onto Django form fields.

Services raise `ValidationError({"overrides.podSets.worker.replicas": "must be at least 1, got 0"})` or a
`ServiceError` with the same dict shape. A form knows which of its fields a path belongs to: the longest
prefix that names a field wins; anything else becomes a non-field error that keeps the path in front.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError

from ..services.errors import ServiceError


def error_items(exc) -> list[tuple[str, str]]:
    """(path, message) pairs of a ValidationError, ServiceError or DRF ValidationError."""
    if isinstance(exc, ServiceError):
        return [(k, str(v)) for k, v in exc.errors.items()]
    if isinstance(exc, ValidationError):
        if hasattr(exc, "error_dict"):
            return [(k, m) for k, msgs in exc.message_dict.items() for m in msgs]
        return [("", m) for m in exc.messages]
    detail = getattr(exc, "detail", None)  # rest_framework.exceptions.ValidationError
    if isinstance(detail, dict):
        return [(k, str(m)) for k, msgs in detail.items() for m in (msgs if isinstance(msgs, list) else [msgs])]
    return [("", str(exc))]


def apply_errors(form, exc, paths: dict[str, str] | None = None) -> None:
    """Attach the errors of `exc` to `form`.

    `paths` maps error-path prefixes to form field names, e.g. {"overrides": "overrides", "spec": "spec"};
    a path equal to a form field's name maps to it by default. The message shown is the service's own; when
    the path is longer than the field's name, the rest of the path is put in front ("podSets[1].name: ...").
    """
    paths = dict(paths or {})
    for name in form.fields:
        paths.setdefault(name, name)
    for path, message in error_items(exc):
        target, rest = None, path
        for prefix in sorted(paths, key=len, reverse=True):
            if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
                target, rest = paths[prefix], path[len(prefix):].lstrip(".")
                if path == prefix:
                    rest = ""
                break
        text = f"{rest}: {message}" if rest else message
        if target is None:
            text = f"{path}: {message}" if path and path not in ("detail", "non_field_errors") else message
        form.add_error(target, text)
