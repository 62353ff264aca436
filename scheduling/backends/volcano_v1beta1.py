"""Volcano, PodGroup `scheduling.volcano.sh/v1beta1`.

One PodGroup per job with minMember, minTaskMember (one entry per pod set), queue, priorityClassName and
minResources, all updated in place. Pods carry the annotation `scheduling.k8s.io/group-name` and
`schedulerName: volcano`; the task name (`volcano.sh/task-spec` annotation) is the pod set, matching
minTaskMember. Status: `phase` (Pending, Inqueue, Running, Completed, Unknown) and `conditions`
(Unschedulable / Scheduled with reasons such as NotEnoughResources).

Source: volcano-sh/apis `pkg/apis/scheduling/v1beta1/types.go` (docs/upstream.md, Volcano PodGroup and Queue). The
Volcano PodGroup CRD has no status subresource, so gangweb patches only `spec` (a merge patch), never the whole
object, to leave Volcano's status alone.

Root object (`root_ref`, ownerReferences): the job's one PodGroup; the Indexed Jobs and the Service name it.
"""
from __future__ import annotations

from ..kube.refs import ObjectRef
from .base import GangSpec, GangStatus, PodSetSpec, SchedulerBackend, object_source, parse_time

POD_GROUP = ObjectRef("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups")
VOLCANO_GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"  # the pods' annotation naming their PodGroup
VOLCANO_SCHEDULER_NAME = "volcano"
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
ADMITTED_PHASES = {"Running", "Completed"}
# Every PodGroup phase and condition type volcano-sh/apis v1beta1 defines (types.go: PodGroupPhase,
# PodGroupConditionType); anything else is shown as it is, never read as one of these.
KNOWN_PHASES = {"", "Pending", "Inqueue", "Running", "Unknown", "Completed"}
KNOWN_CONDITIONS = {"Scheduled", "Unschedulable"}


class VolcanoV1beta1(SchedulerBackend):
    """Volcano PodGroup v1beta1."""

    family = "volcano"
    name = "volcano-v1beta1"
    api_version = POD_GROUP.api_version
    POD_GROUP = POD_GROUP
    scheduler_name = VOLCANO_SCHEDULER_NAME
    # vc-scheduler's lock is named after its component, in --lock-object-namespace (volcano-system by default)
    scheduler_leases = (("", "vc-scheduler"),)
    gang_refs = ("POD_GROUP",)
    mutable_fields = ("minMember", "minTaskMember", "queue", "priorityClassName", "minResources")
    owned_whole = ("minTaskMember",)  # one entry per pod set: a task name added by hand is drift
    # minTaskMember map[string]int32 (volcano-sh/apis v1beta1 types.go): each task's own minimum, 0 allowed.
    per_set_minimums = True

    def build_gang_objects(self, spec: GangSpec) -> list[dict]:
        """One PodGroup named `spec.gang_name`."""
        body = {
            "minMember": spec.min_member,
            "minTaskMember": {ps.name: ps.min_member for ps in spec.pod_sets},
            "queue": spec.queue,
        }
        if spec.priority_class_name:
            body["priorityClassName"] = spec.priority_class_name
        if spec.min_resources:
            body["minResources"] = dict(spec.min_resources)
        return [self.new_gang_object(self.POD_GROUP, spec, body)]

    def stamp_pod_template(self, template: dict, spec: GangSpec, pod_set: PodSetSpec) -> dict:
        """schedulerName volcano, annotations group-name and task-spec."""
        out = super().stamp_pod_template(template, spec, pod_set)
        annotations = out.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[VOLCANO_GROUP_NAME_ANNOTATION] = spec.gang_name
        annotations[TASK_SPEC_ANNOTATION] = pod_set.name
        return out

    def read_status(self, objects: list[dict]) -> GangStatus:
        """A True Unschedulable condition means not admitted (its reason, e.g. NotEnoughResources); a True
        Scheduled condition or phase Running/Completed means admitted; Pending/Inqueue say nothing yet. A phase or
        a True condition type gangweb does not know (`KNOWN_PHASES`, `KNOWN_CONDITIONS`) is said as it is
        (`GangStatus.unknown`), never read as a known one."""
        pg = self.gang_object(self.POD_GROUP, objects)
        if pg is None:
            return GangStatus()
        status = pg.get("status") or {}
        conditions = status.get("conditions") or []
        phase = status.get("phase") or ""
        phase = phase if isinstance(phase, str) else str(phase)  # written by anyone who may edit the object
        result = GangStatus(source=object_source(pg), conditions=conditions, reason=phase)
        live = [c for c in conditions if c.get("status") == "True"]
        latest = max(live, key=lambda c: c.get("lastTransitionTime") or "") if live else None
        if phase in ADMITTED_PHASES or (latest and latest.get("type") == "Scheduled"):
            result.admitted = True
        elif latest and latest.get("type") == "Unschedulable":
            result.admitted = False
        if latest is not None:
            result.reason = latest.get("reason") or latest.get("type", "")
            result.message = latest.get("message", "")
            result.at = parse_time(latest.get("lastTransitionTime"))
        if result.admitted is None:
            result.unknown = self.unknown_value(phase, latest)
            if result.unknown:
                result.reason = (phase if phase not in KNOWN_PHASES else str(latest.get("type")))[:128]
        return result

    def set_minimums(self, objects: list[dict]) -> dict[str, int] | None:
        """`spec.minTaskMember` of the PodGroup among `objects` ({task (pod set) name: minimum})."""
        pg = self.gang_object(self.POD_GROUP, objects) or {}
        return dict((pg.get("spec") or {}).get("minTaskMember") or {})

    @staticmethod
    def unknown_value(phase: str, latest: dict | None) -> str:
        """The sentence for a phase or a True condition type gangweb does not know, "" when it knows both."""
        if phase not in KNOWN_PHASES:
            return f"Volcano reports phase {phase[:64]}, which gangweb does not know"
        kind = (latest or {}).get("type")
        if latest is not None and not (isinstance(kind, str) and kind in KNOWN_CONDITIONS):
            said = f" ({str(latest.get('reason'))[:128]})" if latest.get("reason") else ""
            return f"Volcano reports condition {str(kind)[:64]}{said}, which gangweb does not know"
        return ""
