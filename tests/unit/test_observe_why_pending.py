""""Why pending" carries the scheduler's reason, its numbers, and how many pods are bound of how many required."""
import pytest

from scheduling.backends.base import GangStatus
from scheduling.choices import GangPhase as P
from scheduling.observe import why_pending
from scheduling.observe.phases import JobShape
from scheduling.observe.pods import pod_facts
from tests.kube_objects import kai_over_limit, kai_podgroup, pod, seen, t

GANG3 = JobShape(min_member=3, total=3)


def kai_status(pg: dict) -> GangStatus:
    """What the KAI backend reads from the PodGroup (stub of KaiV2alpha2.read_status: first reason + details)."""
    conditions = pg["status"].get("schedulingConditions") or []
    if not conditions:
        return GangStatus(source="PodGroup default/j-pg")
    first = conditions[-1]["reasons"][0]
    return GangStatus(admitted=False, reason=first["reason"], message=first["message"], at=t(3),
                      source="PodGroup default/j-pg", queue_details=first["details"]["queueDetails"],
                      conditions=conditions, reasons=conditions[-1]["reasons"])


def pods(n=3, **kw):
    return [pod_facts(pod(name=f"p-{i}", **kw)) for i in range(n)]


def test_kai_over_limit_carries_the_queue_numbers_and_what_the_job_asks():
    gang = kai_status(kai_podgroup(reasons=[kai_over_limit(limit="8", allocated="6", requested="4")]))
    why = why_pending.explain(P.QUEUED, seen(GANG3, gang, pods()))
    assert why["reason"] == "OverLimit"
    assert why["queue"]["name"] == "team-a"
    assert why["queue"]["resources"]["nvidia.com/gpu"] == {
        "quota": 4, "limit": 8, "allocated": 6, "allocated_non_preemptible": 0, "requested": 10}
    assert why["job_requests"] == {"nvidia.com/gpu": 4, "cpu": 12}
    assert why["pods"] == {"bound": 0, "required": 3, "total": 3, "created": 3}
    assert "Limit is 8 GPUs, currently 6 GPUs allocated and workload requested 4 GPUs" in why["message"]
    assert why["summary"] == "Queue team-a: 6 of 8 GPUs in use, limit 8, this gang needs 4."
    assert why["blocking"] == [{"code": "QueueOverLimit", "queue": "team-a", "resource": "nvidia.com/gpu",
                                "in_use": 6, "limit": 8, "needs": 4,
                                "message": "queue team-a: 6 of 8 GPUs in use, limit 8, this gang needs 4"}]
    assert why["reasons"][0]["reason"] == "OverLimit"
    assert why["since"] == t(3).isoformat()


def test_a_cleared_kai_condition_disappears_once_the_pods_are_bound():
    gang = kai_status(kai_podgroup(reasons=None))
    assert why_pending.explain(P.QUEUED, seen(GANG3, gang, pods(bound=5))) is None


def test_a_cleared_kai_condition_leaves_no_queue_numbers_behind_while_pods_still_wait():
    gang = kai_status(kai_podgroup(reasons=None))
    why = why_pending.explain(P.QUEUED, seen(GANG3, gang, pods()))
    assert why["reason"] == "WaitingForScheduler"
    assert why["queue"] is None and why["reasons"] == []


