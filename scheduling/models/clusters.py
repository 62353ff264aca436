"""Clusters gangweb reconciles into."""
from django.db import models

from ..choices import ClusterHealth


class Cluster(models.Model):
    """A Kubernetes cluster, reached by a kubeconfig (+ context) or in-cluster service account.

    `kubeconfig` holds the uploaded kubeconfig text; it is never returned by the API or shown after upload.
    Health and discovery results (`server_version`, `served_apis` as ["group/version", ...],
    `available_backends` as registry names) are written by the probe task.
    """

    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=200, blank=True)
    kubeconfig = models.TextField(blank=True, help_text="kubeconfig YAML; write-only")
    context = models.CharField(max_length=253, blank=True, help_text="kubeconfig context; empty = current")
    in_cluster = models.BooleanField(default=False, help_text="use the pod's service account instead")
    health = models.CharField(max_length=16, choices=ClusterHealth.choices, default=ClusterHealth.UNKNOWN)
    health_message = models.TextField(blank=True)
    last_probe_at = models.DateTimeField(null=True, blank=True)
    server_version = models.CharField(max_length=64, blank=True)
    served_apis = models.JSONField(default=list, blank=True)
    available_backends = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name
