"""Runtime template form: name, description and the spec as YAML or JSON, saved through
`services.templates.versions.create_template` / `add_version` (the API's own calls), so the messages match."""
from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from ..choices import PodSecurityLevel
from ..models import QueuePolicy
from ..podspec import pod_security as pss
from ..services.access import roles as access
from ..services.errors import ServiceError
from ..services.templates import specs as template_service
from ..services.templates import versions as template_versions
from .errors import apply_errors
from .specs import parse_yaml_or_json

SPEC_HELP = ("YAML or JSON. Keys: backend (kai, k8s-workload, coscheduling, volcano), gang {minMember, "
             "scheduleTimeoutSeconds}, priorityClassName, preemptibility, podSets [{name, replicas, minMember, "
             "template: a PodTemplateSpec}], overridable (e.g. podSets.*.replicas).")


class TemplateForm(forms.Form):
    """Create a template (with `name`) or add a version to one (`instance` given: the name is fixed)."""

    name = forms.CharField(max_length=63, help_text="DNS-1123 label; cannot change later")
    queue = forms.ModelChoiceField(QueuePolicy.objects.all(), required=False, to_field_name="name",
                                   empty_label="(shared: every queue may use it)",
                                   help_text="the team queue that owns the template; its admins may edit it")
    description = forms.CharField(max_length=300, required=False)
    spec = forms.CharField(widget=forms.Textarea(attrs={"class": "tall", "spellcheck": "false", "rows": 24}),
                           help_text=SPEC_HELP)
    pod_security_level = forms.ChoiceField(
        choices=[("", "the queue's level"), *PodSecurityLevel.choices], required=False, label="Pod Security level",
        help_text="Kubernetes Pod Security Standard its pods meet; the queue's (and its parents') may be stricter")
    policy_exceptions = forms.MultipleChoiceField(
        choices=[(c.id, f"{c.id}: {c.title}") for c in pss.CONTROLS.values()], required=False,
        widget=forms.CheckboxSelectMultiple, label="Pod-security exceptions",
        help_text="controls waived for this template; only platform admins grant them")

    def __init__(self, *args, instance=None, user=None, **kwargs):
        if instance is not None:
            kwargs.setdefault("initial", {})
            kwargs["initial"].setdefault("pod_security_level", instance.pod_security_level)
            kwargs["initial"].setdefault("policy_exceptions", list(instance.policy_exceptions or []))
        super().__init__(*args, **kwargs)
        self.instance = instance
        if instance is not None:
            del self.fields["name"]
            del self.fields["queue"]
        elif user is not None:
            self.fields["queue"].queryset = access.visible_queues(user, QueuePolicy.objects.all())
        if user is not None and not access.is_platform_admin(user):
            # shown, so a queue admin sees what was granted, but not changeable: the service would refuse (403)
            self.fields["policy_exceptions"].disabled = True

    def parsed_spec(self) -> dict | None:
        """The spec dict, validated by the service (defaults filled in); None with form errors otherwise."""
        try:
            spec = parse_yaml_or_json(self.cleaned_data.get("spec", ""), "spec")
            return template_service.validate_template_spec(spec)
        except ValidationError as exc:
            apply_errors(self, exc)
            return None

    def save(self, user):
        """Store the template (or its next version). Returns the RuntimeTemplateVersion, or None with errors."""
        try:
            spec = parse_yaml_or_json(self.cleaned_data.get("spec", ""), "spec")
            description = self.cleaned_data.get("description", "")
            level = self.cleaned_data.get("pod_security_level", "")
            exceptions = self.cleaned_data.get("policy_exceptions") or []
            if self.instance is None:
                return template_versions.create_template(user, self.cleaned_data["name"], description, spec,
                                                        queue=self.cleaned_data.get("queue"),
                                                        pod_security_level=level, policy_exceptions=exceptions)
            return template_versions.add_version(user, self.instance, spec, description, level, exceptions)
        except (ValidationError, ServiceError) as exc:
            apply_errors(self, exc)
            return None
