"""The `Prefer` request header (RFC 7240) on job submits: `Prefer: return=minimal` asks for a short answer.

Only the `return` preference is read (RFC 7240 §4.2): `return=minimal` makes a bulk submit answer each job as
``{"id", "uid", "name"}`` instead of its whole list form, which for 500 jobs is most of the response's size and a
good part of its cost. Anything else (no header, `return=representation`, unknown preferences) gets the full answer.
A response that honoured the preference says so with `Preference-Applied: return=minimal`; every one varies on
`Prefer`.
"""
from django.utils.cache import patch_vary_headers
from drf_spectacular.utils import OpenApiParameter

PREFER_HEADER = OpenApiParameter(
    "Prefer", str, OpenApiParameter.HEADER, required=False, enum=["return=minimal", "return=representation"],
    description="RFC 7240. `return=minimal`: each created job as {id, uid, name} only (answered with "
                "`Preference-Applied: return=minimal`); default: the full list form of every job.")


def wants_minimal(request) -> bool:
    """True when the request's first `return` preference is `minimal`. Preferences are comma-separated, names and
    values case-insensitive, values optionally quoted, parameters after ';' ignored; when a preference is given
    twice, the first one counts (RFC 7240 §2)."""
    for preference in request.headers.get("Prefer", "").split(","):
        name, _, value = preference.split(";", 1)[0].partition("=")
        if name.strip().lower() == "return":
            return value.strip().strip('"').lower() == "minimal"
    return False


def applied(response, minimal: bool):
    """Mark `response` as having honoured `return=minimal` (when it did) and as varying on Prefer; return it."""
    if minimal:
        response["Preference-Applied"] = "return=minimal"
    patch_vary_headers(response, ["Prefer"])
    return response
