"""Serializers of the job endpoints (/api/v1/jobs/): a job, its detail, timeline, events, why-pending and failure,
submit and bulk submit, cancel, wait, logs.
"""
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import (
    GangJob,
    PhaseTransition,
)
from ..observe import timeline
from ..services.jobs import lists as job_list
from ..services.jobs import start_estimate
from ..services.queues import line as queue_line
from .serializers import AmountField, represent


class PhaseTransitionSerializer(serializers.ModelSerializer):
    """One timeline entry, with the time spent in it (`observe.timeline.annotate` sets the two extra fields)."""

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
    """Derived durations (observe.timeline.spans); each null until its span starts."""

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
    """The body of POST /api/v1/jobs/cancel/ (for the schema; services/jobs/bulk_cancel.py validates it)."""

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
    """The query of GET /api/v1/jobs/<id>/logs/ (services/jobs/logs.py): which pod and container, and core/v1
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
    position = serializers.SerializerMethodField(help_text="a pending job's place in line (services/queues/line.py): "
        "{status: known | unknown, reason, queue, queue_total, parent, parent_total, priority, text, parent_text, "
        "order}; null when not pending; unknown (numbers null, the reason in text) when it cannot be computed. "
        "In GET /api/v1/jobs/<id>/ only: write answers (submit, update, cancel) leave it out and cost no query")
    estimated_start = serializers.SerializerMethodField(help_text="a pending job's start-time estimate "
        "(services/jobs/start_estimate.py; the same as GET /api/v1/jobs/<id>/estimate/): {status: estimated | now | "
        "unknown | never, p50, p90, p50_seconds, p90_seconds, p50_in_minutes, p90_in_minutes, text, evidence, reason, "
        "ahead_in_queue, needs, freed_by, samples, computed_at, method}; null when not pending; unknown with the "
        "reason when it cannot be computed (the rest of the job still answers). In GET "
        "/api/v1/jobs/<id>/ only, as `position`")
    failure = serializers.SerializerMethodField(help_text="the first failure among the job's containers, pods and "
                                                          "Jobs; null when nothing failed")
    requeues = serializers.SerializerMethodField(help_text="times the gang started again: re-queued after a "
        "disruption, or its objects recreated after they were lost (Recreated) or replaced (Replaced); it is the "
        "latest timeline attempt's number, and durations read that attempt")

    placement = serializers.JSONField(read_only=True, help_text="where gangweb placed the job and why, when its "
        "submit named no cluster or several: {cluster, rule: fits | earliest, text, clusters: [{cluster, known, why, "
        "fits, free: {gpu, cpu, memory} (GPUs, CPU cores, GiB), wait_share, queue_share, queue_waiting}], moves: "
        "[{from, to, at, text}]}; null when its submit named its cluster and it never moved")

    class Meta(GangJobSerializer.Meta):
        fields = GangJobSerializer.Meta.fields + ["resolved_spec", "observed", "failure", "timeline", "timeline_total",
                                                  "timeline_omitted", "durations", "requeues", "position",
                                                  "estimated_start", "placement"]
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

class JobSubmitSerializer(serializers.Serializer):
    """Submit body (documentation; validation is strict and lives in scheduling.services.jobs.lifecycle)."""

    name = serializers.CharField(help_text="DNS-1123 label, at most 63 characters")
    namespace = serializers.CharField(default="default")
    template = serializers.CharField(help_text="runtime template name")
    template_version = serializers.IntegerField(required=False, help_text="default: latest")
    queue = serializers.CharField()
    cluster = serializers.JSONField(required=False, help_text="a cluster name; or a list of names, or left out: "
                                    "gangweb places the job among them (or among every cluster of the queue) and "
                                    "says why on its timeline and in `placement`")
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
