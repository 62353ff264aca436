"""scheduler-plugins coscheduling, PodGroup `scheduling.x-k8s.io/v1alpha1`.

One PodGroup per job with minMember, minResources (the whole gang's requests, kube/resources.py) and
scheduleTimeoutSeconds (template `gang.scheduleTimeoutSeconds`, default 60). Pods carry the label
`scheduling.x-k8s.io/pod-group` and `schedulerName: scheduler-plugins-scheduler`. All three fields are updated in
place. Status: `phase` (Pending, Scheduling, Running, Finished, Failed, Unknown) and pod counters.

Source: scheduler-plugins `apis/scheduling/v1alpha1/types.go` (docs/upstream.md, scheduler-plugins PodGroup).

Root object (`root_ref`, ownerReferences): the job's one PodGroup; the Indexed Jobs and the Service name it.
"""
from __future__ import annotations

from ..kube.refs import ObjectRef
from .base import GangSpec, GangStatus, PodSetSpec, SchedulerBackend, object_source, parse_time

POD_GROUP = ObjectRef("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups")
COSCHEDULING_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"  # the pods' label naming their PodGroup
COSCHEDULING_SCHEDULER_NAME = "scheduler-plugins-scheduler"  # the default; often a profile of another scheduler
ADMITTED_PHASES = {"Running", "Finished"}


class CoschedulingV1alpha1(SchedulerBackend):
    """scheduler-plugins PodGroup v1alpha1."""

    family = "coscheduling"
    name = "coscheduling-v1alpha1"
    api_version = POD_GROUP.api_version
    POD_GROUP = POD_GROUP
    scheduler_name = COSCHEDULING_SCHEDULER_NAME
    # scheduler-plugins runs kube-scheduler as a second scheduler; its chart names its lease after the scheduler
    scheduler_leases = (("", COSCHEDULING_SCHEDULER_NAME),)
    gang_refs = ("POD_GROUP",)
    mutable_fields = ("minMember", "minResources", "scheduleTimeoutSeconds")
    # One PodGroup, one minMember for all its pods: no per-pod-set minimum (refused at write and submit).
    set_minimum_refusal = "its gang is one PodGroup with one minMember for all its pods"

    def build_gang_objects(self, spec: GangSpec) -> list[dict]:
        """One PodGroup named `spec.gang_name`."""
        body = {"minMember": spec.min_member, "scheduleTimeoutSeconds": spec.schedule_timeout_seconds}
        if spec.min_resources:
            body["minResources"] = dict(spec.min_resources)
        return [self.new_gang_object(self.POD_GROUP, spec, body)]

    def stamp_pod_template(self, template: dict, spec: GangSpec, pod_set: PodSetSpec) -> dict:
        """schedulerName and the label `scheduling.x-k8s.io/pod-group`."""
        out = super().stamp_pod_template(template, spec, pod_set)
        out.setdefault("metadata", {}).setdefault("labels", {})[COSCHEDULING_POD_GROUP_LABEL] = spec.gang_name
        return out

    def read_status(self, objects: list[dict]) -> GangStatus:
        """`status.phase`: Running/Finished admitted, Failed not, others undecided; counters in the message."""
        pg = self.gang_object(self.POD_GROUP, objects)
        if pg is None:
            return GangStatus()
        status = pg.get("status") or {}
        phase = status.get("phase") or ""
        admitted = True if phase in ADMITTED_PHASES else (False if phase == "Failed" else None)
        counts = ", ".join(f"{k} {status.get(k, 0)}" for k in ("running", "succeeded", "failed"))
        return GangStatus(admitted=admitted, reason=phase, message=counts if phase else "",
                          at=parse_time(status.get("scheduleStartTime")), source=object_source(pg))
