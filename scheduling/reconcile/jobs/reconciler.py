"""One pass over one job (`JobReconciler`): read its objects, compute the desired ones, create, patch or replace
(the package docstring, scheduling/reconcile/jobs/__init__.py, says in what order and why); the deleting half is
`JobCleanup` (cleanup.py)."""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.utils import timezone
from kubernetes.client.rest import ApiException

from ...backends import discovery, registry
from ...backends.base import SchedulerBackend, object_source
from ...choices import DesiredState, GangPhase
from ...kube import limit_ranges
from ...kube.errors import (
    CREATE_REFUSED,
    STORED_VERSION_UNREADABLE,
    TransientKubeError,
)
from ...kube.objects import JOB, SERVICE
from ...kube.refs import ObjectRef
from ...models import GangJob, RuntimeTemplate
from ...observe.evidence import JobObjects
from ...observe.objects import created_at as o_created_at
from ...observe.pods import owner_facts
from ...podspec import rules as pod_rules
from .. import desired as desired_mod
from .. import owner_refs, refusals, retention, status, volcano_queues, waiting_events
from ..observed import Observed, adopt_names, read
from . import repairs
from .admission import AdmissionSteps
from .backend import backend_for
from .cleanup import JobCleanup
from .common import (
    API_VERSION_CHANGED,
    API_VERSION_REMOVED,
    JOB_NAME_LABEL,
    RECREATED,
    REPLACED,
    ROOT_DELETED,
    WAIT_SECONDS,
    WAITING,
    Done,
    Failed,
    PolicyRefused,
    Requeue,
    is_terminating,
    ref_of,
)
from .moving import MovingSteps
from .partial import release_partial
from .raced import RacedSteps
from .writes import ObjectWrites


