"""Reconcile one gang job into its cluster: read what is there, compute what should be, diff, act.

Level-triggered and idempotent (controller-runtime style): the input is a job id; a pass reads the job's
objects (one LIST per kind by the job-UID label, or a slice of the resync's cluster-wide LISTs), builds the
desired objects from the job row (reconcile/desired.py), and then:

- creates what is missing, in dependency order: gang object(s) -> Indexed Jobs -> headless Service. A 409
  AlreadyExists is never taken as success: the object is read and compared, and adopted only when its
  `gangweb.io/job-uid` label names this job and it is not terminating (else NameConflict / a countdown);
- updates drifted mutable fields in place with a merge patch carrying the read `resourceVersion`; on 409 it
  reads again and retries (MAX_CONFLICT_RETRIES);
- replaces the gang when a drifted field is immutable (always, for scheduling.k8s.io/v1alpha2): deletes the
  Indexed Jobs, then the gang objects in reverse creation order, bumps `gang_generation` (so every name
  changes) and creates the new objects in order;
- when it created an owner Job of a Scheduled or Running job (its objects vanished, or the gang was replaced),
  starts a new timeline attempt with a Dispatched entry, reason Recreated / Replaced, naming what it created;
- deletes the job's objects that are no longer desired (earlier generations), each with a UID precondition,
  and releases the backend's protection finalizer (v1alpha2 `podgroup-protection`) on its own terminating
  objects once no live pod references them;
- when the API server refuses for good to create one of them (400, 422, a 403 from admission: `CreateRefused`)
  ends the job Failed (reason CreateRefused, the object and the server's words in the message) and deletes every
  object already created for it, as a cancel does;
- gives every object of the job but the root one ownerReference, to the job's root object (the backend's
  `root_ref`, created first), and puts it back when it is removed by hand; an object whose reference names a root
  that was deleted is deleted too and the set created again (reconcile/owner_refs.py);
- keeps each Indexed Job's completions equal to its parallelism (both put back together: Indexed Jobs allow it);
- on cancel deletes every object of the job and ends it Cancelled; when the job has finished (Succeeded or
  Failed) and none of its pods is alive, deletes its gang objects and Service so they stop holding quota (the
  root with propagation Orphan, so the retained Jobs stay), and after the retention its Indexed Jobs and pods
  (reconcile/retention.py).

Status is derived by `reconcile.status.apply_observation` and written once per pass, only if it changed.
Every pass leaves a ReconcileAttempt row. Unreachable cluster, 401/403, 429 and 5xx raise TransientKubeError
after being recorded on the job (phase_reason "ClusterUnreachable", "Forbidden", ...); the Celery task retries
those with backoff. So does a create answered "namespace not found" (phase_reason "NamespaceNotFound"): the job's
namespace is missing in its cluster, and once someone creates it the next retry or resync dispatches the job.
400/422, a 403 from admission (quota, webhook, policy: it refuses the object, not gangweb) and name conflicts are
terminal: recorded, not retried; a create refused so fails the job (above).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from kubernetes.client.rest import ApiException

from ..backends import discovery, registry
from ..backends.base import SchedulerBackend, object_source
from ..choices import DesiredState, GangPhase, ReconcileOutcome
from ..constants import LABEL_JOB_UID
from ..kube import client as kube_client
from ..kube import limit_ranges, objects
from ..kube.errors import (
    CLUSTER_UNREACHABLE,
    CREATE_REFUSED,
    NAMESPACE_NOT_FOUND,
    QUOTA_EXCEEDED,
    STORED_VERSION_UNREADABLE,
    CreateRefused,
    KubeError,
    TerminalKubeError,
    TransientKubeError,
    classify,
    describe,
    refuses_for_good,
)
from ..kube.objects import JOB, POD, SERVICE
from ..kube.refs import ObjectRef
from ..models import GangJob, PhaseTransition, ReconcileAttempt, RuntimeTemplate
from ..observe.objects import created_at as o_created_at
from ..services import policy
from . import desired as desired_mod
from . import owner_refs, ownership, refusals, retention, status
from .observed import Observed, kind_key, obj_key, read

log = logging.getLogger(__name__)

MAX_CONFLICT_RETRIES = 3
WAIT_SECONDS = 5  # countdown while the world catches up (an object terminating, pods going away)
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"  # set on pods by the Job controller
LIVE_POD_PHASES = ("Pending", "Running", "Unknown")
NAME_CONFLICT = "NameConflict"
RECREATED = "Recreated"  # a Scheduled/Running job's vanished objects were created again: a new attempt
REPLACED = "Replaced"  # a Scheduled/Running job's gang was replaced under a new generation: a new attempt
BACKEND_UNAVAILABLE = "BackendUnavailable"
# The cluster stopped serving the API version of the job's plugin (an upgrade, e.g. Kubernetes 1.36 -> 1.37 removed
# scheduling.k8s.io/v1alpha2): the job moves to the newest served version of its backend family.
API_VERSION_CHANGED = "APIVersionChanged"
API_VERSION_REMOVED = "APIVersionRemoved"  # ... and the family has no served version left: the job fails
UNEXPECTED_ERROR = "UnexpectedError"  # an exception no handler expected; recorded on the job, never a bare traceback
WAITING = "WaitingForDeletion"
CANCELLING = "Cancelling"  # phase_reason of a job whose cancel is deleting its objects (observe/phases.py too)
ERROR_REASONS = frozenset({"ClusterUnreachable", "Forbidden", "Unauthorized", "Throttled", "ServerError", "Invalid",
                           "Rejected", "InvalidKubeconfig", NAME_CONFLICT, BACKEND_UNAVAILABLE, "Conflict",
                           NAMESPACE_NOT_FOUND, QUOTA_EXCEEDED, STORED_VERSION_UNREADABLE, UNEXPECTED_ERROR})
STATUS_FIELDS = ("phase", "phase_reason", "phase_message", "phase_changed_at", "finished_at", "cleaned_up_at",
                 "observed", "backend_plugin", "owner_uids", "remove_after", "objects_removed_at")
REMOVING = "RemovingObjects"  # a finished job's retained Jobs and pods are being deleted (retention)
ROOT_DELETED = "RootDeleted"  # an object's ownerReference names a deleted root: it goes, and the set is recreated


class Requeue(Exception):
    """Stop this pass and come back after `countdown` seconds (the world has to move first)."""

    def __init__(self, countdown: int, reason: str, message: str):
        super().__init__(message)
        self.countdown, self.reason, self.message = countdown, reason, message


class PolicyRefused(CreateRefused):
    """gangweb's own pod-spec policy refuses a job's pods (services/policy.py). Ends the job as a create the API
    server refused does (reason CreateRefused, `api_reason` "PolicyRefused"), naming the field and the control."""

    def __init__(self, kind: str, name: str, message: str):
        TerminalKubeError.__init__(self, CREATE_REFUSED, f"gangweb's pod-spec policy refused to create {kind} {name}: "
                                                         f"{message}", None, "PolicyRefused")
        self.kind, self.name = kind, name


class _Done(Exception):
    """The pass finished early without needing the cluster."""


class _Failed(Exception):
    """The pass ended the job Failed by gangweb's own finding (already recorded); `reason`, `message` say why."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass
