"""Request middleware of the scheduling app."""
from .services import access


class AccessMemoMiddleware:
    """Compute each user's roles once per request (services/access.py `cached`): a list page or a bulk submit asks
    the same permission question many times, and grants do not change mid-request."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with access.cached():
            return self.get_response(request)
