"""Queue policy form, saved through `services.queues.policies.create_queue` (the API's own call), so both give the same
messages. Quotas and limits are typed as quantities ("4", "500m", "64Gi", "-1" or "unlimited"), converted to KAI
units by the service (docs/queues.md); limits default to -1 because KAI reads an omitted limit as 0."""
from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from ..choices import PodSecurityLevel
from ..models import Cluster, QueuePolicy
from ..services.access import roles as access
from ..services.errors import ServiceError
from ..services.queues import policies as queue_service
from .errors import apply_errors

UNIT_HELP = {
    "gpu": "GPUs: 4, 0.5",
    "cpu": "cores: 4, 500m",
    "memory": "bytes as a quantity: 64Gi, 8G",
}


class QueueForm(forms.Form):
    """Create a KAI queue policy: name, parent, priority and per resource quota / limit / overQuotaWeight."""

    name = forms.CharField(max_length=63, help_text="DNS-1123 label, e.g. team-a")
    display_name = forms.CharField(max_length=200, required=False)
    parent = forms.ModelChoiceField(QueuePolicy.objects.all(), required=False, to_field_name="name",
                                    empty_label="(top level)")
    priority = forms.IntegerField(initial=100)
    clusters = forms.ModelMultipleChoiceField(Cluster.objects.all(), required=False, to_field_name="name",
                                              help_text="none selected: every cluster")
    allowed_namespaces = forms.CharField(
        required=False, label="Allowed namespaces",
        help_text="comma-separated; jobs may run only there (and within the parent's); empty = no namespace at all")
    allowed_service_accounts = forms.CharField(
        required=False, label="Allowed service accounts",
        help_text="comma-separated, besides 'default'; within the parent's")
    pod_security_level = forms.ChoiceField(choices=PodSecurityLevel.choices, initial=PodSecurityLevel.BASELINE,
                                           required=False, label="Pod Security level",
                                           help_text="Kubernetes Pod Security Standard of its jobs and its children's")

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        if user is not None:  # offer what the user may see; the service decides what they may change
            self.fields["parent"].queryset = access.visible_queues(user, QueuePolicy.objects.all())
            self.fields["clusters"].queryset = access.visible_clusters(user, Cluster.objects.all())
        for res, unit in UNIT_HELP.items():
            label = res.upper()
            self.fields[f"{res}_quota"] = forms.CharField(initial="0", label=f"{label} quota",
                                                          help_text=f"{unit}; guaranteed share, 0 = none")
            self.fields[f"{res}_limit"] = forms.CharField(initial="-1", label=f"{label} limit",
                                                          help_text=f"{unit}; -1 = unlimited, 0 = nothing at all")
            self.fields[f"{res}_over_quota_weight"] = forms.FloatField(
                initial=1, label=f"{label} over-quota weight", help_text="share of unused resources; 0 = none")

    def resource_rows(self):
        """Bound fields grouped per resource for the template: [(resource, [quota, limit, weight])]."""
        return [(res, [self[f"{res}_quota"], self[f"{res}_limit"], self[f"{res}_over_quota_weight"]])
                for res in UNIT_HELP]

    def save(self, user):
        """Create the queue. Returns (queue, warnings), or None with the service's errors on the fields."""
        data = {k: v for k, v in self.cleaned_data.items() if k not in ("parent", "clusters")}
        data["parent"] = self.cleaned_data["parent"].name if self.cleaned_data.get("parent") else None
        data["clusters"] = [c.name for c in self.cleaned_data.get("clusters") or []]
        if not data.get("pod_security_level"):
            data.pop("pod_security_level", None)  # the model's default, baseline
        for name in ("allowed_namespaces", "allowed_service_accounts"):
            data[name] = [n.strip() for n in (self.cleaned_data.get(name) or "").split(",") if n.strip()]
        try:
            return queue_service.create_queue(user, data)
        except (ValidationError, ServiceError) as exc:
            apply_errors(self, exc)
            return None
