"""Rate limits on job submission (single, bulk and resubmit), per API token and per user.

Rates are read from settings at request time ("<n>/<second|minute|hour|day>", or None for no limit):
GANGWEB_SUBMIT_RATE_PER_TOKEN and GANGWEB_SUBMIT_RATE_PER_USER. A bulk submit counts as one request. Counters
live in the default cache (Redis when REDIS_URL is set, so all web workers share them).
"""
from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from ..models import ApiToken


class SubmitPerTokenThrottle(SimpleRateThrottle):
    """Counts submissions made with one API token; requests without a token pass."""

    scope = "submit-token"

    def get_rate(self):
        return getattr(settings, "GANGWEB_SUBMIT_RATE_PER_TOKEN", None)

    def get_cache_key(self, request, view):
        if not isinstance(request.auth, ApiToken):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.auth.pk}


class SubmitPerUserThrottle(SimpleRateThrottle):
    """Counts submissions by one user, whether through the session, basic auth or any of their tokens."""

    scope = "submit-user"

    def get_rate(self):
        return getattr(settings, "GANGWEB_SUBMIT_RATE_PER_USER", None)

    def get_cache_key(self, request, view):
        ident = request.user.pk if request.user and request.user.is_authenticated else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}


SUBMIT_THROTTLES = [SubmitPerTokenThrottle, SubmitPerUserThrottle]
