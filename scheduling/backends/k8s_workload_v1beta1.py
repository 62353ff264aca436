"""Kubernetes workload-aware scheduling, `scheduling.k8s.io/v1beta1` (Kubernetes 1.37; gate GenericWorkload).

The same shape as v1alpha2 (`k8s_workload_v1alpha2`): per job one Workload with a single pod-group template
("gang") and one PodGroup made from it; pods carry `spec.schedulingGroup.podGroupName` and keep the default
scheduler; creation order Workload -> PodGroup -> pods. What 1.37 changed, and what this plugin does about it
(checked against `k8s.io/api@v0.37.2` `scheduling/v1beta1/types.go`; docs/upstream.md, Kubernetes Workload):

- the PodGroup links its template through `spec.workloadRef{workloadName, templateName}` (immutable);
- `schedulingPolicy.gang.minCount` is **mutable** on the PodGroup and on the Workload's template (PR #139279):
  a minCount drift is patched in place, names and UIDs unchanged. Every other field stays immutable
  (`workloadRef`, `disruptionMode`, `priorityClassName`/`priority`, `preemptionPolicy`, `schedulingConstraints`,
  the basic/gang choice, the template list): drift there replaces the gang under new names, as v1alpha2 does,
  never a patch the server refuses;
- `priorityClassName` (the job's priority class) and `disruptionMode` (`gang.disruptionMode` of the template:
  "single" or "all", a union `{single: {}} | {all: {}}`) are served under GenericWorkload alone and set when
  asked for. `preemptionPolicy` (gate PodGroupPreemptionPolicy) and `schedulingConstraints` (gate
  TopologyAwareWorkloadScheduling) are alpha and off, so they are not set. The Priority admission plugin fills
  the PodGroup's `priority` from the class, and validation caps it at 1000000000 (`max_gang_priority`): a
  `system-*` class (2000000000 and up) is refused at submit (services/templates.check_gang_priority_class);
- status: `PodGroupInitiallyScheduled` (renamed from PodGroupScheduled) is terminal once True and never reverts
  (PR #139743), so its lastTransitionTime is when the gang was admitted, and a gang that later lost members is
  judged from its live pods (observe/phases.py re-queues it); `DisruptionTarget`/`PreemptionByScheduler` as before;
- the `scheduling.k8s.io/podgroup-protection` finalizer is added by admission and removed by
  kube-controller-manager's PodGroupProtectionController once every pod of the group is Succeeded or Failed
  (PR #137641). gangweb never strips it: doing so while a pod can still run races that controller and leaves the
  PodGroup Terminating (the upstream review of KubeRay's plugin, PR #4962).

Root object (`root_ref`, ownerReferences): the Workload, as in v1alpha2. Deleting it by hand lets the garbage
collector delete the PodGroup (which then waits on its protection finalizer until the pods are gone), the Indexed
Jobs and their pods, and the Service.
"""
from __future__ import annotations

import copy

from .base import Drift, GangSpec, GangStatus, ObjectRef, is_subset
from .k8s_workload_v1alpha2 import K8sWorkloadV1alpha2

# `gang.disruptionMode` of a template -> the v1beta1 union member.
DISRUPTION_MODES = {"single": {"single": {}}, "all": {"all": {}}}
MIN_COUNT_PATH = "schedulingPolicy.gang.minCount"


