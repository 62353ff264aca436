"""Who may see, use and manage runtime templates: a template belongs to a queue (its owners manage it) or to
the platform (platform admins manage it, everyone uses it); the roles themselves are in services/access/roles.py.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet

from ...choices import GrantRole, TokenAction
from ..errors import NotFound, PermissionDenied
from .roles import (
    _at_least,
    _authenticated,
    _role_text,
    _token_allows,
    is_platform_admin,
    queue_role,
    queue_roles,
    token_of,
    visible_queue_ids,
)


def visible_templates(user, queryset: QuerySet) -> QuerySet:
    """Shared templates (no queue) and those owned by queues visible to `user` (a team's template serves every
    queue below the team's queue)."""
    if not _authenticated(user) or not _token_allows(user, TokenAction.READ):
        return queryset.none()
    if is_platform_admin(user):
        return queryset
    return queryset.filter(Q(queue__isnull=True) | Q(queue_id__in=visible_queue_ids(user)))

def _sees_template(user, template) -> bool:
    return _authenticated(user) and (template.queue_id is None or is_platform_admin(user)
                                     or template.queue_id in visible_queue_ids(user))

def named_template(user, template, name: str, field: str = "template"):
    """`template` (what a request body names as `name`, or None) when `user` may see it, and so submit with it;
    else ValidationError({field: "no runtime template named '<name>'"}), the answer for an unknown name."""
    if template is not None and _sees_template(user, template):
        return template
    raise ValidationError({field: f"no runtime template named '{name}'"})

def check_read_template(user, template) -> None:
    """Raise NotFound (404, as for a template that does not exist) unless `template` is visible to `user`."""
    if not visible_templates(user, type(template).objects.filter(pk=template.pk)).exists():
        raise NotFound(template)

def check_create_template(user, queue) -> None:
    """Shared templates are for platform admins; a team template needs admin on its owning queue."""
    if is_platform_admin(user):
        return
    if queue is None:
        raise PermissionDenied({"queue": "only platform admins create shared templates; name a queue you manage"})
    if token_of(user) is not None or not _at_least(queue_role(user, queue), GrantRole.ADMIN):
        raise PermissionDenied({"queue": f"not allowed to manage templates of queue '{queue.name}'"})

def check_manage_template(user, template) -> None:
    """Raise PermissionDenied unless `user` may change or delete `template` (admin on its owning queue; platform
    admin for a shared one), NotFound when they cannot even see it."""
    if is_platform_admin(user):
        return
    if not _sees_template(user, template):
        raise NotFound(template)
    if token_of(user) is not None:
        raise PermissionDenied({"template": "API tokens cannot change templates; log in with your password"})
    if template.queue_id is None:
        raise PermissionDenied({"template": f"changing shared template '{template.name}' needs a platform admin"})
    role = queue_roles(user).get(template.queue_id)
    if not _at_least(role, GrantRole.ADMIN):
        raise PermissionDenied({"template": f"changing template '{template.name}' needs the admin role on its "
                                            f"queue; {_role_text(role)}"})