class PassResult:
    """How a pass ended: what it did (`actions`), outcome, reason/message, and a countdown to come back."""

    actions: list[str] = field(default_factory=list)
    outcome: str = ReconcileOutcome.OK
    reason: str = ""
    message: str = ""
    requeue_after: int | None = None
    error: KubeError | None = None

    @property
    def transient(self) -> bool:
        """True when the pass ended on a transient error (recorded on the job; worth a retry with backoff)."""
        return isinstance(self.error, TransientKubeError)


def is_terminating(obj: dict) -> bool:
    """True once the object has a deletionTimestamp."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def owner_uid_label(obj: dict) -> str | None:
    """The `gangweb.io/job-uid` label of an object, or None."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB_UID)


def ref_of(backend: SchedulerBackend, obj: dict) -> ObjectRef:
    """The backend's ObjectRef of a gang object dict."""
    return next(ref for ref in backend.gang_kinds if kind_key(ref) == obj_key(obj))


def backend_for(job: GangJob, api) -> SchedulerBackend:
    """The job's backend plugin: the one recorded at dispatch, else the highest version of the template's family
    the cluster serves (its probed `served_apis`, or live discovery), recorded on the job at once. Raises
    TerminalKubeError BackendUnavailable when the cluster serves none."""
    if job.backend_plugin:
        try:
            return registry.by_name(job.backend_plugin)()
        except KeyError:
            raise TerminalKubeError(BACKEND_UNAVAILABLE, f"backend '{job.backend_plugin}' is not registered") from None
    cls = choose_backend(job, api)
    # Recorded at once, before anything is created: a cancel must know which kinds to clean up even if this
    # pass dies half-way. Never on a job cancelled meanwhile: its cancel pass, seeing no backend, may already have
    # ended it Cancelled without reading the cluster, so nothing may be created for it. This pass then cancels it
    # too, as any cancel does (it reads the cluster: nothing of it can be there), without recording a backend.
    if not _claim_backend([job.pk], cls.name):
        row = GangJob.objects.filter(pk=job.pk).values("backend_plugin", "desired_state").first() or {}
        if row.get("backend_plugin"):
            job.backend_plugin = row["backend_plugin"]  # a concurrent pass chose first
            return registry.by_name(job.backend_plugin)()
        job.desired_state = DesiredState.CANCEL
        return cls()
    job.backend_plugin = cls.name
    return cls()


def _claim_backend(job_ids: list[int], name: str) -> set[int]:
    """Record backend `name` on those of `job_ids` that have none yet and are not being cancelled; returns the
    ids it was recorded on."""
    rows = GangJob.objects.filter(pk__in=job_ids, backend_plugin="").exclude(desired_state=DesiredState.CANCEL)
    if rows.update(backend_plugin=name) == len(job_ids):
        return set(job_ids)  # the usual case: one statement
    if len(job_ids) == 1:
        return set()
    return set(GangJob.objects.filter(pk__in=job_ids, backend_plugin=name).values_list("pk", flat=True))


def record_backends(jobs: list[GangJob], api) -> None:
    """`backend_for` for a batch of one cluster's jobs, before any of them is created: each undecided job's plugin
    is chosen, and recorded with one UPDATE per plugin instead of one per job. A job whose backend cannot be
    chosen is left undecided (its own pass records the error); a discovery error propagates (KubeError)."""
    chosen: dict[str, list[GangJob]] = {}
    for job in jobs:
        if job.backend_plugin:
            continue
        try:
            chosen.setdefault(choose_backend(job, api).name, []).append(job)
        except TerminalKubeError:
            continue
    for name, batch in chosen.items():
        claimed = _claim_backend([j.pk for j in batch], name)
        for job in batch:
            if job.pk in claimed:
                job.backend_plugin = name  # the others' own passes find out why (backend_for)


def choose_backend(job: GangJob, api) -> type[SchedulerBackend]:
    """The highest version of the job's template family that its cluster serves (the probed `served_apis`, or live
    discovery). Raises TerminalKubeError BackendUnavailable when the cluster serves none."""
    family = job.resolved_spec.get("backend", "")
    served = set(job.cluster.served_apis or []) or discovery.served_versions(api)
    cls = registry.plugin_for(family=family, served=served)
    if cls is None:
        wanted = ", ".join(registry.api_versions(family)) or "?"
        raise TerminalKubeError(BACKEND_UNAVAILABLE,
                                f"cluster {job.cluster.name} serves no API of backend '{family}' (needs {wanted})")
    return cls


