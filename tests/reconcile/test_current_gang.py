"""The status reader takes the job's current generation's, non-terminating gang object: after a replacement, the old
generation's PodGroup (terminating under its finalizer, or not yet deleted) is history and never the source of an
entry. Real plugin (`K8sWorkloadV1alpha2.read_status`), real names (reconcile/names.py)."""
import pytest

from scheduling.backends.k8s_workload_v1alpha2 import K8sWorkloadV1alpha2
from scheduling.choices import GangPhase as P
from scheduling.models import GangJob, PhaseTransition
from scheduling.reconcile import names, status
from tests import builders
from tests.kube_objects import T0, at, batch_job, pod, v1alpha2_podgroup

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(setup):
    template, queue, cluster = setup
    spec = builders.template_spec(pod_sets=[builders.pod_set(replicas=3)])
    job = GangJob.objects.create(name="gang3", template_version=template, queue=queue, cluster=cluster,
                                 resolved_spec=spec, backend_plugin=K8sWorkloadV1alpha2.name, gang_generation=1)
    PhaseTransition.objects.create(job=job, phase=P.SUBMITTED, at=T0, source="gangweb", reason="Submitted")
    return job


def old_and_new(job, old_terminating: bool):
    """The previous generation's PodGroup (it said Unschedulable at t=3) listed before the current one (t=20)."""
    old_name = names.gang_name(job.name, job.uid, 0)
    old = v1alpha2_podgroup(name=old_name, created=1, scheduled=("False", "Unschedulable", "old attempt", 3))
    if old_terminating:
        old["metadata"]["deletionTimestamp"] = at(15)
        old["metadata"]["finalizers"] = ["scheduling.k8s.io/podgroup-protection"]
    new = v1alpha2_podgroup(name=status.current_gang_name(job), created=16,
                            scheduled=("False", "Unschedulable", "0/2 nodes fit the new gang", 20))
    return old, new


@pytest.mark.parametrize("old_terminating", [True, False], ids=["old-terminating", "old-not-yet-deleted"])
def test_the_queued_entry_names_the_current_podgroup_never_the_old_one(job, old_terminating):
    old, new = old_and_new(job, old_terminating)
    pods = [pod(name=f"p-{i}", created=17, unschedulable="0/2 nodes are available") for i in range(3)]
    status.apply_observation(job, K8sWorkloadV1alpha2(), [old, new], pods, [batch_job(created=16)])
    queued = job.transitions.get(phase=P.QUEUED)
    assert queued.source == f"PodGroup default/{new['metadata']['name']}"
    job.refresh_from_db()
    assert job.phase_message.startswith("0/2 nodes fit the new gang")


def test_only_the_old_generation_says_nothing(job):
    old, _ = old_and_new(job, old_terminating=True)
    assert status.read_gang_status(K8sWorkloadV1alpha2(), status.current_gang_objects(job, [old])).source == ""
    assert K8sWorkloadV1alpha2().read_status([old]).reason == "Unschedulable"  # what it would have said
