"""The steps of a pass for a backend whose queue manager admits the gang before any pod may exist (Kueue,
`SchedulerBackend.holds_pods_until_admitted`): the Indexed Jobs are created suspended and follow the gang object's
admission (un-suspended while `pods_allowed`, suspended again when it stops: an eviction); the status writes the
scheduler expects from the job's owner (`status_writes`: Kueue's quota reservation cleared once an evicted gang's
pods are gone, `Finished` when the job ends); the gang's PriorityClass value read for the create
(`needs_priority_value`). A mixin of JobReconciler (reconcile/jobs/reconciler.py); every step is a no-op for a
backend that asks for none of it. Only objects whose UID gangweb recorded are written (the pass's own objects).
"""
from __future__ import annotations

import dataclasses

from django.core.cache import cache
from django.utils import timezone
from kubernetes.client.rest import ApiException

from ...backends.base import GangSpec, parse_time
from ...choices import GangPhase
from ...kube import objects, priority_classes
from ...kube.errors import CreateRefused, KubeError, TerminalKubeError
from ...observe.pods import REPORTED, reported
from .. import names, status
from .common import JOB_NAME_LABEL, LIVE_POD_PHASES, is_terminating, ref_of

PRIORITY_CLASS_MISSING = "PriorityClassMissing"
PRIORITY_CACHE_SECONDS = 60
_NO_CLASS = "-"  # cached "no such PriorityClass"
RESUMED_WITHOUT_ADMISSION = "ResumedWithoutAdmission"


