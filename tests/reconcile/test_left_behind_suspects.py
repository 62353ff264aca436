"""Which finished jobs a resync looks at for objects left after their clean-up (reconcile/left_behind.py
`suspects`): decided from the snapshot and the clean-up marks alone, before any row is loaded or request sent. A
finished job's retained Indexed Jobs are expected until its retention is over; a gang object or Service never is."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduling.backends.k8s_workload_v1alpha2 import POD_GROUP
from scheduling.kube.objects import JOB, SERVICE
from scheduling.reconcile.left_behind import suspects
from scheduling.reconcile.observed import Snapshot
from tests.kube_objects import batch_job, v1alpha2_podgroup

AT = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
UID = "6f1c1a52-0d7e-4c8e-9c43-2f0f7a1d9b10"


def snapshot_of(*kinds: str) -> Snapshot:
    """A snapshot holding, for job UID, one object of each of `kinds` ("podgroup", "service", "job")."""
    snap = Snapshot()
    labels = {"gangweb.io/job-uid": UID}
    for kind in kinds:
        if kind == "podgroup":
            pg = v1alpha2_podgroup(name="g")
            pg["metadata"]["labels"] = labels
            snap.add([pg], POD_GROUP)
        elif kind == "service":
            snap.add([{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default",
                                                                           "labels": labels}}], SERVICE)
        else:
            owner = batch_job(created=1)
            owner["metadata"]["labels"] = labels
            snap.add([owner], JOB)
    return snap


@pytest.mark.parametrize(("held", "marks", "suspect"), [
    (("podgroup",), (AT, None), True),
    (("service",), (AT, None), True),
    (("job",), (AT, None), False),  # retained for inspection: expected
    (("job",), (AT, AT), True),  # retention over and removed: nothing of it should be left
    (("podgroup", "service", "job"), (None, None), False),  # not cleaned up yet: the ordinary resync's
    ((), (AT, AT), False),
], ids=["gang", "service", "retained-job", "removed-job", "not-cleaned", "nothing"])
def test_a_cleaned_job_is_a_suspect_only_when_the_snapshot_holds_what_should_be_gone(held, marks, suspect):
    assert suspects(snapshot_of(*held), {UID: marks}) == ([UID] if suspect else [])


def test_a_job_with_no_row_is_never_a_suspect():
    assert suspects(snapshot_of("podgroup"), {}) == []  # an orphan: reported by the resync, never acted on
