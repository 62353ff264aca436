"""Kueue's pending messages (v0.17.0 `flavorassigner.go`, `scheduler.go` wordings) become why-pending facts with
numbers in gangweb's units; a message in any other wording is shown as Kueue wrote it."""
import pytest

from scheduling.backends.base import GangStatus
from scheduling.choices import GangPhase as P
from scheduling.observe import kueue_reasons, why_pending
from scheduling.observe.phases import JobShape
from tests.kube_objects import seen, t

GPU_OVER_LIMIT = ("couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu in flavor "
                  "gangweb-default, previously considered podsets requests (0) + current podset request (6) > "
                  "maximum capacity (4)")
TWO_SETS = ("couldn't assign flavors to pod set launcher: insufficient quota for cpu in flavor gangweb-default, "
            "previously considered podsets requests (0) + current podset request (2500m) > maximum capacity (2); "
            "couldn't assign flavors to pod set workers: insufficient quota for memory in flavor gangweb-default, "
            "previously considered podsets requests (16Gi) + current podset request (64Gi) > maximum capacity "
            "(64Gi), insufficient quota for nvidia.com/gpu in flavor gangweb-default, previously considered podsets "
            "requests (2) + current podset request (8) > maximum capacity (8)")
UNUSED = ("couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu in flavor "
          "gangweb-default, 2 more needed. Pending the preemption of 1 workload(s)")


def test_the_limit_message_reads_requested_available_and_more_needed():
    [fact] = kueue_reasons.parse(GPU_OVER_LIMIT)
    assert fact == {"pod_set": "workers", "code": "KueueQuotaExceeded", "resource": "nvidia.com/gpu",
                    "flavor": "gangweb-default", "earlier": 0, "current": 6, "requested": 6, "available": 4,
                    "more_needed": 2}
    assert kueue_reasons.sentence(fact, why_pending.amount) == (
        "insufficient quota for nvidia.com/gpu in flavor gangweb-default: 6 GPUs requested, 4 available within "
        "the limit, 2 more needed")


def test_cpu_in_cores_and_memory_in_bytes_over_two_pod_sets():
    facts = kueue_reasons.parse(TWO_SETS)
    assert [(f["pod_set"], f["resource"], f["requested"], f["available"], f["more_needed"]) for f in facts] == [
        ("launcher", "cpu", 2.5, 2, 0.5),
        ("workers", "memory", 80 * 2**30, 64 * 2**30, 16 * 2**30),
        ("workers", "nvidia.com/gpu", 10, 8, 2)]
    words = [f["message"] for f in kueue_reasons.facts(TWO_SETS, [], why_pending.amount, "team-a")]
    assert words[0] == ("pod set launcher: insufficient quota for cpu in flavor gangweb-default: 2.5 CPU cores "
                        "requested, 2 available within the limit, 0.5 more needed")
    assert words[1] == ("pod set workers: insufficient quota for memory in flavor gangweb-default: 80 GiB of memory "
                        "requested, 64 GiB of memory available within the limit, 16 GiB of memory more needed")


def test_unused_quota_says_how_much_more_and_that_kueue_is_preempting():
    [fact] = kueue_reasons.parse(UNUSED)
    assert (fact["code"], fact["more_needed"], fact["preempting"]) == ("KueueQuotaInUse", 2, 1)
    assert kueue_reasons.sentence(fact, why_pending.amount) == (
        "insufficient unused quota for nvidia.com/gpu in flavor gangweb-default: 2 GPUs more needed than is unused "
        "now; it fits the limit, so it waits for room (Kueue is preempting 1 workload for it)")


@pytest.mark.parametrize("message,code", [
    ("ClusterQueue team-a is inactive", "KueueQueueInactive"),
    ("ClusterQueue team-a not found", "KueueQueueNotFound"),
    ("Workload namespace doesn't match ClusterQueue selector", "KueueNamespaceNotSelected"),
    ("couldn't assign flavors to pod set workers: resource example.com/fpga unavailable in ClusterQueue",
     "KueueResourceNotInQueue"),
])
def test_whole_message_wordings(message, code):
    assert [f["code"] for f in kueue_reasons.parse(message)] == [code]