class K8sWorkloadV1beta1(K8sWorkloadV1alpha2):
    """Workload + PodGroup v1beta1: minCount patched in place, any other drift replaces the gang."""

    name = "k8s-workload-v1beta1"
    api_version = "scheduling.k8s.io/v1beta1"
    WORKLOAD = ObjectRef("scheduling.k8s.io/v1beta1", "Workload", "workloads")
    POD_GROUP = ObjectRef("scheduling.k8s.io/v1beta1", "PodGroup", "podgroups")
    SCHEDULED = "PodGroupInitiallyScheduled"
    gang_kinds = (WORKLOAD, POD_GROUP)
    immutable_spec = False
    releasable_finalizers = ()  # left to the PodGroupProtectionController (module docstring)
    # PodGroupSpec.priority `+k8s:maximum=1000000000` (HighestUserDefinablePriority, k8s.io/api@v0.37.2
    # scheduling/v1beta1/types.go), filled by the Priority admission plugin from priorityClassName.
    max_gang_priority = 1_000_000_000

    def template_fields(self, spec: GangSpec) -> dict:
        """`priorityClassName` and `disruptionMode` when the job asks for them (both immutable once created)."""
        out = {}
        if spec.priority_class_name:
            out["priorityClassName"] = spec.priority_class_name
        if spec.disruption_mode:
            out["disruptionMode"] = copy.deepcopy(DISRUPTION_MODES[spec.disruption_mode])
        return out

    def pod_group_ref(self, spec: GangSpec) -> dict:
        """`spec.workloadRef{workloadName, templateName}` of the PodGroup."""
        return {"workloadRef": {"workloadName": spec.gang_name, "templateName": self.TEMPLATE_NAME}}

    def read_status(self, objects: list[dict]) -> GangStatus:
        """As v1alpha2, from `PodGroupInitiallyScheduled`; `scheduled_at_admission`: its True time is the Scheduled
        time (the condition is written once, when the gang is placed)."""
        result = super().read_status(objects)
        result.scheduled_at_admission = bool(result.source)  # no PodGroup: nothing said
        return result

    # ---- drift ------------------------------------------------------------------------------------------------
    def diff(self, desired: dict, observed: dict) -> Drift:
        """Compare the spec fields `desired` sets with `observed` (server defaults such as `priority` or the
        PodGroup's `disruptionMode: {single: {}}` are ignored). When the only difference is a gang's `minCount`
        (PodGroup `spec.schedulingPolicy.gang.minCount`, or the Workload template's), the drift is a merge patch
        of that number alone; anything else is a replace. The Workload patch carries the observed template list
        with only minCount changed (a merge patch replaces a list whole; server-filled fields must stay)."""
        want, have = desired.get("spec") or {}, observed.get("spec") or {}
        changed = sorted(k for k in want if not _same(k, want[k], have.get(k)))
        if not changed:
            return Drift()
        if desired.get("kind") == self.POD_GROUP.kind and changed == ["schedulingPolicy"]:
            count = _min_count_only(want["schedulingPolicy"], have.get("schedulingPolicy"))
            if count is not None:
                return Drift(fields=[MIN_COUNT_PATH],
                             patch={"spec": {"schedulingPolicy": {"gang": {"minCount": count}}}})
        if desired.get("kind") == self.WORKLOAD.kind and changed == ["podGroupTemplates"]:
            templates = _templates_with_min_counts(want["podGroupTemplates"], have.get("podGroupTemplates"))
            if templates is not None:
                return Drift(fields=[f"podGroupTemplates[{t['name']}].{MIN_COUNT_PATH}"
                                     for t in want["podGroupTemplates"]],
                             patch={"spec": {"podGroupTemplates": templates}})
        return Drift(fields=changed, replace=True)


# Unions (exactly one member set): an observed member gangweb did not set is drift, not a server default.
UNION_FIELDS = ("schedulingPolicy", "disruptionMode")


def _same(key: str, want, have) -> bool:
    """True when the observed value `have` of spec field `key` holds what `want` sets (server defaults ignored,
    except in unions, whose member must be the same one)."""
    if key in UNION_FIELDS and isinstance(want, dict) and (not isinstance(have, dict) or set(want) != set(have)):
        return False
    if key == "podGroupTemplates" and isinstance(want, list) and isinstance(have, list) and len(want) == len(have):
        return all(isinstance(h, dict) and all(_same(k, v, h.get(k)) for k, v in w.items())
                   for w, h in zip(want, have, strict=True))
    return is_subset(want, have)


def _min_count_only(want: dict, have) -> int | None:
    """The desired minCount when `want` and `have` (schedulingPolicy dicts) differ only in `gang.minCount`."""
    if not (isinstance(have, dict) and isinstance(want.get("gang"), dict) and isinstance(have.get("gang"), dict)):
        return None
    if set(want) != set(have):  # basic <-> gang cannot be switched
        return None
    count = want["gang"].get("minCount")
    if not isinstance(count, int) or count < 1:
        return None
    aligned = {**want, "gang": {**want["gang"], "minCount": have["gang"].get("minCount")}}
    return count if is_subset(aligned, have) else None


def _templates_with_min_counts(want: list, have) -> list | None:
    """The observed template list with each desired template's minCount put back, when that is the only
    difference (same templates, same names, same order); else None."""
    if not isinstance(have, list) or len(have) != len(want):
        return None
    out = []
    for w, h in zip(want, have, strict=True):
        if not isinstance(h, dict) or w.get("name") != h.get("name"):
            return None
        if not all(_same(k, v, h.get(k)) for k, v in w.items() if k != "schedulingPolicy"):
            return None
        if _same("schedulingPolicy", w["schedulingPolicy"], h.get("schedulingPolicy")):
            out.append(copy.deepcopy(h))
            continue
        count = _min_count_only(w["schedulingPolicy"], h.get("schedulingPolicy"))
        if count is None:
            return None
        fixed = copy.deepcopy(h)
        fixed["schedulingPolicy"]["gang"]["minCount"] = count
        out.append(fixed)
    return out
