"""Pure helpers behind the dashboard's pictures: durations, Gantt geometry, quota bars, warnings, requests."""
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from scheduling.views.display import format_number, gantt, humanize_seconds, quota_bar, requests_of_spec
from tests import builders

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def tr(phase, seconds, reason=""):
    return SimpleNamespace(phase=phase, at=T0 + timedelta(seconds=seconds), reason=reason, message="", source="",
                           id=None)


@pytest.mark.parametrize("seconds, words", [
    (None, "—"), (0.4, "0.4s"), (12, "12s"), (185, "3m 05s"), (7620, "2h 07m"), (3 * 86400 + 4 * 3600, "3d 4h"),
])
def test_durations_read_as_words(seconds, words):
    assert humanize_seconds(seconds) == words


@pytest.mark.parametrize("value, text", [
    (1024000, "1,024,000"), (0.5, "0.5"), (68719.48, "68,719"), (12.345, "12.35"), (8.0, "8")])
def test_numbers_have_separators_and_no_exponent(value, text):
    assert format_number(value) == text


def test_gantt_bars_span_from_each_phase_to_the_next_and_the_open_phase_grows_until_now():
    rows = gantt([tr("Queued", 10), tr("Submitted", 0), tr("Running", 60)], now=T0 + timedelta(seconds=100)).rows
    assert [(r.phase, r.seconds, r.left, r.width, r.open) for r in rows] == [
        ("Submitted", 10.0, 0.0, 10.0, False),
        ("Queued", 50.0, 10.0, 50.0, False),
        ("Running", 40.0, 60.0, 40.0, True),
    ]


def test_gantt_ends_at_a_terminal_phase_drawn_as_a_visible_sliver():
    g = gantt([tr("Submitted", 0), tr("Running", 30), tr("Succeeded", 90)], now=T0 + timedelta(days=1))
    assert g.total == 90
    last = g.rows[-1]
    assert (last.phase, last.seconds, last.open, last.width) == ("Succeeded", 0.0, False, 0.6)
    assert last.left + last.width <= 100


def test_quota_bar_scales_to_the_largest_finite_number_and_marks_over_quota():
    bar = quota_bar("gpu", "GPU", quota=8, limit=-1, allocated=10, requested=20)
    assert bar.scale == pytest.approx(22.0)
    assert (bar.limit_pct, bar.over_quota) == (0.0, True)
    assert bar.quota_pct == pytest.approx(36.364, abs=1e-3)
    assert bar.over_pct == pytest.approx(bar.allocated_pct - bar.quota_pct)
    # People's units on every page (issue 19 part 6), the KAI Queue's own values on hover.
    assert bar.summary == "quota 8 GPUs · limit unlimited · allocated 10 GPUs · requested 20 GPUs"
    assert bar.kai_summary == "KAI quota 8 devices, limit -1 (unlimited)"


def test_requests_of_a_spec_are_in_kai_units_times_replicas():
    spec = builders.template_spec(pod_sets=[
        builders.pod_set("worker", replicas=4, containers=[builders.container(cpu="1500m", memory="2Gi", gpu=2)]),
        builders.pod_set("launcher", replicas=1, containers=[builders.container(cpu="1", memory="1G")]),
    ])
    # Memory in whole MB, rounded up as the queue-limit check counts it (kai_units.from_quantity): 9589.93 -> 9590.
    assert requests_of_spec(spec) == {"gpu": 8.0, "cpu": 7000.0, "memory": 9590.0}


def test_gantt_keeps_lifecycle_order_when_the_cluster_clock_rounds_down():
    # Submitted at .6 s by gangweb; the cluster's creationTimestamp of the gang object says 0 s (whole seconds).
    rows = gantt([tr("Submitted", 0.6), tr("Dispatched", 0), tr("Running", 5)], now=T0 + timedelta(seconds=10)).rows
    assert [(r.phase, r.seconds) for r in rows] == [("Submitted", 0.0), ("Dispatched", 4.4), ("Running", 5.0)]


def test_step_chart_holds_each_reading_until_the_next_and_scales_to_the_limit():
    from scheduling.views.display import step_chart

    chart = step_chart({"allocated": [(T0 - timedelta(hours=1), 2.0), (T0 + timedelta(minutes=30), 4.0)]},
                       start=T0, end=T0 + timedelta(hours=1), lines={"quota": 4, "limit": 10, "none": -1},
                       width=100, height=110)
    assert chart.vmax == pytest.approx(11.0)
    # 2 GPUs from the start, 4 from half-way: y = 110 - v / 11 * 110.
    assert chart.series["allocated"] == "0,90 50,90 50,70 100,70"
    assert chart.lines == {"quota": 70.0, "limit": 10.0}
