"""Pure helpers that turn model data into what the dashboard draws: durations in words, timeline bars,
quota bars and why-pending sentences. No database access here, so each is unit-tested on plain values.

Geometry is returned in percent (0..100) of the drawing's width; templates put it in SVG `x`/`width`
attributes (never in inline styles, which a strict Content-Security-Policy would block).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from ..amounts import UNLIMITED, for_people, format_number  # for_people: also imported from here by the views
from ..choices import PHASE_ORDER, TERMINAL_PHASES
from ..kube import resources
from ..kube.kai_units import kai_amounts
from ..observe import timeline


def humanize_seconds(seconds: float | None) -> str:
    """A short duration: "0.4s", "12s", "3m 05s", "2h 07m", "3d 4h". None (not reached) is an em dash."""
    if seconds is None:
        return "—"
    seconds = max(0.0, float(seconds))
    if seconds < 10:
        return f"{seconds:.1f}s"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h {m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d {h}h"


def kai_raw(resource: str, value) -> str:
    """A KAI queue value as KAI writes it, for next to the KAI value itself: "8000 millicores", "8590 MB",
    "3 devices", "-1 (unlimited)" (kube/kai_units.py `UNITS`)."""
    if value is None:
        return "?"
    if float(value) == UNLIMITED:
        return "-1 (unlimited)"
    unit = {"gpu": "devices", "cpu": "millicores", "memory": "MB"}.get(resource, "")
    return f"{format_number(value)} {unit}".strip()


@dataclass
class GanttRow:
    """One phase of a job's timeline: where its bar starts and how wide it is (percent of the whole span)."""

    phase: str
    at: datetime
    seconds: float
    left: float
    width: float
    open: bool  # the job is still in this phase: the bar grows until now
    reason: str = ""
    message: str = ""
    source: str = ""
    attempt: int = 0  # 0 for the first pass, n after the n-th re-queue (the API's number; the chart and table agree)
    inferred: bool = False  # `at` is a time gangweb inferred, not the cluster's (PhaseTransition.inferred)
    count: int = 1  # consecutive identical entries folded into this row (`bounded`)
    last_at: datetime | None = None  # `at` of the last of them

    @property
    def duration(self) -> str:
        """The phase's duration in words."""
        return humanize_seconds(self.seconds)


@dataclass
class Gantt:
    """A job's timeline as bars: `rows` in lifecycle order, `start`/`end` of the drawn span, `total` seconds."""

    rows: list[GanttRow] = field(default_factory=list)
    start: datetime | None = None
    end: datetime | None = None
    total: float = 0.0
    omitted: int = 0  # rows left out between the first `head` and the last ones (`bounded`)
    head: int = 0

    @property
    def total_words(self) -> str:
        """The whole span in words."""
        return humanize_seconds(self.total)


MIN_BAR_PERCENT = 0.6  # an instant phase still shows as a sliver you can see


def gantt(transitions, now: datetime) -> Gantt:
    """Lay out a job's phase transitions as Gantt bars.

    `transitions`: objects with `phase`, `at` (aware datetime), `reason`, `message`, `source`, `attempt`, in any
    order. Phases are laid out in lifecycle order within each attempt, attempts one after the other; each lasts
    from its `at` until the next one's; the last one lasts
    until `now` unless it is terminal (Succeeded/Failed/Cancelled), drawn as a thin end marker of zero duration.
    """
    # Lifecycle order, not time order: each phase is recorded once per attempt, and the cluster's timestamps (whole
    # seconds) can put Dispatched a fraction of a second before gangweb's own Submitted time. A phase never starts
    # before the one before it.
    items = sorted(transitions, key=lambda t: (getattr(t, "attempt", 0) or 0, PHASE_ORDER.get(t.phase, 99), t.at))
    if not items:
        return Gantt()
    starts = []
    for t in items:
        starts.append(max(t.at, starts[-1]) if starts else t.at)
    start = starts[0]
    last = items[-1]
    end = starts[-1] if last.phase in TERMINAL_PHASES else max(now, starts[-1])
    total = (end - start).total_seconds()
    span = total or 1.0
    rows = []
    for i, t in enumerate(items):
        is_last = i == len(items) - 1
        stop = starts[i + 1] if not is_last else end
        seconds = max(0.0, (stop - starts[i]).total_seconds())
        left = (starts[i] - start).total_seconds() / span * 100
        width = max(seconds / span * 100, MIN_BAR_PERCENT)
        left = min(left, 100 - MIN_BAR_PERCENT)
        width = min(width, 100 - left)
        rows.append(GanttRow(phase=t.phase, at=t.at, seconds=seconds, left=round(left, 3), width=round(width, 3),
                             open=is_last and t.phase not in TERMINAL_PHASES, reason=t.reason or "",
                             message=t.message or "", source=t.source or "",
                             attempt=getattr(t, "attempt", 0) or 0, inferred=bool(getattr(t, "inferred", False))))
    return Gantt(rows=rows, start=start, end=end, total=total)


