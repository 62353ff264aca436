"""One pass over one job (`JobReconciler`): read its objects, compute the desired ones, create, patch or replace
(the package docstring, scheduling/reconcile/jobs/__init__.py, says in what order and why); the deleting half is
`JobCleanup` (cleanup.py)."""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.utils import timezone
from kubernetes.client.rest import ApiException

from ... import dbclock
from ...backends import discovery, registry
from ...backends.base import SchedulerBackend, object_source
from ...choices import TERMINAL_PHASES, DesiredState, GangPhase
from ...constants import ANNOTATION_MIN_EDITED
from ...kube import limit_ranges, objects
from ...kube.errors import (
    CREATE_REFUSED,
    STORED_VERSION_UNREADABLE,
    THROTTLED,
    CreateRefused,
    KubeError,
    TerminalKubeError,
    TransientKubeError,
    describe,
    refuses_for_good,
)
from ...kube.objects import JOB, SERVICE
from ...kube.refs import ObjectRef
from ...models import GangJob, RuntimeTemplate
from ...observe.evidence import JobObjects
from ...observe.objects import created_at as o_created_at
from ...observe.pods import owner_facts
from ...services import policy
from .. import desired as desired_mod
from .. import owner_refs, ownership, refusals, retention, status, volcano_queues, waiting_events
from ..observed import Observed, adopt_names, read
from . import fanout, repairs
from .backend import backend_for
from .cleanup import JobCleanup
from .common import (
    API_VERSION_CHANGED,
    API_VERSION_REMOVED,
    JOB_NAME_LABEL,
    NAME_CONFLICT,
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
    owner_uid_label,
    ref_of,
)
from .conflicts import merge_patch_retrying
from .partial import gang_is_whole, release_partial

# Drifted gang fields that are the gang's minimum (or a part of it): putting one back marks the object
# (ANNOTATION_MIN_EDITED), so that pods bound below the minimum meanwhile read as a partial gang.
MINIMUM_FIELDS = ("minCount", "minMember", "minTaskMember", "subGroups")


def minimum_edited(fields: list[str]) -> bool:
    """True when a drift's `fields` touch the gang's minimum (MINIMUM_FIELDS)."""
    return any(word in field for field in fields for word in MINIMUM_FIELDS)


THROTTLE_RETRY_SECONDS = 2  # countdown after a 429 that names no Retry-After


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


class _Going(Exception):
    """The Indexed Job being corrected is going away (terminating, or deleted as a stale root's): requeue."""


def over_because(row: dict | None) -> str | None:
    """Why a job's row (`phase`, `desired_state`, `cleaned_up_at`, as read now; None when the row is gone) forbids
    making anything for it: it ended (Succeeded, Failed, Cancelled), a cancel was asked for, or its clean-up ran.
    None when the job still wants its gang."""
    if row is None:
        return "the job was deleted"
    if row["phase"] in TERMINAL_PHASES:
        return f"the job is {row['phase']}"
    if row["desired_state"] == DesiredState.CANCEL:
        return "the job's cancel was asked for"
    if row["cleaned_up_at"] is not None:
        return "the job was cleaned up"
    return None


def owner_job_patch(want: dict, have: dict, root: dict) -> tuple[dict, list[str]]:
    """The merge patch that puts an Indexed Job edited by hand back, and the fields it names: `parallelism` (a
    scaled-down gang never gets all its members) together with `completions` (Indexed Jobs let completions change
    only in tandem with parallelism, to the same value: k8s.io/kubernetes pkg/apis/batch/validation
    `validateCompletions`, 1.36 and 1.37; a completions left higher than parallelism runs extra pods later, outside
    the gang), `suspend` (gangweb never suspends) and `metadata.ownerReferences` (the root alone, `owner_refs`).
    ({}, []) when the Job is as wanted."""
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
    return patch, fields


