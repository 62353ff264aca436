"""A Kueue job's Queued entry comes from its Workload's own times (source "Workload ns/name"): it is queued when the
Workload entered its LocalQueue (no pod exists while it waits), and an admitted one waited until its admission."""
from scheduling.backends.base import GangStatus
from scheduling.choices import GangPhase as P
from scheduling.observe import phases
from scheduling.observe.evidence import Evidence
from tests.kube_objects import T0, t

SHAPE = phases.JobShape(min_member=4, total=4)
SOURCE = "Workload team-a/train-a-1a2b"
PENDING = ("couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu in flavor "
           "gangweb-default, previously considered podsets requests (0) + current podset request (4) > maximum "
           "capacity (0)")


def observe(gang, recorded=None):
    ev = Evidence(SHAPE, gang, [], [], [], t(100))
    return phases.observe(ev, P.DISPATCHED, dict(recorded or {P.SUBMITTED: T0, P.DISPATCHED: t(1)}))


def test_a_waiting_workload_is_queued_at_its_creation_with_kueues_reason():
    gang = GangStatus(admitted=False, reason="Pending", message=PENDING, at=t(3), queued_at=t(1), source=SOURCE)
    [entry] = observe(gang).entries
    assert (entry.phase, entry.at, entry.source, entry.reason) == (P.QUEUED, t(1), SOURCE, "Pending")
    assert entry.message == f"{PENDING} (0 of 4 bound)"


def test_a_workload_first_seen_admitted_says_how_long_it_waited_in_kueues_queue():
    gang = GangStatus(admitted=True, reason="Admitted", message="The workload is admitted", at=t(21),
                      queued_at=t(1), source=SOURCE)
    entries = observe(gang).entries
    assert [(e.phase, e.at, e.source, e.reason) for e in entries][0] == (P.QUEUED, t(1), SOURCE, "PlacedAfterWait")
    assert entries[0].message == "admitted after waiting 20 s (0 of 4 bound)"
