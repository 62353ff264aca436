"""Gang jobs and their append-only phase history."""
import math
import uuid
from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce

from ..choices import ACTIVE_PHASES, TERMINAL_PHASES, DesiredState, GangPhase
from ..constants import GPU_RESOURCE
from ..kube import resources, runtime_classes
from .fields import DbClockDateTimeField

# When the job's current phase began: its last phase change, else its submit. The job lists sort "time in phase" by
# it (annotated as `in_phase_since`), from the index job_in_phase_since.
IN_PHASE_SINCE = Coalesce("phase_changed_at", "created_at")


class GangJob(models.Model):
    """A gang job: a runtime template version plus overrides, targeted at a queue and a cluster.

    - `resolved_spec` is the template spec with overrides applied, frozen at submit: the job never changes when
      its template does. Same shape as `RuntimeTemplateVersion.spec`, without `overridable`.
    - `desired_state` is what the user asked for (Run / Cancel); `phase` is what gangweb last observed.
    - `why_pending` is the structured explanation while Queued/Dispatched (see services/why_pending), or null.
    - `gang_generation` grows each time an immutable gang object must be replaced; it feeds the name hash, so a
      replacement never reuses a previous object's name.
    - `requested_gpu` / `requested_cpu_millicores` / `requested_memory_bytes` are the gang's total requests
      (`kube.resources.gang_requests` of `resolved_spec` with the cluster's RuntimeClass overheads: every pod
      set's per-pod requests × replicas, as kube-scheduler counts a pod), kept in columns when the job is created
      so gangweb's usage estimate per queue is one `SUM … GROUP BY queue` in the database
      (services/queues/usage.py `estimated_usage`).
    """

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=63)
    namespace = models.CharField(max_length=63, default="default")
    template_version = models.ForeignKey(
        "scheduling.RuntimeTemplateVersion", on_delete=models.PROTECT, related_name="jobs"
    )
    overrides = models.JSONField(default=dict, blank=True)
    queue = models.ForeignKey("scheduling.QueuePolicy", on_delete=models.PROTECT, related_name="jobs")
    cluster = models.ForeignKey("scheduling.Cluster", on_delete=models.PROTECT, related_name="jobs")
    priority_class_name = models.CharField(max_length=253, blank=True)
    resolved_spec = models.JSONField()
    requested_gpu = models.FloatField(default=0, help_text="nvidia.com/gpu devices the whole gang requests")
    requested_cpu_millicores = models.BigIntegerField(default=0, help_text="CPU the whole gang requests")
    requested_memory_bytes = models.BigIntegerField(default=0, help_text="memory the whole gang requests")
    desired_state = models.CharField(max_length=8, choices=DesiredState.choices, default=DesiredState.RUN)
    phase = models.CharField(max_length=16, choices=GangPhase.choices, default=GangPhase.SUBMITTED)
    phase_reason = models.CharField(max_length=128, blank=True)
    phase_message = models.TextField(blank=True)
    phase_changed_at = models.DateTimeField(null=True, blank=True)
    why_pending = models.JSONField(null=True, blank=True)
    observed = models.JSONField(default=dict, blank=True, help_text="last observed objects and pods summary")
    backend_plugin = models.CharField(max_length=64, blank=True, help_text="registry name chosen at dispatch")
    gang_generation = models.PositiveIntegerField(default=0)
    spec_revision = models.PositiveIntegerField(default=1, help_text="bumped when queue or priority changes")
    idempotency_key = models.CharField(max_length=255, blank=True)
    request_hash = models.CharField(max_length=64, blank=True)
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    resubmitted_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)  # indexed with id: job_created_id
    # On the database's clock (models/fields.py): the resync compares it with its snapshot's time, and no host whose
    # clock runs ahead writes it in the future. (`created_at` stays a plain field: IN_PHASE_SINCE coalesces it with
    # `phase_changed_at`, and Django refuses an expression over two field classes.)
    updated_at = DbClockDateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cleaned_up_at = models.DateTimeField(null=True, blank=True, help_text="cluster objects deleted")
    # Retention of a finished job's Indexed Jobs and their pods (kept for inspection after the gang objects went):
    # `remove_after` = finished_at + the retention (template `retentionSeconds`, else GANGWEB_FINISHED_RETENTION_
    # SECONDS), set by the pass that first sees the job finished; `objects_removed_at` once a pass found none of the
    # job's objects left. reconcile/retention.py.
    remove_after = models.DateTimeField(null=True, blank=True, db_index=True,
                                        help_text="when the finished job's Jobs and pods are removed")
    objects_removed_at = models.DateTimeField(null=True, blank=True,
                                              help_text="when a pass found none of the job's objects left")
    # {Indexed Job name: its metadata.uid}, recorded as gangweb creates (or first adopts) each of the job's Jobs:
    # the only owners whose pods count for the job (reconcile/ownership.py). NULL on rows written before it existed:
    # those trust any Job in the job's namespace that carries its label (and record nothing) until they finish.
    owner_uids = models.JSONField(null=True, blank=True, default=dict,
                                  help_text="UIDs of the Indexed Jobs gangweb created for the job, by name")
    # Who is working on the job (reconcile/jobs/claims.py): a task's id, and until when its claim holds on the
    # database's clock: short, renewed by a heartbeat while the task works, so a worker killed mid-batch lets go
    # within CLAIM_SECONDS. Other tasks taking waiting jobs along leave a held claim alone; the resync leaves a
    # claimed job to its task, and takes it once the claim lapsed. Empty/NULL when nobody holds it.
    claimed_by = models.CharField(max_length=64, blank=True, default="")
    claimed_until = models.DateTimeField(null=True, blank=True)
    # When a reconcile task for the job was queued (a submit, a cancel, an edit), on the database's clock, until a
    # task takes the job (claims it): the resync's grace reads it (reconcile/resync.py `jobs_to_resync`), so a job
    # whose task is surely still queued is left to it, and a job whose task took it and gave up (the cluster was
    # down: the pass recorded "not attempted") is the resync's at once. NULL when no task is waiting for it.
    task_queued_at = models.DateTimeField(null=True, blank=True)
    # When a batch last took the job's clean-up along (reconcile/jobs/coalesce.py `cleanups_waiting`), on the
    # database's clock: a clean-up that cannot finish yet (a finalizer, pods slow to stop) is not taken along again
    # for RIDE_AGAIN_SECONDS, and those never taken along go first. NULL until a batch takes it along.
    cleanup_rode_at = models.DateTimeField(null=True, blank=True)
    # The latest repair of the job's drifted gang objects and its backoff (reconcile/jobs/repairs.py): what was put
    # back, how many times in a row it was changed back since when, and until when gangweb waits before putting it
    # back again (database clock). Empty until a pass repairs something.
    repairs = models.JSONField(default=dict, blank=True,
                               help_text="latest repair of drifted gang objects and its backoff")
    # Where gangweb placed the job and why, when its submit named no cluster or several (placement/rule.py
    # `Decision.as_dict`), with each move after it under "moves": [{"from", "to", "at", "text"}]. Null for a job
    # whose submit named its cluster and that never moved.
    placement = models.JSONField(null=True, blank=True, help_text="where gangweb placed the job, and why")
    # A move decided and not done yet (reconcile/moves.py): the cluster the job goes to once its objects on `cluster`
    # are confirmed gone, and the sentence for its timeline. Null/empty when no move is under way.
    move_to = models.ForeignKey("scheduling.Cluster", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+")
    move_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["submitted_by", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="uniq_job_idempotency_key_per_submitter",
            ),
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"],
                condition=~Q(phase__in=sorted(p.value for p in TERMINAL_PHASES)),  # sorted: a stable migration
                name="uniq_active_job_name",
            ),
        ]
        indexes = [
            models.Index(fields=["phase", "queue"]),
            models.Index(fields=["cluster", "phase"]),
            # The overview's stuck and failed jobs and the job list sorted by time in phase: a range of one phase
            # in phase_changed_at order, read from here instead of sorting every job of that phase.
            models.Index(fields=["phase", "phase_changed_at", "id"], name="job_phase_changed"),
            # gangweb's usage estimate (services/queues/usage.py) sums active jobs' totals per queue: answered from
            # this index alone (PostgreSQL index-only scan), its size bounded by the active jobs, not the history.
            models.Index(fields=["queue"], include=["phase", "cluster", "requested_gpu", "requested_cpu_millicores",
                                                    "requested_memory_bytes"],
                         condition=Q(phase__in=sorted(p.value for p in ACTIVE_PHASES)), name="job_active_usage"),
            # The job lists' orders (views/jobs.py SORTS, the API's `ordering`), each (key, id) so a keyset page
            # (db/keyset.py) starts its scan at the cursor, read forwards or backwards (bench/README.md
            # shows the plans at 1,000,000 jobs). PostgreSQL also gets a trigram index for the name search
            # (migration 0019; SQLite has no such index type).
            models.Index(fields=["created_at", "id"], name="job_created_id"),
            models.Index(fields=["name", "id"], name="job_name_id"),
            models.Index(fields=["phase", "id"], name="job_phase_id"),
            # Time in the current phase, since the change or else the submit (IN_PHASE_SINCE), so the overview's
            # phase-filtered lists keep job_phase_changed's index condition on phase under stale statistics.
            models.Index(IN_PHASE_SINCE, models.F("id"), name="job_in_phase_since"),
            # A queue's jobs newest first (?queue=), and the list sorted by queue (one queue's rows after another).
            models.Index(fields=["queue", "created_at", "id"], name="job_queue_created"),
            # Active jobs newest first (?phase=Running, Queued, …): bounded by the active jobs, not the history.
            models.Index(fields=["phase", "created_at", "id"], name="job_active_created",
                         condition=Q(phase__in=sorted(p.value for p in ACTIVE_PHASES))),
        ]

    def __str__(self):
        return f"{self.namespace}/{self.name}"

    def save(self, *args, **kwargs):
        """Save; a new job gets its requested totals from `resolved_spec` (bulk creates call
        `fill_requested_totals` themselves, since `bulk_create` skips `save`)."""
        if self._state.adding:
            fill_requested_totals([self])
        super().save(*args, **kwargs)

    @property
    def is_terminal(self) -> bool:
        """True once the job reached Succeeded, Failed or Cancelled."""
        return self.phase in TERMINAL_PHASES


