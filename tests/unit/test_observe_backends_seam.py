"""The seam with the backends: each backend's own `read_status` of a gang object feeds the phase and why-pending
logic (the table of the issue: KAI OverLimit with its numbers, a cleared KAI condition, v1alpha2 Unschedulable)."""
import pytest

kai_v2alpha2 = pytest.importorskip("scheduling.backends.kai_v2alpha2")  # the backends land separately
k8s_workload = pytest.importorskip("scheduling.backends.k8s_workload_v1alpha2")
coscheduling = pytest.importorskip("scheduling.backends.coscheduling_v1alpha1")
volcano = pytest.importorskip("scheduling.backends.volcano_v1beta1")

from scheduling.choices import GangPhase as P  # noqa: E402
from scheduling.observe import phases, why_pending  # noqa: E402
from scheduling.observe.evidence import Evidence  # noqa: E402
from scheduling.observe.pods import pod_facts  # noqa: E402
from tests.kube_objects import T0, kai_over_limit, kai_podgroup, pod, t, v1alpha2_podgroup  # noqa: E402

GANG3 = phases.JobShape(min_member=3, total=3)


def podgroup(api_version: str, status: dict) -> dict:
    """A scheduler-plugins or Volcano PodGroup with the given status."""
    return {"apiVersion": api_version, "kind": "PodGroup", "status": status,
            "metadata": {"name": "j-pg", "namespace": "default", "creationTimestamp": "2026-11-29T14:00:01Z"}}


VOLCANO_NOT_ENOUGH = podgroup("scheduling.volcano.sh/v1beta1", {"phase": "Inqueue", "conditions": [
    {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
     "message": "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable",
     "lastTransitionTime": "2026-11-29T14:00:03Z"}]})
COSCHEDULING_PENDING = podgroup("scheduling.x-k8s.io/v1alpha1", {"phase": "Pending"})


def pods(**kw):
    return [pod_facts(pod(name=f"p-{i}", **kw)) for i in range(3)]


@pytest.mark.parametrize("backend,gang_object,pod_kw,reason,numbers", [
    (kai_v2alpha2.KaiV2alpha2, kai_podgroup(reasons=[kai_over_limit(limit="8", allocated="6", requested="4")]), {},
     "OverLimit", {"limit": 8, "allocated": 6, "job": 4}),
    (kai_v2alpha2.KaiV2alpha2, kai_podgroup(reasons=None), {"bound": 5}, None, None),
    (k8s_workload.K8sWorkloadV1alpha2,
     v1alpha2_podgroup(scheduled=("False", "Unschedulable", "0/4 nodes are available", 3)),
     {"unschedulable": "0/4 nodes are available"}, "Unschedulable", None),
    (volcano.VolcanoV1beta1, VOLCANO_NOT_ENOUGH, {}, "NotEnoughResources", None),
    # Coscheduling's Pending phase says nothing either way: the pods' own PodScheduled=False messages speak.
    (coscheduling.CoschedulingV1alpha1, COSCHEDULING_PENDING,
     {"unschedulable": "rejected by Coscheduling: 3 of 3 pods pending"}, "Unschedulable", None),
])
def test_what_each_backend_reads_becomes_why_pending(backend, gang_object, pod_kw, reason, numbers):
    gang = backend().read_status([gang_object])
    facts = pods(**pod_kw)
    evidence = Evidence(GANG3, gang, [gang_object], facts, [], t(100))
    obs = phases.observe(evidence, P.SUBMITTED, {P.SUBMITTED: T0})
    why = why_pending.explain(obs.phase, evidence)
    if reason is None:
        assert why is None
        assert obs.phase == P.SCHEDULED
        return
    assert obs.phase == P.QUEUED
    assert (why["reason"], why["pods"]["bound"], why["pods"]["required"]) == (reason, 0, 3)
    if numbers:
        gpu = why["queue"]["resources"]["nvidia.com/gpu"]
        assert (gpu["limit"], gpu["allocated"], why["job_requests"]["nvidia.com/gpu"]) == (
            numbers["limit"], numbers["allocated"], numbers["job"])

