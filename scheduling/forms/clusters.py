"""Cluster registration: name, kubeconfig (file upload or pasted), context. Validated and saved through the
API's `ClusterSerializer`, so credentials are handled (and later encrypted) in one place."""
from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.exceptions import ValidationError as DRFValidationError

from .errors import apply_errors

MAX_KUBECONFIG_BYTES = 256 * 1024


class ClusterForm(forms.Form):
    """Register a cluster. The kubeconfig is write-only: it is never shown again after upload."""

    name = forms.CharField(max_length=63, help_text="DNS-1123 label, e.g. local")
    description = forms.CharField(max_length=200, required=False)
    kubeconfig_file = forms.FileField(required=False, label="kubeconfig file",
                                      help_text="upload the file; or paste it below")
    kubeconfig = forms.CharField(required=False, label="kubeconfig (pasted)",
                                 widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}))
    context = forms.CharField(max_length=253, required=False, help_text="kubeconfig context; empty = current")
    in_cluster = forms.BooleanField(required=False, label="Use gangweb's own service account (in-cluster)")

    def clean(self):
        data = super().clean()
        upload = data.get("kubeconfig_file")
        if upload:
            if upload.size > MAX_KUBECONFIG_BYTES:
                self.add_error("kubeconfig_file", f"is {upload.size} bytes; at most {MAX_KUBECONFIG_BYTES} allowed")
            else:
                try:
                    data["kubeconfig"] = upload.read().decode("utf-8")
                except UnicodeDecodeError:
                    self.add_error("kubeconfig_file", "is not UTF-8 text")
        if not data.get("kubeconfig") and not data.get("in_cluster"):
            self.add_error("kubeconfig_file", "upload a kubeconfig, paste one, or choose in-cluster")
        return data

    def save(self, user):
        """Create the cluster through `ClusterSerializer` and audit it as POST /api/v1/clusters/ does (the
        kubeconfig recorded only as "(changed)"); returns it, or None with the errors on the form. The caller
        checks `access.check_platform_admin` first."""
        from django.db import transaction

        from ..api.serializers import ClusterSerializer
        from ..services.access import audit

        payload = {k: self.cleaned_data.get(k) for k in ("name", "description", "kubeconfig", "context",
                                                          "in_cluster")}
        serializer = ClusterSerializer(data={k: v for k, v in payload.items() if v is not None})
        try:
            serializer.is_valid(raise_exception=True)
        except DRFValidationError as exc:
            apply_errors(self, exc, {"kubeconfig": "kubeconfig_file"})
            return None
        with transaction.atomic():
            cluster = serializer.save()
            details = {k: v for k, v in serializer.validated_data.items() if k != "kubeconfig"}
            if "kubeconfig" in serializer.validated_data:
                details["kubeconfig"] = "(changed)" if serializer.validated_data["kubeconfig"] else "(cleared)"
            audit.record(user, "cluster.create", cluster, details)
        return cluster


class SchedulerNamesForm(forms.Form):
    """The cluster's scheduler names, one field per backend family that names a scheduler (`kai`, `coscheduling`,
    `volcano`): checked and merged by `services.clusters.checks.scheduler_names`, as PATCH /api/v1/clusters/<name>/
    is."""

    def __init__(self, *args, cluster, **kwargs):
        from ..backends import registry

        super().__init__(*args, **kwargs)
        self.cluster = cluster
        defaults = registry.scheduler_names()
        current = cluster.scheduler_names or {}
        for family, default in defaults.items():
            self.fields[family] = forms.CharField(
                max_length=253, required=False, initial=current.get(family) or default,
                label=f"{family} scheduler", help_text=f"pods' schedulerName; empty = {default}")

    def clean(self):
        from ..services.clusters import checks as cluster_service

        data = super().clean()
        try:
            data["scheduler_names"] = cluster_service.scheduler_names(
                {k: data.get(k) or "" for k in self.fields}, self.cluster.scheduler_names)
        except DjangoValidationError as exc:
            apply_errors(self, exc, {f"scheduler_names.{k}": k for k in self.fields})
        return data
