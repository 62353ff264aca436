"""API serializers. Write paths validate through scheduling.services, so the API and forms say the same."""
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..amounts import for_api
from ..choices import GangPhase, TokenAction
from ..models import (
    ApiToken,
    AuditEvent,
    Cluster,
    GangJob,
    PhaseTransition,
    QueuePolicy,
    QueueUsageSample,
    RuntimeTemplate,
    RuntimeTemplateVersion,
    WebhookDelivery,
    WebhookSubscription,
)
from ..models.tokens import TOKEN_PREFIX
from ..services import job_list, queue_line, start_estimate, timeline
from ..services import queues as queue_service
from ..services import templates as template_service

# One bound serializer per (class, many), per process: see represent().
_SHARED: dict[tuple[type, bool], serializers.BaseSerializer] = {}


def represent(serializer_class, instance, many: bool = False):
    """What `serializer_class(instance, many=many).data` returns (a dict, or a list with many=True), from one
    serializer instance per class kept for the process.

    DRF builds a serializer's fields on every instantiation, and a ModelSerializer introspects its model to do it:
    for a job's detail form that was ~2 ms of a ~12 ms submit (bench/README.md), four times the representing
    itself. Representing reads the bound fields and changes nothing, so one instance serves every call. Only for
    serializers that read no context (request, view): none is given.
    """
    key = (serializer_class, many)
    serializer = _SHARED.get(key)
    if serializer is None:
        serializer = _SHARED[key] = serializer_class(many=many)
    return serializer.to_representation(instance)


# Shown to platform admins only (ClusterSerializer.to_representation): a cluster's shard queue and client rate limit.
ADMIN_ONLY_CLUSTER_FIELDS = ("work_shard", "api_qps", "api_burst")


class ClusterSerializer(serializers.ModelSerializer):
    """A cluster. `kubeconfig` is write-only: it is never returned after upload."""

    kubeconfig = serializers.CharField(write_only=True, required=False, allow_blank=True, trim_whitespace=False,
                                       style={"base_template": "textarea.html"})
    has_credentials = serializers.SerializerMethodField()
    scheduler_presence = serializers.SerializerMethodField(
        help_text="{backend family: {state: seen|not_seen|unknown, scheduler, seen_at, by, text}} as last probed")
    scheduler_names = serializers.JSONField(
        required=False, help_text="{backend family: schedulerName on this cluster}, e.g. {\"kai\": \"kai-scheduler\"}; "
                                  "a write changes the families it names (an empty name restores the default)")

    class Meta:
        model = Cluster
        fields = ["id", "name", "description", "kubeconfig", "context", "in_cluster", "has_credentials", "health",
                  "health_message", "last_probe_at", "server_version", "served_apis", "available_backends",
                  "scheduler_names", "scheduler_presence", "work_shard", "api_qps", "api_burst", "created_at",
                  "updated_at"]
        read_only_fields = ["health", "health_message", "last_probe_at", "server_version", "served_apis",
                            "available_backends", "created_at", "updated_at"]
        extra_kwargs = {
            "work_shard": {"help_text": "shard queue reconcile.<n> of this cluster's work; null: id modulo shards. "
                                        "Platform admins only: set and shown (absent for other readers)"},
            "api_qps": {"help_text": "API requests per second per gangweb process; null: the install default. "
                                     "Platform admins only: set and shown (absent for other readers)"},
            "api_burst": {"help_text": "requests allowed at once above api_qps; null: the default. Platform admins "
                                       "only: set and shown (absent for other readers)"},
        }

    def get_has_credentials(self, obj) -> bool:
        return bool(obj.kubeconfig) or obj.in_cluster

    def get_scheduler_presence(self, obj) -> dict:
        """Whether each served backend's scheduler is seen acting (observe/presence.py)."""
        from ..observe import presence

        return {family: p.as_dict() for family, p in presence.all_presence(obj).items()}

    def to_representation(self, instance):
        """The cluster; `work_shard`, `api_qps` and `api_burst` only for platform admins (and their tokens): the
        platform's worker pools and rate limits are theirs to set (services.clusters.PLATFORM_FIELDS), and other
        readers are left out of them (absent from the answer, not null)."""
        from ..services import access

        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not access.sees_every_cluster(request.user):
            for field in ADMIN_ONLY_CLUSTER_FIELDS:
                data.pop(field, None)
        return data

    def validate_work_shard(self, value):
        """A shard queue that exists: 0 to GANGWEB_RECONCILE_SHARDS - 1 (scheduling/routing.py), or null."""
        from .. import routing

        if value is not None and value >= routing.shard_count():
            raise serializers.ValidationError(f"must be between 0 and {routing.shard_count() - 1} "
                                              f"(GANGWEB_RECONCILE_SHARDS is {routing.shard_count()}), or null")
        return value

    def validate(self, attrs):
        """The kubeconfig follows `kube.kubeconfig_policy` (data only, https, allowed addresses) for the context
        the cluster will use; a 400 names the offending field ("kubeconfig.users[0].user.exec")."""
        from ..services import clusters as cluster_service

        cluster_service.check_kubeconfig(attrs, self.instance)
        if "scheduler_names" in attrs:
            attrs["scheduler_names"] = cluster_service.scheduler_names(
                attrs["scheduler_names"], self.instance.scheduler_names if self.instance else None)
        return attrs