class JobReconciler(JobCleanup):
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
        replaced = self.fix_gang_drift(wanted)
        if replaced:
            spec = desired_mod.gang_spec(self.job, self.limit_defaults())
            wanted = self.backend.build_gang_objects(spec)
        if any(w["metadata"]["name"] not in self.observed.gang_of(ref_of(self.backend, w)) for w in wanted):
            self.ensure_volcano_queue(spec.queue)  # a Volcano PodGroup (the root there) only once its queue exists
        root = self.ensure_root(wanted)
        owners = [owner_refs.with_owner(o, root) for o in desired_mod.owners(self.backend, spec)]
        svc = owner_refs.with_owner(desired_mod.service(spec), root)
        self.put_back_labels(wanted, owners, svc)
        missing = self.align_existing(wanted, owners, svc, root)
        self.create_members(missing, owners, svc)
        self.record_own(wanted, svc)
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

    def repair(self, patches: list[tuple]) -> list[str]:
        """Patch each drifted gang object of `patches` [(ref, want, have, drift)] back, unless the same repair
        keeps not holding and its backoff is not over (jobs/repairs.py): then nothing is patched, and the pass
        ends with a countdown to the backoff's end (`ensure`, `self.holding`). Returns the patches the server
        refused for good (the caller replaces the gang)."""
        now = dbclock.now()
        items = [(repairs.describe(ref.kind, self.ns, want["metadata"]["name"], drift.fields),
                  repairs.wanted_values(want, drift.fields)) for ref, want, _, drift in patches]
        if repairs.held(self.job, repairs.what_of(items), now) is not None:
            self.actions.append(f"not repaired yet ({repairs.REPAIR_NOT_HOLDING}): {repairs.message(self.job, now)}")
            self.holding = True
            return []
        refused, done = [], []
        for (ref, want, have, drift), item in zip(patches, items, strict=True):
            before = len(self.actions)
            if not self.patch(ref, want, have, drift):
                refused.append(f"{ref.kind}.spec.{', '.join(drift.fields)} (patch refused)")
            elif len(self.actions) > before:  # patched (not found in sync on a second read)
                done.append(item)
        if done and repairs.repaired(self.job, done, now)["hold_until"]:
            self.holding = True
        return refused

    def hold_over(self, wait: Requeue | None = None) -> None:
        """End the pass with a countdown to the end of its repair backoff (`RepairNotHolding`, jobs/repairs.py),
        or to `wait`'s (a partial gang's grace) when that comes first, naming both; nothing while no repair is
        held back (then `wait`, if any, is raised as it is)."""
        now = dbclock.now()
        left = repairs.held(self.job, self.job.repairs.get("what", ""), now) if self.holding else None
        if left is None:
            if wait is not None:
                raise wait
            return
        said = repairs.message(self.job, now)
        countdown = max(1, math.ceil(left))
        if wait is not None:
            countdown, said = min(countdown, wait.countdown), f"{said}; {wait.reason}: {wait.message}"
        raise Requeue(countdown, repairs.REPAIR_NOT_HOLDING, said)

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

    def create_members(self, gang: list[tuple[ObjectRef, dict]], owners: list[dict], svc: dict) -> None:
        """Create what is missing besides the root in two rounds, each round's creates sent at once
        (`create_round`): first the missing gang objects `gang` and the Service (they need only the root's UID,
        for their ownerReferences), then the missing owner Jobs, after the pod-spec policy check, because their
        pods need every gang object to exist (Workload -> PodGroup -> pods; docs/upstream.md, Kubernetes Workload).
        With no gang object missing (a backend whose root is its only gang object) the Service goes with the Jobs:
        one round. Then record the Jobs' UIDs: what the job's pods are recognised by
        (reconcile/ownership.py), saved with the status. Before: one create after the other, 4 round trips for a
        k8s-workload job where there are 3 now (bench/README.md)."""
        first = [(ref, want, self.create_gang) for ref, want in gang]
        second = [(JOB, want, self._created_owner) for want in owners
                  if want["metadata"]["name"] not in self.observed.owners]
        if svc["metadata"]["name"] not in self.observed.services:
            (first or second).append((SERVICE, svc, self._created_service))
        self.create_round(first)
        if any(ref == JOB for ref, _, _ in second):
            self.check_pod_policy(next(want for ref, want, _ in second if ref == JOB))
        self.create_round(second)
        self.update.owner_uids(self.job, ownership.record(
            self.job, {w["metadata"]["name"]: self.observed.owners[w["metadata"]["name"]] for w in owners}))

    def create_round(self, items: list[tuple[ObjectRef, dict, Callable]]) -> None:
        """POST every (ref, desired object) of `items` at once (`fanout.at_once`: API requests only, each through
        the client rate limit), then hand each answer, in order, to its item's handler here (`create_gang`,
        `_created_owner`, `_created_service`: a 409 is read and compared there, never trusted). Every object
        created is recorded (`observed`, `actions`, `created`) before an error ends the pass: the first error is
        raised (the pass records it on the job; a refusal then deletes what was created), any later one is named
        in the pass's actions, so none goes unrecorded."""
        if items:
            self.refuse_when_over(", ".join(f"{ref.kind} {self.ns}/{want['metadata']['name']}"
                                            for ref, want, _ in items))
        answers = fanout.at_once([functools.partial(self.create, ref, want) for ref, want, _ in items])
        error = None
        for (ref, want, handle), answer in zip(items, answers, strict=True):
            try:
                handle(ref, want, answer)
            except Exception as exc:  # noqa: BLE001 - raised below, or named in the actions when not the first
                if error is None:
                    error = exc
                else:
                    self.actions.append(f"create {ref.kind} {self.ns}/{want['metadata']['name']} failed too: "
                                        f"{describe(exc, 500)}")
        if error is not None:
            if isinstance(error, TransientKubeError):
                failed = next((item for item, answer in zip(items, answers, strict=True)
                               if answer.error is error), None)
                if failed is not None:
                    self.throttled(failed[0], failed[1], error)
            raise error

    def throttled(self, ref: ObjectRef, want: dict, exc: TransientKubeError) -> None:
        """When the API server throttled the create of `want` (429 Too Many Requests, from API priority and
        fairness or an admission webhook): record it on the job, naming the object and when the pass retries,
        and end the pass with a countdown of the server's `Retry-After` (THROTTLE_RETRY_SECONDS when it names
        none), not the task's backoff. The job stays what it was: it is Dispatched only once every gang object
        exists (observe/phases.py), its reason says Throttled meanwhile. Any other error: nothing (the caller
        raises it)."""
        if exc.reason != THROTTLED:
            return
        wait = exc.retry_after if exc.retry_after is not None else THROTTLE_RETRY_SECONDS
        countdown = max(1, math.ceil(wait))
        at = (timezone.now() + timedelta(seconds=countdown)).strftime("%H:%M:%S UTC")
        said = f"Retry-After {_seconds(exc.retry_after)} s" if exc.retry_after is not None else "no Retry-After"
        message = (f"the API server throttled the create of {ref.kind} {self.ns}/{want['metadata']['name']} "
                   f"(HTTP 429, {said}); gangweb creates it again in {countdown} s, at {at}: {exc.message}")
        self.actions.append(f"create {ref.kind} {self.ns}/{want['metadata']['name']} throttled (429); retry in "
                            f"{countdown} s")
        self.update.fail_with_error(self.job, THROTTLED, message, 429)
        raise Requeue(countdown, THROTTLED, message) from exc

    def _created_owner(self, ref: ObjectRef, want: dict, sent: fanout.Answer) -> None:
        self.observed.owners[want["metadata"]["name"]] = self.create_plain(ref, want, sent)

    def _created_service(self, ref: ObjectRef, want: dict, sent: fanout.Answer) -> None:
        self.observed.services[want["metadata"]["name"]] = self.create_plain(ref, want, sent)

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

    def refuse_when_over(self, making: str) -> None:
        """Before this pass first creates anything, or replaces the gang to create it anew: read the job's row again
        (one query, three columns) and end the pass (Done), creating nothing, when since the pass loaded it the job
        ended (Succeeded, Failed, Cancelled), a cancel was asked for, or its clean-up ran (`cleaned_up_at`;
        `over_because`). `making` names what would have been made, for the pass's actions.

        A pass's row may be older than the job's end: a resync loads its rows up to a pass's length before their
        turn, and a pass may wait on a stopped API server. Its clean-up may then have deleted the gang and set
        `cleaned_up_at` already, and a gang made again now would stay for good. So a pass creates nothing for a job
        whose end, cancel or clean-up was committed before this read. Read once per pass (`_row_checked`), before
        its first create (every create goes through `ensure_root` or `create_round`); what ends the job while the
        pass's creates are in flight is found by the read after them (`cancelled_meanwhile`), and a clean-up that
        commits after that read, having listed before the creates, by the next resync (reconcile/left_behind.py)."""
        if getattr(self, "_row_checked", False):
            return
        row = GangJob.objects.filter(pk=self.job.pk).values("phase", "desired_state", "cleaned_up_at").first()
        why = over_because(row)
        if why is None:
            self._row_checked = True
            return
        # Read before the pass's first create: nothing this pass made is in the cluster to hand back.
        self.actions.append(f"{why} since this pass loaded it: {making} not created")
        raise Done

    def cancelled_meanwhile(self) -> bool:
        """After this pass created objects, read the job's row again: when since the pass loaded it the job was
        cancelled, ended or cleaned up (`over_because`; a clean-up that ran while this pass's creates were in
        flight may have found the cluster empty), nothing would ever delete what this pass just made: it is handed
        back (`hand_back`). Our creates finished before this read, so a clean-up or cancel committed after it is
        seen by its own pass's LIST. Returns True when the job was cancelled (and its objects are being deleted);
        raises Done when it ended."""
        if not any(a.startswith("create ") for a in self.actions):
            return False
        row = GangJob.objects.filter(pk=self.job.pk).values("phase", "desired_state", "cleaned_up_at").first()
        if row is None or over_because(row) is None:
            return False
        return self.hand_back(row)

    def hand_back(self, row: dict) -> bool:
        """This pass made objects for a job that, since the pass loaded it, was cancelled, ended or cleaned up (`row`:
        phase, desired_state, cleaned_up_at as read now). `cleaned_up_at` and `objects_removed_at` are cleared at once
        (one UPDATE: the resync takes the job again whatever happens to this pass), then: a cancelled job is cancelled
        by this pass (its objects deleted; returns True); an ended one ends the pass (Done) and is left to its
        clean-up (a resync's rows are loaded up to a pass's length before their turn: a fault run left 4 finished
        jobs holding gang objects so)."""
        GangJob.objects.filter(pk=self.job.pk).update(cleaned_up_at=None, objects_removed_at=None)
        self.job.cleaned_up_at = self.job.objects_removed_at = None  # not cleaned up: what this pass made is there
        if row["desired_state"] == DesiredState.CANCEL or row["phase"] == GangPhase.CANCELLED:
            self.job.desired_state = row["desired_state"]
            if row["phase"] == GangPhase.CANCELLED:
                self.job.phase = GangPhase.CANCELLED  # already recorded by the other pass: not recorded twice
            self.cancel()
            return True
        self.actions.append(f"{over_because(row)} since this pass loaded it: what it made is left to its clean-up")
        raise Done

    def replace(self, fields: list[str], cause: str = "drift") -> None:
        """Replace the gang under a new generation: Indexed Jobs first (their pods reference the gang), then gang
        objects in reverse creation order, then bump `gang_generation` (conditionally: a concurrent pass that
        already bumped it wins and this pass requeues). `cause`: "drift" (`fields` name the immutable fields) or
        "gone" (`fields` say which gang object is missing or terminating, `gang_gone`) or "partial" (a partial gang
        released, jobs/partial.py)."""
        self.refuse_when_over(f"a new generation of the gang ({cause})")
        self.replaced_because = cause
        if cause == "drift":
            self.actions.append(f"replace gang: immutable drift in {', '.join(fields)}")
        else:
            self.actions.append(f"replace gang: {'; '.join(fields)}")
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
        """Merge-patch drifted mutable fields with the read resourceVersion; on 409 read again and retry
        (`merge_patch_retrying`); an object that changed immutably meanwhile is a countdown.

        Returns False when the API server refuses the patch for good (400/422: a field the backend believed
        mutable is not, on this cluster's version): the caller replaces the gang instead of patching again on
        every pass. True once the object is in sync."""
        name = want["metadata"]["name"]

        def plan(current: dict) -> dict | None:
            nonlocal drift
            if current is not have:  # read again after a conflict
                drift = self.backend.diff(want, current)
                if drift.in_sync:
                    return None
                if drift.replace:
                    raise Requeue(1, "Conflict", f"{ref.kind} {self.ns}/{name} changed immutably during update")
            if minimum_edited(drift.fields) and not gang_is_whole(self.job, self.observed.pods):
                # remembered on the object: pods bound meanwhile are a partial gang (none can be once it is whole)
                return {**drift.patch, "metadata": {"annotations": {
                    ANNOTATION_MIN_EDITED: timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ")}}}
            return drift.patch

        try:
            patched, current = merge_patch_retrying(self.api, ref, self.ns, name, have, plan,
                                                    lambda: self.read_ours(ref, name))
        except TerminalKubeError as exc:
            if exc.status not in (400, 422):
                raise
            self.actions.append(f"patch of {ref.kind} {self.ns}/{name} refused ({exc.status}): {exc.message}")
            return False
        if patched is not None:
            self.actions.append(f"update {ref.kind} {self.ns}/{name}: {', '.join(drift.fields)}")
        self.observed.gang_of(ref)[name] = patched if patched is not None else current
        return True

    def correct_owner(self, want: dict, have: dict, root: dict) -> bool:
        """Put back the mutable fields of an Indexed Job edited by hand (`owner_job_patch`): parallelism with
        completions, suspend, ownerReferences. Merge patch with the read resourceVersion; on 409 read again and retry
        (`merge_patch_retrying`). When the server refuses the patch for good (400/422), the Job is deleted (UID
        precondition) and created anew by a later pass. Returns True when the Job is going (terminating, its patch
        refused, or its reference names a deleted root): the caller requeues."""
        name = want["metadata"]["name"]
        last, fields = [have], []

        def plan(current: dict) -> dict | None:
            last[0] = current
            if is_terminating(current):
                raise _Going
            if owner_refs.verdict(current, root) == owner_refs.STALE:
                self.delete(JOB, current, propagation="Foreground")
                raise _Going
            body, fields[:] = owner_job_patch(want, current, root)
            return body or None

        try:
            patched, current = merge_patch_retrying(self.api, JOB, self.ns, name, have, plan,
                                                    lambda: self.read_ours(JOB, name))
        except _Going:
            return True
        except TerminalKubeError as exc:
            if exc.status not in (400, 422):
                raise
            self.actions.append(f"patch of Job {self.ns}/{name} refused ({exc.status}): {exc.message}; "
                                "replacing the Job")
            self.delete(JOB, last[0], propagation="Foreground")
            return True
        if patched is not None:
            self.actions.append(f"update Job {self.ns}/{name}: {', '.join(fields)}")
        self.observed.owners[name] = patched if patched is not None else current
        return False

    def ensure_root(self, wanted: list[dict]) -> dict:
        """Create the job's root object (the desired object of the backend's `root_ref`) when missing, and return
        its OwnerReference (`owner_refs.reference`), which every other object of the job names."""
        want = next(w for w in wanted if ref_of(self.backend, w) == self.backend.root_ref)
        name = want["metadata"]["name"]
        if name not in self.observed.gang_of(self.backend.root_ref):
            self.refuse_when_over(f"{self.backend.root_ref.kind} {self.ns}/{name}")
            try:
                self.create_gang(self.backend.root_ref, want)
            except TransientKubeError as exc:
                self.throttled(self.backend.root_ref, want, exc)
                raise
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
        terminating or gone. Ours means (reconcile/ownership.py): its UID is the one recorded under its key,
        whatever its labels say (labels edited away are put back here); or, with nothing recorded under its key, it
        carries the job's label. A UID recorded under its key that is not its own makes it someone else's, labels
        or not."""
        try:
            have = objects.get(self.api, ref, self.ns, name)
        except ApiException as exc:
            if exc.status == 404:
                raise Requeue(1, "Conflict", f"{ref.kind} {self.ns}/{name} was deleted meanwhile") from None
            raise
        other = owner_uid_label(have)
        recorded = ownership.is_recorded(have, self.job.owner_uids)
        uid = have["metadata"].get("uid")
        if not recorded and other == self.uid and not (
                ownership.adoptable(name, uid, self.job.owner_uids, ownership.object_key(have))
                and ownership.may_adopt(have, self.uid, self.job.owner_uids)):
            other = None  # carries the job's label, but gangweb did not make it (no UID recorded, no creation mark)
        if not recorded and other != self.uid:
            whose = f"gangweb job {other}" if other else "something other than gangweb"
            copied = " though it carries this job's gangweb labels," if owner_uid_label(have) == self.uid else ""
            raise TerminalKubeError(NAME_CONFLICT, (
                f"{ref.kind} {self.ns}/{name} already exists and belongs to {whose}: gangweb did not make it (uid "
                f"{uid}),{copied} so it is not adopted, counted or deleted. gangweb creates nothing under this name "
                "until it is gone: delete it, or resubmit the job under another name."))
        if is_terminating(have):
            raise Requeue(WAIT_SECONDS, WAITING, f"{ref.kind} {self.ns}/{name} is being deleted")
        return self.relabel(ref, have)

    def relabel(self, ref: ObjectRef, have: dict) -> dict:
        """Put the job's labels (`desired.job_labels_from`: what gangweb finds its objects by) back on one of its own
        objects whose labels were edited (merge patch with the read resourceVersion); returns the object as it is
        now. A 404/409 (changed meanwhile) is a countdown: the next pass looks again."""
        want = desired_mod.job_labels_from(self.job.name, self.uid)
        labels = (have.get("metadata") or {}).get("labels") or {}
        if all(labels.get(k) == v for k, v in want.items()):
            return have
        name = have["metadata"]["name"]
        try:
            patched = objects.merge_patch(self.api, ref, self.ns, name, {"metadata": {"labels": want}},
                                          have["metadata"].get("resourceVersion"))
        except ApiException as exc:
            if exc.status in (404, 409):
                raise Requeue(1, "Conflict", f"{ref.kind} {self.ns}/{name} changed during update") from None
            raise
        self.actions.append(f"update {ref.kind} {self.ns}/{name}: labels put back "
                            f"({', '.join(sorted(k for k, v in want.items() if labels.get(k) != v))})")
        return patched

    def put_back_labels(self, wanted: list[dict], owners: list[dict], svc: dict) -> None:
        """The job's labels back on every own object of the current generation found without them (its recorded
        UID: `ownership.annex`, or adopted under its name), so the watch, the resync and a cancel find it again."""
        for want in wanted:
            store = self.observed.gang_of(ref_of(self.backend, want))
            have = store.get(want["metadata"]["name"])
            if have is not None and not is_terminating(have):
                store[want["metadata"]["name"]] = self.relabel(ref_of(self.backend, want), have)
        for ref, store, name in [*((JOB, self.observed.owners, w["metadata"]["name"]) for w in owners),
                                 (SERVICE, self.observed.services, svc["metadata"]["name"])]:
            have = store.get(name)
            if have is not None and not is_terminating(have):
                store[name] = self.relabel(ref, have)

    def record_own(self, wanted: list[dict], svc: dict) -> None:
        """Record the UIDs of the current generation's gang objects and Service (created or adopted by this pass,
        or before it) under their `ownership.object_key`: from then on only those objects are the job's, whatever
        labels anything else carries (reconcile/ownership.py). The owner Jobs are recorded as they are created
        (`create_members`)."""
        found = {}
        for want in wanted:
            have = self.observed.gang_of(ref_of(self.backend, want)).get(want["metadata"]["name"])
            if have is not None:
                found[ownership.object_key(have)] = have
        have = self.observed.services.get(svc["metadata"]["name"])
        if have is not None:
            found[ownership.object_key(have)] = have
        self.update.owner_uids(self.job, ownership.record(self.job, found))

    def create(self, ref: ObjectRef, want: dict) -> dict:
        """POST one object. Raises ApiException(409) when the name is taken, CreateRefused when the API server
        refuses it for good (`refuses_for_good`), other KubeErrors as classified."""
        try:
            return objects.create(self.api, ref, ownership.stamp(want, self.uid))  # gangweb's creation mark on it
        except KubeError as exc:
            if refuses_for_good(exc):
                raise CreateRefused(ref.kind, f"{self.ns}/{want['metadata']['name']}", exc) from exc
            raise

    def create_gang(self, ref: ObjectRef, want: dict, sent: fanout.Answer | None = None) -> None:
        """Create a gang object (or take `sent`, the answer of its create sent already); on AlreadyExists read it,
        check it is ours, compare and fix drift."""
        name = want["metadata"]["name"]
        try:
            self.observed.gang_of(ref)[name] = obj = self.create(ref, want) if sent is None else sent.get()
            self.actions.append(f"create {ref.kind} {self.ns}/{name}")
            self.created.append(obj)
            self.remember(obj)
            return
        except ApiException as exc:
            if exc.status != 409:
                raise
        have = self.remember(self.read_ours(ref, name))
        drift = self.backend.diff(want, have)
        if drift.replace:
            raise Requeue(1, "Conflict", f"{ref.kind} {self.ns}/{name} appeared with immutable drift "
                                         f"({', '.join(drift.fields)})")
        self.observed.gang_of(ref)[name] = have
        if drift.patch and not self.patch(ref, want, have, drift):
            raise Requeue(1, "Conflict", f"{ref.kind} {self.ns}/{name} appeared with drift the server does not let "
                                         "gangweb patch; it is replaced at the next pass")

    def create_plain(self, ref: ObjectRef, want: dict, sent: fanout.Answer | None = None) -> dict:
        """Create an Indexed Job or Service (or take `sent`, the answer of its create sent already); on
        AlreadyExists accept it only when it is ours and alive."""
        name = want["metadata"]["name"]
        try:
            obj = self.create(ref, want) if sent is None else sent.get()
            self.actions.append(f"create {ref.kind} {self.ns}/{name}")
            self.created.append(obj)
            return self.remember(obj)
        except ApiException as exc:
            if exc.status != 409:
                raise
        return self.remember(self.read_ours(ref, name))

    def remember(self, obj: dict) -> dict:
        """Record the UID of an object this pass created or found to be the job's own (`ownership.record`), at once:
        written with the pass's status whatever ends the pass, so a later pass knows it as gangweb's. Returns it."""
        if isinstance(obj, dict) and obj.get("apiVersion") and obj.get("kind"):
            self.update.owner_uids(self.job, ownership.record(self.job, {ownership.object_key(obj): obj}))
        return obj
