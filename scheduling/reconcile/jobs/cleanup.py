"""Deleting a job's objects: one by one with a UID precondition, the gang in reverse creation order, what earlier
generations left, everything on cancel or refusal, and a finished job's objects in two steps (its gang objects and
Service once no pod runs; its Indexed Jobs and pods after the retention, reconcile/retention.py)."""
from __future__ import annotations

from django.utils import timezone
from kubernetes.client.rest import ApiException

from ...choices import GangPhase
from ...kube import objects
from ...kube.errors import TerminalKubeError
from ...kube.objects import JOB, POD, SERVICE
from ...kube.refs import ObjectRef
from ...observe import leftovers
from ...observe.objects import condition_true
from .. import ownership, retention, status
from ..observed_set import kind_key, obj_key
from .common import CANCELLING, LIVE_POD_PHASES, REMOVING, WAIT_SECONDS, Requeue, is_terminating
from .conflicts import merge_patch_retrying


def _runs(job: dict) -> bool:
    """True for an Indexed Job that may still run pods: not being deleted, not suspended, no `Complete` or `Failed`
    condition True (batch/v1 JobStatus.conditions)."""
    if is_terminating(job) or (job.get("spec") or {}).get("suspend"):
        return False
    return condition_true(job, "Complete") is None and condition_true(job, "Failed") is None


def ref_line(obj: dict) -> str:
    """"Kind ns/name" of an object, as `JobCleanup.delete` writes it in the pass's actions ("delete Kind ns/name")."""
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind', '?')} {meta.get('namespace', '')}/{meta.get('name', '')}"


