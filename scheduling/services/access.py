"""Who may do what: the one place the API and the dashboard ask.

Platform admins (superusers or staff) may do everything. Other authenticated users may use every queue until
per-queue roles are configured. Functions raise `PermissionDenied` or filter querysets.
"""
from __future__ import annotations

from django.db.models import QuerySet

from .errors import PermissionDenied


def is_platform_admin(user) -> bool:
    """Superusers and staff are platform admins."""
    return bool(user and user.is_authenticated and (user.is_superuser or user.is_staff))


def visible_jobs(user, queryset: QuerySet) -> QuerySet:
    """Restrict a GangJob queryset to the jobs `user` may read."""
    if user is None or not user.is_authenticated:
        return queryset.none()
    return queryset


def check_submit(user, queue) -> None:
    """Raise PermissionDenied({"queue": ...}) unless `user` may submit to `queue`."""
    if user is None or not user.is_authenticated:
        raise PermissionDenied({"queue": f"not allowed to submit to queue '{queue.name}'"})


def check_cancel(user, job) -> None:
    """Raise PermissionDenied unless `user` may cancel `job`."""
    if user is None or not user.is_authenticated:
        raise PermissionDenied({"job": "not allowed to cancel this job"})