def bounded(chart: Gantt) -> Gantt:
    """`chart` with consecutive identical rows (same phase, reason, message and source) folded into the first
    (`count`, `last_at`, their seconds summed and its bar widened to the last one's end) and only the first
    timeline.SHOWN_HEAD and last timeline.SHOWN_TAIL rows kept (`omitted` says how many are left out, after `head`
    rows): a job page stays small however long the history (issue 33; the API's timeline endpoint pages it all)."""
    folded: list[GanttRow] = []
    for row in chart.rows:
        prev = folded[-1] if folded else None
        if prev is not None and (prev.phase, prev.reason, prev.message, prev.source) == (
                row.phase, row.reason, row.message, row.source):
            prev.count += 1
            prev.last_at, prev.seconds, prev.open = row.at, prev.seconds + row.seconds, row.open
            prev.width = round(min(row.left + row.width - prev.left, 100 - prev.left), 3)
            continue
        row.last_at = row.at
        folded.append(row)
    shown, omitted = timeline.bounded(folded, timeline.SHOWN_HEAD, timeline.SHOWN_TAIL)
    return Gantt(rows=shown, start=chart.start, end=chart.end, total=chart.total, omitted=omitted,
                 head=timeline.SHOWN_HEAD if omitted else 0)


def _finite(x) -> bool:
    return x is not None and x != UNLIMITED and not (isinstance(x, float) and math.isinf(x))


@dataclass
class QuotaBar:
    """One resource of one queue, scaled to a drawing: values in the resource's unit, geometry in percent.

    `limit` is -1 for unlimited: no limit region and no full bar, the bar says "unlimited" (`unlimited`). Allocated
    beyond the quota is drawn in the over-quota colour from the quota mark on, but only when a quota is set
    (finite and above 0): with none (KAI's default 0, or -1) nothing is guaranteed, so nothing is "over" it, and
    no quota mark is drawn. Values in KAI units; `summary` in people's units (`for_people`), `kai_summary` raw.
    """

    resource: str
    unit: str
    quota: float
    limit: float
    allocated: float | None
    requested: float | None
    scale: float = 1.0
    # The queue's fair share (services/queues/fair_share.py) when the bar shows one (the queue page), else None.
    fair_share: float | None = None

    def pct(self, value) -> float:
        """`value` as percent of the drawing width, clipped to 0..100."""
        if value is None or value == UNLIMITED:
            return 0.0
        return round(max(0.0, min(100.0, value / self.scale * 100)), 3)

    @property
    def quota_set(self) -> bool:
        """True when the queue has a guaranteed quota for this resource (finite, above 0)."""
        return _finite(self.quota) and self.quota > 0

    @property
    def unlimited(self) -> bool:
        """True when the limit is KAI's unlimited (-1)."""
        return not _finite(self.limit)

    @property
    def quota_pct(self) -> float:
        return self.pct(self.quota) if self.quota_set else 0.0

    @property
    def limit_pct(self) -> float:
        return self.pct(self.limit) if _finite(self.limit) else 0.0

    @property
    def allocated_pct(self) -> float:
        return self.pct(self.allocated)

    @property
    def requested_pct(self) -> float:
        return self.pct(self.requested)

    @property
    def fair_pct(self) -> float:
        return self.pct(self.fair_share)

    @property
    def over_quota(self) -> bool:
        """True when more is allocated than the queue's guaranteed quota (never when no quota is set)."""
        return self.quota_set and self.allocated is not None and self.allocated > self.quota + 1e-9

    @property
    def over_pct(self) -> float:
        """Width of the over-quota part of the allocated bar, starting at `quota_pct`."""
        return max(0.0, round(self.allocated_pct - self.quota_pct, 3)) if self.over_quota else 0.0

    @property
    def summary(self) -> str:
        """The numbers for people, e.g. "quota 8 GPUs · limit unlimited · allocated 6 GPUs · requested 10 GPUs";
        a quota that is not set reads "no quota"."""
        def fmt(x):
            return for_people(self.resource, x)
        quota = f"quota {fmt(self.quota)}" if self.quota_set or self.quota == UNLIMITED else "no quota"
        fair = "" if self.fair_share is None else f" · fair share {fmt(self.fair_share)}"
        return (f"{quota} · limit {fmt(self.limit)}{fair} · allocated {fmt(self.allocated)} · "
                f"requested {fmt(self.requested)}")

    @property
    def kai_summary(self) -> str:
        """The KAI Queue's own values in KAI's units: "KAI quota 8000 millicores, limit -1 (unlimited)"."""
        return f"KAI quota {kai_raw(self.resource, self.quota)}, limit {kai_raw(self.resource, self.limit)}"


