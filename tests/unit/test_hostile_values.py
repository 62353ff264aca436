"""Issue 30, items 7 and 10, as pure functions: counts capped by what the Job controller reports, and values a
scheduler writes that gangweb does not know, said as they are."""
from __future__ import annotations

import pytest

from scheduling.backends.kai_v2alpha2 import KaiV2alpha2
from scheduling.backends.volcano_v1beta1 import VolcanoV1beta1
from scheduling.choices import GangPhase
from scheduling.observe import phases, why_pending
from scheduling.observe.evidence import Evidence, JobObjects, JobShape
from scheduling.observe.pods import cross_check, owner_facts, pod_facts
from tests.kube_objects import T0, at, batch_job, kai_podgroup, pod


def owned(p: dict, uid: str = "uid-j-worker", controller: bool = True) -> dict:
    p["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j-worker", "uid": uid,
                                         "controller": controller}]
    return p


def reporting(job: dict, **counts) -> dict:
    job["status"].update({"startTime": at(1), **counts})
    return job


def test_pods_beyond_what_the_job_controller_reports_are_not_counted_the_earliest_kept():
    pods = [owned(pod(f"p-{i}", created=2 + i, bound=3 + i, started=4 + i)) for i in range(5)]
    checked = cross_check([pod_facts(p) for p in pods], [owner_facts(reporting(batch_job(), active=3))])
    assert [p.name for p in checked.pods] == ["p-0", "p-1", "p-2"] and checked.dropped == ["p-3", "p-4"]
    assert checked.note.startswith("5 active pods of Job default/j-worker seen, its Job controller reports 3")


def test_fewer_pods_than_the_job_controller_reports_are_said_not_hidden():
    """A pod whose gangweb label was taken off is the controller's and no longer listed: the count says 1, and the
    note says why it disagrees with the controller's 2 (hostile pass, finding F6)."""
    pods = [owned(pod("p-0", created=2, bound=3, started=4))]
    checked = cross_check([pod_facts(p) for p in pods], [owner_facts(reporting(batch_job(), active=2))])
    assert [p.name for p in checked.pods] == ["p-0"] and checked.dropped == []
    assert checked.note.startswith("1 active pods of Job default/j-worker seen, its Job controller reports 2 (a pod "
                                   "without gangweb's labels is not counted)")


@pytest.mark.parametrize("job", [batch_job(), reporting(batch_job(), active=2)])
def test_pods_agreeing_with_the_controller_or_of_a_job_not_synced_yet_all_count(job):
    pods = [owned(pod(f"p-{i}", created=2, bound=3)) for i in range(2)]
    checked = cross_check([pod_facts(p) for p in pods], [owner_facts(job)])
    assert len(checked.pods) == 2 and checked.dropped == [] and checked.note == ""


def test_a_job_reads_neither_scheduled_nor_running_on_pods_its_controller_does_not_report():
    """3 pods naming the Job as controller, bound and running, while the Job controller reports none active: the
    job stays where its real pods are (none)."""
    pods = [owned(pod(f"forged-{i}", created=2, bound=3, started=4)) for i in range(3)]
    objects = JobObjects([], [reporting(batch_job())], pods)
    ev = Evidence.of(JobShape(min_member=3, total=3), KaiV2alpha2().read_status([]), objects, T0)
    obs = phases.observe(ev, GangPhase.DISPATCHED, {})
    assert obs.phase == GangPhase.DISPATCHED and (obs.bound, obs.running) == (0, 0)
    assert ev.uncounted == ["forged-0", "forged-1", "forged-2"]


def volcano_pg(status: dict) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ns", "creationTimestamp": at(1), "uid": "u"},
            "spec": {"minMember": 2}, "status": status}


@pytest.mark.parametrize(("status", "reason", "said"), [
    ({"phase": "Draining"}, "Draining", "Volcano reports phase Draining, which gangweb does not know"),
    ({"phase": {"x": 1}}, "{'x': 1}", "Volcano reports phase {'x': 1}, which gangweb does not know"),
    ({"phase": "Pending", "conditions": [{"type": "Evicting", "status": "True", "reason": "Drain",
                                          "lastTransitionTime": at(3)}]},
     "Evicting", "Volcano reports condition Evicting (Drain), which gangweb does not know"),
])
def test_a_volcano_value_gangweb_does_not_know_is_said_as_it_is(status, reason, said):
    gang = VolcanoV1beta1().read_status([volcano_pg(status)])
    assert (gang.admitted, gang.reason, gang.unknown) == (None, reason, said)


def test_known_volcano_phases_say_nothing_unknown():
    for phase in ("Pending", "Inqueue", "Unknown"):
        assert VolcanoV1beta1().read_status([volcano_pg({"phase": phase})]).unknown == ""


def test_an_unknown_kai_condition_without_reasons_is_never_read_as_no_room():
    pg = kai_podgroup(reasons=[])
    pg["status"]["schedulingConditions"][0]["type"] = "DrainingOnNodePool"
    gang = KaiV2alpha2().read_status([pg])
    assert (gang.admitted, gang.reason) == (None, "DrainingOnNodePool")
    pods = [owned(pod(f"p-{i}", created=2)) for i in range(2)]
    ev = Evidence.of(JobShape(min_member=2, total=2), gang, JobObjects([pg], [batch_job()], pods), T0)
    obs = phases.observe(ev, GangPhase.DISPATCHED, {})
    assert obs.phase == GangPhase.QUEUED and obs.reason == "DrainingOnNodePool"
    assert obs.message == "KAI reports condition DrainingOnNodePool, which gangweb does not know (0 of 2 bound)"
    why = why_pending.explain(obs.phase, ev, scheduler_name="kai-scheduler", queue_name="team-a")
    assert why["summary"] == ("KAI reports condition DrainingOnNodePool, which gangweb does not know "
                              "(0 of 2 bound). Queue: team-a.")
    assert "Not enough room" not in why["summary"] and why["reason"] == "DrainingOnNodePool"


def test_an_unknown_volcano_phase_is_never_the_scheduler_saying_nothing():
    gang = VolcanoV1beta1().read_status([volcano_pg({"phase": "Draining"})])
    ev = Evidence.of(JobShape(min_member=2, total=2), gang,
                     JobObjects([], [batch_job()], [owned(pod(f"p-{i}", created=2)) for i in range(2)]), T0)
    why = why_pending.explain(GangPhase.QUEUED, ev, scheduler_name="volcano", queue_name="q")
    assert why["summary"] == "Volcano reports phase Draining, which gangweb does not know (0 of 2 bound). Queue: q."
    assert why["unknown"] and "has not said anything yet" not in why["summary"]
