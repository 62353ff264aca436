"""KAI Scheduler, PodGroup `scheduling.run.ai/v2alpha2`.

One PodGroup per job: minMember, queue, priorityClassName, preemptibility, one subGroup per pod set (its own
minMember), a topologyConstraint and the v0.17 durations `preemptionDelay` / `stalenessGracePeriod` when the
template asks for them. KAI v0.15-v0.17 CRDs reject a top-level `minMember: 0` ("should be greater than or equal
to 1"), so the gang's minimum stays >= 1 (template and job validation, 400 naming the field); a subGroup's
`minMember` is `+kubebuilder:validation:Minimum=0` (KAI `pkg/apis/scheduling/v2alpha2/podgroup_types.go`
`SubGroup`), so a pod set's minimum of 0 (an optional set) is sent as it is (`per_set_minimums`).
`schedulingConditions` are removed once the group schedules (v0.17), so admission is read from
`resourcesStatus`, never from a condition that survived. Pods: `schedulerName: kai-scheduler`,
annotation `pod-group-name`, labels `kai.scheduler/queue` and `kai.scheduler/subgroup-name`. The pods' owners
carry `kai.scheduler/skip-podgrouper: "true"` so KAI's podgrouper leaves the grouping alone (KAI v0.15.0+).

Source: docs/upstream.md, KAI PodGroup (KAI `pkg/apis/scheduling/v2alpha2/podgroup_types.go`,
`examples/batch/external-podgroup-job.yaml`). KAI has no `minResources` on its PodGroup; its status carries no
phase (removed in v0.17.0), only `schedulingConditions` and `resourcesStatus`.

Root object (`root_ref`, ownerReferences): the job's one PodGroup. The Indexed Jobs and the Service name it as
their (non-controller) owner; KAI's podgrouper never follows them, the owners carry `skip-podgrouper`.
"""
from __future__ import annotations

from ..kube.refs import ObjectRef
from .base import GangSpec, GangStatus, PodSetSpec, SchedulerBackend, object_source, parse_time

POD_GROUP = ObjectRef("scheduling.run.ai/v2alpha2", "PodGroup", "podgroups")
# KAI's keys (docs/upstream.md, KAI PodGroup): the pods' scheduler (configurable at install: a cluster setting
# overrides it), queue and subgroup labels, the annotation naming the PodGroup, and the owner key that keeps KAI's
# podgrouper away.
KAI_SCHEDULER_NAME = "kai-scheduler"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
KAI_POD_GROUP_ANNOTATION = "pod-group-name"
KAI_SKIP_PODGROUPER_LABEL = "kai.scheduler/skip-podgrouper"
# The schedulingConditions type KAI writes (`podgroup_types.go`: always UnschedulableOnNodePool). Another type without
# reasons is said as it is (`GangStatus.unknown`), never read as "no room".
KNOWN_CONDITIONS = {"UnschedulableOnNodePool"}