QUANTITY_HELP = {
    "gpu": "GPU devices, fractions allowed (KAI unit). A number is devices; a string is a quantity ('4', '0.5', "
           "'500m' = 0.5). -1 or 'unlimited' = unlimited.",
    "cpu": "CPU in millicores (KAI unit). A number is millicores (4000 = 4 cores); a string is a quantity "
           "('4' = 4000, '500m' = 500). -1 or 'unlimited' = unlimited.",
    "memory": "Memory in decimal megabytes, 10^6 bytes (KAI unit). A number is MB; a string is a quantity "
              "('8G' = 8000, '64Gi' = 68720, rounded up). -1 or 'unlimited' = unlimited.",
}
LIMIT_HELP = " Default -1 (unlimited); 0 means nothing of this resource can be allocated (KAI)."
QUOTA_HELP = " Default 0 (no guarantee)."
WEIGHT_HELP = "Share of unused resources among siblings; 0 = no share of the surplus. Default 1."


class AmountField(serializers.FloatField):
    """A resource amount, read only, written by amounts.for_api: 2 (never 2.0) or 0.5, in the unit its help text
    names."""

    def __init__(self, **kwargs):
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value):
        return for_api(value)


class QueuePolicySerializer(serializers.ModelSerializer):
    """A KAI queue policy. GPUs in devices, CPU in millicores, memory in megabytes (10^6 bytes); -1 = unlimited.

    `warnings` lists accepted but doubtful settings (zero limit, quota over limit, children's quotas over the
    parent's, ...); `quantities` repeats the amounts per resource as display strings ("64Gi", "unlimited").
    """

    parent = serializers.SlugRelatedField(slug_field="name", read_only=True)
    clusters = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)
    warnings = serializers.SerializerMethodField()
    quantities = serializers.SerializerMethodField()
    gpu_quota = AmountField(help_text="GPU devices; -1 unlimited")
    gpu_limit = AmountField(help_text="GPU devices; -1 unlimited")
    cpu_quota = AmountField(help_text="CPU millicores; -1 unlimited")
    cpu_limit = AmountField(help_text="CPU millicores; -1 unlimited")
    memory_quota = AmountField(help_text="memory MB (10^6 bytes); -1 unlimited")
    memory_limit = AmountField(help_text="memory MB (10^6 bytes); -1 unlimited")

    class Meta:
        model = QueuePolicy
        fields = ["id", "name", "display_name", "parent", "priority", "gpu_quota", "gpu_limit",
                  "gpu_over_quota_weight", "cpu_quota", "cpu_limit", "cpu_over_quota_weight", "memory_quota",
                  "memory_limit", "memory_over_quota_weight", "preempt_min_runtime", "reclaim_min_runtime",
                  "clusters", "allowed_namespaces", "allowed_service_accounts", "pod_security_level", "managed",
                  "warnings", "quantities", "created_at", "updated_at"]
        read_only_fields = fields

    def get_warnings(self, obj) -> list[dict]:
        tree = self.context.get("tree") or queue_service.QueueTree.load()
        return queue_service.warnings_for(tree.by_id.get(obj.id, obj), tree)

    def get_quantities(self, obj) -> dict:
        return queue_service.policy_payload(obj)


class QueuePolicyDetailSerializer(QueuePolicySerializer):
    """A queue policy with its state in every cluster: sync state, last drift (field, expected, found) and the
    latest `status` KAI wrote (allocated / requested in KAI units, child queues)."""

    sync = serializers.SerializerMethodField()
    volcano_sync = serializers.SerializerMethodField(
        help_text="the queue as a Volcano Queue, per cluster that serves Volcano: sync state, drift, warnings for "
                  "what Volcano cannot express, and Volcano's status")

    class Meta(QueuePolicySerializer.Meta):
        fields = QueuePolicySerializer.Meta.fields + ["sync", "volcano_sync"]
        read_only_fields = fields

    def get_sync(self, obj) -> list[dict]:
        return [queue_service.sync_payload(s) for s in obj.cluster_states.all()]

    def get_volcano_sync(self, obj) -> list[dict]:
        return [queue_service.volcano_sync_payload(s) for s in obj.volcano_states.all()]