@pytest.mark.parametrize("message", [
    "The workload has failed admission checks",
    "failed to assign flavors to pod set workers: some error",
    "couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu in flavor x, previously "
    "considered podsets requests (lots) + current podset request (6) > maximum capacity (4)",
    "",
])
def test_other_wordings_yield_no_fact(message):
    assert kueue_reasons.parse(message) == []


def kueue_pending(message: str) -> GangStatus:
    """What the Kueue backend reads from a Workload with QuotaReserved=False reason Pending."""
    return GangStatus(admitted=False, reason="Pending", message=message, at=t(3), source="Workload default/j",
                      reasons=[{"reason": "Pending", "message": message}], quota_only=True)


def test_why_pending_of_a_kueue_job_leads_with_kueues_numbers_and_names_the_queue():
    why = why_pending.explain(P.QUEUED, seen(JobShape(min_member=6, total=6), kueue_pending(GPU_OVER_LIMIT), []),
                              queue_name="team-a")
    assert [f["code"] for f in why["blocking"]] == ["KueueQuotaExceeded"]
    assert why["blocking"][0]["more_needed"] == 2
    assert why["summary"] == ("Pod set workers: insufficient quota for nvidia.com/gpu in flavor gangweb-default: "
                              "6 GPUs requested, 4 available within the limit, 2 more needed. Queue: team-a.")
    assert why["message"] == GPU_OVER_LIMIT and why["source"] == "Workload default/j"
    # Kueue states the queue's limit in its message ("maximum capacity"): the queue object carries it.
    assert why["queue"] == {"name": "team-a", "resources": {"nvidia.com/gpu": {"limit": 4}}}
    assert why["queue_name"] == "team-a"


def test_a_kueue_message_gangweb_cannot_read_is_shown_as_kueue_wrote_it():
    why = why_pending.explain(P.QUEUED, seen(JobShape(min_member=2, total=2),
                                             kueue_pending("The workload has failed admission checks"), []),
                              queue_name="team-a")
    assert why["blocking"] == [] and why["queue"] == {"name": "team-a", "resources": {}}
    assert why["summary"] == "Pending: The workload has failed admission checks (0 of 2 bound). Queue: team-a."


def test_the_backends_per_pod_set_parts_read_as_the_whole_message():
    first, second = UNUSED.replace("workers", "launcher").split(". Pending")[0], UNUSED
    whole = f"{first}; {second}"
    from_parts = kueue_reasons.facts("", [first, second], why_pending.amount)
    # The later pod set's shortfall counts the earlier one's (`_cumulative`): one fact, Kueue's preemption on it.
    assert [(f["pod_set"], f["preempting"], f["earlier_pod_sets"]) for f in from_parts] == [
        ("workers", 1, ["launcher"])]
    assert from_parts == kueue_reasons.facts(whole, [first, second], why_pending.amount)


def test_a_later_pod_sets_unused_quota_shortfall_counts_the_earlier_ones_and_is_said_once():
    # Kueue's flavor assigner adds each pod set's request to those before it: the worker's "4 more needed" (its 3
    # GPUs + the launcher's 1) already holds the launcher's "1 more needed". Said once, not as 1 + 4.
    message = ("couldn't assign flavors to pod set launcher: insufficient unused quota for nvidia.com/gpu in flavor "
               "gangweb-default, 1 more needed; couldn't assign flavors to pod set worker: insufficient unused quota "
               "for nvidia.com/gpu in flavor gangweb-default, 4 more needed")
    found = kueue_reasons.parse(message)
    assert [(f["pod_set"], f["more_needed"], f.get("earlier_pod_sets")) for f in found] == [
        ("worker", 4, ["launcher"])]
    said = kueue_reasons.sentence(found[0], lambda r, v: f"{v} GPUs")
    assert said == ("insufficient unused quota for nvidia.com/gpu in flavor gangweb-default: 4 GPUs more needed "
                    "than is unused now (with pod set launcher before it); it fits the limit, so it waits for room")