def quota_bar(resource: str, unit: str, quota, limit, allocated=None, requested=None, fair_share=None) -> QuotaBar:
    """Build a QuotaBar whose scale fits the largest finite number plus 10% headroom (at least 1 unit); with
    `fair_share`, the bar marks it too."""
    values = [x for x in (quota, limit, allocated, requested, fair_share) if _finite(x)]
    scale = max(values + [1.0]) * 1.1
    return QuotaBar(resource, unit, float(quota), float(limit), allocated, requested, scale=scale,
                    fair_share=None if fair_share is None else float(fair_share))


def requests_of_spec(resolved_spec: dict, overheads: resources.RuntimeClasses | None = None) -> dict[str, float]:
    """What a resolved job spec asks for in KAI queue units: {"gpu": devices, "cpu": millicores, "memory": MB}.

    The whole gang as kube-scheduler counts it (`kube.resources.gang_requests`: sidecars, init peaks, pod-level
    resources, overhead; `overheads` from `kube.runtime_classes.for_job`), in KAI `resources.go` units
    (`kai_units.kai_amounts`). A spec that cannot be read (hand-made rows only: submit validates) asks 0.
    """
    try:
        total = resources.spec_requests(resolved_spec, overheads)
    except resources.UNREADABLE:
        total = {}
    return {k: float(v) for k, v in kai_amounts(total).items()}


def pods_of_spec(resolved_spec: dict) -> int:
    """Number of pods a resolved job spec creates (sum of replicas)."""
    return sum(int(ps.get("replicas", 0) or 0) for ps in (resolved_spec or {}).get("podSets", []))


@dataclass
class StepChart:
    """A step line chart in a `width`×`height` SVG user space: `series` maps a name to an SVG `points` string;
    `lines` maps a name to the y of a horizontal reference line (quota, limit) or None when off the chart."""

    width: int
    height: int
    vmax: float
    series: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)


def step_chart(series: dict[str, list[tuple[datetime, float]]], start: datetime, end: datetime,
               lines: dict[str, float] | None = None, width: int = 600, height: int = 160) -> StepChart:
    """Lay out usage readings as step lines (a reading holds until the next one) over [start, end].

    `series`: name -> [(time, value)] in time order; values before `start` set the level at `start`. `lines`:
    name -> value of a horizontal reference (quota, limit; -1 = unlimited is left out). The y scale fits the
    largest value or finite reference plus 10% headroom.
    """
    finite = {k: v for k, v in (lines or {}).items() if v is not None and v != UNLIMITED}
    values = [v for points in series.values() for _, v in points] + list(finite.values())
    vmax = max(values + [1.0]) * 1.1
    span = max((end - start).total_seconds(), 1.0)

    def x(t):
        return round(max(0.0, min(1.0, (t - start).total_seconds() / span)) * width, 2)

    def y(v):
        return round(height - v / vmax * height, 2)

    chart = StepChart(width=width, height=height, vmax=vmax)
    for name, points in series.items():
        if not points:
            continue
        coords, level = [], None
        for t, v in points:
            if t <= start:
                level = v
                continue
            if level is None:
                level = 0.0
                coords.append((0.0, y(0.0)))
            elif not coords:
                coords.append((0.0, y(level)))
            coords.append((x(t), y(level)))
            coords.append((x(t), y(v)))
            level = v
        if not coords:
            coords.append((0.0, y(level)))
        coords.append((float(width), y(level)))
        chart.series[name] = " ".join(f"{a:g},{b:g}" for a, b in coords)
    chart.lines = {name: y(v) for name, v in finite.items()}
    return chart