class JobReconciler:
    """One pass over one job. Create with the job (cluster and queue loaded), an ApiClient and optionally the
    Observed slice from a resync; call `run()`."""

    def __init__(self, job: GangJob, api, observed: Observed | None = None):
        self.job = job
        self.api = api
        self.backend = backend_for(job, api)
        self.uid = str(job.uid)
        self.ns = job.namespace
        self.actions: list[str] = []
        self.created: list[dict] = []  # objects this pass created (not adopted on 409), in creation order
        self.retired: type[SchedulerBackend] | None = None  # the plugin whose API the cluster stopped serving
        served = set(job.cluster.served_apis or [])
        if served and not self.backend.available(served):  # the last probe says its API is gone
            self.retire(served)
        try:
            self.observed = self.first_read(observed)
        except TransientKubeError as exc:
            if exc.reason == STORED_VERSION_UNREADABLE and self.retired is not None:
                # The new version's objects cannot be listed yet: the switch waits (nothing recorded), named here.
                raise TransientKubeError(exc.reason, f"{self.version_message}, but {exc.message}",
                                         exc.status) from None
            raise
        if self.retired is not None:
            GangJob.objects.filter(pk=job.pk, backend_plugin=self.retired.name).update(backend_plugin=self.backend.name)
            self.job.backend_plugin = self.backend.name

    def first_read(self, observed: Observed | None) -> Observed:
        """The job's objects: `observed` (a resync's slice) when it holds the kinds of the job's plugin, else read
        now. Raises the snapshot's StoredVersionUnreadable error when its LIST of one of those kinds failed so (a
        missing kind is never taken for absent objects)."""
        unreadable = observed.unreadable_for(self.backend.gang_kinds) if observed is not None else None
        if unreadable is not None:
            raise TransientKubeError(unreadable.reason, unreadable.message, unreadable.status)
        try:
            # A snapshot (resync) listed the kinds of the plugin it knew; after a switch only the new ones count.
            return observed if observed is not None and self.retired is None else self.read()
        except ApiException as exc:
            # A LIST answered 404: the kind's API version is not served (the probe has not noticed the change yet).
            if exc.status != 404 or self.retired is not None:
                raise
            served = discovery.served_versions(self.api)
            if self.backend.available(served):
                raise
            self.retire(served)
            return self.read()

    def retire(self, served: set[str]) -> None:
        """The cluster no longer serves the API of the job's pinned plugin: take the newest plugin of the same family
        it does serve (`registry.select`; pinned on the job by `__init__` once its objects could be read), or, when
        there is none, end the job Failed (`API_VERSION_REMOVED`, naming the version it had and those it could use)
        and stop the pass (`_Failed`). What happens to the gang then is `ensure`'s: a job not yet scheduled is
        recreated in the new version under new names; a scheduled or running one keeps its pods and gets its gang
        objects in the new version under the same names (its pods name them)."""
        old = type(self.backend)
        new = registry.select(old.family, served)
        if (new is None or new is old) and self.job.is_terminal:
            # Finished, and its gang objects are out of the API's reach: nothing left that gangweb could delete.
            # (Its retained Jobs are not read on this path: they are removed by the garbage collector when the
            # cluster deletes the old objects, or by hand; the job is not looked at again.)
            self.job.cleaned_up_at = self.job.cleaned_up_at or timezone.now()
            self.job.remove_after = self.job.remove_after or retention.remove_after(self.job)
            self.job.objects_removed_at = self.job.objects_removed_at or self.job.cleaned_up_at
            raise _Done
        if new is None or new is old:
            known = ", ".join(registry.api_versions(old.family))
            message = (f"cluster {self.job.cluster.name} no longer serves {old.api_version} (backend {old.name}) "
                       f"and serves no other version of backend '{old.family}' ({known}); the job cannot continue")
            status.record_failure(self.job, API_VERSION_REMOVED, message)
            raise _Failed(API_VERSION_REMOVED, message)
        self.backend, self.retired = new(), old
        self.actions.append(f"switch backend {old.name} -> {new.name}: cluster {self.job.cluster.name} no longer "
                            f"serves {old.api_version}; it serves {new.api_version}")

    @property
    def version_message(self) -> str:
        """`APIVersionChanged` message naming both versions (empty when the version did not change this pass)."""
        if self.retired is None:
            return ""
        return (f"cluster {self.job.cluster.name} stopped serving {self.retired.api_version}; the job's gang moves "
                f"to {self.backend.api_version} (backend {self.retired.name} -> {self.backend.name})")

    def read(self) -> Observed:
        """The job's own objects, listed now (one LIST per kind in its namespace)."""
        return read(self.api, self.backend, self.ns, self.uid, self.job.owner_uids)

    def confirm_absence(self) -> bool:
        """Before a pass concludes that something of the job is gone (cleaned up, nothing left to delete): when what
        it holds came from a snapshot (listed for many jobs, maybe before the job's last change), read the job's
        objects again and go on with those. Returns True when it read again. Absence in an old list is no proof."""
        if not self.observed.from_snapshot:
            return False
        recorded = self.observed.recorded_phases
        self.observed = self.read()
        self.observed.recorded_phases = recorded
        self.actions.append("read again before concluding absence")
        return True

    # ---- entry -------------------------------------------------------------------------------------------------
    def run(self) -> None:
        """Act according to the job's desired state and phase."""
        job = self.job
        if job.desired_state == DesiredState.CANCEL or job.phase == GangPhase.CANCELLED:
            self.cancel()
        elif job.phase == GangPhase.FAILED and job.phase_reason == CREATE_REFUSED:
            self.discard()
        elif job.is_terminal:
            self.clean_up_finished()
        else:
            self.ensure()

    # ---- the running job ---------------------------------------------------------------------------------------
    def ensure(self) -> None:
        """Make the cluster hold exactly the desired objects of the current generation, then derive status."""
        if self.retired is not None and self.job.phase not in (GangPhase.SCHEDULED, GangPhase.RUNNING):
            # Its pods (if any) name gang objects of an API the cluster no longer serves: start over under new
            # names in the new version. A scheduled or running gang keeps its pods and names.
            self.replace([f"apiVersion {self.retired.api_version} -> {self.backend.api_version}"])
        spec = desired_mod.gang_spec(self.job, self.limit_defaults())
        wanted = self.backend.build_gang_objects(spec)
        patches, replace_fields = [], []
        for want in wanted:
            ref = ref_of(self.backend, want)
            have = self.observed.gang_of(ref).get(want["metadata"]["name"])
            if have is None:
                continue
            if is_terminating(have):
                raise Requeue(WAIT_SECONDS, WAITING, f"{object_source(have)} is being deleted")
            drift = self.backend.diff(want, have)
            if drift.replace:
                replace_fields += [f"{ref.kind}.spec.{f}" for f in drift.fields]
            elif drift.patch:
                patches.append((ref, want, have, drift))
        refused = []
        for ref, want, have, drift in patches:
            if not replace_fields and not self.patch(ref, want, have, drift):
                refused.append(f"{ref.kind}.spec.{', '.join(drift.fields)} (patch refused)")
        if replace_fields or refused:
            replace_fields += refused
            self.replace(replace_fields)
            spec = desired_mod.gang_spec(self.job, self.limit_defaults())
            wanted = self.backend.build_gang_objects(spec)
        if any(w["metadata"]["name"] not in self.observed.gang_of(ref_of(self.backend, w)) for w in wanted):
            self.ensure_volcano_queue(spec.queue)  # a Volcano PodGroup (the root there) only once its queue exists
        root = self.ensure_root(wanted)
        stale = False
        for want in wanted:
            ref = ref_of(self.backend, want)
            if want["metadata"]["name"] == root["name"] and ref == self.backend.root_ref:
                continue
            owner_refs.with_owner(want, root)
            have = self.observed.gang_of(ref).get(want["metadata"]["name"])
            if have is None:
                self.create_gang(ref, want)
            else:
                stale |= self.align_owner(ref, have, root, self.observed.gang_of(ref))
        owners = [owner_refs.with_owner(o, root) for o in desired_mod.owners(self.backend, spec)]
        svc = owner_refs.with_owner(desired_mod.service(spec), root)
        # A terminating object under a desired name is not "present": wait for it to go, then create it anew.
        for have in [*(self.observed.owners.get(w["metadata"]["name"]) for w in owners),
                     self.observed.services.get(svc["metadata"]["name"])]:
            if have is not None and is_terminating(have):
                raise Requeue(WAIT_SECONDS, WAITING, f"{object_source(have)} is being deleted")
        for want in owners:  # existing ones first: nothing is created next to objects of a deleted root
            if want["metadata"]["name"] in self.observed.owners:
                stale |= self.correct_owner(want, self.observed.owners[want["metadata"]["name"]], root)
        if svc["metadata"]["name"] in self.observed.services:
            stale |= self.align_owner(SERVICE, self.observed.services[svc["metadata"]["name"]], root,
                                      self.observed.services)
        if stale:
            # Objects that belonged to a root deleted by hand were deleted (the garbage collector is at them too);
            # the set is created again once they are gone (a Recreated attempt for a job that ran).
            raise Requeue(WAIT_SECONDS, ROOT_DELETED, "objects of a deleted root object are being deleted; the job's "
                                                      "objects are created again once they are gone")
        for want in owners:
            name = want["metadata"]["name"]
            if name not in self.observed.owners:
                self.check_pod_policy(want)
                self.observed.owners[name] = self.create_plain(JOB, want)
        # Their UIDs are what the job's pods are recognised by (reconcile/ownership.py); saved with the status.
        ownership.record(self.job, {w["metadata"]["name"]: self.observed.owners[w["metadata"]["name"]]
                                    for w in owners})
        if svc["metadata"]["name"] not in self.observed.services:
            self.observed.services[svc["metadata"]["name"]] = self.create_plain(SERVICE, svc)
        self.delete_stale(wanted, owners, svc)
        if self.cancelled_meanwhile():
            return
        self.note_restart(replace_fields)

        owner_names = {o["metadata"]["name"] for o in owners}
        pods = [p for p in self.observed.pods
                if ((p.get("metadata") or {}).get("labels") or {}).get(JOB_NAME_LABEL) in owner_names]
        gang_now = [self.observed.gang_of(ref_of(self.backend, w))[w["metadata"]["name"]] for w in wanted]
        owners_now = [self.observed.owners[n] for n in sorted(owner_names)]
        status.apply_observation(self.job, self.backend, gang_now, pods, owners_now,
                                 recorded=self.observed.recorded_phases,
                                 refusals=refusals.read(self.job, owners_now, pods, self.api))
        if self.job.is_terminal:
            self.clean_up_finished()

    def ensure_volcano_queue(self, queue: str) -> None:
        """Before a Volcano PodGroup is created: its queue's Volcano Queue must exist (Volcano never schedules a
        PodGroup whose queue is missing, api-changes-2026.md §3). The queue sync creates it if a policy wants it
        here (reconcile/volcano_queues.py `missing_queue`); if it still is missing the pass waits with reason
        VolcanoQueueMissing, naming the queue and why. Other backends: nothing to do."""
        if self.backend.family != "volcano" or getattr(self, "_volcano_queue_checked", False):
            return
        from . import volcano_queues

        message = volcano_queues.missing_queue(self.job.cluster, self.api, queue)
        if message:  # shown as the job's why-pending until the PodGroup exists (status.record_error)
            status.record_error(self.job, status.VOLCANO_QUEUE_MISSING, message)
            raise Requeue(WAIT_SECONDS, status.VOLCANO_QUEUE_MISSING, message)
        self._volcano_queue_checked = True

    def limit_defaults(self) -> dict:
        """The container defaults the job's namespace's LimitRanges add at admission (`kube.limit_ranges`, cached
        per cluster and namespace), counted in the gang's minResources; read once per pass."""
        if not hasattr(self, "_limit_defaults"):
            self._limit_defaults = limit_ranges.defaults(self.api, self.job.cluster_id, self.ns)
        return self._limit_defaults

    def check_pod_policy(self, want: dict) -> None:
        """Before creating an owner Job (what makes pods), check the job's namespace and resolved spec against the
        pod-spec policy as it stands now (services/policy.py), once per pass: defense in depth behind the submit's
        check (rows written before it, a queue or template tightened since). Raises PolicyRefused."""
        if getattr(self, "_policy_checked", False):
            return
        job = self.job
        # one statement: the template's level and exceptions (not the version's spec: the job has its resolved spec)
        level, exceptions = RuntimeTemplate.objects.filter(versions__pk=job.template_version_id).values_list(
            "pod_security_level", "policy_exceptions").first() or ("", [])
        try:
            policy.check_namespace(job.queue, job.namespace)
            policy.check_job_spec(job.resolved_spec, RuntimeTemplate(pod_security_level=level,
                                                                     policy_exceptions=exceptions), job.queue)
        except ValidationError as exc:
            field, messages = next(iter(exc.message_dict.items()))
            raise PolicyRefused(JOB.kind, f"{self.ns}/{want['metadata']['name']}", f"{field}: {messages[0]}") \
                from None
        self._policy_checked = True

    def note_restart(self, replaced: list[str]) -> None:
        """When this pass created an owner Job of a job that was Scheduled or Running (its Job had been there: its
        pods ran), the job starts again: record a Dispatched entry of a new attempt (`status.record_restart`),
        at the new objects' creationTimestamp, source the new Job, reason `Replaced` (immutable drift, the
        fields named) or `Recreated` (the objects vanished: deleted by someone, a cluster restored without
        them), naming every object this pass created. The run before it ends there (run_time reads the latest
        attempt) instead of spanning the loss. A job still Dispatched or Queued just goes on waiting."""
        jobs = [obj for obj in self.created if obj.get("kind") == JOB.kind]
        if not jobs or (self.job.phase not in (GangPhase.SCHEDULED, GangPhase.RUNNING) and self.retired is None):
            return
        at = min((t for t in (o_created_at(obj) for obj in self.created) if t is not None), default=None)
        if at is None:
            return
        names = ", ".join(object_source(obj) for obj in self.created)
        if self.retired is not None:
            reason, message = API_VERSION_CHANGED, f"{self.version_message}; recreated under new names: {names}"
        elif replaced:
            reason, message = REPLACED, f"replaced the gang (immutable change of {', '.join(replaced)}): {names}"
        else:
            reason, message = RECREATED, f"recreated what was missing from the cluster: {names}"
        status.record_restart(self.job, at, object_source(jobs[0]), reason, message)
        self.observed.recorded_phases = None  # read before this entry: the observation must read the timeline

    def cancelled_meanwhile(self) -> bool:
        """After this pass created objects, read the job's row again: when a cancel landed since the pass loaded
        it, a concurrent cancel pass may already have found the cluster empty and ended the job Cancelled and
        cleaned up, and nothing would ever delete what this pass just made. Then this pass cancels instead.
        Our creates finished before this read, so a cancel committed after it is seen by its own pass's LIST.
        Returns True when the job was cancelled (and its objects are being deleted)."""
        if not any(a.startswith("create ") for a in self.actions):
            return False
        row = GangJob.objects.filter(pk=self.job.pk).values("desired_state", "phase").first()
        if row is None or (row["desired_state"] != DesiredState.CANCEL and row["phase"] != GangPhase.CANCELLED):
            return False
        self.job.desired_state = row["desired_state"]
        if row["phase"] == GangPhase.CANCELLED:
            self.job.phase = GangPhase.CANCELLED  # already recorded by the other pass: not recorded twice
        self.job.cleaned_up_at = None  # what this pass made is not cleaned up yet
        GangJob.objects.filter(pk=self.job.pk).update(cleaned_up_at=None)
        self.cancel()
        return True

    def replace(self, fields: list[str]) -> None:
        """Replace the gang under a new generation: Indexed Jobs first (their pods reference the gang), then gang
        objects in reverse creation order, then bump `gang_generation` (conditionally: a concurrent pass that
        already bumped it wins and this pass requeues)."""
        self.actions.append(f"replace gang: immutable drift in {', '.join(fields)}")
        for owner in list(self.observed.owners.values()):
            self.delete(JOB, owner)
        self.observed.owners = {}
        for ref in reversed(self.backend.gang_kinds):
            kind = self.observed.gang_of(ref)
            for name, obj in list(kind.items()):
                if not is_terminating(obj):
                    left = self.delete(ref, obj)  # still terminating (finalizer): the stale sweep looks again
                    if left is None:
                        kind.pop(name)
                    else:
                        kind[name] = left
        old = self.job.gang_generation
        if not GangJob.objects.filter(pk=self.job.pk, gang_generation=old).update(gang_generation=old + 1):
            raise Requeue(1, "Conflict", "another reconcile pass replaced the gang first")
        self.job.gang_generation = old + 1

    def patch(self, ref: ObjectRef, want: dict, have: dict, drift) -> bool:
        """Merge-patch drifted mutable fields with the read resourceVersion; on 409 read again and retry.

        Returns False when the API server refuses the patch for good (400/422: a field the backend believed
        mutable is not, on this cluster's version): the caller replaces the gang instead of patching again on
        every pass. True once the object is in sync."""
        name = want["metadata"]["name"]
        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                obj = objects.merge_patch(self.api, ref, self.ns, name, drift.patch,
                                          have["metadata"].get("resourceVersion"))
                self.actions.append(f"update {ref.kind} {self.ns}/{name}: {', '.join(drift.fields)}")
                self.observed.gang_of(ref)[name] = obj
                return True
            except TerminalKubeError as exc:
                if exc.status not in (400, 422):
                    raise
                self.actions.append(f"patch of {ref.kind} {self.ns}/{name} refused ({exc.status}): {exc.message}")
                return False
            except ApiException as exc:
                if exc.status == 404:
                    raise Requeue(1, "Conflict", f"{ref.kind} {self.ns}/{name} vanished during update") from None
                if exc.status != 409:
                    raise
            have = self.read_ours(ref, name)
            drift = self.backend.diff(want, have)
            if drift.in_sync:
                self.observed.gang_of(ref)[name] = have
                return True
            if drift.replace:
                raise Requeue(1, "Conflict", f"{ref.kind} {self.ns}/{name} changed immutably during update")
        raise TransientKubeError("Conflict", f"{ref.kind} {self.ns}/{name} kept changing; will retry")

    def correct_owner(self, want: dict, have: dict, root: dict) -> bool:
        """Put back the mutable fields of an Indexed Job edited by hand: `parallelism` (a scaled-down gang never
        gets all its members) together with `completions` (Indexed Jobs let completions change only in tandem
        with parallelism, to the same value: k8s.io/kubernetes pkg/apis/batch/validation `validateCompletions`,
        1.36 and 1.37; a completions left higher than parallelism runs extra pods later, outside the gang),
        `suspend` (gangweb never suspends) and `metadata.ownerReferences` (the root alone, `owner_refs`). Merge
        patch with the read resourceVersion; on 409 read again and retry. When the server refuses the patch for
        good (400/422), the Job is deleted (UID precondition) and created anew by a later pass. Returns True when
        the Job was deleted (refused patch, or its reference names a deleted root): the caller requeues."""
        name = want["metadata"]["name"]
        for _ in range(MAX_CONFLICT_RETRIES):
            if is_terminating(have):
                return True
            if owner_refs.verdict(have, root) == owner_refs.STALE:
                self.delete(JOB, have, propagation="Foreground")
                return True
            spec = have.get("spec") or {}
            patch, fields = {}, []
            count = want["spec"]["parallelism"]
            if spec.get("parallelism") != count or spec.get("completions") != want["spec"]["completions"]:
                patch["spec"] = {"parallelism": count, "completions": want["spec"]["completions"]}
                fields += ["completions", "parallelism"]
            if spec.get("suspend"):
                patch.setdefault("spec", {})["suspend"] = False
                fields.append("suspend")
            if owner_refs.verdict(have, root) == owner_refs.PATCH:
                patch.update(owner_refs.patch_body(root))
                fields.append("ownerReferences")
            if not patch:
                self.observed.owners[name] = have
                return False
            try:
                self.observed.owners[name] = objects.merge_patch(self.api, JOB, self.ns, name, patch,
                                                                 have["metadata"].get("resourceVersion"))
                self.actions.append(f"update Job {self.ns}/{name}: {', '.join(fields)}")
                return False
            except TerminalKubeError as exc:
                if exc.status not in (400, 422):
                    raise
                self.actions.append(f"patch of Job {self.ns}/{name} refused ({exc.status}): {exc.message}; "
                                    "replacing the Job")
                self.delete(JOB, have, propagation="Foreground")
                return True
            except ApiException as exc:
                if exc.status == 404:
                    raise Requeue(1, "Conflict", f"Job {self.ns}/{name} vanished during update") from None
                if exc.status != 409:
                    raise
            have = self.read_ours(JOB, name)
        raise TransientKubeError("Conflict", f"Job {self.ns}/{name} kept changing; will retry")

    def ensure_root(self, wanted: list[dict]) -> dict:
        """Create the job's root object (the desired object of the backend's `root_ref`) when missing, and return
        its OwnerReference (`owner_refs.reference`), which every other object of the job names."""
        want = next(w for w in wanted if ref_of(self.backend, w) == self.backend.root_ref)
        name = want["metadata"]["name"]
        if name not in self.observed.gang_of(self.backend.root_ref):
            self.create_gang(self.backend.root_ref, want)
        return owner_refs.reference(self.observed.gang_of(self.backend.root_ref)[name])

    def align_owner(self, ref: ObjectRef, have: dict, root: dict, store: dict) -> bool:
        """Bring one observed object's `metadata.ownerReferences` to the root alone (`owner_refs.verdict`): patch it
        (merge patch, read resourceVersion; the patched object replaces it in `store`), or, when its reference
        names a deleted root, delete it (UID precondition) and return True (the caller requeues). A 404/409 means
        it changed meanwhile: the next pass looks again."""
        verdict = owner_refs.verdict(have, root)
        if verdict == owner_refs.IN_SYNC or is_terminating(have):
            return False
        name = have["metadata"]["name"]
        if verdict == owner_refs.STALE:
            self.delete(ref, have)
            return True
        try:
            store[name] = objects.merge_patch(self.api, ref, self.ns, name, owner_refs.patch_body(root),
                                              have["metadata"].get("resourceVersion"))
        except ApiException as exc:
            if exc.status in (404, 409):
                raise Requeue(1, "Conflict", f"{ref.kind} {self.ns}/{name} changed during update") from None
            raise
        self.actions.append(f"update {ref.kind} {self.ns}/{name}: ownerReferences")
        return False

    def read_ours(self, ref: ObjectRef, name: str) -> dict:
        """GET an object that should be this job's; NameConflict if it is someone else's, a countdown if it is
        terminating or gone."""
        try:
            have = objects.get(self.api, ref, self.ns, name)
        except ApiException as exc:
            if exc.status == 404:
                raise Requeue(1, "Conflict", f"{ref.kind} {self.ns}/{name} was deleted meanwhile") from None
            raise
        other = owner_uid_label(have)
        if ref == JOB and other == self.uid and not ownership.adoptable(name, have["metadata"].get("uid"),
                                                                        self.job.owner_uids):
            other = None  # carries the job's label, but is not the Job gangweb recorded under that name
        if other != self.uid:
            whose = f"gangweb job {other}" if other else "something other than gangweb"
            raise TerminalKubeError(NAME_CONFLICT, f"{ref.kind} {self.ns}/{name} already exists and belongs to "
                                                   f"{whose}; it is not adopted. Delete it or rename the job.")
        if is_terminating(have):
            raise Requeue(WAIT_SECONDS, WAITING, f"{ref.kind} {self.ns}/{name} is being deleted")
        return have

    def create(self, ref: ObjectRef, want: dict) -> dict:
        """POST one object. Raises ApiException(409) when the name is taken, CreateRefused when the API server
        refuses it for good (`refuses_for_good`), other KubeErrors as classified."""
        try:
            return objects.create(self.api, ref, want)
        except KubeError as exc:
            if refuses_for_good(exc):
                raise CreateRefused(ref.kind, f"{self.ns}/{want['metadata']['name']}", exc) from exc
            raise

    def create_gang(self, ref: ObjectRef, want: dict) -> None:
        """Create a gang object; on AlreadyExists read it, check it is ours, compare and fix drift."""
        name = want["metadata"]["name"]
        try:
            self.observed.gang_of(ref)[name] = obj = self.create(ref, want)
            self.actions.append(f"create {ref.kind} {self.ns}/{name}")
            self.created.append(obj)
            return
        except ApiException as exc:
            if exc.status != 409:
                raise
        have = self.read_ours(ref, name)
        drift = self.backend.diff(want, have)
        if drift.replace:
            raise Requeue(1, "Conflict", f"{ref.kind} {self.ns}/{name} appeared with immutable drift "
                                         f"({', '.join(drift.fields)})")
        self.observed.gang_of(ref)[name] = have
        if drift.patch and not self.patch(ref, want, have, drift):
            raise Requeue(1, "Conflict", f"{ref.kind} {self.ns}/{name} appeared with drift the server does not let "
                                         "gangweb patch; it is replaced at the next pass")

    def create_plain(self, ref: ObjectRef, want: dict) -> dict:
        """Create an Indexed Job or Service; on AlreadyExists accept it only when it is ours and alive."""
        name = want["metadata"]["name"]
        try:
            obj = self.create(ref, want)
            self.actions.append(f"create {ref.kind} {self.ns}/{name}")
            self.created.append(obj)
            return obj
        except ApiException as exc:
            if exc.status != 409:
                raise
        return self.read_ours(ref, name)

    # ---- deletion ----------------------------------------------------------------------------------------------
    def delete(self, ref: ObjectRef, obj: dict, propagation: str = "Background") -> dict | None:
        """Delete one of our objects with a UID precondition (a 409 means it was already replaced: leave it).
        `propagation` is the DeleteOptions propagationPolicy. Returns the object when the server kept it
        terminating (finalizers pending), else None."""
        meta = obj["metadata"]
        try:
            left = objects.delete(self.api, ref, self.ns, meta["name"], uid=meta.get("uid"), propagation=propagation)
        except ApiException as exc:
            if exc.status != 409:
                raise
            return None
        self.actions.append(f"delete {ref.kind} {self.ns}/{meta['name']}")
        if isinstance(left, dict) and left.get("kind") == ref.kind and is_terminating(left):
            return left
        return None

    def live_pods_of(self, gang_name: str) -> list[dict]:
        """The job's pods not yet Succeeded/Failed (terminating ones included) that belong to the gang object
        `gang_name` as its plugin links them (`pod_in_group`: v1alpha2 `schedulingGroup`; any pod of the job by
        default)."""
        live = [p for p in self.observed.pods if (p.get("status") or {}).get("phase", "Pending") in LIVE_POD_PHASES]
        if not self.backend.releasable_finalizers:
            return live
        return [p for p in live if self.backend.pod_in_group(p, gang_name)]

    def release_finalizers(self, ref: ObjectRef, obj: dict) -> None:
        """Drop the backend's protection finalizer from our terminating object once no live pod references it."""
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or []
        keep = [f for f in finalizers if f not in self.backend.releasable_finalizers]
        if keep == finalizers or self.live_pods_of(meta["name"]):
            return
        try:
            objects.merge_patch(self.api, ref, self.ns, meta["name"], {"metadata": {"finalizers": keep or None}},
                                meta.get("resourceVersion"))
            self.actions.append(f"release finalizers of {ref.kind} {self.ns}/{meta['name']}")
        except ApiException as exc:
            if exc.status not in (404, 409):  # gone already, or changed: the next pass looks again
                raise

    def delete_gang(self, keep: set[tuple[str, str]] = frozenset(), orphan_root: bool = False) -> None:
        """Delete the job's gang objects (reverse creation order) except `keep` {(kind_key, name)}; release the
        protection finalizer of terminating ones. With `orphan_root`, the root object is deleted with propagation
        Orphan: the garbage collector takes its ownerReference off the objects that remain (a finished job's
        retained Indexed Jobs) instead of deleting them."""
        for ref in reversed(self.backend.gang_kinds):
            for name, obj in list(self.observed.gang_of(ref).items()):
                if (kind_key(ref), name) in keep:
                    continue
                if not is_terminating(obj):
                    orphan = orphan_root and ref == self.backend.root_ref
                    obj = self.delete(ref, obj, propagation="Orphan" if orphan else "Background")
                if obj is not None:
                    self.release_finalizers(ref, obj)

    def delete_stale(self, wanted: list[dict], owners: list[dict], svc: dict) -> None:
        """Delete objects of the job from earlier generations (Jobs first, so their pods go before the gang)."""
        owner_names = {o["metadata"]["name"] for o in owners}
        for name, owner in list(self.observed.owners.items()):
            if name not in owner_names and not is_terminating(owner):
                self.delete(JOB, owner)
        for name, obj in list(self.observed.services.items()):
            if name != svc["metadata"]["name"] and not is_terminating(obj):
                self.delete(SERVICE, obj)
        self.delete_gang(keep={(obj_key(w), w["metadata"]["name"]) for w in wanted})

    def delete_all(self) -> bool:
        """Delete every object of the job (Jobs with their pods, Service, gang objects). Returns True when the
        pass found nothing left to delete (the cleanup is complete).

        "Nothing left" is concluded only from a LIST made by this pass: a resync snapshot was listed before the
        pass began, and a job's objects created after it (a pass that was creating them when the cancel landed)
        are not in it, so an empty slice of a snapshot is read again (`confirm_absence`). The Jobs are deleted with
        Foreground propagation: each stays (terminating) until the garbage collector has deleted its pods, so a
        LIST that finds no Job has no pod of it to miss either, and the watch's cache, which sees the Job go last,
        never shows the job empty while its pods run."""
        nothing_left = self.observed.is_empty()
        if nothing_left and self.confirm_absence():
            return self.delete_all()
        for owner in self.observed.owners.values():
            if not is_terminating(owner):
                self.delete(JOB, owner, propagation="Foreground")
        for svc in self.observed.services.values():
            if not is_terminating(svc):
                self.delete(SERVICE, svc)
        self.delete_gang()
        return nothing_left

    def cancel(self) -> None:
        """Delete every object of the job; once a pass finds nothing of it left (no gang object, Job, Service or
        pod, terminating ones included), end it Cancelled and set `cleaned_up_at`, together. Until then the job
        keeps its phase with reason `Cancelling` (docs/observability.md) and the pass comes back (a countdown;
        the watch also queues a pass at each of the job's deletions): Cancelled is a promise that nothing of the
        job runs or holds quota any more."""
        nothing_left = self.delete_all()
        if nothing_left and self.job.phase != GangPhase.CANCELLED:
            status.record_phase(self.job, GangPhase.CANCELLED, timezone.now(), "gangweb", "Cancelled",
                                "cancelled; the job's cluster objects are deleted")
        elif not nothing_left and self.job.phase != GangPhase.CANCELLED:
            self.job.phase_reason, self.job.phase_message = CANCELLING, "deleting the job's cluster objects"
        self.finish_cleanup(nothing_left)

    def discard(self) -> None:
        """Delete every object of a job the API server refused (Failed, CreateRefused), as a cancel does: nothing
        of a job that can never run is kept (unlike a job that ran and failed, whose Jobs stay for inspection)."""
        self.finish_cleanup(self.delete_all())

    def finish_cleanup(self, nothing_left: bool) -> None:
        """`cleaned_up_at` is set once a pass finds nothing left; until then it comes back after WAIT_SECONDS."""
        if nothing_left:
            self.job.cleaned_up_at = self.job.cleaned_up_at or timezone.now()
            self.job.objects_removed_at = self.job.objects_removed_at or self.job.cleaned_up_at
        else:
            raise Requeue(WAIT_SECONDS, "CleaningUp", "waiting for the job's objects to be deleted")

    def clean_up_finished(self) -> None:
        """After Succeeded/Failed: once none of the job's pods is alive, delete its gang objects and Service (the
        root with propagation Orphan: the Indexed Jobs and finished pods stay for inspection; they hold no quota)
        and set `cleaned_up_at`; once the retention has passed (`remove_after`, reconcile/retention.py), delete
        the Indexed Jobs and pods too (`remove_retained`)."""
        job = self.job
        if job.remove_after is None:
            job.remove_after = retention.remove_after(job)
        if job.objects_removed_at:
            return
        if any((p.get("status") or {}).get("phase", "Pending") in LIVE_POD_PHASES for p in self.observed.pods):
            return
        if not job.cleaned_up_at:
            if any(self.observed.gang.values()) or self.observed.services:
                for svc in self.observed.services.values():
                    if not is_terminating(svc):
                        self.delete(SERVICE, svc)
                self.delete_gang(orphan_root=True)
                return
            if self.confirm_absence():  # a snapshot's "nothing" may predate the job's objects: look now
                self.clean_up_finished()
                return
            job.cleaned_up_at = timezone.now()
        if retention.due(job):
            self.remove_retained()

    def remove_retained(self) -> None:
        """Retention over: delete the finished job's Indexed Jobs (Foreground: each goes after its pods), then any
        pod of the job left without its Job, each with a UID precondition; `objects_removed_at` once a LIST of this
        pass finds nothing of the job left. Until then the pass comes back after WAIT_SECONDS."""
        if self.observed.is_empty():
            if self.confirm_absence():
                self.remove_retained()
                return
            self.job.objects_removed_at = timezone.now()
            return
        for owner in self.observed.owners.values():
            if not is_terminating(owner):
                self.delete(JOB, owner, propagation="Foreground")
        if not self.observed.owners:
            for pod in self.observed.pods:
                if not is_terminating(pod):
                    self.delete(POD, pod)
        for svc in self.observed.services.values():  # made again by hand after the cleanup: not the job's to keep
            if not is_terminating(svc):
                self.delete(SERVICE, svc)
        self.delete_gang()
        raise Requeue(WAIT_SECONDS, REMOVING, "deleting the finished job's Jobs and pods (retention over)")


