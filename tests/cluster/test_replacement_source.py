"""After a gang is replaced under new names, the new attempt's entries come from the new gang object: the previous
generation's PodGroup, terminating under its protection finalizer while its pods go away (or not yet deleted), is
history and never an entry's source (reconcile/derive.py `current_gang_objects`). Real control plane, real plugin
chosen by discovery: v1alpha2 replaces on a minCount change, v1beta1 on a priority class change."""
from __future__ import annotations

import copy

import pytest

from scheduling.backends.k8s_workload_v1alpha2 import K8sWorkloadV1alpha2
from scheduling.choices import GangPhase as P
from scheduling.models import GangJob
from tests import builders

from .reconcile_support import reconciled_until, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]



def test_after_a_replacement_the_new_attempts_queued_entry_names_the_new_podgroup(world, priority_classes):
    priority_class = priority_classes(100)
    job = world.submit(backend="k8s-workload", replicas=2, containers=[builders.container(cpu="100m", memory="64Mi")])
    reconciled_until(world, job, P.RUNNING, 0)
    old = world.names(job).gang_name
    job.refresh_from_db()
    # The new gang cannot be placed (no node has 1000 CPUs), so its PodGroup says Unschedulable while the old one is
    # still terminating (its pods are going away, its protection finalizer holds it).
    spec = copy.deepcopy(job.resolved_spec)
    spec["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1000"
    changes = {"resolved_spec": spec}
    if job.backend_plugin == K8sWorkloadV1alpha2.name:  # every v1alpha2 field is immutable: minCount replaces
        spec["gang"]["minMember"] = 1
    else:  # v1beta1 patches minCount in place; a priority class is immutable
        changes["priority_class_name"] = priority_class
    GangJob.objects.filter(pk=job.pk).update(**changes)

    result = world.reconcile(job)
    assert result.error is None, result.message
    assert result.actions[0].startswith("replace gang: immutable drift")
    new = world.names(job).gang_name
    assert new != old
    job = reconciled_until(world, job, P.QUEUED, 1)
    # kube-scheduler writes the pods' PodScheduled=False before the PodGroup's own condition; until the PodGroup has
    # said Unschedulable, why-pending rightly names the pod that spoke. Wait (passes, as the resync runs them) for
    # a row whose one observation holds the PodGroup's word, then read every source from that same row.
    job = wait_for(lambda: world.reconcile(job).error is None and (
        fresh := GangJob.objects.get(pk=job.pk)).observed["gang"]["admitted"] is False and fresh,
        timeout=120, what="the new PodGroup's Unschedulable condition in the job's observation", interval=1)

    ns = world.namespace
    queued = job.transitions.get(phase=P.QUEUED, attempt=1)
    # The source is whichever object of the new generation said Unschedulable first (observe/phases.py names an
    # object only when it said something): the new PodGroup, or one of the new Job's pods when the PodGroup's
    # condition came later. Never the old generation.
    generation = new.rsplit("-", 1)[1]
    assert queued.reason == "Unschedulable"
    assert queued.source == f"PodGroup {ns}/{new}" or (
        queued.source.startswith(f"Pod {ns}/") and f"-{generation}-" in queued.source), queued.source
    assert not job.transitions.filter(attempt=1, source__contains=old).exists()
    assert job.observed["gang"]["source"] == f"PodGroup {ns}/{new}"
    assert job.why_pending["source"] == f"PodGroup {ns}/{new}"