class JobCleanup:
    """The deleting half of a job's pass (a mixin of `JobReconciler`). Uses the pass's `job`, `api`, `ns`,
    `backend`, `observed` (the job's objects, kept up to date as they are deleted), `actions` (what the pass did,
    one line each), `update` (what it records, status.StatusUpdate) and `confirm_absence()` (read again before
    concluding that nothing is left)."""

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

    def release_finalizers(self, ref: ObjectRef, obj: dict) -> dict | None:
        """Drop the backend's protection finalizer from our terminating object once no live pod references it.
        Returns the object as it is after (None when that let it go, or it was gone already)."""
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or []
        keep = [f for f in finalizers if f not in self.backend.releasable_finalizers]
        if keep == finalizers or self.live_pods_of(meta["name"]):
            return obj
        try:
            patched = objects.merge_patch(self.api, ref, self.ns, meta["name"],
                                          {"metadata": {"finalizers": keep or None}}, meta.get("resourceVersion"))
            self.actions.append(f"release finalizers of {ref.kind} {self.ns}/{meta['name']}")
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status != 409:  # changed meanwhile: the next pass looks again
                raise
            return obj
        return patched if keep and isinstance(patched, dict) else None

    def delete_gang(self, keep: set[tuple[str, str]] = frozenset(), orphan_root: bool = False) -> None:
        """Delete the job's gang objects (reverse creation order) except `keep` {(kind_key, name)}; release the
        protection finalizer of terminating ones. With `orphan_root`, the root object is deleted with propagation
        Orphan: the garbage collector takes its ownerReference off the objects that remain (a finished job's
        retained Indexed Jobs) instead of deleting them."""
        for ref in reversed(self.backend.gang_kinds):
            store = self.observed.gang_of(ref)
            for name, obj in list(store.items()):
                if (kind_key(ref), name) in keep:
                    continue
                if not is_terminating(obj):
                    orphan = orphan_root and ref == self.backend.root_ref
                    obj = self.delete(ref, obj, propagation="Orphan" if orphan else "Background")
                if obj is not None:
                    obj = self.release_finalizers(ref, obj)
                if obj is None:
                    store.pop(name)  # gone
                else:
                    store[name] = obj  # being deleted, held by a finalizer (`left_behind` names it)

    def delete_stale(self, wanted: list[dict], owners: list[dict], svc: dict) -> None:
        """Delete objects of the job from earlier generations (Jobs first, so their pods go before the gang)."""
        owner_names = {o["metadata"]["name"] for o in owners}
        for name, owner in list(self.observed.owners.items()):
            if name not in owner_names and not is_terminating(owner):
                self.delete(JOB, owner)
        for name, obj in list(self.observed.services.items()):
            if name != svc["metadata"]["name"] and not is_terminating(obj):
                self.delete(SERVICE, obj)
        current = {(obj_key(w), w["metadata"]["name"]) for w in wanted}
        stale_gang = any((kind_key(ref), name) not in current
                         for ref in self.backend.gang_kinds for name in self.observed.gang_of(ref))
        if stale_gang and self.hold_gang_for_pods(owner_names):
            return  # Kueue: an earlier generation's Workload holds the quota until its pods are gone
        self.delete_gang(keep=current)

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
        for name, owner in list(self.observed.owners.items()):
            if not is_terminating(owner):
                self.observed.owners[name] = self.delete(JOB, owner, propagation="Foreground") or owner
        for name, svc in list(self.observed.services.items()):
            if not is_terminating(svc):
                self.observed.services[name] = self.delete(SERVICE, svc) or svc
        if self.hold_gang_for_pods():
            return False  # Kueue: the Workload (the quota) goes only after every pod; the pass comes back
        self.delete_gang()
        return self.sweep_recorded() and nothing_left

    def left_behind(self) -> list[dict]:
        """What of the job the pass still found in the cluster, as its deletes left it: objects being deleted (with
        their finalizers, as the server answered the delete or the LIST showed them), pods (their Job's
        Foreground deletion takes them; one with a finalizer of its own stays), in `observe/leftovers.py`'s words.
        An object whose delete this pass the server answered with nothing left (gone) is not among them."""
        gone = {line.split(" ", 1)[1] for line in self.actions if line.startswith("delete ")}
        objs = [*self.observed.owners.values(), *self.observed.services.values(),
                *(g for kind in self.observed.gang.values() for g in kind.values()), *self.observed.pods]
        return [x for x in objs if is_terminating(x) or ref_line(x) not in gone]

    def recorded_ref(self, key: str) -> ObjectRef | None:
        """The kind of a key of `GangJob.owner_uids` (reconcile/ownership.py `split_key`): a Job, the Service, or
        one of the backend's gang kinds; None for a kind the job's plugin no longer has (an API version retired)."""
        api_version, kind, _ = ownership.split_key(key)
        for ref in (JOB, SERVICE, *self.backend.gang_kinds):
            if (ref.api_version, ref.kind) == (api_version, kind):
                return ref
        return None

    def sweep_recorded(self) -> bool:
        """Find by name every object whose UID gangweb recorded for the job (`GangJob.owner_uids`) that the label
        LIST did not show (its labels were edited away), and delete it when it is still the recorded one (UID
        precondition; a Job Foreground, so its pods go first), releasing a terminating gang object's protection
        finalizer as `delete_gang` does. Returns True when none is left: a cancel reads Cancelled only then, so
        nothing of the job holds quota. One GET per such key (on a cancel or a refusal only)."""
        seen = {ownership.object_key(o) for o in [*self.observed.owners.values(), *self.observed.services.values(),
                                                  *(o for g in self.observed.gang.values() for o in g.values())]}
        none_left = True
        for key, uid in (self.job.owner_uids or {}).items():
            ref = self.recorded_ref(key)
            if key in seen or not uid or ref is None:
                continue
            try:
                obj = objects.get(self.api, ref, self.ns, ownership.split_key(key)[2])
            except ApiException as exc:
                if exc.status == 404:
                    continue
                raise
            if (obj.get("metadata") or {}).get("uid") != uid:
                continue  # someone else's object under the name now: not ours to delete
            none_left = False
            if not is_terminating(obj):
                obj = self.delete(ref, obj, propagation="Foreground" if ref == JOB else "Background")
            if obj is not None and ref in self.backend.gang_kinds:
                self.release_finalizers(ref, obj)
        return none_left

    def cancel(self) -> None:
        """Delete every object of the job; once a pass finds nothing of it left (no gang object, Job, Service or
        pod, terminating ones included), end it Cancelled and set `cleaned_up_at`, together. Until then the job
        keeps its phase with reason `Cancelling` (docs/observability.md) and the pass comes back (a countdown;
        the watch also queues a pass at each of the job's deletions): Cancelled is a promise that nothing of the
        job runs or holds quota any more."""
        nothing_left = self.delete_all()
        if nothing_left and self.job.phase != GangPhase.CANCELLED:
            self.update.decide(self.job, status.Decision(GangPhase.CANCELLED, timezone.now(), "gangweb", "Cancelled",
                                                         "cancelled; the job's cluster objects are deleted"))
        elif not nothing_left and self.job.phase != GangPhase.CANCELLED:
            self.update.say(self.job, CANCELLING, leftovers.waiting_for(self.left_behind()))
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
            raise Requeue(WAIT_SECONDS, "CleaningUp", leftovers.waiting_for(
                self.left_behind(), "waiting for the job's objects to be deleted"))

    def clean_up_finished(self) -> None:
        """After Succeeded/Failed: once none of the job's pods is alive, write the backend's end status (Kueue:
        `Finished=True`; never while a pod of the job still runs, or its quota would be released under it), delete
        its gang objects and Service (the root with propagation Orphan: the Indexed Jobs and finished pods stay for
        inspection; they hold no quota) and set `cleaned_up_at`; once the retention has passed (`remove_after`,
        reconcile/retention.py), delete the Indexed Jobs and pods too (`remove_retained`)."""
        job = self.job
        if job.remove_after is None:
            job.remove_after = retention.remove_after(job)
        if job.objects_removed_at:
            return
        self.stop_failed_gang()
        if any((p.get("status") or {}).get("phase", "Pending") in LIVE_POD_PHASES for p in self.observed.pods):
            return  # a pod of the ended job still runs (being stopped, `stop_failed_gang`): it holds quota
        if not job.cleaned_up_at:
            # Kueue: Finished=True releases the quota at once (as its job framework does, once no pod is active).
            self.write_ended()
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

    def stop_failed_gang(self) -> None:
        """A Failed job's members that still run are stopped: a gang with a failed member has failed whole (its Jobs
        have `backoffLimit: 0`), and pods of its other pod sets would hold nodes, GPUs and queue quota for nothing.
        Each of its Indexed Jobs that has not finished (no `Complete` or `Failed` condition), is not suspended or
        being deleted, and whose UID gangweb recorded is suspended (`spec.suspend: true`, merge patch with the read
        resourceVersion): its Job controller deletes its active pods and keeps the Job, and the pods already
        finished, for inspection (batch/v1 JobSpec.suspend). The same as JobSet does with the active child Jobs of a
        failed JobSet."""
        if self.job.phase != GangPhase.FAILED:
            return
        recorded = set((self.job.owner_uids or {}).values())
        for name, owner in list(self.observed.owners.items()):
            uid = (owner.get("metadata") or {}).get("uid")
            if uid not in recorded or not _runs(owner):
                continue

            def plan(current: dict, uid=uid) -> dict | None:
                same = (current.get("metadata") or {}).get("uid") == uid
                return {"spec": {"suspend": True}} if same and _runs(current) else None

            try:
                patched, _ = merge_patch_retrying(self.api, JOB, self.ns, name, owner, plan,
                                                  lambda name=name: self.read_ours(JOB, name))
            except TerminalKubeError as exc:
                self.actions.append(f"suspend of Job {self.ns}/{name} refused ({exc.status}): {exc.message}")
                continue
            if patched is not None:
                self.actions.append(f"update Job {self.ns}/{name}: suspend (the gang failed: its running members "
                                    "stop)")
                self.observed.owners[name] = patched

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
        raise Requeue(WAIT_SECONDS, REMOVING, leftovers.waiting_for(
            self.left_behind(), "deleting the finished job's Jobs and pods (retention over)"))