# ---- a pass with its bookkeeping ---------------------------------------------------------------------------------
def _status_snapshot(job: GangJob) -> dict:
    return {f: getattr(job, f) for f in STATUS_FIELDS}


def _clear_error(job: GangJob) -> None:
    """After a successful pass, put back the reason of the current phase in place of a recorded error."""
    if job.phase_reason in ERROR_REASONS:
        last = PhaseTransition.objects.filter(job=job, phase=job.phase).order_by("-attempt", "-at").first()
        job.phase_reason = last.reason if last else ""
        job.phase_message = last.message if last else ""


def save_status(job: GangJob, before: dict) -> list[str]:
    """Write, once, the status fields this pass changed in memory that the row does not already hold (a status
    writer such as `apply_observation` may have saved some itself). A phase change is conditional on the phase
    read at the start, so a slower concurrent pass never overwrites a newer phase. Returns the fields written."""
    touched = [f for f in STATUS_FIELDS if getattr(job, f) != before[f]]
    if not touched:
        return []
    written = getattr(job, "row_as_written", None)  # the row as a status writer of this pass committed it
    if written is not None and all(getattr(written, f) == getattr(job, f) for f in touched):
        return []  # e.g. a new job's Dispatched: `apply_observation` wrote all of it under its lock
    current = GangJob.objects.filter(pk=job.pk).values(*touched).first() or {}
    changed = [f for f in touched if current.get(f) != getattr(job, f)]
    if changed:
        values = {f: getattr(job, f) for f in changed}
        values["updated_at"] = timezone.now()
        rows = GangJob.objects.filter(pk=job.pk)
        if "phase" in changed:
            rows = rows.filter(phase=before["phase"])
        rows.update(**values)
    return changed


