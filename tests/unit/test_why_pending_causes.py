"""why_pending's causes beyond the scheduler's words, from pure inputs: refused pod creations (FailedCreate events,
hostile text), foreign scheduling gates, a silent scheduler, and free room split over nodes."""
from datetime import timedelta

import pytest

from scheduling.backends.base import GangStatus
from scheduling.choices import GangPhase as P
from scheduling.observe import capacity, causes, why_pending
from scheduling.observe.phases import JobShape
from scheduling.observe.pods import pod_facts
from tests.kube_objects import pod, seen, t

GANG3 = JobShape(min_member=3, total=3)


def refusal(message, obj="Job ns/train-worker", count=4):
    return {"type": "Warning", "reason": "FailedCreate", "message": message, "object": obj, "count": count,
            "first_at": t(1).isoformat(), "last_at": t(5).isoformat()}


QUOTA = ('Error creating: pods "train-worker-0-x" is forbidden: exceeded quota: gpus, requested: '
         'requests.nvidia.com/gpu=3, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=2')


@pytest.mark.parametrize("message, cause", [
    ('Error creating: pods "a" is forbidden: no PriorityClass with name urgent was found', "PriorityClass"),
    ('Error creating: pods "a" is forbidden: pod rejected: RuntimeClass "kata" not found', "RuntimeClass"),
    ("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead", "RuntimeClass"),
    (QUOTA, "ResourceQuota"),
    ('pods "a" is forbidden: maximum cpu usage per Container is 2, but limit is 4', "LimitRange"),
    ('admission webhook "deny.example.com" denied the request: no GPUs on Sundays', "AdmissionWebhook"),
    ("something else entirely", "Other"),
])
def test_a_failed_create_message_is_read_for_its_admission_cause(message, cause):
    assert causes.cause_of(message) == cause


def test_refused_pods_lead_the_summary_in_the_servers_words_with_the_pod_counts():
    why = why_pending.explain(P.DISPATCHED, seen(GANG3, GangStatus(), [], refusals=[refusal(QUOTA)]))
    assert why["reason"] == "FailedCreate" and why["message"] == QUOTA and why["source"] == "Job ns/train-worker"
    (fact,) = why["blocking"]
    assert (fact["code"], fact["cause"], fact["created"], fact["total"], fact["count"]) == (
        "PodCreateRefused", "ResourceQuota", 0, 3, 4)
    assert why["summary"] == ("The cluster refuses to create the job's pods (0 of 3 exist) because of the "
                              f"namespace's ResourceQuota; Job ns/train-worker says: {QUOTA}.")


def test_refusals_say_nothing_once_every_pod_exists():
    pods = [pod_facts(pod(name=f"p-{i}")) for i in range(3)]
    why = why_pending.explain(P.QUEUED, seen(GANG3, GangStatus(), pods, refusals=[refusal(QUOTA)]))
    assert not [f for f in why["blocking"] if f["code"] == "PodCreateRefused"]


def test_hostile_event_text_is_one_bounded_line():
    evil = "line one\nline two\x1b[31m\u202eevil" + "x" * 5000
    said = causes.quote(evil)
    assert len(said) == causes.MAX_QUOTE and said.endswith("…")
    assert "\n" not in said and "\x1b" not in said and "\u202e" not in said
    why = why_pending.explain(P.DISPATCHED, seen(GANG3, GangStatus(), [], refusals=[refusal(evil, obj="<b>Job</b>")]))
    assert len(why["summary"]) < 600 and "\n" not in why["summary"]


def test_distinct_refusals_are_kept_newest_first_and_at_most_three():
    rows = [refusal(f"admission webhook \"w{i}\" denied the request", obj=f"Job ns/j{i}") for i in range(5)]
    facts = causes.refused(rows, 0, 3)
    assert [f["object"] for f in facts] == ["Job ns/j0", "Job ns/j1", "Job ns/j2"]


