"""Runtime templates: reusable, versioned blueprints of a distributed job (cf. Kubeflow Trainer TrainingRuntime)."""
from django.conf import settings
from django.db import models


class RuntimeTemplate(models.Model):
    """A named template. Its content lives in immutable versions; editing creates a new version.

    `queue` is the team queue that owns it: admins of that queue manage it and its users see it. A template
    without a queue is shared: every user sees it, only platform admins change it.
    """

    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=300, blank=True)
    queue = models.ForeignKey("scheduling.QueuePolicy", null=True, blank=True, on_delete=models.PROTECT,
                              related_name="templates", help_text="owning team queue; empty = shared")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def latest(self):
        """The highest version (prefetch `versions` to avoid a query per template)."""
        versions = list(self.versions.all())
        return max(versions, key=lambda v: v.version) if versions else None


class RuntimeTemplateVersion(models.Model):
    """One immutable version of a runtime template.

    `spec` shape (validated by `scheduling.services.templates.validate_template_spec`)::

        {"backend": "kai" | "k8s-workload" | "coscheduling" | "volcano",
         "gang": {"minMember": int | null, "scheduleTimeoutSeconds": int, "disruptionMode": "single" | "all" (opt.),
                  "preemptionDelay": "5m" (kai, opt.), "stalenessGracePeriod": "-1s" (kai, opt.)},
         "priorityClassName": str, "preemptibility": "" | "preemptible" | "non-preemptible",
         "topologyConstraint": {...} | null,
         "podSets": [{"name": str, "replicas": int, "minMember": int | null,
                      "template": <core/v1 PodTemplateSpec as a dict: {"metadata": {...}, "spec": {...}}>}],
         "overridable": ["podSets.worker.replicas", "podSets.*.resources", "priorityClassName", ...]}
    """

    template = models.ForeignKey(RuntimeTemplate, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    spec = models.JSONField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["template__name", "-version"]
        constraints = [models.UniqueConstraint(fields=["template", "version"], name="uniq_template_version")]

    def __str__(self):
        return f"{self.template.name}@v{self.version}"

    @property
    def backend(self) -> str:
        """Scheduler backend family named by the spec."""
        return self.spec.get("backend", "")