class QueuePolicyWriteSerializer(serializers.Serializer):
    """Create / update body (documentation; validation lives in scheduling.services.queues). On update every
    field is optional and fields not sent keep their value; `name` cannot change."""

    name = serializers.CharField(help_text="DNS-1123 label; the KAI Queue's name")
    display_name = serializers.CharField(required=False, allow_blank=True)
    parent = serializers.CharField(required=False, allow_null=True, help_text="parent queue name; null = top level")
    priority = serializers.IntegerField(required=False, default=100)
    gpu_quota = serializers.JSONField(required=False, help_text=QUANTITY_HELP["gpu"] + QUOTA_HELP)
    gpu_limit = serializers.JSONField(required=False, help_text=QUANTITY_HELP["gpu"] + LIMIT_HELP)
    gpu_over_quota_weight = serializers.FloatField(required=False, help_text=WEIGHT_HELP)
    cpu_quota = serializers.JSONField(required=False, help_text=QUANTITY_HELP["cpu"] + QUOTA_HELP)
    cpu_limit = serializers.JSONField(required=False, help_text=QUANTITY_HELP["cpu"] + LIMIT_HELP)
    cpu_over_quota_weight = serializers.FloatField(required=False, help_text=WEIGHT_HELP)
    memory_quota = serializers.JSONField(required=False, help_text=QUANTITY_HELP["memory"] + QUOTA_HELP)
    memory_limit = serializers.JSONField(required=False, help_text=QUANTITY_HELP["memory"] + LIMIT_HELP)
    memory_over_quota_weight = serializers.FloatField(required=False, help_text=WEIGHT_HELP)
    preempt_min_runtime = serializers.CharField(required=False, allow_blank=True, help_text="Go duration, e.g. 10m")
    reclaim_min_runtime = serializers.CharField(required=False, allow_blank=True, help_text="Go duration, e.g. 30m")
    clusters = serializers.ListField(child=serializers.CharField(), required=False,
                                     help_text="cluster names; empty = every cluster")
    allowed_namespaces = serializers.ListField(child=serializers.CharField(), required=False,
                                               help_text="namespaces its jobs may use, within the parent's; "
                                                         "empty = none; kube-* and gangweb's own are refused")
    allowed_service_accounts = serializers.ListField(child=serializers.CharField(), required=False,
                                                     help_text="service accounts its pods may run as besides "
                                                               "'default', within the parent's")
    pod_security_level = serializers.ChoiceField(["baseline", "restricted"], required=False,
                                                 help_text="Pod Security Standard of its jobs (default baseline); "
                                                           "the strictest along the queue's ancestors applies")


class QueueUsageSampleSerializer(serializers.ModelSerializer):
    """One usage reading (KAI units: GPU devices, CPU millicores, memory MB)."""

    cluster = serializers.CharField(source="cluster.name", read_only=True)
    allocated_gpu = AmountField(help_text="GPU devices")
    requested_gpu = AmountField(help_text="GPU devices")
    allocated_cpu = AmountField(help_text="CPU millicores")
    requested_cpu = AmountField(help_text="CPU millicores")
    allocated_memory = AmountField(help_text="memory MB (10^6 bytes)")
    requested_memory = AmountField(help_text="memory MB (10^6 bytes)")

    class Meta:
        model = QueueUsageSample
        fields = ["cluster", "at", "allocated_gpu", "allocated_cpu", "allocated_memory", "requested_gpu",
                  "requested_cpu", "requested_memory"]
        read_only_fields = fields


def _shown(version) -> tuple[dict | None, str]:
    """(spec, error) of a version loaded with `shown_spec=templates.loadable_spec()` (the viewsets do): a spec
    stored before the size/depth limits is not sent, and `error` says why (services/templates.spec_shown)."""
    shown = getattr(version, "_spec_shown", None)
    if shown is None:  # walked once per version, though two fields read it
        shown = version._spec_shown = template_service.spec_shown(
            version.shown_spec if hasattr(version, "shown_spec") else version.spec)
    return shown


class TemplateVersionSerializer(serializers.ModelSerializer):
    """One immutable template version. `spec` is null, and `spec_error` says why, for a spec stored before the
    size and depth limits that breaks them. `retired_at` is set once the version takes no new jobs."""

    spec = serializers.SerializerMethodField()
    spec_error = serializers.SerializerMethodField()

    class Meta:
        model = RuntimeTemplateVersion
        fields = ["version", "spec", "spec_error", "created_at", "retired_at"]
        read_only_fields = fields

    def get_spec(self, obj) -> dict | None:
        return _shown(obj)[0]

    def get_spec_error(self, obj) -> str | None:
        return _shown(obj)[1] or None


class RuntimeTemplateSerializer(serializers.ModelSerializer):
    """A runtime template. Writing `spec` stores a new version; jobs already submitted keep theirs."""

    spec = serializers.JSONField(write_only=True, help_text="template spec; see docs/api.md for its shape")
    queue = serializers.SlugRelatedField(slug_field="name", queryset=QueuePolicy.objects.all(), allow_null=True,
                                         required=False, help_text="owning team queue; empty = shared")
    latest_version = serializers.SerializerMethodField()
    latest_spec = serializers.SerializerMethodField()
    latest_spec_error = serializers.SerializerMethodField(help_text="why latest_spec is null: it breaks the size "
                                                                    "or depth limit (stored before the limits)")

    class Meta:
        model = RuntimeTemplate
        fields = ["id", "name", "description", "queue", "spec", "pod_security_level", "policy_exceptions",
                  "latest_version", "latest_spec", "latest_spec_error", "created_at"]
        read_only_fields = ["created_at"]
        extra_kwargs = {"policy_exceptions": {"help_text": "pod-security control ids waived for this template; "
                                                           "only platform admins change them"}}

    def get_latest_version(self, obj) -> int | None:
        latest = obj.latest
        return latest.version if latest else None

    def get_latest_spec(self, obj) -> dict | None:
        latest = obj.latest
        return _shown(latest)[0] if latest else None

    def get_latest_spec_error(self, obj) -> str | None:
        latest = obj.latest
        return (_shown(latest)[1] or None) if latest else None


