"""Create, version, retire, describe and delete runtime templates: the writes the API and the dashboard share,
each checked (services/access/templates.py), validated (services/templates/specs.py) and audited.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import ProtectedError
from django.utils import timezone

from ...models import QueuePolicy, RuntimeTemplate, RuntimeTemplateVersion
from ...podspec import rules as pod_rules
from .. import validation as v
from ..access import audit
from ..access import roles as access
from ..access import templates as template_access
from ..errors import Conflict
from ..queues.policies import name_taken
from . import policy
from .specs import validate_template_spec


def _owner_queue(queue, user=None):
    """Resolve the `queue` of a template body: None, a QueuePolicy, or a queue name. Raises ValidationError for a
    name that does not exist or, when `user` is given, that they cannot see (access.named_queue)."""

    if queue is None or isinstance(queue, QueuePolicy):
        return queue
    name = v.string(queue, "queue", max_length=63)
    found = QueuePolicy.objects.filter(name=name).first()
    if found is None or user is not None:
        return access.named_queue(user, found, name)
    return found

def create_template(user, name, description, spec, queue=None, pod_security_level="", policy_exceptions=None):
    """Create a template and its version 1. Returns the RuntimeTemplateVersion.

    `queue` (a QueuePolicy, a queue name or None for a shared template) owns the template. `user` None means an
    internal caller (management command, fixtures): no permission check; views pass request.user. The pod-spec
    policy applies to every caller (pod_rules.check_template_spec, at `pod_security_level` with `policy_exceptions`).
    Raises ValidationError for a bad name or spec or a refused pod setting, PermissionDenied (see
    template_access.check_create_template; exceptions need a platform admin), Conflict when the name is taken.
    """


    v.dns_label(name, "name")
    v.string(description or "", "description", allow_empty=True, max_length=300)
    queue = _owner_queue(queue, user)
    if user is not None:
        template_access.check_create_template(user, queue)
    spec = validate_template_spec(spec)
    level, exceptions = policy.template_settings(user, pod_security_level, policy_exceptions)
    pod_rules.check_template_spec(spec, queue=queue, level=level, exceptions=exceptions)
    taken = list(RuntimeTemplate.objects.filter(name=name).values_list("queue_id", flat=True))
    if taken:  # said only as far as `user` may see the owner (queues.name_taken)

        raise Conflict({"name": name_taken(user, "runtime template", name, taken[0]) if user is not None
                        else f"a runtime template named '{name}' already exists"})
    with transaction.atomic():
        template = RuntimeTemplate.objects.create(name=name, description=description or "", queue=queue,
                                                  pod_security_level=level, policy_exceptions=exceptions)
        version = RuntimeTemplateVersion.objects.create(template=template, version=1, spec=spec, created_by=user)
        if user is not None:
            audit.record(user, "template.create", template, {"version": 1, "queue": queue.name if queue else None})
        return version

def add_version(user, template, spec, description=None, pod_security_level=None, policy_exceptions=None):
    """Store `spec` as the next version of `template`; jobs already submitted keep theirs.

    Returns the new RuntimeTemplateVersion, or the latest one unchanged when `spec` equals it. `pod_security_level`
    and `policy_exceptions` (None: unchanged) are saved with it (policy.template_settings).
    Raises ValidationError for a bad spec or a refused pod setting (pod_rules.check_template_spec),
    PermissionDenied unless `user` manages the template (None: internal).
    """


    if user is not None:
        template_access.check_manage_template(user, template)
    spec = validate_template_spec(spec)
    level, exceptions = policy.template_settings(user, pod_security_level, policy_exceptions, template)
    pod_rules.check_template_spec(spec, queue=template.queue, level=level, exceptions=exceptions)
    with transaction.atomic():
        if description is not None:
            template.description = v.string(description, "description", allow_empty=True, max_length=300)
            template.save(update_fields=["description"])
        policy.save_template_settings(user, template, level, exceptions)
        latest = template.versions.select_for_update().order_by("-version").first()
        if latest is not None and latest.spec == spec and latest.retired_at is None:
            return latest
        version = RuntimeTemplateVersion.objects.create(
            template=template, version=(latest.version + 1) if latest else 1, spec=spec, created_by=user)
        if user is not None:
            audit.record(user, "template.version", template, {"version": version.version})
        return version

def retire_version(user, template, version_no):
    """Retire version `version_no` of `template`: it takes no new jobs from now on (submit and resubmit answer 400
    naming `template_version`); jobs that used it keep it, with their history. One-way, and idempotent (retiring a
    retired version changes nothing). Returns the RuntimeTemplateVersion.

    Raises PermissionDenied unless `user` manages the template (template_access.check_manage_template), ValidationError
    ({"version": ...}) for a version the template does not have.
    """


    template_access.check_manage_template(user, template)
    if isinstance(version_no, str) and version_no.isascii() and version_no.isdigit():
        version_no = int(version_no)
    v.integer(version_no, "version", minimum=1, maximum=2**31 - 1)
    with transaction.atomic():
        version = template.versions.select_for_update().filter(version=version_no).defer("spec").first()
        if version is None:
            raise ValidationError({"version": f"template '{template.name}' has no version {version_no}"})
        if version.retired_at is None:
            version.retired_at, version.retired_by = timezone.now(), user
            version.save(update_fields=["retired_at", "retired_by"])
            audit.record(user, "template.retire", template, {"version": version_no})
    return version

def check_not_retired(version, template_name: str) -> None:
    """Raise ValidationError({"template_version": ...}) when `version` (a RuntimeTemplateVersion) is retired."""
    if version.retired_at is not None:
        raise ValidationError({"template_version": f"version {version.version} of template '{template_name}' is "
                                                   "retired and takes no new jobs; use a newer version"})

def update_description(user, template, description):
    """Change only a template's description. Raises ValidationError, PermissionDenied."""


    template_access.check_manage_template(user, template)
    template.description = v.string(description, "description", allow_empty=True, max_length=300)
    with transaction.atomic():
        template.save(update_fields=["description"])
        audit.record(user, "template.update", template, {"description": template.description})
    return template

def delete_template(user, template) -> None:
    """Delete a template and its versions. Raises PermissionDenied, Conflict while jobs still use a version."""


    template_access.check_manage_template(user, template)
    try:
        with transaction.atomic():
            audit.record(user, "template.delete", template)
            template.delete()
    except ProtectedError:
        raise Conflict({"template": f"jobs still use template '{template.name}'"}) from None