def gated(name, gates, **kw):
    p = pod(name=name, **kw)
    p["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return pod_facts(p)


def test_a_foreign_gate_is_named_with_its_owner_domain_and_counted():
    pods = [gated(f"p-{i}", ["kueue.x-k8s.io/admission"]) for i in range(3)]
    why = why_pending.explain(P.QUEUED, seen(GANG3, GangStatus(), pods))
    (fact,) = why["blocking"]
    assert fact == {"code": "ForeignSchedulingGate", "gate": "kueue.x-k8s.io/admission", "owner": "kueue.x-k8s.io",
                    "pods": 3,
                    "message": "3 pods held by scheduling gate `kueue.x-k8s.io/admission` (from kueue.x-k8s.io); "
                               "gangweb did not add it and will not remove it: whoever added it must remove it"}
    assert why["summary"] == ("3 pods held by scheduling gate `kueue.x-k8s.io/admission` (from kueue.x-k8s.io); "
                              "gangweb did not add it and will not remove it: whoever added it must remove it.")


def test_a_gate_from_the_template_and_one_without_a_domain():
    pods = [gated("p-0", ["hold", "example.com/x"]), gated("p-1", ["example.com/x"])]
    facts = causes.foreign_gates(pods, {"example.com/x"})
    assert [(f["gate"], f["owner"], f["pods"]) for f in facts] == [
        ("example.com/x", "the job's pod template", 2), ("hold", "", 1)]
    assert "(owner unknown)" in facts[1]["message"]


def waiting_pods(created):
    return [pod_facts(pod(name=f"p-{i}", created=created)) for i in range(3)]


def test_a_silent_scheduler_is_named_once_the_window_has_passed():
    pods = waiting_pods(0)
    early = why_pending.explain(P.QUEUED, seen(GANG3, GangStatus(), pods, now=t(0) + timedelta(seconds=299)),
                                scheduler_name="kai-scheduler", silence_s=300)
    assert early["blocking"] == [] and early["reason"] == "WaitingForScheduler"
    late = why_pending.explain(P.QUEUED, seen(GANG3, GangStatus(), pods, now=t(0) + timedelta(seconds=300)),
                               scheduler_name="kai-scheduler", silence_s=300)
    assert late["blocking"][0]["code"] == "SchedulerSilent"
    assert late["summary"] == ("No scheduler named `kai-scheduler` has acted on these pods in 5 min — is it running "
                               "in this cluster?")


def test_a_scheduler_that_said_anything_is_not_silent():
    pods = [pod_facts(pod(name="p-0", created=0, unschedulable="0/4 nodes are available"))]
    assert causes.silent_scheduler("kai-scheduler", pods, t(0) + timedelta(hours=1), 300) == []


@pytest.mark.parametrize("names, said", [
    (["node-0", "node-1", "node-2", "node-3"], "node-0..3"),
    (["n10", "n9"], "n9..10"),
    (["a", "b"], "a, b"),
    (["node-0", "node-2"], "node-0, node-2"),
    (["a", "b", "c", "d", "e"], "a, b, c and 2 more"),
    (["only"], "only"),
])
def test_node_names_are_said_briefly(names, said):
    assert causes.node_span(names) == said


NODES = [{"name": f"node-{i}", "labels": {"pool": "a"}, "allocatable": {"nvidia.com/gpu": 8, "cpu": 64}}
         for i in range(4)] + [{"name": "other", "labels": {"pool": "b"}, "allocatable": {"nvidia.com/gpu": 8}}]
USED = {f"node-{i}": {"nvidia.com/gpu": 3} for i in range(4)}


def test_fragmentation_counts_free_room_per_node_within_the_node_selector():
    (fact,) = capacity.fragmented([({"nvidia.com/gpu": 6}, {"pool": "a"}, 3)], NODES, USED)
    assert fact == {"code": "NodesFragmented", "resource": "nvidia.com/gpu", "per_pod": 6, "pods": 3, "fit": 0,
                    "most_free": 5, "most_free_nodes": ["node-0", "node-1", "node-2", "node-3"], "free_total": 20,
                    "nodes": 4}
    # Without the selector, the idle node takes one pod: still not three.
    (fact,) = capacity.fragmented([({"nvidia.com/gpu": 6}, {}, 3)], NODES, USED)
    assert (fact["fit"], fact["most_free"], fact["most_free_nodes"], fact["free_total"]) == (1, 8, ["other"], 28)


def test_no_fragmentation_fact_when_the_pods_fit_or_the_room_is_simply_too_small():
    assert capacity.fragmented([({"nvidia.com/gpu": 5}, {"pool": "a"}, 4)], NODES, USED) == []  # 4 x 5 fit
    assert capacity.fragmented([({"nvidia.com/gpu": 6}, {"pool": "a"}, 4)], NODES, USED) == []  # 24 > 20 free
    assert capacity.fragmented([({"nvidia.com/gpu": 6}, {}, 3)], None, USED) == []  # nodes unknown


def test_the_fragmentation_summary_has_the_issues_numbers():
    pods = [pod_facts(pod(name=f"p-{i}", unschedulable="0/5 nodes are available")) for i in range(3)]
    why = why_pending.explain(P.QUEUED, seen(GANG3, GangStatus(), pods), {"nvidia.com/gpu": 18},
                              waiting=[({"nvidia.com/gpu": 6}, {"pool": "a"}, 3)], nodes=lambda: (NODES, USED))
    assert why["summary"].startswith(
        "Each pod needs 6 GPUs; the most free on any node is 5 (node-0..3 have 5 each, 20 in all); an upper bound: "
        "gangweb counts only the pods it manages on these nodes. Not enough room for the whole gang: 0 of 3 bound")


def test_node_list_keeps_schedulable_nodes_with_their_labels_and_checked_resources():
    ready = [{"type": "Ready", "status": "True"}]
    nodes = [{"metadata": {"name": "b", "labels": {"pool": "a"}},
              "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "1Ti", "pods": "110"},
                         "conditions": ready}},
             {"metadata": {"name": "a"}, "spec": {"unschedulable": True},
              "status": {"allocatable": {"cpu": "8"}, "conditions": ready}}]
    assert capacity.node_list(nodes) == [{"name": "b", "labels": {"pool": "a"},
                                          "allocatable": {"nvidia.com/gpu": 8, "cpu": 64, "memory": 2**40}}]
