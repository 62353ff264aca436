"""The timeline says only what the cluster said: a wait is a wait, a silent object is never a source, a gated pod is
not Scheduled, and a time gangweb could only infer is marked inferred (issue 19, part 3)."""
import copy

import pytest

from scheduling.backends.base import GangStatus
from scheduling.choices import GangPhase as P
from scheduling.observe import phases
from scheduling.observe.evidence import Evidence
from scheduling.observe.pods import owner_facts, pod_facts
from tests.kube_objects import T0, at, batch_job, pod, t, v1alpha2_podgroup

GANG3 = phases.JobShape(min_member=3, total=3)
SILENT = GangStatus(source="PodGroup default/j-pg")  # a coscheduling PodGroup whose status is null


def run(gang, pods, recorded=None, current=P.SUBMITTED, shape=GANG3):
    evidence = Evidence(shape, gang, [v1alpha2_podgroup()], [pod_facts(p) for p in pods], [owner_facts(batch_job())],
                        t(100))
    return phases.observe(evidence, current, dict(recorded or {P.SUBMITTED: T0}))


def entry(obs, phase):
    return next(e for e in obs.entries if e.phase == phase)


@pytest.mark.parametrize(("binds", "reason", "message", "source"), [
    ((2, 3, 4), "PlacedWithoutWait", "placed as soon as it was queued (3 of 3 bound)", "Pod default/p-0"),
    ((40, 73, 4), "PlacedAfterWait", "placed after waiting 71 s unbound (3 of 3 bound)", "Pod default/p-1"),
    ((5, 5, 5), "PlacedAfterWait", "placed after waiting 3 s unbound (3 of 3 bound)", "Pod default/p-0"),
], ids=["bound-within-2s", "waited-38-and-71s", "just-over-the-bound"])
def test_a_gang_first_seen_placed_is_said_not_to_have_waited_only_when_its_pods_did_not(binds, reason, message,
                                                                                       source):
    """Pods created at t(2); the issue's case: two of them waited 38 s and 71 s unbound."""
    pods = [pod(name=f"p-{i}", bound=b) for i, b in enumerate(binds)]
    queued = entry(run(SILENT, pods), P.QUEUED)
    assert (queued.reason, queued.message, queued.source) == (reason, message, source)
    assert queued.at == t(2) and not queued.inferred


def test_a_gang_first_seen_placed_without_a_bind_time_is_not_said_to_have_waited_or_not():
    pods = [pod(name=f"p-{i}", bound=3) for i in range(3)]
    for p in pods:
        p["status"]["conditions"] = []  # bound (nodeName) but the cluster kept no PodScheduled condition
        p["status"]["startTime"] = at(9)
    obs = run(SILENT, pods)
    assert entry(obs, P.QUEUED).reason == "PlacedUnseen"
    scheduled = entry(obs, P.SCHEDULED)
    assert scheduled.inferred and scheduled.at == t(9)


def test_a_queued_entry_never_names_a_gang_object_that_said_nothing():
    """Coscheduling PodGroup with status null, one of three pods bound: the bound pod spoke, the PodGroup did not."""
    pods = [pod(name="p-0", bound=4), pod(name="p-1"), pod(name="p-2")]
    queued = entry(run(SILENT, pods), P.QUEUED)
    # Seen mid-binding with no pod waiting: one instant placement reads one way (issue 33), from the bound pod.
    assert (queued.reason, queued.source) == ("PlacedWithoutWait", "Pod default/p-0")
    assert queued.message.endswith("(1 of 3 bound)"), queued.message


def test_a_queued_entry_names_the_gang_object_when_its_status_spoke():
    pods = [pod(name="p-0", bound=4), pod(name="p-1"), pod(name="p-2")]
    said = GangStatus(reason="Pending", message="running 0, succeeded 0, failed 0", source="PodGroup default/j-pg")
    queued = entry(run(said, pods), P.QUEUED)
    assert (queued.reason, queued.source) == ("Pending", "PodGroup default/j-pg")


