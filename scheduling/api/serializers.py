"""API serializers. Write paths validate through scheduling.services, so the API and forms say the same."""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..amounts import for_api
from ..choices import GangPhase, TokenAction
from ..models import (
    ApiToken,
    AuditEvent,
    Cluster,
    QueuePolicy,
    QueueUsageSample,
    RuntimeTemplate,
    RuntimeTemplateVersion,
    WebhookDelivery,
    WebhookSubscription,
)
from ..models.tokens import TOKEN_PREFIX
from ..services.queues import decayed_usage as decayed_usage_service
from ..services.queues import kueue_usage
from ..services.queues import payloads as queue_payloads
from ..services.queues import per_cluster as per_cluster_service
from ..services.queues import policies as queue_service
from ..services.queues import warnings as queue_warnings
from ..services.templates import specs as template_service
from .summary_serializers import QueueClusterUseSerializer

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


# Paths under /api/v1/clusters/ that are not a cluster (the viewset's list actions): no cluster may take these names.
RESERVED_CLUSTER_NAMES = frozenset({"summary"})
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
        platform's worker pools and rate limits are theirs to set (services.clusters.checks.PLATFORM_FIELDS), and other
        readers are left out of them (absent from the answer, not null)."""
        from ..services.access import roles as access

        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not access.sees_every_cluster(request.user):
            for field in ADMIN_ONLY_CLUSTER_FIELDS:
                data.pop(field, None)
        return data

    def validate_name(self, value):
        """Not a name the cluster routes take for themselves: GET /api/v1/clusters/summary/ is the clusters side by
        side, so a cluster named `summary` would have no detail URL (RESERVED_CLUSTER_NAMES)."""
        if value in RESERVED_CLUSTER_NAMES:
            raise serializers.ValidationError(f"'{value}' is reserved: /api/v1/clusters/{value}/ is another endpoint")
        return value

    def validate_work_shard(self, value):
        """A shard queue that exists: 0 to GANGWEB_RECONCILE_SHARDS - 1 (scheduling/work/routing.py), or null."""
        from ..work import routing

        if value is not None and value >= routing.shard_count():
            raise serializers.ValidationError(f"must be between 0 and {routing.shard_count() - 1} "
                                              f"(GANGWEB_RECONCILE_SHARDS is {routing.shard_count()}), or null")
        return value

    def validate(self, attrs):
        """The kubeconfig follows `kube.kubeconfig_policy` (data only, https, allowed addresses) for the context
        the cluster will use; a 400 names the offending field ("kubeconfig.users[0].user.exec")."""
        from ..services.clusters import checks as cluster_service

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
                  "move_after_seconds", "warnings", "quantities", "created_at", "updated_at"]
        read_only_fields = fields

    def get_warnings(self, obj) -> list[dict]:
        tree = self.context.get("tree") or queue_service.QueueTree.load()
        return queue_warnings.warnings_for(tree.by_id.get(obj.id, obj), tree)

    def get_quantities(self, obj) -> dict:
        return queue_payloads.policy_payload(obj)


class QueuePolicyDetailSerializer(QueuePolicySerializer):
    """A queue policy with its state in every cluster: sync state, last drift (field, expected, found) and the
    latest `status` KAI wrote (allocated / requested in KAI units, child queues)."""

    sync = serializers.SerializerMethodField()
    volcano_sync = serializers.SerializerMethodField(
        help_text="the queue as a Volcano Queue, per cluster that serves Volcano: sync state, drift, warnings for "
                  "what Volcano cannot express, and Volcano's status")
    kueue = serializers.SerializerMethodField(
        help_text="the queue as Kueue reports it, per cluster where it is a Kueue ClusterQueue or Cohort: reserved "
                  "and borrowed amounts (queue units), Workload counts and Kueue's fair share "
                  "(services/queues/kueue_usage.py)")
    kueue_sync = serializers.SerializerMethodField(
        help_text="the queue as a Kueue Cohort or ClusterQueue, per cluster that serves Kueue: sync state, drift, "
                  "warnings for what Kueue cannot express, and Kueue's status (reconcile/kueue_desired.py)")
    decayed_usage = serializers.SerializerMethodField(
        help_text="what the queue and every queue below it used, each second weighed 0.5^(age / half-life) (KAI "
                  "time-based fair share): gpu device-seconds, cpu core-seconds, memory byte-seconds, "
                  "half_life_seconds; services/queues/decayed_usage.py")
    per_cluster = extend_schema_field(QueueClusterUseSerializer(many=True))(serializers.SerializerMethodField(
        help_text="the queue's use per cluster it (or a queue below it) takes jobs on, of the clusters the reader "
                  "may see: quota, limit, in use (gangweb's count), reported (the scheduler's) and waiting per "
                  "resource in queue units, and its running and waiting jobs; services/queues/per_cluster.py"))

    class Meta(QueuePolicySerializer.Meta):
        fields = QueuePolicySerializer.Meta.fields + ["sync", "volcano_sync", "kueue", "kueue_sync", "decayed_usage",
                                                      "per_cluster"]
        read_only_fields = fields

    def get_sync(self, obj) -> list[dict]:
        return [queue_payloads.sync_payload(s) for s in obj.kai_states]  # prefetched: api.views.queues.queue_states

    def get_volcano_sync(self, obj) -> list[dict]:
        return [queue_payloads.volcano_sync_payload(s) for s in obj.volcano_states]

    def get_kueue(self, obj) -> list[dict]:
        # Prefetched (api.views.queues.queue_states, one Prefetch per QueueFamily) once the family is known.
        return [kueue_usage.kueue_payload(s) for s in getattr(obj, f"{kueue_usage.FAMILY}_states", [])]

    def get_kueue_sync(self, obj) -> list[dict]:
        return [queue_payloads.volcano_sync_payload(s) for s in obj.kueue_states]  # the same keys, with warnings

    def get_per_cluster(self, obj) -> list[dict]:
        request = self.context.get("request")
        tree = self.context.get("tree") or queue_service.QueueTree.load_rows()
        return per_cluster_service.per_cluster(obj, tree, request.user if request is not None else None)

    def get_decayed_usage(self, obj) -> dict:
        tree = self.context.get("tree") or queue_service.QueueTree.load_rows()
        usage = decayed_usage_service.decayed_usage([obj.id], tree)[obj.id]
        return {k: for_api(v) for k, v in usage.items()}  # resource-seconds to 6 decimals, whole ones as integers


class QueuePolicyWriteSerializer(serializers.Serializer):
    """Create / update body (documentation; validation lives in scheduling.services.queues.policies). On update every
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
    move_after_seconds = serializers.IntegerField(required=False, allow_null=True, min_value=30,
                                                  help_text="move a job gangweb placed that has waited this long on "
                                                            "one cluster to one of the queue's where it fits now; "
                                                            "null (default): never")


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
    """Create / update body (documentation; validation lives in scheduling.services.webhooks.subscriptions)."""

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
    """Create body (documentation; validation lives in scheduling.services.access.tokens)."""

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