# resource (KAI's names) -> the GangJob column of the gang's total request: GPU devices, CPU millicores, memory bytes
REQUESTED_COLUMNS = {"gpu": "requested_gpu", "cpu": "requested_cpu_millicores", "memory": "requested_memory_bytes"}
BIGINT_MAX = 2**63 - 1  # the requested-total columns: BigIntegerField, a signed 64-bit integer in every database


def requested_totals(resolved_spec: dict, overheads: resources.RuntimeClasses | None = None) -> tuple[float, int, int]:
    """(GPU devices, CPU millicores, memory bytes) a resolved spec's whole gang requests: gangweb's one request
    arithmetic (`kube.resources.gang_requests`, kube-scheduler's `PodRequests`; `overheads` are the target cluster's
    RuntimeClass overheads, `kube.runtime_classes.for_spec`). Millicores and bytes are rounded up, as Kubernetes
    rounds a quantity to its smallest unit. A spec that cannot be read (no pod sets, an unparseable amount; submit
    validates specs, so only hand-made rows) counts as 0."""
    try:
        total = resources.spec_requests(resolved_spec, overheads)
    except resources.UNREADABLE:
        return 0.0, 0, 0
    cpu, memory = total.get("cpu", Decimal(0)), total.get("memory", Decimal(0))
    return (float(total.get(GPU_RESOURCE, Decimal(0))), math.ceil(cpu * 1000), math.ceil(memory))


