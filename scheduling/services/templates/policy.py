"""Pod-spec policy as people set it: a template's pod-security level and exceptions (exceptions by platform admins
only), and the reserved priority classes (platform admins only). The checks on a spec, which the reconciler runs
too, are in `pod_rules` (see its docstring for the rules).
"""
from __future__ import annotations

from django.core.exceptions import ValidationError

from ...podspec import pod_security as pss
from ...podspec.rules import is_reserved_priority_class, level_of, queue_chain
from ..access import roles as access
from ..access import templates as template_access
from ..errors import PermissionDenied


def check_priority_class(user, name: str, field: str = "priority_class_name") -> None:
    """Refuse a reserved ("system-") priority class asked for by anyone but a platform admin: 403."""
    if is_reserved_priority_class(name) and not access.is_platform_admin(user):
        raise PermissionDenied({field: f"'{name}' is reserved for the cluster's own components"})


# ---- exceptions ----------------------------------------------------------------------------------------------------

def check_exceptions(user, value, before=(), field: str = "policy_exceptions") -> list[str]:
    """Validate a template's `policy_exceptions` (a list of control ids of pod_security.CONTROLS) and return it
    deduplicated. Raises ValidationError naming `policy_exceptions[i]` for an unknown id, PermissionDenied (403)
    when `user` is not a platform admin and the list differs from `before`."""
    if value is None:
        value = []
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ValidationError({field: "must be a list of control ids"})
    for i, control in enumerate(value):
        if control not in pss.CONTROLS:
            raise ValidationError({f"{field}[{i}]": f"'{control[:80]}' is not a control; controls are "
                                                    f"{', '.join(pss.CONTROLS)}"})
    value = list(dict.fromkeys(value))
    if sorted(value) != sorted(before or []) and not access.is_platform_admin(user):
        raise PermissionDenied({field: "only platform admins grant or withdraw pod-security exceptions"})
    return value


# ---- a template's level and exceptions ------------------------------------------------------------------------------

def template_settings(user, level=None, exceptions=None, template=None) -> tuple[str, list[str]]:
    """Validate a template's `pod_security_level` ("", "baseline" or "restricted"; None: `template`'s) and
    `policy_exceptions` (None: `template`'s) as `user` sets them; returns (level, exceptions).

    Raises ValidationError naming the field, PermissionDenied when anyone but a platform admin changes the
    exceptions (`user` None, an internal caller, may set none)."""
    current_level = getattr(template, "pod_security_level", "") or ""
    current = list(getattr(template, "policy_exceptions", None) or [])
    level = current_level if level is None else level
    if level not in ("", *pss.LEVELS):
        raise ValidationError({"pod_security_level": f"must be '' (the queue's), {' or '.join(pss.LEVELS)}"})
    if exceptions is None:
        return level, current
    if user is None:
        if exceptions:
            raise PermissionDenied({"policy_exceptions": "only platform admins grant pod-security exceptions"})
        return level, []
    return level, check_exceptions(user, exceptions, current)


def save_template_settings(user, template, level: str, exceptions: list[str]) -> bool:
    """Store a validated level and exceptions on `template` when they changed, with an audit event
    ("template.policy": before and after). Returns True when something changed. Call inside a transaction."""
    from ..access import audit

    before = {"pod_security_level": template.pod_security_level or "",
              "policy_exceptions": list(template.policy_exceptions or [])}
    after = {"pod_security_level": level, "policy_exceptions": exceptions}
    if before == after:
        return False
    template.pod_security_level, template.policy_exceptions = level, exceptions
    template.save(update_fields=["pod_security_level", "policy_exceptions"])
    if user is not None:
        audit.record(user, "template.policy", template, {"before": before, "after": after})
    return True


def update_template_settings(user, template, level=None, exceptions=None):
    """Change only a template's level and/or exceptions (no new version). Raises PermissionDenied unless `user`
    manages the template (and, for exceptions, is a platform admin), ValidationError for bad values. A stricter
    level or a withdrawn exception is not checked against the existing versions: jobs that no longer pass are
    refused at submit (400 naming the field and control), so tightening is never blocked."""
    from django.db import transaction

    template_access.check_manage_template(user, template)
    level, exceptions = template_settings(user, level, exceptions, template)
    with transaction.atomic():
        save_template_settings(user, template, level, exceptions)
    return template


def template_summary(template) -> dict:
    """What the template page shows: {"level": "baseline" | "restricted", "level_source": words saying where it
    comes from, "exceptions": [Control, ...]} (unknown ids in old rows are left out). Walks the owning queue's
    parents (one query per level)."""
    chain = queue_chain(template.queue) if template.queue_id else []
    level = level_of(template, chain)
    if template.pod_security_level == level:
        source = "set on the template"
    elif chain:
        source = f"of queue '{template.queue.name}' and its parents"
    else:
        source = "the default; a stricter queue makes its jobs stricter"
    return {"level": level, "level_source": source,
            "exceptions": [pss.CONTROLS[c] for c in template.policy_exceptions or [] if c in pss.CONTROLS]}
