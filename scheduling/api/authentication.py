"""API token authentication: `Authorization: Bearer gw_<lookup>_<secret>`.

Listed first in DEFAULT_AUTHENTICATION_CLASSES so that DRF answers 401 (with `WWW-Authenticate: Bearer`) rather
than 403 to a request without credentials.
"""
from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from ..services.access import tokens as token_service


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """Authenticate with an ApiToken. The user is the token's owner, with `user.api_token` set so that
    services/access/roles.py narrows what it may do to the token's queues and actions.

    Unknown, malformed, revoked or expired tokens are 401; no Authorization header lets the next class try.
    """

    keyword = b"bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'")
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("invalid token") from None
        token = token_service.authenticate(raw)
        if token is None:
            raise exceptions.AuthenticationFailed("invalid, revoked or expired token")
        user = token.owner
        user.api_token = token
        return user, token

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class ThrottledBasicAuthentication(authentication.BasicAuthentication):
    """DRF's Basic auth with django-axes' lockout made visible: a username+IP pair locked out after
    AXES_FAILURE_LIMIT failed passwords is 429 with `Retry-After` (the cool-off, seconds) instead of 401, and its
    password is not even hashed (axes' backend refuses before ModelBackend runs). Settings: gangweb/settings.py."""

    def authenticate_credentials(self, userid, password, request=None):
        try:
            return super().authenticate_credentials(userid, password, request)
        except exceptions.AuthenticationFailed:
            if getattr(request, "axes_locked_out", False):
                cooloff = settings.AXES_COOLOFF_TIME
                raise exceptions.Throttled(
                    wait=cooloff.total_seconds() if cooloff else None,
                    detail="too many failed logins for this username from this address; try again later") from None
            raise


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Documents the bearer token in the OpenAPI schema."""

    target_class = "scheduling.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "gw_<lookup>_<secret>"}