def run_pass(job: GangJob, *, api=None, observed: Observed | None = None, task_id: str = "", retry: int = 0,
             record_idle: bool = True, raise_transient: bool = True) -> PassResult:
    """Reconcile `job` once: act, derive status, write it if changed, record a ReconcileAttempt.

    `observed` comes from a resync snapshot (no reads then); `record_idle=False` skips the attempt row for a
    pass that neither acted nor changed anything (resync of an in-sync job). Returns how the pass ended (like
    controller-runtime's Result): done, `requeue_after` seconds with a reason, or an error (terminal ones are
    recorded and returned). A transient error is recorded too, then raised (TransientKubeError) unless
    `raise_transient` is False, when it is returned in `result.error` for the caller's retry policy.
    """
    started = time.monotonic()
    before = _status_snapshot(job)
    job.row_as_written = None  # set by a status writer of this pass
    result = PassResult()
    reconciler = None
    try:
        if job.desired_state == DesiredState.CANCEL and not job.backend_plugin:
            # Never dispatched: nothing of it can be in the cluster, so no request is needed (works offline too).
            # No pass creates anything for it from now on: a backend is never recorded on a cancelled job
            # (backend_for), and no pass creates without one.
            status.record_phase(job, GangPhase.CANCELLED, timezone.now(), "gangweb", "Cancelled",
                                "cancelled before it was dispatched")
            job.cleaned_up_at = job.cleaned_up_at or timezone.now()
            job.objects_removed_at = job.objects_removed_at or job.cleaned_up_at
            raise _Done
        api = api or kube_client.api_client(job.cluster)
        reconciler = JobReconciler(job, api, observed)
        reconciler.run()
        _clear_error(job)
    except _Done:
        pass
    except _Failed as exc:
        result.outcome, result.reason, result.message = ReconcileOutcome.TERMINAL_ERROR, exc.reason, exc.message
    except Requeue as exc:
        result.reason, result.message, result.requeue_after = exc.reason, exc.message, exc.countdown
    except CreateRefused as exc:
        result.error, result.outcome = exc, ReconcileOutcome.TERMINAL_ERROR
        result.reason, result.message = exc.reason, exc.message
        _fail_refused(job, reconciler, exc, result)
    except KubeError as exc:
        if exc.reason == NAMESPACE_NOT_FOUND:
            exc.message = (f'namespace "{job.namespace}" does not exist in cluster {job.cluster.name}; create it '
                           f"(kubectl create namespace {job.namespace}) and the job is dispatched at the next retry")
        result.error = exc
        result.outcome = (ReconcileOutcome.TRANSIENT_ERROR if isinstance(exc, TransientKubeError)
                          else ReconcileOutcome.TERMINAL_ERROR)
        result.reason, result.message = exc.reason, exc.message
        status.record_error(job, exc.reason, exc.message, exc.status)
    except Exception as exc:  # noqa: BLE001 - no exception leaves a pass unrecorded (a bug, an unexpected answer)
        err = classify(exc)  # a raw ApiException (a 404/409 nobody handled) still says what the server answered
        # describe: server words only from a Status body, anything else by its type (its text may quote secrets).
        message = f"{type(exc).__name__}: {describe(exc, 1900)}" if err is not None else describe(exc, 2000)
        # An API answer nobody handled is logged in one line; anything else is a bug, worth its traceback.
        log.warning("job %s: unexpected error in a reconcile pass: %s", job.pk, message, exc_info=err is None)
        reason = UNEXPECTED_ERROR
        result.outcome, result.reason, result.message = ReconcileOutcome.TERMINAL_ERROR, reason, message
        try:
            status.record_error(job, reason, result.message, getattr(exc, "status", None))
        except Exception:  # noqa: BLE001 - the attempt row below still records it
            log.exception("job %s: could not record the error on the job", job.pk)
    if reconciler is not None:
        result.actions = reconciler.actions
        if reconciler.retired is not None and not result.reason:
            result.reason, result.message = API_VERSION_CHANGED, reconciler.version_message
    with transaction.atomic():
        changed = save_status(job, before)
        if record_idle or result.actions or changed or result.outcome != ReconcileOutcome.OK:
            ReconcileAttempt.objects.create(
                kind=ReconcileAttempt.KIND_JOB, job=job, cluster_id=job.cluster_id, task_id=task_id or "",
                retry=retry, duration_ms=int((time.monotonic() - started) * 1000), outcome=result.outcome,
                reason=result.reason, message=result.message[:2000], actions=result.actions)
    if result.actions:
        log.info("reconciled job %s (%s): %s", job.pk, job, "; ".join(result.actions))
    if raise_transient and result.transient:
        raise result.error
    return result


