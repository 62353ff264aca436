"""Is a scheduler there (issue 33 item 3): the evidence read from a cluster (kube/scheduler_presence.py) and the
state shown from what the probe recorded (observe/presence.py)."""
from datetime import UTC, datetime, timedelta

import pytest

from scheduling.kube import scheduler_presence
from scheduling.models import Cluster
from scheduling.observe import presence

NOW = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)


def fake_lists(monkeypatch, leases=(), events=()):
    """list_objects answering `leases` for Lease LISTs and `events` for the first Event LIST (by reportingComponent);
    records the field selectors asked."""
    asked = []

    def list_objects(api, ref, namespace, labels, project=None, *, field_selector="", limit=None):
        asked.append((ref.kind, namespace, field_selector))
        if ref.kind == "Lease":
            return list(leases)
        return list(events) if field_selector.startswith("reportingComponent=") else []

    monkeypatch.setattr(scheduler_presence.objects, "list_objects", list_objects)
    return asked


def lease(renew, holder="node-1", namespace="kube-system"):
    return {"metadata": {"name": "kube-scheduler", "namespace": namespace},
            "spec": {"holderIdentity": holder, "renewTime": renew}}


def test_a_renewed_lease_dates_the_scheduler_and_names_itself(monkeypatch):
    asked = fake_lists(monkeypatch, leases=[lease("2026-12-06T07:59:58.123456Z")])
    seen = scheduler_presence.sighting(None, "default-scheduler", (("kube-system", "kube-scheduler"),), NOW)
    assert seen == scheduler_presence.Sighting(datetime(2026, 12, 6, 7, 59, 58, 123456, tzinfo=UTC),
                                               "Lease kube-system/kube-scheduler")
    assert asked == [("Lease", "kube-system", "metadata.name=kube-scheduler")]  # a held Lease: no Event LIST


def test_without_a_lease_its_events_are_read_newer_recorder_first(monkeypatch):
    asked = fake_lists(monkeypatch)
    assert scheduler_presence.sighting(None, "volcano", (("", "vc-scheduler"),), NOW).seen_at is None
    assert asked == [("Lease", None, "metadata.name=vc-scheduler"), ("Event", None, "reportingComponent=volcano"),
                     ("Event", None, "source=volcano")]


@pytest.mark.parametrize("leases, events, expected", [
    ([lease("2026-12-06T07:00:00Z", holder="")], [], None),  # released: nobody leads
    ([lease("not a time")], [], None),  # garbage is no evidence
    ([lease("2030-01-01T00:00:00Z")], [], NOW),  # a time ahead of ours counts as now, never later
    ([], [{"series": {"lastObservedTime": "2026-12-06T07:58:00.000000Z"}, "eventTime": "2026-12-06T07:50:00Z"}],
     datetime(2026, 12, 6, 7, 58, tzinfo=UTC)),  # events.k8s.io's series: its last observation
    ([lease("2026-12-06T07:40:00Z", holder="")], [{"lastTimestamp": "2026-12-06T07:55:00Z"}],
     datetime(2026, 12, 6, 7, 55, tzinfo=UTC)),  # a released Lease: its Events tell
])
def test_what_counts_as_evidence(monkeypatch, leases, events, expected):
    fake_lists(monkeypatch, leases=leases, events=events)
    assert scheduler_presence.sighting(None, "kai-scheduler", (("", "kai-scheduler"),), NOW).seen_at == expected


def cluster(entry) -> Cluster:
    return Cluster(name="c", scheduler_presence={"kai": entry} if entry is not None else {})


@pytest.mark.parametrize("entry, state, text", [
    (None, presence.UNKNOWN, "scheduler presence unknown"),
    ({"scheduler": "kai-scheduler", "seen_at": None, "by": "", "read": False}, presence.UNKNOWN,
     "scheduler presence unknown"),
    ({"scheduler": "kai-scheduler", "seen_at": None, "by": "", "read": True}, presence.NOT_SEEN,
     "no kai-scheduler seen"),
    ({"scheduler": "kai-scheduler", "seen_at": (NOW - timedelta(seconds=21)).isoformat(), "by": "Lease x/y",
      "read": True}, presence.SEEN, "scheduler seen 21 s ago"),
    ({"scheduler": "kai-scheduler", "seen_at": (NOW - timedelta(minutes=2, seconds=5)).isoformat(), "by": "",
      "read": True}, presence.SEEN, "scheduler seen 2 min ago"),
    ({"scheduler": "kai-scheduler", "seen_at": (NOW - timedelta(minutes=6)).isoformat(), "by": "", "read": True},
     presence.NOT_SEEN, "no kai-scheduler seen (last 6 min ago)"),
])
def test_presence_as_shown(settings, entry, state, text):
    settings.GANGWEB_SCHEDULER_SEEN_WITHIN_SECONDS = 300
    found = presence.presence(cluster(entry), "kai", NOW)
    assert (found.state, found.text) == (state, text)
    assert found.silent == (state == presence.NOT_SEEN)