class PhaseTransitionSerializer(serializers.ModelSerializer):
    """One timeline entry, with the time spent in it (`services.timeline.annotate` sets the two extra fields)."""

    duration_s = serializers.FloatField(read_only=True, allow_null=True, default=None,
                                        help_text="seconds in this phase: until the next entry, or until now while "
                                                  "ongoing; null for a terminal entry")
    ongoing = serializers.BooleanField(read_only=True, default=False,
                                       help_text="true for the job's current, unfinished phase")
    inferred = serializers.BooleanField(read_only=True,
                                        help_text="true when `at` is not the cluster's own timestamp for this event "
                                                  "(gangweb inferred it); such times are left out of the latency "
                                                  "histograms (docs/observability.md, Inferred times)")

    count = serializers.IntegerField(read_only=True, default=1,
                                     help_text="consecutive identical entries (same phase, reason, message and "
                                               "source) folded into this one; 1 when alone")
    first_at = serializers.DateTimeField(read_only=True, default=None, help_text="`at` of the first folded entry")
    last_at = serializers.DateTimeField(read_only=True, default=None, help_text="`at` of the last folded entry")

    class Meta:
        model = PhaseTransition
        fields = ["phase", "attempt", "at", "recorded_at", "source", "reason", "message", "inferred", "duration_s",
                  "ongoing", "count", "first_at", "last_at"]


class DurationSerializer(serializers.Serializer):
    """One derived duration: seconds, and whether it is still counting (the job is still in that span)."""

    duration_s = serializers.FloatField()
    ongoing = serializers.BooleanField()
    inferred = serializers.BooleanField(default=False, help_text="true when one end of the span is an inferred time")


class DurationsSerializer(serializers.Serializer):
    """Derived durations (services.timeline.spans); each null until its span starts."""

    time_in_queue = DurationSerializer(allow_null=True, help_text="Queued (else Dispatched) until Scheduled")
    time_to_schedule = DurationSerializer(allow_null=True, help_text="Submitted until Scheduled")
    time_to_running = DurationSerializer(allow_null=True, help_text="Submitted until Running")
    run_time = DurationSerializer(allow_null=True, help_text="Running until Succeeded/Failed/Cancelled")


class JobEventSerializer(serializers.Serializer):
    """One Kubernetes Event about one of the job's objects (see scheduling.observe.events)."""

    type = serializers.CharField()
    reason = serializers.CharField()
    message = serializers.CharField()
    object = serializers.CharField(help_text='"Kind namespace/name"')
    kind = serializers.CharField()
    count = serializers.IntegerField()
    first_at = serializers.DateTimeField(allow_null=True)
    last_at = serializers.DateTimeField(allow_null=True)
    component = serializers.CharField()


class JobEventsSerializer(serializers.Serializer):
    """The events of a job, read live from its cluster; `error` says why they could not be read."""

    cluster = serializers.CharField()
    events = JobEventSerializer(many=True)
    error = serializers.CharField(allow_null=True)


class WhyPendingPodsSerializer(serializers.Serializer):
    """Pods of the gang: bound of required (minMember), all the job has, and how many exist."""

    bound = serializers.IntegerField()
    required = serializers.IntegerField()
    total = serializers.IntegerField()
    created = serializers.IntegerField()
    sets = serializers.ListField(child=serializers.DictField(), required=False, help_text=(
        "per pod set that states its own minimum: {name, replicas, minimum, bound}; absent when none does. A gang "
        "is whole only when each has at least its minimum bound"))