class JobReconciler(ObjectWrites, JobCleanup, AdmissionSteps, MovingSteps, RacedSteps):
    """One pass over one job. Create with the job (cluster and queue loaded), an ApiClient and optionally the
    Observed slice from a resync; call `run()`."""

    def __init__(self, job: GangJob, api, observed: Observed | None = None,
                 update: status.StatusUpdate | None = None):
        self.job = job
        self.api = api
        self.update = update if update is not None else status.StatusUpdate.begin(job)  # what the pass records
        self.backend = backend_for(job, api)
        self.uid = str(job.uid)
        self.ns = job.namespace
        self.actions: list[str] = []
        self.created: list[dict] = []  # objects this pass created (not adopted on 409), in creation order
        self.retired: type[SchedulerBackend] | None = None  # the plugin whose API the cluster stopped serving
        self.holding = False  # a repair of this pass's is held back (jobs/repairs.py): the pass ends with a countdown
        served = set(job.cluster.served_apis or [])
        if served and not self.backend.available(served):  # the last probe says its API is gone
            self.retire(served)
        self._limit_memo = observed.limit_defaults if observed is not None else None  # the snapshot's, if any
        self._policy_memo = observed.pod_policies if observed is not None else None  # likewise
        try:
            self.observed = self.first_read(observed)
        except TransientKubeError as exc:
            if exc.reason == STORED_VERSION_UNREADABLE and self.retired is not None:
                # The new version's objects cannot be listed yet: the switch waits (nothing recorded), named here.
                raise TransientKubeError(exc.reason, f"{self.version_message}, but {exc.message}",
                                         exc.status) from None
            raise
        if self.retired is not None:  # written with the pass's status, unless another pass switched it meanwhile
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
        and stop the pass (`Failed`). What happens to the gang then is `ensure`'s: a job not yet scheduled is
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
            raise Done
        if new is None or new is old:
            known = ", ".join(registry.api_versions(old.family))
            message = (f"cluster {self.job.cluster.name} no longer serves {old.api_version} (backend {old.name}) "
                       f"and serves no other version of backend '{old.family}' ({known}); the job cannot continue")
            self.update.fail(self.job, API_VERSION_REMOVED, message)
            raise Failed(API_VERSION_REMOVED, message)
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
        return read(self.api, self.backend, self.ns, self.uid, self.job.owner_uids, adopt_names(self.job))

    def confirm_absence(self) -> bool:
        """Before a pass concludes that something of the job is gone (cleaned up, nothing left to delete): when what
        it holds came from a snapshot (listed for many jobs, maybe before the job's last change), read the job's
        objects again and go on with those. Returns True when it read again. Absence in an old list is no proof."""
        if not self.observed.from_snapshot:
            return False
        self.observed = self.read()
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
        elif job.move_to_id:
            self.move()  # reconcile/moves.py decided it; jobs/moving.py carries it out
        else:
            self.ensure()

    # ---- the running job ---------------------------------------------------------------------------------------
    def ensure(self) -> None:
        """Make the cluster hold exactly the desired objects of the current generation, then derive status: fix
        the gang's drift (patch, or replace under a new generation), create the root, then the other gang objects
        with the Service, then the owner Jobs (`create_members`), delete what earlier generations left, and record
        what the cluster says now."""
        if self.retired is not None and self.job.phase not in (GangPhase.SCHEDULED, GangPhase.RUNNING):
            # Its pods (if any) name gang objects of an API the cluster no longer serves: start over under new
            # names in the new version. A scheduled or running gang keeps its pods and names.
            self.replace([f"apiVersion {self.retired.api_version} -> {self.backend.api_version}"])
        spec = desired_mod.gang_spec(self.job, self.limit_defaults())
        wanted = self.backend.build_gang_objects(spec)
        self.stop_when_ended(wanted)
        wanted = self.with_known_priority(spec, wanted)
        replaced = self.fix_gang_drift(wanted)
        if replaced:
            spec = desired_mod.gang_spec(self.job, self.limit_defaults())
            wanted = self.backend.build_gang_objects(spec)
        if any(w["metadata"]["name"] not in self.observed.gang_of(ref_of(self.backend, w)) for w in wanted):
            self.ensure_volcano_queue(spec.queue)  # a Volcano PodGroup (the root there) only once its queue exists
            spec = self.with_priority(spec, wanted)  # Kueue's Workload carries its PriorityClass's value
            wanted = self.backend.build_gang_objects(spec)
        root = self.ensure_root(wanted)
        owners = [owner_refs.with_owner(o, root)
                  for o in desired_mod.owners(self.backend, spec, suspend=self.owners_held(wanted))]
        svc = owner_refs.with_owner(desired_mod.service(spec), root)
        self.put_back_labels(wanted, owners, svc)
        missing = self.align_existing(wanted, owners, svc, root)
        self.create_members(missing, owners, svc)
        self.record_own(wanted, svc)
        self.write_gang_status(wanted)  # Kueue: an evicted gang's reservation cleared once its pods are gone
        self.delete_stale(wanted, owners, svc)
        if self.cancelled_meanwhile():
            return
        self.note_restart(replaced)
        self.observe_now(wanted, owners)
        try:
            released = release_partial(self)
        except Requeue as wait:
            self.hold_over(wait)
        if released:
            self.ensure()  # the new generation, created in this pass
            return
        if self.job.is_terminal:
            self.clean_up_finished()
            return
        self.hold_over()

    def stop_when_ended(self, wanted: list[dict]) -> None:
        """Raise Done, creating nothing, when the job's Indexed Jobs have all ended (their Job controller's
        `Complete` or `Failed` condition, batch/v1 JobStatus) while a gang object of the current generation is
        missing: the job is over whatever this pass's row says (a resync's rows are loaded up to a pass's length
        before their turn), its clean-up may already have deleted the gang, and a gang made again now would stay
        for good. The observation records the end; the clean-up follows it."""
        owners = [w for w in self.observed.owners.values() if not is_terminating(w)]
        if not owners or not all(owner_facts(w).complete_at or owner_facts(w).failed_at for w in owners):
            return
        if all(w["metadata"]["name"] in self.observed.gang_of(ref_of(self.backend, w)) for w in wanted):
            return
        self.actions.append("the job's Indexed Jobs have ended: nothing of its gang is made again")
        raise Done

    def fix_gang_drift(self, wanted: list[dict]) -> list[str]:
        """Patch the existing gang objects' drifted mutable fields; when a drifted field is immutable, or the server
        refuses a patch for good, replace the gang under a new generation instead. Returns the fields that made it
        replace ([] when it did not).

        A gang object of the current generation that is terminating (deleted by hand and held by a finalizer, or
        by the garbage collector after its root was deleted), or missing while the job's owner Jobs exist (the set
        was whole once), is never waited for or made again under the same name: its pods could bind against the
        terminating one, or the new one would have to wait for it to go. The gang is replaced at once under a new
        generation (new names for every object, on every backend; `replace`)."""
        gone = self.gang_gone(wanted)
        if gone and self.confirm_absence():
            # A snapshot finds the job's objects by label: one whose label was taken off is still the job's (its
            # recorded UID), and the job's own read finds it; only that read may say the gang is gone.
            gone = self.gang_gone(wanted)
        if gone:
            self.replace(gone, cause="gone")
            return gone
        patches, replace_fields = [], []
        for want in wanted:
            ref = ref_of(self.backend, want)
            have = self.observed.gang_of(ref).get(want["metadata"]["name"])
            if have is None:
                continue
            drift = self.backend.diff(want, have)
            if drift.replace:
                replace_fields += [f"{ref.kind}.spec.{f}" for f in drift.fields]
            elif drift.patch:
                patches.append((ref, want, have, drift))
        refused = []
        if patches and not replace_fields:
            refused = self.repair(patches)
        elif not patches and not replace_fields:
            repairs.held_off(self.job)  # in sync: the last repair held (for now); its hold no longer gates the watch
        if replace_fields or refused:
            replace_fields += refused
            self.replace(replace_fields)
        return replace_fields

    def gang_gone(self, wanted: list[dict]) -> list[str]:
        """What of the current generation's gang object set is broken, one phrase each ("PodGroup ns/x is being
        deleted", "Workload ns/x was deleted"): terminating objects under a desired name, and missing ones while
        a live owner Job of the job exists (owner Jobs are created only after the whole set), unless the pass just
        switched API versions. [] when nothing is."""
        out = []
        # After an API version switch (`retire`) the new version's objects are missing by nature: a running gang
        # gets them under its old names (its pods name them), not a replacement.
        owners_live = self.retired is None and any(not is_terminating(w) for w in self.observed.owners.values())
        for want in wanted:
            ref = ref_of(self.backend, want)
            name = want["metadata"]["name"]
            have = self.observed.gang_of(ref).get(name)
            if have is not None and is_terminating(have):
                held = ", ".join((have.get("metadata") or {}).get("finalizers") or []) or "no finalizer"
                out.append(f"{ref.kind} {self.ns}/{name} is being deleted (finalizers: {held})")
            elif have is None and owners_live:
                out.append(f"{ref.kind} {self.ns}/{name} was deleted")
        return out

    def align_existing(self, wanted: list[dict], owners: list[dict], svc: dict,
                       root: dict) -> list[tuple[ObjectRef, dict]]:
        """Bring every existing object's ownerReferences (and an Indexed Job's mutable fields) back to the root, and
        return the missing gang objects besides the root (ref, desired object naming the root), for
        `create_members`. Waits (Requeue) while an object under a desired name is terminating, and after deleting
        objects of a deleted root (the set is created again once they are gone): nothing is created then."""
        stale, missing = False, []
        for want in wanted:
            ref = ref_of(self.backend, want)
            if want["metadata"]["name"] == root["name"] and ref == self.backend.root_ref:
                continue
            owner_refs.with_owner(want, root)
            have = self.observed.gang_of(ref).get(want["metadata"]["name"])
            if have is None:
                missing.append((ref, want))
            else:
                stale |= self.align_owner(ref, have, root, self.observed.gang_of(ref))
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
        return missing

    def observe_now(self, wanted: list[dict], owners: list[dict]) -> None:
        """Note what the cluster says of the job's current objects (`StatusUpdate.observe`, written with the pass's
        status): its gang objects of this generation, its owner Jobs, their pods, the Jobs' FailedCreate
        events and the Warning Events of the gang objects and a waiting pod, for why-pending."""
        owner_names = {o["metadata"]["name"] for o in owners}
        pods = [p for p in self.observed.pods
                if ((p.get("metadata") or {}).get("labels") or {}).get(JOB_NAME_LABEL) in owner_names]
        gang_now = [self.observed.gang_of(ref_of(self.backend, w))[w["metadata"]["name"]] for w in wanted]
        owners_now = [self.observed.owners[n] for n in sorted(owner_names)]
        self.update.observe(self.job, status.Sighting(self.backend, JobObjects(gang_now, owners_now, pods),
                                                      refusals.read(self.job, owners_now, pods, self.api),
                                                      self.observed.foreign, self.observed.foreign_complete,
                                                      said=waiting_events.read(self.job, gang_now, pods, self.api)))

    def ensure_volcano_queue(self, queue: str) -> None:
        """Before a Volcano PodGroup is created: its queue's Volcano Queue must exist (Volcano never schedules a
        PodGroup whose queue is missing; docs/upstream.md, Volcano PodGroup and Queue). The queue sync creates it if
        a policy wants it here (reconcile/volcano_queues.py `missing_queue`); if it still is missing the pass waits
        with reason VolcanoQueueMissing, naming the queue and why. Other backends: nothing to do."""
        if self.backend.family != "volcano" or getattr(self, "_volcano_queue_checked", False):
            return
        message = volcano_queues.missing_queue(self.job.cluster, self.api, queue)
        if message:  # shown as the job's why-pending until the PodGroup exists (an error, status.py)
            self.update.fail_with_error(self.job, status.VOLCANO_QUEUE_MISSING, message)
            raise Requeue(WAIT_SECONDS, status.VOLCANO_QUEUE_MISSING, message)
        self._volcano_queue_checked = True

    def limit_defaults(self) -> dict:
        """The container defaults the job's namespace's LimitRanges add at admission (`kube.limit_ranges`, cached
        per cluster and namespace), counted in the gang's minResources; read once per pass, and once per namespace
        for all the passes of one resync or batch snapshot (`Observed.limit_defaults`)."""
        if not hasattr(self, "_limit_defaults"):
            memo = self._limit_memo
            if memo is not None and self.ns in memo:
                self._limit_defaults = memo[self.ns]
            else:
                self._limit_defaults = limit_ranges.defaults(self.api, self.job.cluster_id, self.ns)
                if memo is not None:
                    memo[self.ns] = self._limit_defaults
        return self._limit_defaults

    def check_pod_policy(self, want: dict) -> None:
        """Before creating an owner Job (what makes pods), check the job's namespace and resolved spec against the
        pod-spec policy as it stands now (podspec/rules.py), once per pass: defense in depth behind the submit's
        check (rows written before it, a queue or template tightened since). The template's level and exceptions
        are read once per pass, or once per template version for all the passes of one batch or resync snapshot
        (`Observed.pod_policies`: as of the batch's first pass to need them, as the LimitRange defaults are; a
        template tightened during a batch is checked from the next pass on). Raises PolicyRefused."""
        if getattr(self, "_policy_checked", False):
            return
        job = self.job
        memo = self._policy_memo
        policy = memo.get(job.template_version_id) if memo is not None else None
        if policy is None:
            # one statement: the template's level and exceptions (not the version's spec: the job's is resolved)
            policy = RuntimeTemplate.objects.filter(versions__pk=job.template_version_id).values_list(
                "pod_security_level", "policy_exceptions").first() or ("", [])
            if memo is not None:
                memo[job.template_version_id] = policy
        level, exceptions = policy
        try:
            pod_rules.check_namespace(job.queue, job.namespace)
            pod_rules.check_job_spec(job.resolved_spec, RuntimeTemplate(pod_security_level=level,
                                                                     policy_exceptions=exceptions), job.queue)
        except ValidationError as exc:
            field, messages = next(iter(exc.message_dict.items()))
            raise PolicyRefused(JOB.kind, f"{self.ns}/{want['metadata']['name']}", f"{field}: {messages[0]}") \
                from None
        self._policy_checked = True

    def note_restart(self, replaced: list[str]) -> None:
        """When this pass created an owner Job of a job that was Scheduled or Running (its Job had been there: its
        pods ran), the job starts again: note a Dispatched entry of a new attempt (`StatusUpdate.restart_at`),
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
        elif replaced and getattr(self, "replaced_because", "drift") == "gone":
            reason, message = REPLACED, f"replaced the gang under new names ({'; '.join(replaced)}): {names}"
        elif replaced:
            reason, message = REPLACED, f"replaced the gang (immutable change of {', '.join(replaced)}): {names}"
        else:
            reason, message = RECREATED, f"recreated what was missing from the cluster: {names}"
        self.update.restart_at(self.job, status.Decision(GangPhase.DISPATCHED, at, object_source(jobs[0]), reason,
                                                         message))
