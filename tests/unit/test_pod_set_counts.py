"""Issue 30 item 11, counts per pod set: the issue's gang (head 1, cpu-workers 4 with minimum 1, gpu-workers 2 with
minimum 2; the gang's minimum 3) with head and the 4 CPU workers bound and no GPU worker is not Scheduled, whatever
the gang object says; its reason and why-pending say "gpu-workers 0 of 2 bound". Once both GPU workers bind, it
is Scheduled."""
from scheduling.backends.base import GangStatus
from scheduling.choices import GangPhase as P
from scheduling.constants import LABEL_POD_SET
from scheduling.observe import phases, why_pending
from scheduling.observe.evidence import Evidence, SetShape
from scheduling.observe.pods import owner_facts, pod_facts
from tests.kube_objects import T0, batch_job, pod, t, v1alpha2_podgroup

SHAPE = phases.JobShape(min_member=3, total=7, sets=(SetShape("cpu-workers", 4, 1), SetShape("gpu-workers", 2, 2)))
# kube-scheduler's v1beta1 PodGroup, admitted once minCount (3) pods were placed.
ADMITTED = GangStatus(admitted=True, reason="Scheduled", at=t(5), source="PodGroup default/j-pg",
                      scheduled_at_admission=True)


def labelled(name: str, pod_set: str, **kw) -> dict:
    out = pod(name=name, **kw)
    out["metadata"]["labels"] = {LABEL_POD_SET: pod_set}
    return out


def gang(gpu_bound: bool) -> list[dict]:
    pods = [labelled("head-0", "head", bound=4)]
    pods += [labelled(f"cpu-{i}", "cpu-workers", bound=4) for i in range(4)]
    pods += [labelled(f"gpu-{i}", "gpu-workers", bound=6) if gpu_bound else
             labelled(f"gpu-{i}", "gpu-workers", unschedulable="0/4 nodes are available: 4 Insufficient nvidia.com/gpu")
             for i in range(2)]
    return pods


def evidence(pods, status=ADMITTED) -> Evidence:
    return Evidence(SHAPE, status, [v1alpha2_podgroup()], [pod_facts(p) for p in pods], [owner_facts(batch_job())],
                    t(100))


def test_item11_a_gang_with_a_pod_set_below_its_minimum_is_not_scheduled_even_when_its_podgroup_says_so():
    ev = evidence(gang(gpu_bound=False))
    obs = phases.observe(ev, P.SUBMITTED, {P.SUBMITTED: T0})
    assert obs.phase == P.QUEUED and obs.bound == 5
    assert "gpu-workers 0 of 2 bound" in obs.message
    assert ev.set_counts == [{"name": "cpu-workers", "replicas": 4, "minimum": 1, "bound": 4},
                             {"name": "gpu-workers", "replicas": 2, "minimum": 2, "bound": 0}]
    why = why_pending.explain(obs.phase, ev)
    assert why is not None
    assert why["pods"]["sets"][1] == {"name": "gpu-workers", "replicas": 2, "minimum": 2, "bound": 0}
    assert "gpu-workers 0 of 2 bound" in why["summary"]


def test_item11_the_gang_is_scheduled_once_every_pod_set_meets_its_minimum():
    ev = evidence(gang(gpu_bound=True))
    obs = phases.observe(ev, P.SUBMITTED, {P.SUBMITTED: T0})
    assert obs.phase == P.SCHEDULED and obs.bound == 7
    assert ev.short_sets == [] and why_pending.explain(obs.phase, ev) is None


def test_a_pod_set_without_a_stated_minimum_is_held_to_the_gangs_count_only():
    # An elastic gang (minMember 3 of 7, no pod set states a minimum) is Scheduled with any 3 pods bound, as before.
    shape = phases.JobShape(min_member=3, total=7)
    pods = [labelled(f"w-{i}", "workers", bound=4) for i in range(3)]
    pods += [labelled(f"w-{i}", "workers", unschedulable="no room") for i in range(3, 7)]
    ev = Evidence(shape, GangStatus(source="PodGroup default/j-pg"), [v1alpha2_podgroup()],
                  [pod_facts(p) for p in pods], [owner_facts(batch_job())], t(100))
    assert phases.observe(ev, P.SUBMITTED, {P.SUBMITTED: T0}).phase == P.SCHEDULED


def test_item11_an_optional_pod_set_left_unplaced_does_not_hold_running_back():
    # workers 2 (minimum 2) running; eval 2 (minimum 0) found no node: the job runs. Once an eval pod is bound, it
    # must start before the job reads Running again from a fresh observation.
    shape = phases.JobShape(min_member=2, total=4, sets=(SetShape("workers", 2, 2), SetShape("eval", 2, 0)))
    workers = [labelled(f"w-{i}", "workers", bound=4, started=6) for i in range(2)]
    unplaced = [labelled(f"e-{i}", "eval", unschedulable="no room") for i in range(2)]
    ev = Evidence(shape, GangStatus(source="PodGroup default/j-pg"), [v1alpha2_podgroup()],
                  [pod_facts(p) for p in workers + unplaced], [owner_facts(batch_job())], t(100))
    assert phases.observe(ev, P.SUBMITTED, {P.SUBMITTED: T0}).phase == P.RUNNING
    bound_not_started = [labelled("e-0", "eval", bound=7), labelled("e-1", "eval", unschedulable="no room")]
    ev = Evidence(shape, GangStatus(source="PodGroup default/j-pg"), [v1alpha2_podgroup()],
                  [pod_facts(p) for p in workers + bound_not_started], [owner_facts(batch_job())], t(100))
    assert phases.observe(ev, P.SUBMITTED, {P.SUBMITTED: T0}).phase == P.SCHEDULED