class WhyPendingSerializer(serializers.Serializer):
    """Why a job waits (see scheduling.observe.why_pending). Numbers are in base units: GPUs, CPU cores, bytes."""

    reason = serializers.CharField(help_text="code: the scheduler's reason (OverLimit, Unschedulable, ...) or "
                                             "gangweb's (WaitingForPods, WaitingForScheduler, ClusterUnreachable)")
    message = serializers.CharField(help_text="the scheduler's own words")
    summary = serializers.CharField(help_text="the explanation in plain words")
    source = serializers.CharField(help_text='"Kind namespace/name" that said it')
    since = serializers.DateTimeField(allow_null=True)
    pods = WhyPendingPodsSerializer(allow_null=True)
    queue = serializers.JSONField(allow_null=True, help_text='{"name", "resources": {"nvidia.com/gpu": {"quota", '
                                                             '"limit", "allocated", "allocated_non_preemptible", '
                                                             '"requested"}}} when the scheduler gives them (KAI)')
    job_requests = serializers.DictField(child=serializers.FloatField(), help_text="what the job asks, per resource")
    blocking = serializers.ListField(
        child=serializers.DictField(), required=False,
        help_text='what blocks, most certain first, each {"code", "message", ...numbers}: ExceedsClusterCapacity '
                  '{"resource", "needs", "available", "nodes"}, NoNodeFits {"resource", "per_pod", "largest_node", '
                  '"nodes"}, QueueOverLimit {"queue", "resource", "in_use", "limit", "needs"}, QueueOverQuota '
                  '{"queue", "resource", "in_use", "quota", "needs"}, ClusterBusy {"resource", "needs", '
                  '"allocatable", "in_use", "free"}')
    reasons = serializers.ListField(child=serializers.DictField(), help_text="every explanation the scheduler gave")
    pod_conditions = serializers.ListField(child=serializers.DictField(),
                                           help_text="pods' PodScheduled=False reasons and messages, with counts")
    said = serializers.ListField(
        child=serializers.DictField(), required=False,
        help_text='what the cluster keeps saying: the Warning Events of the gang objects and one waiting pod, one '
                  'entry per (reason, object), newest first, at most 3, each {"type", "reason", "message", "object", '
                  '"kind", "count", "first_at", "last_at", "component"}: count sums the Events\' count or '
                  'series.count, first_at/last_at are first and last seen (RFC 3339); absent when nothing was said')
    http_status = serializers.IntegerField(required=False, allow_null=True,
                                           help_text="for cluster errors: the HTTP status the cluster answered")


@extend_schema_field(WhyPendingSerializer(allow_null=True))
class WhyPendingField(serializers.JSONField):
    """`GangJob.why_pending` as stored (documented in the schema by WhyPendingSerializer)."""


class GangJobSerializer(serializers.ModelSerializer):
    """A gang job as the API returns it (list form)."""

    why_pending = WhyPendingField(read_only=True, allow_null=True)

    template = serializers.CharField(source="template_version.template.name", read_only=True)
    template_version = serializers.IntegerField(source="template_version.version", read_only=True)
    queue = serializers.CharField(source="queue.name", read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    submitted_by = serializers.CharField(source="submitted_by.username", read_only=True, default=None)
    gpus = AmountField(source="requested_gpu",
                       help_text="GPU devices the whole gang requests (gangweb's request arithmetic: every "
                                 "pod set's per-pod requests times its replicas, as kube-scheduler counts)")
    waiting_reason = serializers.SerializerMethodField(
        help_text="why a pending job waits, in one short line (its why_pending summary, else the scheduler's reason); "
                  "empty when the job is not pending")

    class Meta:
        model = GangJob
        fields = ["id", "uid", "name", "namespace", "template", "template_version", "queue", "cluster",
                  "priority_class_name", "overrides", "desired_state", "phase", "phase_reason", "phase_message",
                  "phase_changed_at", "why_pending", "waiting_reason", "gpus", "backend_plugin", "submitted_by",
                  "created_at", "updated_at", "finished_at", "cleaned_up_at", "remove_after", "objects_removed_at"]
        read_only_fields = fields
        extra_kwargs = {"remove_after": {"help_text": "kept until: when a finished job's Indexed Jobs and pods are "
                                                      "deleted (finished_at + the retention)"},
                        "objects_removed_at": {"help_text": "removed at: when gangweb found none of the job's "
                                                            "cluster objects left"}}

    def get_waiting_reason(self, obj) -> str:
        return job_list.waiting_reason(obj)


class BulkCancelSerializer(serializers.Serializer):
    """The body of POST /api/v1/jobs/cancel/ (for the schema; services/bulk_cancel.py validates it)."""

    ids = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1, max_length=500)


class BulkCancelJobSerializer(serializers.Serializer):
    """One job's result in a bulk cancel."""

    id = serializers.IntegerField()
    name = serializers.CharField(help_text="the job's name; empty for a job you cannot see")
    namespace = serializers.CharField(help_text="the job's namespace; empty for a job you cannot see")
    cancelled = serializers.BooleanField()
    status = serializers.IntegerField(help_text="what the single cancel answers: 202, or 403 / 404 / 409 refused")
    reason = serializers.CharField(help_text="why it was refused (or 'already being cancelled'); empty otherwise")


class BulkCancelResultSerializer(serializers.Serializer):
    """The answer of POST /api/v1/jobs/cancel/."""

    cancelled = serializers.IntegerField()
    refused = serializers.IntegerField()
    jobs = BulkCancelJobSerializer(many=True)


