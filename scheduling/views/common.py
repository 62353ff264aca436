"""Small helpers shared by the dashboard views: htmx detection and rendering a page or its fragment."""
from __future__ import annotations

from django.shortcuts import render
from django.utils.cache import patch_vary_headers


def is_htmx(request) -> bool:
    """True when htmx sent the request (it sets `HX-Request: true`); such requests get a fragment back."""
    return request.headers.get("HX-Request") == "true"


def allowed(check, user, obj) -> None:
    """Run an `access.check_*` function; its PermissionDenied becomes Django's, which answers 403."""
    from django.core.exceptions import PermissionDenied as Forbidden

    from ..services.errors import PermissionDenied

    try:
        check(user, obj)
    except PermissionDenied as exc:
        raise Forbidden("; ".join(exc.errors.values())) from None


def page_or_fragment(request, page: str, fragment: str, context: dict):
    """Render the full `page` for a browser, the `fragment` partial for htmx polling, on the same URL.

    Sets `Vary: HX-Request` so a cache never serves one in place of the other.
    """
    response = render(request, fragment if is_htmx(request) else page, context)
    patch_vary_headers(response, ["HX-Request"])
    return response
