"""Events are reduced to rows about the job's own objects, in both the core/v1 and the events.k8s.io forms."""
from scheduling.observe import events
from tests.kube_objects import at, t


def core_event(uid="uid-p-0", reason="FailedScheduling", first=3, last=9, count=4):
    return {"type": "Warning", "reason": reason, "message": "0/4 nodes are available",
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p-0", "uid": uid},
            "firstTimestamp": at(first), "lastTimestamp": at(last), "count": count,
            "source": {"component": "default-scheduler"}, "metadata": {"creationTimestamp": at(first)}}


def series_event(uid="uid-j-pg"):
    """As kube-scheduler writes them through events.k8s.io/v1, seen through core/v1."""
    return {"type": "Normal", "reason": "Scheduled", "message": "gang placed",
            "involvedObject": {"kind": "PodGroup", "namespace": "default", "name": "j-pg", "uid": uid},
            "eventTime": at(5).replace("Z", ".123456Z"), "series": {"count": 2, "lastObservedTime": at(7)},
            "reportingComponent": "default-scheduler", "metadata": {"creationTimestamp": at(5)}}


def test_a_core_event_becomes_a_row_with_counts_and_times():
    assert events.row(core_event()) == {
        "type": "Warning", "reason": "FailedScheduling", "message": "0/4 nodes are available",
        "object": "Pod default/p-0", "kind": "Pod", "count": 4, "first_at": t(3).isoformat(),
        "last_at": t(9).isoformat(), "component": "default-scheduler"}


def test_a_series_event_uses_event_time_and_series():
    r = events.row(series_event())
    assert (r["count"], r["last_at"], r["component"]) == (2, t(7).isoformat(), "default-scheduler")
    assert r["first_at"].startswith("2026-11-29T14:00:05.123456")


def test_only_the_jobs_objects_are_kept_oldest_first():
    rows = events.select([core_event(last=9), series_event(), core_event(uid="someone-else")],
                         {"uid-p-0", "uid-j-pg"})
    assert [r["object"] for r in rows] == ["PodGroup default/j-pg", "Pod default/p-0"]


def test_a_hostile_count_is_read_as_a_bounded_number_and_text_is_cut():
    for count, series, expect in ((None, {"count": "12"}, 12), ("abc", {}, 1), (-5, {"count": 3}, 3),
                                  (True, {}, 1), (10**20, {}, events.MAX_COUNT), ([1], "not a dict", 1)):
        r = events.row({**core_event(count=count), "series": series})
        assert r["count"] == expect, (count, series)
    r = events.row({**core_event(), "message": "x\u202e" * 5000, "involvedObject": "not a dict"})
    assert len(r["message"]) == events.MAX_MESSAGE and "\u202e" not in r["message"] and r["object"] == ""


def test_said_keeps_the_warnings_folded_newest_first_at_most_three():
    rows = [events.row(core_event(reason=f"R{i}", first=i, last=10 + i)) for i in range(5)]
    rows += [events.row(core_event(reason="R4", first=1, last=2, count=6)), events.row(series_event())]
    said = events.said(rows)
    assert [(r["reason"], r["count"]) for r in said] == [("R4", 10), ("R3", 4), ("R2", 4)]  # the Normal one left out
    assert (said[0]["first_at"], said[0]["last_at"]) == (t(1).isoformat(), t(14).isoformat())