class FailureSerializer(serializers.Serializer):
    """Which of the job's containers failed first, and how (scheduling/observe/failure.py; docs/observability.md
    "The failure"). Read from the job's own pods (controller reference to a Job UID gangweb recorded) and its
    Jobs' Failed condition."""

    kind = serializers.ChoiceField(choices=["ExitCode", "OOMKilled", "DeadlineExceeded", "ImagePull", "Evicted",
                                            "PodFailed", "JobFailed"])
    pod_set = serializers.CharField(help_text="the pod set of the pod that failed first")
    index = serializers.IntegerField(allow_null=True, help_text="its Indexed Job completion index")
    pod = serializers.CharField(help_text="the pod's name (empty when only the Job's condition says anything)")
    container = serializers.CharField(help_text="the container that failed (empty when the pod failed as a whole)")
    init_container = serializers.BooleanField()
    exit_code = serializers.IntegerField(allow_null=True)
    signal = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField(help_text="the container's terminated/waiting reason, or the pod's status.reason "
                                             "(Error, OOMKilled, ImagePullBackOff, Evicted, DeadlineExceeded, ...)")
    message = serializers.CharField(help_text="its termination message (at most 1 KiB)")
    restarts = serializers.IntegerField()
    at = serializers.DateTimeField(allow_null=True, help_text="when it ended (the container's finishedAt)")
    job_reason = serializers.CharField(help_text="the Job's Failed condition reason (BackoffLimitExceeded, ...)")
    job_message = serializers.CharField()
    failed_pods = serializers.IntegerField(help_text="the job's pods with a failure")
    summary = serializers.CharField(help_text="one line, e.g. 'worker[1] container trainer exited with code 3 "
                                              "(Error)'")


class JobLogQuerySerializer(serializers.Serializer):
    """The query of GET /api/v1/jobs/<id>/logs/ (services/job_logs.py): which pod and container, and core/v1
    PodLogOptions."""

    pod_set = serializers.CharField(required=False, max_length=63, default="", allow_blank=True,
                                    help_text="the pod set (default: the failed pod's, else the first)")
    index = serializers.IntegerField(required=False, min_value=0, max_value=1_000_000, allow_null=True,
                                     default=None, help_text="the Indexed Job completion index")
    container = serializers.CharField(required=False, max_length=63, default="", allow_blank=True,
                                      help_text="default: the container that failed, else the pod's first")
    tail_lines = serializers.IntegerField(required=False, min_value=1, max_value=1_000_000, allow_null=True,
                                          default=None, help_text="the last N lines only")
    since_seconds = serializers.IntegerField(required=False, min_value=1, max_value=30 * 86400, allow_null=True,
                                             default=None, help_text="only lines written in the last N seconds")
    previous = serializers.BooleanField(required=False, default=False,
                                        help_text="the previous (restarted) container's log")
    follow = serializers.BooleanField(required=False, default=False,
                                      help_text="stream new lines as they come, for GANGWEB_LOG_FOLLOW_SECONDS at "
                                                "most")


class GangJobDetailSerializer(GangJobSerializer):
    """A gang job with its resolved spec, timeline (in order) and derived durations (seconds)."""

    timeline = serializers.SerializerMethodField(help_text="the timeline, consecutive identical entries folded "
        "(`count`, `first_at`, `last_at`), at most the first 5 and the last 45 of them: `timeline_omitted` says how "
        "many are left out between, and GET /api/v1/jobs/<id>/timeline/?offset=&limit= pages every entry")
    timeline_total = serializers.SerializerMethodField(help_text="recorded timeline entries (rows, unfolded)")
    timeline_omitted = serializers.SerializerMethodField(help_text="folded entries left out of `timeline`")
    durations = serializers.SerializerMethodField()
    position = serializers.SerializerMethodField(help_text="a pending job's place in line (services/queue_line.py): "
        "{status: known | unknown, reason, queue, queue_total, parent, parent_total, priority, text, parent_text, "
        "order}; null when not pending; unknown (numbers null, the reason in text) when it cannot be computed. "
        "In GET /api/v1/jobs/<id>/ only: write answers (submit, update, cancel) leave it out and cost no query")
    estimated_start = serializers.SerializerMethodField(help_text="a pending job's start-time estimate "
        "(services/start_estimate.py; the same as GET /api/v1/jobs/<id>/estimate/): {status: estimated | now | "
        "unknown | never, p50, p90, p50_seconds, p90_seconds, p50_in_minutes, p90_in_minutes, text, evidence, reason, "
        "ahead_in_queue, needs, freed_by, samples, computed_at, method}; null when not pending; unknown with the "
        "reason when it cannot be computed (the rest of the job still answers). In GET "
        "/api/v1/jobs/<id>/ only, as `position`")
    failure = serializers.SerializerMethodField(help_text="the first failure among the job's containers, pods and "
                                                          "Jobs; null when nothing failed")
    requeues = serializers.SerializerMethodField(help_text="times the gang started again: re-queued after a "
        "disruption, or its objects recreated after they were lost (Recreated) or replaced (Replaced); it is the "
        "latest timeline attempt's number, and durations read that attempt")

    class Meta(GangJobSerializer.Meta):
        fields = GangJobSerializer.Meta.fields + ["resolved_spec", "observed", "failure", "timeline", "timeline_total",
                                                  "timeline_omitted", "durations", "requeues", "position",
                                                  "estimated_start"]
        read_only_fields = fields

    def _transitions(self, obj):
        # One `now` per job, so the timeline's ongoing entry and the ongoing durations agree.
        cached = getattr(obj, "_timeline_now", None)
        if cached is None:
            obj._timeline_now = cached = timezone.now()
        return timeline.annotate(obj.transitions.all(), cached)

    def _shown(self, obj) -> tuple[list, int, int]:
        cached = getattr(obj, "_timeline_shown", None)
        if cached is None:
            items = self._transitions(obj)
            shown, omitted = timeline.bounded(timeline.fold(items))
            obj._timeline_shown = cached = (shown, omitted, len(items))
        return cached

    @extend_schema_field(FailureSerializer(allow_null=True))
    def get_failure(self, obj) -> dict | None:
        found = (obj.observed or {}).get("failure") if isinstance(obj.observed, dict) else None
        return found if isinstance(found, dict) else None

    @extend_schema_field(PhaseTransitionSerializer(many=True))
    def get_timeline(self, obj) -> list[dict]:
        return represent(PhaseTransitionSerializer, self._shown(obj)[0], many=True)

    def get_timeline_total(self, obj) -> int:
        return self._shown(obj)[2]

    def get_timeline_omitted(self, obj) -> int:
        return self._shown(obj)[1]

    @extend_schema_field(DurationsSerializer)
    def get_durations(self, obj) -> dict:
        self._transitions(obj)
        return timeline.spans(obj.transitions.all(), obj._timeline_now)

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_position(self, obj) -> dict | None:
        return queue_line.position(obj)

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_estimated_start(self, obj) -> dict | None:
        request = self.context.get("request")
        return start_estimate.payload(obj, getattr(request, "user", None))

    def to_representation(self, instance):
        if self.context.get("with_position"):
            return super().to_representation(instance)
        # Write answers leave the position and the estimate out: they cost queries, and submit's count is pinned
        # (it reads nothing back). `fields` is per serializer instance, so this drops them for this one only.
        self.fields.pop("position", None)
        self.fields.pop("estimated_start", None)
        return super().to_representation(instance)

    def get_requeues(self, obj) -> int:
        return timeline.requeues(obj.transitions.all())


