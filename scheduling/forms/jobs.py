"""The submit form: pick a template, fill in the overrides it allows, submit through `services.jobs.lifecycle.submit`.

The form builds one input per simple override the template allows (replicas, image, each resource the
template's first container requests, gang minMember and timeout, priority class) and a YAML/JSON textarea
for anything else. It assembles the same JSON body a pipeline would POST to /api/v1/jobs/ and hands it to the
same service, so a bad override gets the API's message, shown under the input that caused it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from django import forms
from django.core.exceptions import ValidationError

from ..services.errors import ServiceError
from ..services.jobs import lifecycle as job_service
from ..services.templates import specs as template_service
from .errors import apply_errors
from .specs import parse_yaml_or_json

INTEGER = re.compile(r"[+-]?\d+")
TOP_INPUTS = (("minMember", "Gang minMember", True), ("scheduleTimeoutSeconds", "Schedule timeout (seconds)", True),
              ("priorityClassName", "Priority class", False))


@dataclass(frozen=True)
class OverrideInput:
    """One generated override input: its form field name, the override path and how to read its value."""

    field: str
    path: tuple[str, ...]
    integer: bool

    @property
    def dotted(self) -> str:
        """The path as the service names it in errors, e.g. "overrides.podSets.worker.replicas"."""
        return ".".join(("overrides", *self.path))


def _override_inputs(spec: dict) -> list[tuple[OverrideInput, forms.Field]]:
    """Inputs for the simple overrides `spec` allows, with the template's value as placeholder."""
    allowed = spec.get("overridable", [])
    out = []

    def add(path, label, placeholder, integer):
        if not template_service._allowed(list(path[:3]), allowed):  # noqa: SLF001 - the service's own rule
            return
        name = f"ov_{len(out)}"
        widget = forms.TextInput(attrs={"placeholder": str(placeholder), "inputmode": "numeric" if integer else "text"})
        field = forms.CharField(required=False, label=label, widget=widget,
                                help_text=f"{'.'.join(path)}; empty keeps {placeholder}")
        out.append((OverrideInput(name, tuple(path), integer), field))

    for ps in spec.get("podSets", []):
        pname = ps["name"]
        add(("podSets", pname, "replicas"), f"{pname}: replicas", ps.get("replicas"), True)
        containers = ps.get("template", {}).get("spec", {}).get("containers", [])
        first = containers[0] if containers else {}
        add(("podSets", pname, "image"), f"{pname}: image", first.get("image", ""), False)
        requests = dict(first.get("resources", {}).get("requests", {}))
        for rname, qty in first.get("resources", {}).get("limits", {}).items():
            requests.setdefault(rname, qty)
        for rname, qty in requests.items():
            add(("podSets", pname, "resources", rname), f"{pname}: {rname} per pod", qty, False)
    gang = spec.get("gang", {})
    for key, label, integer in TOP_INPUTS:
        current = gang.get(key) if key != "priorityClassName" else spec.get("priorityClassName")
        add((key,), label, current if current not in (None, "") else "(none)", integer)
    return out


def _set(tree: dict, path: tuple[str, ...], value) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def _merge(base: dict, extra: dict) -> dict:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


class NameField(forms.CharField):
    """A name picked from a list (a select), validated by the service rather than against the list: a name the
    user cannot see gets the API's message ("no queue named 'x'"), not Django's "Select a valid choice"."""

    widget = forms.Select

    def set_names(self, names, prompt: str) -> None:
        """Offer `names` after an empty `prompt` option."""
        self.choices = self.widget.choices = [("", prompt)] + [(n, n) for n in names]


class SubmitForm(forms.Form):
    """Submit a gang job. `version` is the RuntimeTemplateVersion whose overrides the inputs offer (or None
    before a template is picked); `templates`, `queues`, `clusters` are the names to choose from."""

    template = NameField(help_text="the job uses this template's latest version")
    name = forms.CharField(max_length=63, help_text="DNS-1123 label, unique among active jobs of the namespace")
    namespace = forms.CharField(max_length=63, initial="default")
    queue = NameField(help_text="only leaf queues take jobs")
    cluster = NameField(required=False, help_text="leave it to gangweb: it places the job where it fits now, else "
                                                   "where it should start first, and says why on the timeline")
    overrides_extra = forms.CharField(
        required=False, label="Other overrides (YAML or JSON)",
        widget=forms.Textarea(attrs={"rows": 5, "spellcheck": "false",
                                     "placeholder": "podSets:\n  worker:\n    env: {LR: '0.001'}"}),
        help_text="merged with the inputs above; the inputs win")

    def __init__(self, *args, version=None, templates=(), queues=(), clusters=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.version = version
        self.fields["template"].set_names(templates, "— pick a template —")
        self.fields["queue"].set_names(queues, "— pick a queue —")
        self.fields["cluster"].set_names(clusters, "— gangweb chooses —")
        self.inputs: list[OverrideInput] = []
        if version is not None:
            for spec_input, field in _override_inputs(version.spec):
                self.fields[spec_input.field] = field
                self.inputs.append(spec_input)

    @property
    def override_fields(self):
        """Bound fields of the generated override inputs, in order."""
        return [self[i.field] for i in self.inputs]

    @property
    def allowed(self) -> list[str]:
        """The template's overridable patterns, for the help text."""
        return self.version.spec.get("overridable", []) if self.version else []

    def body(self) -> dict:
        """The submit body, exactly as the API receives it. Raises ValidationError for a bad textarea."""
        data = self.cleaned_data
        overrides = parse_yaml_or_json(data.get("overrides_extra", ""), "overrides_extra", allow_empty=True) or {}
        for spec_input in self.inputs:
            raw = (data.get(spec_input.field) or "").strip()
            if not raw:
                continue
            value = int(raw) if spec_input.integer and INTEGER.fullmatch(raw) else raw
            _merge(overrides, _nest(spec_input, value))
        body = {"name": data["name"], "namespace": data.get("namespace") or "default", "template": data["template"],
                "queue": data["queue"]}
        if data.get("cluster"):  # left empty: gangweb places the job (services/jobs/placing.py)
            body["cluster"] = data["cluster"]
        if self.version is not None and self.version.template.name == data["template"]:
            body["template_version"] = self.version.version
        if overrides:
            body["overrides"] = overrides
        return body

    def submit(self, user):
        """Submit through `services.jobs.lifecycle.submit`. Returns the job, or None with the service's errors on the
        fields they name (an override's error on its input, anything else on the textarea or the form)."""
        paths = {i.dotted: i.field for i in self.inputs}
        paths["overrides"] = "overrides_extra"
        try:
            job, _ = job_service.submit(user, self.body())
            return job
        except (ValidationError, ServiceError) as exc:
            apply_errors(self, exc, paths)
            return None


def _nest(spec_input: OverrideInput, value) -> dict:
    tree: dict = {}
    _set(tree, spec_input.path, value)
    return tree
