"""Queue policy form: its fields are the API's, and it validates through the API's serializer, so both say
the same. Limits default to -1 (unlimited) because KAI reads an omitted limit as 0 (nothing allocatable)."""
from __future__ import annotations

from django import forms
from rest_framework.exceptions import ValidationError as DRFValidationError

from ..models import Cluster, QueuePolicy
from .errors import apply_errors

UNIT_HELP = {
    "gpu": "GPUs (devices; fractions allowed)",
    "cpu": "millicores (1 core = 1000)",
    "memory": "megabytes (10^6 bytes)",
}


class QueueForm(forms.Form):
    """Create a KAI queue policy: name, parent, priority and per resource quota / limit / overQuotaWeight."""

    name = forms.CharField(max_length=63, help_text="DNS-1123 label, e.g. team-a")
    display_name = forms.CharField(max_length=200, required=False)
    parent = forms.ModelChoiceField(QueuePolicy.objects.all(), required=False, to_field_name="name",
                                    empty_label="(top level)")
    priority = forms.IntegerField(initial=100)
    clusters = forms.ModelMultipleChoiceField(Cluster.objects.all(), required=False, to_field_name="name",
                                              help_text="sync to these clusters (none: queue is not synced yet)")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for res, unit in UNIT_HELP.items():
            self.fields[f"{res}_quota"] = forms.FloatField(initial=0, label=f"{res.upper()} quota",
                                                           help_text=f"{unit}; guaranteed share, 0 = none")
            self.fields[f"{res}_limit"] = forms.FloatField(initial=-1, label=f"{res.upper()} limit",
                                                           help_text=f"{unit}; -1 = unlimited, 0 = nothing")
            self.fields[f"{res}_over_quota_weight"] = forms.FloatField(
                initial=1, label=f"{res.upper()} over-quota weight", help_text="share of surplus; 0 = none")

    def resource_rows(self):
        """Bound fields grouped per resource for the template: [(resource, [quota, limit, weight])]."""
        return [(res, [self[f"{res}_quota"], self[f"{res}_limit"], self[f"{res}_over_quota_weight"]])
                for res in UNIT_HELP]

    def save(self, user):
        """Validate with `QueuePolicySerializer` and create the queue. Errors go to the named fields."""
        from ..api.serializers import QueuePolicySerializer

        data = {k: v for k, v in self.cleaned_data.items() if k not in ("parent", "clusters")}
        data["parent"] = self.cleaned_data["parent"].name if self.cleaned_data.get("parent") else None
        data["clusters"] = [c.name for c in self.cleaned_data.get("clusters") or []]
        for res in ("cpu", "memory"):
            for key in (f"{res}_quota", f"{res}_limit"):
                data[key] = int(data[key])
        serializer = QueuePolicySerializer(data=data)
        try:
            serializer.is_valid(raise_exception=True)
        except DRFValidationError as exc:
            apply_errors(self, exc)
            return None
        return serializer.save()
