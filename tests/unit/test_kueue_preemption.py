"""A job preempted by Kueue: its timeline names the preempting job (gangweb's, when the preemptor's Workload UID is
one gangweb recorded) and the reason in plain words, at the time of the Workload's Evicted condition."""
import pytest
from django.core.cache import cache

from scheduling.backends.base import GangStatus
from scheduling.choices import GangPhase as P
from scheduling.models import GangJob
from scheduling.observe import kueue_preemption, phases
from scheduling.observe.evidence import Evidence
from scheduling.observe.pods import pod_facts
from scheduling.reconcile import kueue_preemptors
from tests.builders import make_cluster, make_job, make_queue, make_template, pod_set, template_spec
from tests.kube_objects import T0, pod, t

WL_UID = "5b8e0c3a-6f7d-4a2e-9a51-0f4c2d9e7b11"
MESSAGE = (f"Preempted to accommodate a workload (UID: {WL_UID}, JobUID: UNKNOWN) due to reclamation within the "
           "cohort; preemptor path: /research/team-b; preemptee path: /research/team-a")


def test_kueues_message_reads_the_preemptor_uid_the_reason_and_the_paths():
    assert kueue_preemption.parse(MESSAGE) == {
        "workload_uid": WL_UID, "job_uid": "", "reason": "InCohortReclamation",
        "preemptor_path": "/research/team-b", "preemptee_path": "/research/team-a"}


@pytest.mark.parametrize("words,reason", [
    ("prioritization in the ClusterQueue", "InClusterQueue"),
    ("Fair Sharing within the cohort", "InCohortFairSharing"),
    ("reclamation within the cohort while borrowing", "InCohortReclaimWhileBorrowing"),
])
def test_each_of_kueues_reasons(words, reason):
    message = MESSAGE.replace("reclamation within the cohort", words)
    assert kueue_preemption.parse(message)["reason"] == reason


def test_the_words_name_gangwebs_job_or_say_the_workload_is_not_gangwebs():
    parsed = kueue_preemption.parse(MESSAGE)
    assert kueue_preemption.words(parsed, {"id": 42, "name": "train-b", "namespace": "team-b", "queue": "team-b"}) == (
        f"preempted by Kueue for job team-b/train-b (#42, queue team-b, Workload UID {WL_UID}): this job's queue "
        "was borrowing, and the preemptor's queue took back its own quota (Kueue: InCohortReclamation; preemptor "
        "/research/team-b, preempted /research/team-a)")
    assert kueue_preemption.words(parsed, None).startswith(
        f"preempted by Kueue for a workload gangweb did not create, UID {WL_UID}: this job's queue was borrowing")


def test_another_wording_is_not_read():
    assert kueue_preemption.parse("Preempted by someone") is None
    gang = GangStatus(disruption_reason="Preempted", disruption_message="Preempted by someone")
    assert kueue_preemptors.named(gang, 1) is gang


RAN = {P.SUBMITTED: T0, P.DISPATCHED: t(1), P.QUEUED: t(2), P.SCHEDULED: t(5), P.RUNNING: t(6)}


def test_an_evicted_workload_starts_a_new_attempt_at_the_evicted_time_naming_the_preemptor():
    # gangweb suspended the Jobs: the pods terminate without a DisruptionTarget condition; only the Workload says why.
    words = kueue_preemption.words(kueue_preemption.parse(MESSAGE), None)
    gang = GangStatus(admitted=False, reason="Pending", source="Workload team-a/train-a-1a2b", at=t(40),
                      disruption_reason="Preempted", disruption_message=words, disrupted_at=t(40))
    pods = [pod_facts(pod(name=f"p-{i}", bound=5, started=6, terminating=True)) for i in range(4)]
    ev = Evidence(phases.JobShape(min_member=4, total=4), gang, [], pods, [], t(100))
    obs = phases.observe(ev, P.RUNNING, dict(RAN))
    [entry] = obs.entries
    assert (entry.phase, entry.attempt, entry.at, entry.reason, entry.source) == (
        P.QUEUED, 1, t(40), "Preempted", "Workload team-a/train-a-1a2b")
    assert entry.message == f"gang disrupted: 0 of 4 bound; Workload team-a/train-a-1a2b: {words}"
    assert (obs.phase, obs.reason) == (P.QUEUED, "Preempted")


@pytest.fixture
def kueue_jobs(db, admin_user):
    cache.clear()
    cluster = make_cluster()
    template = make_template(**template_spec(pod_sets=[pod_set(replicas=1)]))
    queue = make_queue("team-b", clusters=[cluster])
    job = make_job(template, queue, cluster, name="train-b", user=admin_user)
    GangJob.objects.filter(pk=job.pk).update(observed={"objects": [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
         "metadata": {"name": "train-b-9f8e", "namespace": "default", "uid": WL_UID}}]})
    return cluster, job


def test_the_preemptor_is_gangwebs_job_when_it_recorded_that_workload_uid(kueue_jobs):
    cluster, job = kueue_jobs
    gang = kueue_preemptors.named(GangStatus(disruption_reason="Preempted", disruption_message=MESSAGE), cluster.id)
    assert gang.disruption_message.startswith(
        f"preempted by Kueue for job default/train-b (#{job.id}, queue team-b, Workload UID {WL_UID}): this job's "
        "queue was borrowing")


def test_a_uid_in_another_field_or_cluster_is_not_a_recorded_workload(kueue_jobs):
    cluster, job = kueue_jobs
    GangJob.objects.filter(pk=job.pk).update(observed={"objects": [
        {"kind": "Job", "metadata": {"name": "x", "uid": WL_UID}}]})
    assert kueue_preemptors.preemptor(cluster.id, WL_UID) is None
    cache.clear()
    assert kueue_preemptors.preemptor(make_cluster().id, WL_UID) is None
