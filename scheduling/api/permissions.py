"""DRF permission classes; each asks services/access/roles.py, so the API and the dashboard agree."""
from rest_framework.permissions import BasePermission

from ..services.access import roles as access


class IsPlatformAdmin(BasePermission):
    """Platform admins only, never through an API token (audit log)."""

    message = "only platform admins may do this"

    def has_permission(self, request, view):
        return access.is_platform_admin(request.user)


class NotWithToken(BasePermission):
    """Password logins only: API tokens cannot manage API tokens."""

    message = "API tokens cannot manage API tokens; log in with your password"

    def has_permission(self, request, view):
        return bool(request.user and request.user.is_authenticated) and access.token_of(request.user) is None
