"""Request middleware of the scheduling app."""
from . import unavailable
from .services.access import roles as access


class AccessMemoMiddleware:
    """Compute each user's roles once per request (services/access/roles.py `cached`): a list page or a bulk submit asks
    the same permission question many times, and grants do not change mid-request."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with access.cached():
            return self.get_response(request)


class DependencyUnavailableMiddleware:
    """A view failed because PostgreSQL, Redis or the broker is down: answer 503 with Retry-After (JSON under
    /api/, a page elsewhere) instead of a 500 (`scheduling.unavailable`). Other errors pass on unchanged."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        """The 503 response for a dependency error, else None (Django goes on handling the exception)."""
        return unavailable.response_for(request, exception)