def test_v1alpha2_unschedulable_gang_says_0_of_3_bound_with_the_pods_messages():
    gang = GangStatus(admitted=False, reason="Unschedulable", message="not enough room for the gang", at=t(3),
                      source="PodGroup default/j-pg")
    why = why_pending.explain(P.QUEUED,
                              seen(GANG3, gang, pods(unschedulable="0/4 nodes are available: 4 Insufficient "
                                                                   "nvidia.com/gpu.")),
                              job_requests={"nvidia.com/gpu": "24", "cpu": "3"})
    assert (why["reason"], why["message"]) == ("Unschedulable", "not enough room for the gang")
    assert why["pods"]["bound"] == 0 and why["pods"]["required"] == 3
    assert why["pod_conditions"] == [{"reason": "Unschedulable", "pods": 3, "example": "p-0",
                                      "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]
    assert why["job_requests"] == {"nvidia.com/gpu": 24, "cpu": 3}
    assert why["summary"].startswith("Not enough room for the whole gang: 0 of 3 bound (all 3 must fit at once).")


@pytest.mark.parametrize("phase", [P.SCHEDULED, P.RUNNING, P.SUCCEEDED, P.FAILED, P.CANCELLED])
def test_a_job_past_queued_has_no_why_pending(phase):
    gang = GangStatus(admitted=False, reason="Unschedulable")
    assert why_pending.explain(phase, seen(GANG3, gang, pods())) is None


@pytest.mark.parametrize("made,expected_reason,summary_start", [
    (0, "WaitingForPods", "Waiting for the job's pods to be created: 0 of 3 exist."),
    (3, "WaitingForScheduler", "3 pods are waiting for scheduler 'kai-scheduler' to look at them"),
])
def test_waiting_reasons_gangweb_gives_when_the_scheduler_said_nothing(made, expected_reason, summary_start):
    why = why_pending.explain(P.DISPATCHED, seen(GANG3, GangStatus(), pods(made)), scheduler_name="kai-scheduler")
    assert why["reason"] == expected_reason
    assert why["summary"].startswith(summary_start)


def test_pods_unschedulable_without_a_gang_statement_use_the_pods_reason():
    why = why_pending.explain(P.QUEUED, seen(JobShape(min_member=2, total=2), GangStatus(),
                                             [pod_facts(pod(name="a", unschedulable="0/4 nodes: Insufficient cpu")),
                                              pod_facts(pod(name="b", unschedulable="0/4 nodes: Insufficient cpu"))]))
    assert (why["reason"], why["source"]) == ("Unschedulable", "Pod default/a")
    assert why["pod_conditions"][0]["pods"] == 2


@pytest.mark.parametrize("value,expected", [("8", 8), ("1500m", 1.5), ("64Gi", 68719476736), (2.5, 2.5),
                                            ("garbage", None), (None, None)])
def test_quantities_become_numbers_in_base_units(value, expected):
    assert why_pending.number(value) == expected


# --- every summary names the job's queue (issue 21) -------------------------------------------------------------

def test_queue_does_not_exist_names_the_jobs_queue_when_the_scheduler_gave_no_details():
    why = {"reason": "QueueDoesNotExist", "pods": {"bound": 0, "required": 2, "total": 2, "created": 2},
           "queue": None, "queue_name": "team-a", "blocking": []}
    assert why_pending.summary(why) == ("Queue team-a does not exist in the cluster, so the scheduler will not "
                                        "consider this job.")


def test_waiting_for_the_scheduler_names_the_queue():
    why = {"reason": "WaitingForScheduler", "pods": {"bound": 0, "required": 3, "total": 3, "created": 3},
           "queue": None, "queue_name": "team-a", "blocking": []}
    assert why_pending.summary(why, "kai-scheduler") == (
        "3 pods are waiting for scheduler 'kai-scheduler' to look at them; it has not said anything yet. "
        "Queue: team-a.")


@pytest.mark.parametrize("text, expected", [
    ("Queue team-a: 6 of 8 GPUs in use, limit 8, this gang needs 4.", "Queue team-a: 6 of 8 GPUs in use, limit 8, "
                                                                       "this gang needs 4."),
    ("This job needs 16 GPUs.", "This job needs 16 GPUs. Queue: team-a."),
    ("", "Queue: team-a."),
    # the scheduler's words without a full stop: the queue still gets a sentence of its own
    ("No preemption victims found for incoming preemptor", "No preemption victims found for incoming preemptor. "
                                                           "Queue: team-a."),
    # a namespace or object that contains the queue's name does not name the queue
    ("2 pods in namespace team-a wait.", "2 pods in namespace team-a wait. Queue: team-a."),
    ("Queue team-a-gpu is full.", "Queue team-a-gpu is full. Queue: team-a."),
    ("queue 'team-a' does not exist in the cluster", "queue 'team-a' does not exist in the cluster"),
])
def test_naming_queue_adds_the_name_only_when_missing(text, expected):
    assert why_pending.naming_queue(text, "team-a") == expected
    assert why_pending.naming_queue(text, "") == text
