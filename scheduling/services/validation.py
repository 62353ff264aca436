"""Small validators shared by templates, jobs and queues. Each raises ValidationError({field: message}).

Patterns are matched against the whole string with ``re.fullmatch``: ``re.match`` with ``$`` also accepts a
trailing newline (``$`` matches before a final "\\n"), so ``"sample-gang\\n"`` passed as a name that looks like
``sample-gang`` (issue 15, L4).
"""
from __future__ import annotations

import re

from django.core.exceptions import ValidationError

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
# A container image reference: printable, no whitespace or quotes (docker/distribution reference grammar is stricter;
# the kubelet reports the rest as InvalidImageName).
IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")


def dns_label(value, field: str, max_length: int = 63) -> str:
    """A DNS-1123 label (RFC 1123: lower-case alphanumerics and '-', at most `max_length` characters)."""
    if not isinstance(value, str) or not value:
        raise ValidationError({field: "is required and must be a string"})
    if len(value) > max_length:
        raise ValidationError({field: f"'{value[:80]}' is {len(value)} characters; at most {max_length} allowed"})
    if not DNS1123_LABEL.fullmatch(value):
        raise ValidationError({field: f"'{value[:80]}' is not a DNS-1123 label (lower-case letters, digits and '-', "
                                      "starting and ending with a letter or digit)"})
    return value


def dns_subdomain(value, field: str, max_length: int = 253) -> str:
    """A DNS-1123 subdomain (dot-separated labels, at most 253 characters)."""
    if not isinstance(value, str) or not value or len(value) > max_length or not DNS1123_SUBDOMAIN.fullmatch(value):
        raise ValidationError({field: f"'{str(value)[:80]}' is not a DNS-1123 subdomain"})
    return value


JSON_TYPES = {type(None): "null", bool: "a boolean", int: "an integer", float: "a number", str: "a string",
              list: "an array", dict: "an object"}


def wrong_type(field: str, expected: str, value) -> ValidationError:
    """The error for `value` at `field` that is not `expected` ("a string", ...): "is required" when it is missing
    (None: absent or JSON null), else "must be <expected>, got <its JSON type>" (never a Python type name)."""
    if value is None:
        return ValidationError({field: "is required"})
    return ValidationError({field: f"must be {expected}, got {JSON_TYPES.get(type(value), type(value).__name__)}"})


def integer(value, field: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """A JSON integer (not a bool, not a float) within [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(field, "an integer", value)
    if minimum is not None and value < minimum:
        raise ValidationError({field: f"must be at least {minimum}, got {value}"})
    if maximum is not None and value > maximum:
        raise ValidationError({field: f"must be at most {maximum}, got {value}"})
    return value


def string(value, field: str, *, allow_empty: bool = False, max_length: int = 4096) -> str:
    """A JSON string; empty only when `allow_empty`."""
    if not isinstance(value, str):
        raise wrong_type(field, "a string", value)
    if not allow_empty and not value.strip():
        raise ValidationError({field: "must not be empty"})
    if len(value) > max_length:
        raise ValidationError({field: f"is {len(value)} characters; at most {max_length} allowed"})
    return value


def string_list(value, field: str) -> list[str]:
    """A JSON list of strings (command, args)."""
    if not isinstance(value, list):
        raise wrong_type(field, "a list of strings", value)
    for i, item in enumerate(value):
        string(item, f"{field}[{i}]", allow_empty=True)
    return value


# A Go `time.Duration` string as metav1.Duration parses it ("90s", "1h30m", "-1s", "0"): KAI v0.17 PodGroup
# `preemptionDelay` / `stalenessGracePeriod`.
GO_DURATION = re.compile(r"^-?(0|(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+)$")


def duration(value, field: str, *, allow_negative: bool = False) -> str:
    """A Go duration string ("5m", "1h30m"; "-1s" only with `allow_negative`); ValidationError naming `field`."""
    if not isinstance(value, str) or not GO_DURATION.match(value) or len(value) > 64:
        raise ValidationError({field: f"{value!r} is not a duration such as '30s', '5m' or '1h30m'"})
    if value.startswith("-") and not allow_negative:
        raise ValidationError({field: "must not be negative"})
    return value


def date_time(value, field: str, *, require_zone: bool = False):
    """An ISO 8601 date-time string as a datetime (aware when it carries an offset). Raises ValidationError naming
    `field` when it is not a string in that form, names no such day or offset (2026-02-30, +25:00: Django's
    `parse_datetime` raises ValueError for those), or, with `require_zone`, has no offset."""
    from django.utils.dateparse import parse_datetime

    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise ValidationError({field: f"'{str(value)[:40]}' is not an ISO 8601 date-time"})
    if require_zone and parsed.tzinfo is None:
        raise ValidationError({field: "must be an ISO 8601 date-time with a time zone"})
    return parsed


def mapping(value, field: str) -> dict:
    """A JSON object."""
    if not isinstance(value, dict):
        raise wrong_type(field, "an object", value)
    return value


def is_qualified_name(value) -> bool:
    """True for a Kubernetes qualified name ("example.com/hold", "hold"): an optional DNS-subdomain prefix and a
    name of 1-63 alphanumerics, '-', '_' or '.' (apimachinery validation.IsQualifiedName)."""
    if not isinstance(value, str):
        return False
    prefix, _, name = value.rpartition("/")
    bad_prefix = prefix and not DNS1123_SUBDOMAIN.fullmatch(prefix)
    return bool(name) and len(name) <= 63 and bool(LABEL_VALUE.fullmatch(name)) and not bad_prefix


def label_map(value, field: str) -> dict[str, str]:
    """Kubernetes labels or a nodeSelector: qualified-name keys, label-value values (at most 63 characters)."""
    mapping(value, field)
    for key, val in value.items():
        if not is_qualified_name(key):
            raise ValidationError({f"{field}.{key[:80]}": "is not a valid label key"})
        if not isinstance(val, str) or len(val) > 63 or not LABEL_VALUE.fullmatch(val):
            raise ValidationError({f"{field}.{key[:80]}": f"'{str(val)[:80]}' is not a valid label value (<= 63 "
                                                          "alphanumerics, '-', '_' or '.')"})
    return value


def image(value, field: str) -> str:
    """A container image reference: 1-1024 characters of letters, digits and . _ / : @ + -."""
    string(value, field, max_length=1024)
    if not IMAGE_REF.fullmatch(value):
        raise ValidationError({field: f"'{value[:80]}' is not a container image reference"})
    return value


class Collect:
    """Run independent checks of one body and raise their errors together, so one 400 names every bad field (not
    only the first): ``name = errors.run(dns_label, data.get("name"), "name")`` ... ``errors.raise_any()``. `run`
    returns the check's result, or None when it raised ValidationError; the errors merge with Django's own
    ValidationError.update_error_dict ({field: [messages]})."""

    def __init__(self):
        self.errors: dict[str, list] = {}

    def run(self, check, *args, **kwargs):
        try:
            return check(*args, **kwargs)
        except ValidationError as exc:
            exc.update_error_dict(self.errors)
            return None

    def raise_any(self) -> None:
        """Raise ValidationError({field: [messages]}) when any check failed."""
        if self.errors:
            raise ValidationError(self.errors)