class AdmissionSteps:
    """Suspend/un-suspend the owner Jobs with the gang's admission and make the backend's status writes (a
    JobReconciler mixin: uses its job, api, ns, backend, observed, actions)."""

    def current_gang(self, wanted: list[dict]) -> list[dict]:
        """The observed gang objects of the current generation (those of `wanted` that exist)."""
        out = []
        for want in wanted:
            have = self.observed.gang_of(ref_of(self.backend, want)).get(want["metadata"]["name"])
            if have is not None:
                out.append(have)
        return out

    def owners_held(self, wanted: list[dict]) -> bool:
        """True when the job's Indexed Jobs must be suspended now (`spec.suspend: true`): the backend holds pods
        until its queue manager admits the gang and the current gang objects do not say so (not yet, or no more)."""
        return self.backend.holds_pods_until_admitted and not self.backend.pods_allowed(self.current_gang(wanted))

    def pods_gone(self) -> bool:
        """True when nothing of the job can still run: no pod of it is Pending, Running or Unknown (terminating ones
        count as left), and every owner Job is suspended or being deleted and counts no active or terminating pod
        (batch/v1 JobStatus `active`, `terminating`): the job framework's `!job.IsActive()`."""
        if any((p.get("status") or {}).get("phase", "Pending") in LIVE_POD_PHASES for p in self.observed.pods):
            return False
        for owner in self.observed.owners.values():
            status = owner.get("status") or {}
            if not (is_terminating(owner) or (owner.get("spec") or {}).get("suspend")):
                return False
            if status.get("active") or status.get("terminating"):
                return False
        return True

    def write_gang_status(self, wanted: list[dict], ended: tuple[str, str] | None = None) -> None:
        """Send the backend's status writes for the current gang objects (`status_writes`), each a merge patch of
        the object's `status` subresource carrying the read resourceVersion, on objects whose UID gangweb recorded.
        A 404 or 409 (gone, or changed by its scheduler meanwhile) is left to the next pass, which reads it again."""
        gang = self.current_gang(wanted)
        if not gang:
            return
        recorded = set((self.job.owner_uids or {}).values())
        writes = self.backend.status_writes(gang, pods_gone=self.pods_gone(), ended=ended, now=timezone.now())
        for ref, obj, body in writes:
            meta = obj.get("metadata") or {}
            if meta.get("uid") not in recorded:
                continue  # only gangweb's own, as recorded at its create
            try:
                patched = objects.patch_status(self.api, ref, self.ns, meta["name"], body, meta.get("resourceVersion"))
            except ApiException as exc:
                if exc.status in (404, 409):
                    self.actions.append(f"status of {ref.kind} {self.ns}/{meta['name']} changed meanwhile "
                                        f"({exc.status}): written at the next pass")
                    continue
                raise
            said = ", ".join(f"{c.get('type')}={c.get('status')}" for c in body["status"].get("conditions") or []
                             if c not in ((obj.get("status") or {}).get("conditions") or []))
            self.actions.append(f"update {ref.kind} {self.ns}/{meta['name']} status: {said or 'written'}"
                                + ("; admission cleared" if "admission" in body["status"] else ""))
            self.observed.gang_of(ref)[meta["name"]] = patched if isinstance(patched, dict) else obj

    def write_ended(self) -> None:
        """A finished job (Succeeded or Failed): the backend's status write for its end (Kueue: `Finished=True`,
        reason Succeeded or Failed, the job's message), on its current gang objects, before they are deleted."""
        if self.job.phase not in (GangPhase.SUCCEEDED, GangPhase.FAILED) or not self.backend.status_refs:
            return
        self.write_gang_status(self._named_gang(), ended=(str(self.job.phase), self.job.phase_message or ""))

    def _named_gang(self) -> list[dict]:
        """The current generation's gang objects as names only (apiVersion, kind, metadata.name), for lookups."""
        name = names.gang_name(self.job.name, self.uid, self.job.gang_generation)
        return [{"apiVersion": ref.api_version, "kind": ref.kind, "metadata": {"name": name}}
                for ref in self.backend.gang_kinds]

    def note_resumed_by_hand(self, before: dict, after: dict | None) -> None:
        """gangweb just suspended again an Indexed Job (`before`: as read; `after`: as the patch answered) that
        someone else un-suspended while the queue manager had not admitted the gang (no eviction on the gang
        object: an eviction's suspend is gangweb's own). When the Job controller had started pods meanwhile
        (its status counts any, batch/v1 JobStatus `active`, `ready`, `succeeded`, `failed`), the job starts
        again: a Dispatched entry of a new attempt at the Job's resume time (its `Suspended=False` condition,
        reason `JobResumed`, written by the Job controller), source the Job, reason `ResumedWithoutAdmission`,
        saying how many pods ran outside the admission. Nothing when the Job controller had not acted on the
        resume yet (no pod can have existed)."""
        if not self.backend.holds_pods_until_admitted or before.get("spec", {}).get("suspend"):
            return
        if self.backend.read_status(self.current_gang(self._named_gang())).disruption_reason:
            return
        seen = (before, after or {})
        resumed = next((c for job in seen for c in ((job.get("status") or {}).get("conditions") or [])
                        if isinstance(c, dict) and c.get("type") == "Suspended" and c.get("status") == "False"), None)
        at = parse_time((resumed or {}).get("lastTransitionTime"))
        reports = [r for r in map(reported, seen) if r is not None]
        counts = {k: max((r[k] for r in reports), default=0) for k in REPORTED}
        if at is None or not (counts["active"] or counts["succeeded"] or counts["failed"]):
            return
        name = (before.get("metadata") or {}).get("name", "")
        gang = self.backend.root_ref.kind
        self.update.restart_at(self.job, status.Decision(GangPhase.DISPATCHED, at, f"Job {self.ns}/{name}",
                                                         RESUMED_WITHOUT_ADMISSION, (
            f"Job {self.ns}/{name} was un-suspended by someone else while {gang} "
            f"{self.ns}/{names.gang_name(self.job.name, self.uid, self.job.gang_generation)} was not admitted: "
            f"its controller counted {counts['active']} active ({counts['ready']} ready), {counts['succeeded']} "
            f"succeeded, {counts['failed']} failed pods outside the admission; gangweb suspended it again (its "
            "pods are deleted) and the gang waits for admission")))

    def with_known_priority(self, spec: GangSpec, wanted: list[dict]) -> list[dict]:
        """`wanted` built again with the priority value the gang objects must carry (`known_priority`) once they all
        exist, so that a value edited by hand (Kueue's Workload `spec.priority`) is put back; else `wanted`."""
        if not all(w["metadata"]["name"] in self.observed.gang_of(ref_of(self.backend, w)) for w in wanted):
            return wanted
        return self.backend.build_gang_objects(self.known_priority(spec))

    def known_priority(self, spec: GangSpec) -> GangSpec:
        """`spec` with `priority` = the value of the job's PriorityClass as the cluster defines it now (without one:
        the globalDefault class's, else 0), when the backend needs it (`needs_priority_value`), for the drift check
        of an existing gang object (a priority edited by hand is put back). Read with one LIST of the cluster's
        PriorityClasses, kept PRIORITY_CACHE_SECONDS per cluster and class (a class's value is immutable; a class
        deleted and made again under the same name is seen within that time). `spec` unchanged when the class is
        missing or the LIST fails: the observed priority is then not compared (a create still reads it afresh,
        `with_priority`)."""
        if not self.backend.needs_priority_value:
            return spec
        key = f"gangweb:priority-class:{self.job.cluster_id}:{spec.priority_class_name}"
        value = cache.get(key)
        if value is None:
            try:
                value = priority_classes.value_of(self.api, spec.priority_class_name)
            except (KubeError, ApiException):
                return spec
            cache.set(key, _NO_CLASS if value is None else value, PRIORITY_CACHE_SECONDS)
        if not isinstance(value, int) or isinstance(value, bool):
            return spec
        return dataclasses.replace(spec, priority=value)

    def with_priority(self, spec: GangSpec, wanted: list[dict]) -> GangSpec:
        """`spec` with `priority` = the value of the job's PriorityClass (without one: the cluster's globalDefault
        class's value, else 0, as its pods get), read from the cluster (one LIST), when the backend needs it
        (`needs_priority_value`) and a gang object is about to be created; else `spec` unchanged.
        Raises CreateRefused (the job fails, as a create the API server refused) when the cluster has no such
        PriorityClass: the gang object could not carry its priority, and its pods would be refused too."""
        if not self.backend.needs_priority_value:
            return spec
        if all(w["metadata"]["name"] in self.observed.gang_of(ref_of(self.backend, w)) for w in wanted):
            return spec
        value = priority_classes.value_of(self.api, spec.priority_class_name)
        if value is None:
            refused = TerminalKubeError(PRIORITY_CLASS_MISSING, (
                f'no PriorityClass with name "{spec.priority_class_name}" was found in cluster '
                f"{self.job.cluster.name}: the {self.backend.root_ref.kind} carries its value (spec.priority)"), 422,
                PRIORITY_CLASS_MISSING)
            raise CreateRefused(self.backend.root_ref.kind, f"{self.ns}/{spec.gang_name}", refused)
        return dataclasses.replace(spec, priority=value)

    def hold_gang_for_pods(self, keep_owner_names: set[str] | None = None) -> bool:
        """True when the backend's gang objects must stay because pods of the job are still there
        (`gang_deleted_after_pods`: deleting them releases the quota). With `keep_owner_names` (the current
        generation's Jobs), only pods and Jobs of other generations count (an earlier generation's gang goes once
        its own pods are gone); without, any Job or pod of the job counts (a cancel)."""
        if not self.backend.gang_deleted_after_pods:
            return False
        keep = keep_owner_names
        owners = [n for n in self.observed.owners if keep is None or n not in keep]
        pods = [p for p in self.observed.pods
                if keep is None or ((p.get("metadata") or {}).get("labels") or {}).get(JOB_NAME_LABEL) not in keep]
        if owners or pods:
            self.actions.append(f"{self.backend.root_ref.kind} kept until the pods are gone "
                                f"({len(owners)} Jobs, {len(pods)} pods left)")
            return True
        return False