def _fail_refused(job: GangJob, reconciler: JobReconciler, exc: CreateRefused, result: PassResult) -> None:
    """End `job` Failed because the API server refused one of its objects for good, then delete what was created
    (`discard`). The Failed entry has gangweb's clock and source: a refusal carries no cluster timestamp. When the
    cleanup must wait or the cluster fails meanwhile, a later pass (task countdown or resync) finishes it."""
    status.record_failure(job, CREATE_REFUSED, exc.message)
    if job.phase != GangPhase.FAILED or job.phase_reason != CREATE_REFUSED:
        return  # finished otherwise meanwhile (a cancel): that path cleans up
    try:
        reconciler.discard()
    except Requeue as wait:
        result.requeue_after = wait.countdown
    except KubeError as err:
        log.warning("job %s: cleaning up after %s failed: %s (the resync retries)", job.pk, exc.reason, err)


def _load(job_ids):
    return GangJob.objects.select_related("cluster", "queue").filter(pk__in=job_ids)


def reconcile_one(job_id: int, *, task_id: str = "", retry: int = 0) -> PassResult | None:
    """One pass over job `job_id` as the `scheduling.reconcile_job` task runs it: None when the job no longer exists
    (logged), else the pass's result (`run_pass`), a transient error included in it (`result.error`,
    `result.transient`) rather than raised: what follows (a retry, a countdown) is the task's decision
    (scheduling/tasks.py). `task_id` and `retry` are recorded on the ReconcileAttempt row."""
    job = _load([job_id]).first()
    if job is None:
        log.info("reconcile_job: job %s no longer exists", job_id)
        return None
    return run_pass(job, task_id=task_id, retry=retry, raise_transient=False)