def fill_requested_totals(jobs) -> None:
    """Set the requested-total columns of unsaved GangJobs from their `resolved_spec` and their cluster's
    RuntimeClass overheads, in place. Jobs of one bulk submit often share their spec object, which is then read
    once per cluster."""
    seen: dict[tuple[int, int | None], tuple[float, int, int]] = {}
    for job in jobs:
        key = (id(job.resolved_spec), job.cluster_id)
        if key not in seen:
            overheads = runtime_classes.for_job(job)
            gpu, cpu, memory = requested_totals(job.resolved_spec, overheads)
            # `services.jobs.lookups.check_storable_totals` refuses a spec too big for the columns; a cluster's absurd
            # RuntimeClass overhead on top is held to what they take rather than failing the insert.
            seen[key] = (gpu, min(cpu, BIGINT_MAX), min(memory, BIGINT_MAX))
        job.requested_gpu, job.requested_cpu_millicores, job.requested_memory_bytes = seen[key]


class StrandedObjects(models.Model):
    """Objects of a job left on a cluster that was lost (unreachable for GANGWEB_CLUSTER_LOST_SECONDS) when the job
    moved away: their keys and UIDs as gangweb recorded them (`GangJob.owner_uids`), in `namespace`. When the
    cluster answers again its resync deletes them first, each by name with a UID precondition
    (reconcile/stranded.py), and sets `deleted_at` once none is left."""

    cluster = models.ForeignKey("scheduling.Cluster", on_delete=models.CASCADE, related_name="stranded")
    job = models.ForeignKey(GangJob, on_delete=models.CASCADE, related_name="stranded")
    namespace = models.CharField(max_length=63)
    owner_uids = models.JSONField(default=dict, blank=True)
    backend_plugin = models.CharField(max_length=64, blank=True, help_text="the plugin whose kinds the objects are")
    recorded_at = models.DateTimeField(auto_now_add=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["cluster", "deleted_at"], name="stranded_cluster_open")]

    def __str__(self):
        return f"objects of job {self.job_id} left on cluster {self.cluster_id}"