WAIT_TIMELINE_SHOWN = 50  # timeline entries per job in a wait answer (issue 33: bounded history)


class JobWaitEntrySerializer(serializers.ModelSerializer):
    """One timeline entry as the wait endpoint returns it (the entry's own fields; no derived durations)."""

    class Meta:
        model = PhaseTransition
        fields = ["phase", "attempt", "at", "source", "reason", "message", "inferred"]
        read_only_fields = fields


class JobWaitStateSerializer(serializers.ModelSerializer):
    """A job's current state as the wait endpoint returns it: phase, reason, why it waits, the last
    WAIT_TIMELINE_SHOWN entries of its timeline in order (`timeline_total` counts them all; a waiter that follows a
    job sees each entry as it comes, and GET /api/v1/jobs/<id>/timeline/ pages a long history)."""

    queue = serializers.CharField(source="queue.name", read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    why_pending = WhyPendingField(read_only=True, allow_null=True)
    terminal = serializers.BooleanField(source="is_terminal", read_only=True,
                                        help_text="Succeeded, Failed or Cancelled: the job will not change again")
    timeline = serializers.SerializerMethodField(help_text="the last 50 timeline entries, in order")
    timeline_total = serializers.SerializerMethodField(help_text="recorded timeline entries")

    class Meta:
        model = GangJob
        fields = ["id", "name", "namespace", "queue", "cluster", "desired_state", "phase", "phase_reason",
                  "phase_message", "phase_changed_at", "finished_at", "why_pending", "terminal", "timeline",
                  "timeline_total"]
        read_only_fields = fields

    @extend_schema_field(JobWaitEntrySerializer(many=True))
    def get_timeline(self, obj) -> list[dict]:
        return represent(JobWaitEntrySerializer, timeline.ordered(obj.transitions.all())[-WAIT_TIMELINE_SHOWN:],
                         many=True)

    def get_timeline_total(self, obj) -> int:
        return len(obj.transitions.all())


class JobWaitSerializer(serializers.Serializer):
    """The wait endpoint's answer: every named job's current state, and the cursor to send back as `after`."""

    cursor = serializers.CharField(help_text="send it back as `after` to wait for the next change")
    changed = serializers.BooleanField(help_text="the jobs' state differs from `after` (always true without it)")
    timed_out = serializers.BooleanField(help_text="answered at the timeout, nothing having changed")
    all_terminal = serializers.BooleanField(help_text="every job found is Succeeded, Failed or Cancelled")
    jobs = JobWaitStateSerializer(many=True, help_text="in the order of `ids`")
    missing = serializers.ListField(child=serializers.IntegerField(),
                                    help_text="ids with no job you can see (as a 404 would say)")


class WebhookSubscriptionSerializer(serializers.ModelSerializer):
    """A webhook subscription (never its secret). Scope: `job`, else `queue`, else every job you submitted."""

    owner = serializers.CharField(source="owner.username", read_only=True)
    queue = serializers.CharField(source="queue.name", read_only=True, allow_null=True, default=None)
    job = serializers.IntegerField(source="job_id", read_only=True, allow_null=True)

    class Meta:
        model = WebhookSubscription
        fields = ["id", "name", "url", "owner", "job", "queue", "phases", "active", "created_at"]
        read_only_fields = fields


class WebhookSubscriptionCreatedSerializer(WebhookSubscriptionSerializer):
    """The create response: the only time the signing `secret` (Standard Webhooks `whsec_...`) is shown."""

    secret = serializers.CharField(read_only=True, help_text="store it now to verify signatures; never shown again")

    class Meta(WebhookSubscriptionSerializer.Meta):
        fields = WebhookSubscriptionSerializer.Meta.fields + ["secret"]
        read_only_fields = fields


class WebhookSubscriptionWriteSerializer(serializers.Serializer):
    """Create / update body (documentation; validation lives in scheduling.services.notifications)."""

    name = serializers.CharField(max_length=100)
    url = serializers.URLField(help_text="receiver; public addresses only unless the install allows private ones")
    job = serializers.IntegerField(required=False, allow_null=True, help_text="one job's phase changes")
    queue = serializers.CharField(required=False, allow_null=True, help_text="the phase changes of a queue's jobs")
    phases = serializers.ListField(child=serializers.CharField(), required=False,
                                   help_text=f"phases to send ({', '.join(GangPhase.values)}); empty = all")
    active = serializers.BooleanField(required=False)


class WebhookDeliverySerializer(serializers.ModelSerializer):
    """One delivery: the event sent, its status, attempts and last error."""

    class Meta:
        model = WebhookDelivery
        fields = ["id", "event_id", "status", "attempts", "last_status_code", "last_error", "created_at",
                  "last_attempt_at", "delivered_at", "payload"]
        read_only_fields = fields


class JobSubmitSerializer(serializers.Serializer):
    """Submit body (documentation; validation is strict and lives in scheduling.services.jobs)."""

    name = serializers.CharField(help_text="DNS-1123 label, at most 63 characters")
    namespace = serializers.CharField(default="default")
    template = serializers.CharField(help_text="runtime template name")
    template_version = serializers.IntegerField(required=False, help_text="default: latest")
    queue = serializers.CharField()
    cluster = serializers.CharField()
    priority_class_name = serializers.CharField(required=False, allow_blank=True)
    overrides = serializers.JSONField(required=False, help_text="fields the template allows, e.g. "
                                      '{"podSets": {"worker": {"replicas": 4, "resources": {"nvidia.com/gpu": "1"}}}}')


class BulkSubmitSerializer(serializers.Serializer):
    """Bulk submit body: all jobs are created, or none."""

    jobs = JobSubmitSerializer(many=True)


class JobRefSerializer(serializers.ModelSerializer):
    """A created job as a bulk submit answers it under `Prefer: return=minimal`: enough to find it again."""

    class Meta:
        model = GangJob
        fields = ["id", "uid", "name"]
        read_only_fields = fields


class BulkSubmitResultSerializer(serializers.Serializer):
    """Bulk submit answer: how many jobs were created and each one, in request order (list form)."""

    count = serializers.IntegerField()
    jobs = GangJobSerializer(many=True)


class BulkSubmitMinimalResultSerializer(serializers.Serializer):
    """Bulk submit answer under `Prefer: return=minimal`: the count and each job's id, uid and name."""

    count = serializers.IntegerField()
    jobs = JobRefSerializer(many=True)


class JobUpdateSerializer(serializers.Serializer):
    """PATCH body: the fields of a running job that may change."""

    queue = serializers.CharField(required=False)
    priority_class_name = serializers.CharField(required=False, allow_blank=True)


class ApiTokenSerializer(serializers.ModelSerializer):
    """An API token as listed: never its secret (`display` shows only the public lookup part)."""

    owner = serializers.CharField(source="owner.username", read_only=True)
    display = serializers.SerializerMethodField()
    queues = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)
    is_active = serializers.BooleanField(read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "owner", "display", "actions", "queues", "created_at", "expires_at", "revoked_at",
                  "last_used_at", "is_active"]
        read_only_fields = fields

    def get_display(self, obj) -> str:
        return f"{TOKEN_PREFIX}{obj.lookup}_…"


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    """The create response: the only time the plaintext `token` is shown."""

    token = serializers.CharField(read_only=True, help_text="store it now; it is never shown again")

    class Meta(ApiTokenSerializer.Meta):
        fields = ApiTokenSerializer.Meta.fields + ["token"]
        read_only_fields = fields


class ApiTokenCreateSerializer(serializers.Serializer):
    """Create body (documentation; validation lives in scheduling.services.tokens)."""

    name = serializers.CharField(max_length=100)
    actions = serializers.ListField(child=serializers.ChoiceField(choices=TokenAction.choices), required=False,
                                    help_text='default ["read"]')
    queues = serializers.ListField(child=serializers.CharField(), required=False,
                                   help_text="queue names; empty = every queue you have a role on")
    expires_at = serializers.DateTimeField(required=False, help_text="default: GANGWEB_TOKEN_DEFAULT_DAYS from now")


class AuditEventSerializer(serializers.ModelSerializer):
    """One audit log entry."""

    token = serializers.SerializerMethodField()

    class Meta:
        model = AuditEvent
        fields = ["id", "at", "actor_name", "token", "action", "object_type", "object_id", "object_name", "details"]
        read_only_fields = fields

    def get_token(self, obj) -> str | None:
        return f"{TOKEN_PREFIX}{obj.token.lookup}_…" if obj.token_id else None
