"""Runtime templates: reusable, versioned blueprints of a distributed job (cf. Kubeflow Trainer TrainingRuntime)."""
from django.conf import settings
from django.db import models

from ..choices import PodSecurityLevel


class RuntimeTemplate(models.Model):
    """A named template. Its content lives in immutable versions; editing creates a new version.

    `queue` is the team queue that owns it: admins of that queue manage it and its users see it. A template
    without a queue is shared: every user sees it, only platform admins change it.

    `pod_security_level` ("" = the queue's) can only make the job's level stricter than its queue's.
    `policy_exceptions` lists control ids of `podspec.pod_security.CONTROLS` waived for every version of this
    template; only platform admins set it (services/templates/policy.py).
    """

    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=300, blank=True)
    queue = models.ForeignKey("scheduling.QueuePolicy", null=True, blank=True, on_delete=models.PROTECT,
                              related_name="templates", help_text="owning team queue; empty = shared")
    pod_security_level = models.CharField(max_length=16, choices=PodSecurityLevel.choices, blank=True, default="",
                                          help_text="empty = the queue's level")
    policy_exceptions = models.JSONField(default=list, blank=True,
                                         help_text="pod-security control ids waived (platform admins only)")
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

    `spec` shape (validated by `scheduling.services.templates.specs.validate_template_spec`)::

        {"backend": "kai" | "k8s-workload" | "coscheduling" | "volcano",
         "gang": {"minMember": int | null, "scheduleTimeoutSeconds": int, "disruptionMode": "single" | "all" (opt.),
                  "preemptionDelay": "5m" (kai, opt.), "stalenessGracePeriod": "-1s" (kai, opt.)},
         "priorityClassName": str, "preemptibility": "" | "preemptible" | "non-preemptible",
         "topologyConstraint": {...} | null,
         "podSets": [{"name": str, "replicas": int, "minMember": int (0..replicas; 0 = optional) | null,
                      "template": <core/v1 PodTemplateSpec as a dict: {"metadata": {...}, "spec": {...}}>}],
         "overridable": ["podSets.worker.replicas", "podSets.*.resources", "priorityClassName", ...]}
    """

    template = models.ForeignKey(RuntimeTemplate, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    spec = models.JSONField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    # A retired version takes no new jobs (submit and resubmit are 400); jobs that used it keep it and their
    # history. Retiring is one-way (services/template_versions.retire_version): a version withdrawn for what it allows
    # must not come back by a click; storing its spec again makes a new version.
    retired_at = models.DateTimeField(null=True, blank=True, help_text="when it stopped taking new jobs")
    retired_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["template__name", "-version"]
        constraints = [models.UniqueConstraint(fields=["template", "version"], name="uniq_template_version")]

    def __str__(self):
        return f"{self.template.name}@v{self.version}"

    @property
    def backend(self) -> str:
        """Scheduler backend family named by the spec."""
        return self.spec.get("backend", "")
