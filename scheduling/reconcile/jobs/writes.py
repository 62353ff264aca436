"""The writes of a job's pass: create its objects in rounds (recording the UIDs gangweb's trust rests on), patch
drift back (backing off a repair the cluster keeps undoing), replace what cannot be patched, merge the owner
references, put back the labels someone edited away. A mixin of JobReconciler (reconcile/jobs/reconciler.py),
beside JobCleanup (reconcile/jobs/cleanup.py).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from datetime import timedelta

from django.utils import timezone
from kubernetes.client.rest import ApiException

from ...constants import ANNOTATION_MIN_EDITED
from ...db import clock as dbclock
from ...kube import objects
from ...kube.errors import (
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
from ...models import GangJob
from .. import desired as desired_mod
from .. import owner_refs, ownership
from . import fanout, repairs
from .common import (
    NAME_CONFLICT,
    WAIT_SECONDS,
    WAITING,
    Requeue,
    is_terminating,
    owner_uid_label,
    ref_of,
)
from .conflicts import merge_patch_retrying
from .partial import gang_is_whole

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

def owner_job_patch(want: dict, have: dict, root: dict) -> tuple[dict, list[str]]:
    """The merge patch that puts an Indexed Job edited by hand back, and the fields it names: `parallelism` (a
    scaled-down gang never gets all its members) together with `completions` (Indexed Jobs let completions change
    only in tandem with parallelism, to the same value: k8s.io/kubernetes pkg/apis/batch/validation
    `validateCompletions`, 1.36 and 1.37; a completions left higher than parallelism runs extra pods later, outside
    the gang), `suspend` (as `want` says: False unless the backend holds the pods until its queue manager admits
    the gang, reconcile/jobs/admission.py) and `metadata.ownerReferences` (the root alone, `owner_refs`).
    ({}, []) when the Job is as wanted."""
    spec = have.get("spec") or {}
    patch, fields = {}, []
    count = want["spec"]["parallelism"]
    if spec.get("parallelism") != count or spec.get("completions") != want["spec"]["completions"]:
        patch["spec"] = {"parallelism": count, "completions": want["spec"]["completions"]}
        fields += ["completions", "parallelism"]
    suspend = bool(want["spec"].get("suspend"))
    if bool(spec.get("suspend")) != suspend:
        patch.setdefault("spec", {})["suspend"] = suspend
        fields.append("suspend")
    if owner_refs.verdict(have, root) == owner_refs.PATCH:
        patch.update(owner_refs.patch_body(root))
        fields.append("ownerReferences")
    return patch, fields


class ObjectWrites:
    """Create, patch, replace and repair a job's own objects (a JobReconciler mixin: uses its job, api, observed
    and result)."""

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
        # A backend whose gang objects hold quota (Kueue) keeps them until their pods are gone (`delete_stale`).
        for ref in () if self.backend.gang_deleted_after_pods else reversed(self.backend.gang_kinds):
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
            if "suspend" in fields and want["spec"].get("suspend"):
                self.note_resumed_by_hand(last[0], patched)
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