def _record_not_attempted(job: GangJob, err: KubeError) -> None:
    before = _status_snapshot(job)
    status.record_error(job, err.reason, f"not attempted: {err.message}", err.status)
    save_status(job, before)
    ReconcileAttempt.objects.create(kind=ReconcileAttempt.KIND_JOB, job=job, cluster_id=job.cluster_id,
                                    outcome=ReconcileOutcome.TRANSIENT_ERROR if isinstance(err, TransientKubeError)
                                    else ReconcileOutcome.TERMINAL_ERROR, reason=err.reason,
                                    message=f"not attempted: {err.message}"[:2000])


def reconcile_many(job_ids: list[int], threads: int | None = None) -> dict[str, int]:
    """Reconcile a batch of jobs (bulk submit), one pass each.

    Reads are shared: per cluster one snapshot (one LIST per kind across namespaces, as the resync does, selected
    by the batch's job UIDs) feeds every job's pass, so a batch of N new jobs costs a constant number of reads
    plus the creates; the backends of the batch's new jobs are recorded before anything is created, one UPDATE
    per plugin. The passes then run from `threads` threads (default `settings.GANGWEB_RECONCILE_THREADS`), each
    taking every n-th job of the batch with a database connection of its own, closed when it is done: a pass
    mostly waits on the API server's creates and on PostgreSQL, and the jobs of a batch are independent (each
    pass locks only its own row). Inside a transaction (tests) the passes run here, one after the other, since
    other connections could not see its rows. A job's error is recorded on it and does not stop the batch; when
    a cluster cannot be reached its remaining jobs get that error without more connection attempts (the periodic
    resync retries them). Returns counts {"ok", "failed", "requeued"}.
    """
    from django.conf import settings
    from django.db import connection

    from .resync import snapshot

    batch = list(_load(job_ids).order_by("pk"))
    by_cluster: dict[int, list[GangJob]] = {}
    for job in batch:
        by_cluster.setdefault(job.cluster_id, []).append(job)
    apis, snapshots, broken, down = {}, {}, {}, {}
    for cluster_id, jobs in by_cluster.items():
        try:
            api = apis[cluster_id] = kube_client.api_client(jobs[0].cluster)
            served = set(jobs[0].cluster.served_apis or []) or discovery.served_versions(api)
            # Only this batch's objects: the LISTs cost the batch's size, not the cluster's (bench/).
            snapshots[cluster_id] = snapshot(api, served, [str(j.uid) for j in jobs])
            record_backends(jobs, api)
        except KubeError as exc:
            if isinstance(exc, TransientKubeError) or exc.reason == "InvalidKubeconfig":
                down[cluster_id] = exc
            else:
                broken[cluster_id] = exc

    def one(job: GangJob) -> str:
        err = down.get(job.cluster_id) or broken.get(job.cluster_id)
        if err is not None:
            _record_not_attempted(job, err)
            return "failed"
        api = apis[job.cluster_id]
        try:
            observed = snapshots[job.cluster_id].for_job(job, backend_for(job, api))
        except KubeError as exc:
            if isinstance(exc, TransientKubeError):
                down[job.cluster_id] = exc
            _record_not_attempted(job, exc)
            return "failed"
        try:
            result = run_pass(job, api=api, observed=observed)
        except TransientKubeError as exc:
            if exc.reason == CLUSTER_UNREACHABLE:
                down[job.cluster_id] = exc
            return "failed"
        if result.error is not None:
            return "failed"
        return "requeued" if result.requeue_after is not None else "ok"

    workers = min(threads or settings.GANGWEB_RECONCILE_THREADS, len(batch))
    if workers <= 1 or connection.in_atomic_block:
        outcomes = [one(job) for job in batch]
    else:
        outcomes = [o for part in in_threads(one, [batch[i::workers] for i in range(workers)]) for o in part]
    return {key: outcomes.count(key) for key in ("ok", "failed", "requeued")}


def in_threads(fn, parts: list[list]) -> list[list]:
    """[[fn(item) for item in part] for part in parts], each part in a thread of its own whose database
    connections are closed when it is done. Re-raises the first exception of a part (the others finish theirs)."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    def run(part: list) -> list:
        try:
            return [fn(item) for item in part]
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix="reconcile-batch") as pool:
        return list(pool.map(run, parts))