class PhaseTransitionQuerySet(models.QuerySet):
    def update(self, **kwargs):  # noqa: D102 - history is append-only
        raise TypeError("phase history is append-only")


class PhaseTransition(models.Model):
    """One entry of a job's timeline: the job entered `phase` at `at`.

    `at` comes from the cluster's own timestamps where they exist (condition lastTransitionTime, pod
    scheduled time, container startedAt/finishedAt); `recorded_at` is when gangweb learned of it. `source`
    names the object, e.g. "PodGroup default/train-1a2b3c" or "gangweb". `attempt` is 0 for the job's first pass
    through the lifecycle and n after its n-th re-queue (a disrupted gang waiting for the scheduler again starts a
    new attempt with a Queued entry); one entry per (phase, attempt). `inferred` marks an `at` that is not the
cluster's own timestamp for the event (observe/phases.py, "Inferred"). Rows are never updated.
    """

    job = models.ForeignKey(GangJob, on_delete=models.CASCADE, related_name="transitions")
    phase = models.CharField(max_length=16, choices=GangPhase.choices)
    at = models.DateTimeField()
    recorded_at = models.DateTimeField(auto_now_add=True)
    source = models.CharField(max_length=300, blank=True)
    reason = models.CharField(max_length=128, blank=True)
    message = models.TextField(blank=True)
    attempt = models.PositiveSmallIntegerField(default=0, help_text="0 for the first pass, n after the n-th re-queue")
    inferred = models.BooleanField(
        default=False, help_text="`at` is not the cluster's own timestamp for this event (gangweb inferred it from a "
        "weaker one); such entries are left out of the latency histograms")

    objects = PhaseTransitionQuerySet.as_manager()

    class Meta:
        ordering = ["job_id", "at", "id"]
        constraints = [models.UniqueConstraint(fields=["job", "phase", "attempt"], name="uniq_phase_per_job_attempt")]

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise TypeError("phase history is append-only")
        super().save(*args, **kwargs)