def gated(p: dict, gate: str = "example.com/hold") -> dict:
    p = copy.deepcopy(p)
    p["spec"] = {"schedulingGates": [{"name": gate}]}
    p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                  "message": "Scheduling is blocked due to non-empty scheduling gates",
                                  "lastTransitionTime": at(2)}]
    return p


@pytest.mark.parametrize("initially", [True, False], ids=["v1beta1-initially-scheduled", "admitted"])
def test_a_gang_object_saying_admitted_does_not_make_gated_pods_scheduled(initially):
    """kueue #9482: "Admitted" shown while a foreign gate kept the pods SchedulingGated."""
    admitted = GangStatus(admitted=True, reason="Scheduled", at=t(5), source="Workload default/j",
                          scheduled_at_admission=initially)
    obs = run(admitted, [gated(pod(name=f"p-{i}")) for i in range(3)])
    assert P.SCHEDULED not in [e.phase for e in obs.entries]
    assert obs.phase == P.QUEUED and obs.bound == 0


def test_a_pod_with_a_gate_is_not_bound_even_if_its_condition_says_scheduled():
    p = pod(name="p-0", bound=4)
    p["spec"] = {"schedulingGates": [{"name": "example.com/hold"}]}  # no nodeName
    facts = pod_facts(p)
    assert facts.gated and not facts.bound


def test_scheduled_and_running_from_condition_and_container_times_are_not_inferred():
    pods = [pod(name=f"p-{i}", bound=4 + i, started=8 + i) for i in range(3)]
    obs = run(SILENT, pods)
    assert [(e.phase, e.at, e.inferred) for e in obs.entries[-2:]] == [(P.SCHEDULED, t(6), False),
                                                                      (P.RUNNING, t(10), False)]


def test_running_without_a_container_start_time_is_inferred_from_the_pod_start():
    pods = [pod(name=f"p-{i}", bound=4) for i in range(3)]
    for p in pods:
        p["status"].update(phase="Running", startTime=at(7))
    running = entry(run(SILENT, pods), P.RUNNING)
    assert running.inferred and running.at == t(7)


def test_a_failed_pod_without_a_finish_time_fails_the_job_at_an_inferred_time():
    pods = [pod(name=f"p-{i}", bound=4, started=5) for i in range(3)]
    pods[0]["status"]["phase"] = "Failed"
    obs = phases.observe(Evidence(GANG3, SILENT, [], [pod_facts(p) for p in pods], [], t(100)), P.RUNNING,
                         {P.SUBMITTED: T0, P.SCHEDULED: t(4), P.RUNNING: t(5)})
    failed = entry(obs, P.FAILED)
    assert failed.inferred and failed.at == t(100)


def row(phase, seconds, inferred=False, attempt=0):
    from types import SimpleNamespace
    return SimpleNamespace(phase=phase, at=t(seconds), attempt=attempt, id=None, inferred=inferred)


def test_a_span_with_an_inferred_end_is_left_out_of_the_histograms():
    from scheduling.observe import timeline
    rows = [row(P.SUBMITTED, 0), row(P.QUEUED, 2), row(P.SCHEDULED, 5), row(P.RUNNING, 9, inferred=True)]
    assert timeline.durations(rows) == {"time_in_queue": 3.0, "time_to_schedule": 5.0, "time_to_running": None,
                                        "run_time": None}
    guessed = [row(P.SUBMITTED, 0), row(P.QUEUED, 2), row(P.SCHEDULED, 5, inferred=True)]
    assert timeline.durations(guessed)["time_in_queue"] is None


def test_the_histograms_observe_only_spans_from_cluster_times():
    from scheduling.observe import metrics, timeline

    def count(histogram, cluster):
        return sum(s.value for m in histogram.collect() for s in m.samples
                   if s.name.endswith("_count") and s.labels.get("cluster") == cluster)

    rows = [row(P.SUBMITTED, 0), row(P.QUEUED, 2), row(P.SCHEDULED, 5, inferred=True), row(P.RUNNING, 9)]
    metrics.observe_durations("truth-test", "q", {P.SCHEDULED, P.RUNNING}, timeline.durations(rows))
    assert count(metrics.TIME_IN_QUEUE, "truth-test") == 0 and count(metrics.TIME_TO_RUNNING, "truth-test") == 1
