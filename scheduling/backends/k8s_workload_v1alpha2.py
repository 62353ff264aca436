"""Kubernetes workload-aware scheduling, `scheduling.k8s.io/v1alpha2` (Kubernetes 1.36, KEP-4671 / KEP-5832).

Per job: one Workload with a single pod-group template ("gang", policy `gang.minCount`) and one PodGroup made
from it (`spec.podGroupTemplateRef.workload`, the same policy copied in). Pods carry
`spec.schedulingGroup.podGroupName` and keep the default scheduler. Creation order is Workload -> PodGroup ->
pods. Both specs are immutable in 1.36, so any drift means replacing both under a new name (the job's
`gang_generation` grows). A PodGroup may carry the `scheduling.k8s.io/podgroup-protection` finalizer while pods
still reference it; gangweb releases it on its own PodGroups once none of the job's pods is alive.

Source: docs/upstream.md, Kubernetes Workload and PodGroup (`k8s.io/api` `scheduling/v1alpha2/types.go`, website
podgroup-api/lifecycle.md). Fields behind gates the local cluster does not enable (schedulingConstraints,
priorityClassName, disruptionMode) are not set: the API server would drop them silently.

Root object (`root_ref`, ownerReferences): the Workload. It is created first and outlives the PodGroup (the
PodGroup is made from its template), so the PodGroup, the Indexed Jobs and the Service name it as their owner.
"""
from __future__ import annotations

from ..kube.refs import ObjectRef
from .base import GangSpec, GangStatus, PodSetSpec, SchedulerBackend, object_source, parse_time

WORKLOAD = ObjectRef("scheduling.k8s.io/v1alpha2", "Workload", "workloads")
POD_GROUP = ObjectRef("scheduling.k8s.io/v1alpha2", "PodGroup", "podgroups")
TEMPLATE_NAME = "gang"
# Added by admission while pods reference the PodGroup (lifecycle.md); gangweb releases it on its own terminating
# v1alpha2 PodGroups once none of the group's pods is alive.
K8S_PODGROUP_PROTECTION_FINALIZER = "scheduling.k8s.io/podgroup-protection"
SCHEDULED = "PodGroupScheduled"
DISRUPTION_TARGET = "DisruptionTarget"


class K8sWorkloadV1alpha2(SchedulerBackend):
    """Workload + PodGroup v1alpha2 with kube-scheduler's GangScheduling plugin; immutable, replaced on change.

    The refs, the template name and the condition types are class attributes, so a later API version
    (`k8s_workload_v1beta1`) subclasses this one and overrides only what changed.
    """

    family = "k8s-workload"
    name = "k8s-workload-v1alpha2"
    api_version = "scheduling.k8s.io/v1alpha2"
    scheduler_name = ""
    # kube-scheduler's --leader-elect-resource-namespace / --leader-elect-resource-name defaults
    scheduler_leases = (("kube-system", "kube-scheduler"),)
    WORKLOAD = WORKLOAD
    POD_GROUP = POD_GROUP
    TEMPLATE_NAME = TEMPLATE_NAME
    SCHEDULED = SCHEDULED  # the PodGroup condition kube-scheduler writes when it admits (or cannot admit) the gang
    DISRUPTION_TARGET = DISRUPTION_TARGET
    gang_refs = ("WORKLOAD", "POD_GROUP")
    pod_spec_keys = ("schedulingGroup",)
    immutable_spec = True
    releasable_finalizers = (K8S_PODGROUP_PROTECTION_FINALIZER,)
    # One pod-group template with one `gang.minCount` (v1alpha2 and v1beta1): no per-pod-set minimum. Kubernetes'
    # CompositePodGroup (a group of PodGroups) arrives as beta in 1.38 (k8s.io/api v0.38 scheduling/v1beta1); until
    # gangweb runs on a plane serving it, a pod set's minimum below its replicas is refused
    # (services/templates/specs.py).
    set_minimum_refusal = ("its gang is one PodGroup with one minCount for all its pods; Kubernetes' "
                           "CompositePodGroup, which can hold each pod set to its own minimum, arrives in 1.38")

    @staticmethod
    def policy(spec: GangSpec) -> dict:
        """The gang policy: all-or-nothing for `min_member` pods."""
        return {"gang": {"minCount": spec.min_member}}

    def template_fields(self, spec: GangSpec) -> dict:
        """Optional fields the pod-group template and the PodGroup both carry. None in v1alpha2: the gates that
        serve them (WorkloadAwarePreemption, TopologyAwareWorkloadScheduling) are off on the 1.36 clusters gangweb
        is tested on, and the API server would drop them silently."""
        return {}

    def pod_group_ref(self, spec: GangSpec) -> dict:
        """`spec.podGroupTemplateRef` of the PodGroup: the Workload and template it was made from."""
        return {"podGroupTemplateRef": {"workload": {"workloadName": spec.gang_name,
                                                     "podGroupTemplateName": self.TEMPLATE_NAME}}}

    def build_gang_objects(self, spec: GangSpec) -> list[dict]:
        """[Workload, PodGroup], both named `spec.gang_name`, in creation order."""
        extra = self.template_fields(spec)
        workload = self.new_gang_object(self.WORKLOAD, spec, {
            "podGroupTemplates": [{"name": self.TEMPLATE_NAME, "schedulingPolicy": self.policy(spec), **extra}]})
        pod_group = self.new_gang_object(self.POD_GROUP, spec, {
            **self.pod_group_ref(spec), "schedulingPolicy": self.policy(spec), **extra})
        return [workload, pod_group]

    def stamp_pod_template(self, template: dict, spec: GangSpec, pod_set: PodSetSpec) -> dict:
        """`spec.schedulingGroup.podGroupName`; the default scheduler (GangScheduling plugin) handles the rest."""
        out = super().stamp_pod_template(template, spec, pod_set)
        out.setdefault("spec", {})["schedulingGroup"] = {"podGroupName": spec.gang_name}
        return out

    def pod_in_group(self, pod: dict, gang_name: str) -> bool:
        """A pod names its PodGroup in `spec.schedulingGroup.podGroupName`."""
        return ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") == gang_name

    def read_status(self, objects: list[dict]) -> GangStatus:
        """PodGroup conditions written by kube-scheduler: `SCHEDULED` True/Scheduled (admitted),
        False/Unschedulable or SchedulerError (not admitted); DisruptionTarget True (PreemptionByScheduler)
        takes precedence in reason and message, and sets `disruption_reason` / `disruption_message`."""
        pg = self.gang_object(self.POD_GROUP, objects)
        if pg is None:
            return GangStatus()
        conditions = (pg.get("status") or {}).get("conditions") or []
        by_type = {c.get("type"): c for c in conditions}
        result = GangStatus(source=object_source(pg), conditions=conditions)
        scheduled = by_type.get(self.SCHEDULED)
        if scheduled is not None:
            result.admitted = {"True": True, "False": False}.get(scheduled.get("status"))
            result.reason = scheduled.get("reason", "")
            result.message = scheduled.get("message", "")
            result.at = parse_time(scheduled.get("lastTransitionTime"))
        disrupted = by_type.get(self.DISRUPTION_TARGET)
        if disrupted is not None and disrupted.get("status") == "True":
            result.reason = disrupted.get("reason") or self.DISRUPTION_TARGET
            result.message = disrupted.get("message", "")
            result.disruption_reason, result.disruption_message = result.reason, result.message
            result.at = parse_time(disrupted.get("lastTransitionTime"))
        return result