class KaiV2alpha2(SchedulerBackend):
    """KAI Scheduler PodGroup v2alpha2: queue, priority, preemptibility and sizes are updated in place."""

    family = "kai"
    name = "kai-v2alpha2"
    api_version = POD_GROUP.api_version
    POD_GROUP = POD_GROUP
    scheduler_name = KAI_SCHEDULER_NAME
    scheduler_leases = (("", KAI_SCHEDULER_NAME),)  # in its install namespace, named after the scheduler
    gang_refs = ("POD_GROUP",)
    immutable_spec = False
    mutable_fields = ("minMember", "queue", "priorityClassName", "preemptibility", "subGroups", "topologyConstraint",
                      "preemptionDelay", "stalenessGracePeriod")
    owned_whole = ("subGroups", "topologyConstraint")  # written whole from the job: extra keys/fields are drift
    per_set_minimums = True  # subGroups[].minMember, 0 allowed

    def build_gang_objects(self, spec: GangSpec) -> list[dict]:
        """One PodGroup named `spec.gang_name`."""
        body = {
            "minMember": spec.min_member,
            "queue": spec.queue,
            "subGroups": [{"name": ps.name, "minMember": ps.min_member} for ps in spec.pod_sets],
        }
        if spec.priority_class_name:
            body["priorityClassName"] = spec.priority_class_name
        if spec.preemptibility:
            body["preemptibility"] = spec.preemptibility
        if spec.topology:
            body["topologyConstraint"] = dict(spec.topology)
        body.update(spec.durations)  # v0.17: preemptionDelay, stalenessGracePeriod (Go durations)
        return [self.new_gang_object(self.POD_GROUP, spec, body)]

    def stamp_pod_template(self, template: dict, spec: GangSpec, pod_set: PodSetSpec) -> dict:
        """schedulerName kai-scheduler, annotation pod-group-name, labels queue and subgroup-name."""
        out = super().stamp_pod_template(template, spec, pod_set)
        meta = out.setdefault("metadata", {})
        meta.setdefault("annotations", {})[KAI_POD_GROUP_ANNOTATION] = spec.gang_name
        labels = meta.setdefault("labels", {})
        labels[KAI_QUEUE_LABEL] = spec.queue
        labels[KAI_SUBGROUP_LABEL] = pod_set.name
        return out

    def owner_metadata(self, spec: GangSpec) -> dict:
        """`kai.scheduler/skip-podgrouper: "true"`: KAI reads it as an annotation (docs/upstream.md, KAI PodGroup);
        it is also set as a label so owners can be selected by it."""
        return {"labels": {KAI_SKIP_PODGROUPER_LABEL: "true"}, "annotations": {KAI_SKIP_PODGROUPER_LABEL: "true"}}

    def read_status(self, objects: list[dict]) -> GangStatus:
        """The latest `status.schedulingConditions[]` entry: its `reasons[]` (all of them in `reasons`; the first
        one's reason and message, and `details.queueDetails`) say why the gang waits. A condition of a type gangweb
        does not know (`KNOWN_CONDITIONS`) without reasons is said as it is (`GangStatus.unknown`, admitted None).
        No condition and some `resourcesStatus.allocated` means admitted; neither means KAI said nothing yet
        (admitted None)."""
        pg = self.gang_object(self.POD_GROUP, objects)
        if pg is None:
            return GangStatus()
        status = pg.get("status") or {}
        conditions = status.get("schedulingConditions") or []
        source = object_source(pg)
        if conditions:
            latest = max(conditions, key=lambda c: c.get("lastTransitionTime") or "")
            reasons = [r for r in latest.get("reasons") or [] if isinstance(r, dict)]
            kind = latest.get("type")
            if not (isinstance(kind, str) and kind in KNOWN_CONDITIONS) and not reasons:
                said = f": {str(latest.get('message'))[:400]}" if latest.get("message") else ""
                return GangStatus(reason=str(kind)[:128], source=source, conditions=conditions,
                                  at=parse_time(latest.get("lastTransitionTime")),
                                  unknown=f"KAI reports condition {str(kind)[:64]}{said}, which gangweb does not know")
            first = reasons[0] if reasons else {}
            details = next(((r.get("details") or {}).get("queueDetails") for r in reasons
                            if (r.get("details") or {}).get("queueDetails")), None)
            return GangStatus(
                admitted=False,
                reason=first.get("reason") or latest.get("reason") or "Unschedulable",
                message=first.get("message") or latest.get("message") or "",
                at=parse_time(latest.get("lastTransitionTime")), source=source, queue_details=details,
                conditions=conditions, reasons=reasons)
        allocated = (status.get("resourcesStatus") or {}).get("allocated") or {}
        if allocated:
            return GangStatus(admitted=True, reason="Allocated", source=source)
        return GangStatus(source=source)

    def set_minimums(self, objects: list[dict]) -> dict[str, int] | None:
        """{subGroup name: minMember} of the PodGroup among `objects`."""
        pg = self.gang_object(self.POD_GROUP, objects) or {}
        return {g["name"]: g.get("minMember") for g in (pg.get("spec") or {}).get("subGroups") or []}
