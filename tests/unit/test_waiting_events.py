"""reconcile/waiting_events.py: which objects' Warning Events a waiting job's observation reads, and what a read
that fails or is not worth making returns."""
from types import SimpleNamespace

import pytest

from scheduling.reconcile import waiting_events
from tests.kube_objects import pod, v1alpha2_podgroup


def job(phase="Queued"):
    return SimpleNamespace(phase=phase, uid="u-1", pk=1, namespace="default", cluster=None)


@pytest.mark.parametrize("phase, pods, expect", [
    ("Queued", [pod("b-1", unschedulable="x"), pod("b-0", unschedulable="x")], ["uid-j-pg", "uid-b-0"]),
    ("Dispatched", [pod("b-0", bound=3), pod("b-1", unschedulable="x")], ["uid-j-pg", "uid-b-1"]),
    ("Queued", [pod("b-0", bound=3)], []),  # every pod bound: nothing is waiting on the scheduler
    ("Queued", [pod("b-0", unschedulable="x", terminating=True)], []),
    ("Queued", [], []),  # no pod yet: the FailedCreate reader's business (reconcile/refusals.py)
    ("Queued", [pod("b-0")], []),  # no scheduler spoke to it: a silent scheduler writes no Events either
    ("Running", [pod("b-0", unschedulable="x")], []),
    # A UID that would add terms to the field selector is never sent
    ("Queued", [{**pod("b-0", unschedulable="x"), "metadata": {"name": "b-0", "uid": "u,type=Normal"}}], []),
])
def test_the_gang_objects_and_the_first_waiting_pod_are_read_only_while_pending(phase, pods, expect):
    assert waiting_events.wanted(job(phase), [v1alpha2_podgroup()], pods) == expect


def test_a_cluster_that_cannot_be_asked_or_reading_turned_off_means_not_read(monkeypatch, settings):
    class Down:
        def __init__(self, api):
            pass

        def list_namespaced_event(self, *a, **kw):
            raise ConnectionError("refused")

    monkeypatch.setattr(waiting_events.client, "CoreV1Api", Down)
    assert waiting_events.read(job(), [], [pod("b-0", unschedulable="x")], api=object()) is None
    assert waiting_events.read(job("Running"), [], [pod("b-0", unschedulable="x")], api=object()) == []
    settings.GANGWEB_WAITING_EVENTS_SECONDS = 0
    assert waiting_events.read(job("Running"), [], [pod("b-0", unschedulable="x")], api=object()) is None
