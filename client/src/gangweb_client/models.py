"""Typed views of the API's answers. Each keeps the API's own dict as `raw`, which `-o json` prints unchanged."""
from __future__ import annotations

from dataclasses import dataclass, field

from . import exitcodes

TERMINAL_PHASES = frozenset({"Succeeded", "Failed", "Cancelled"})


@dataclass(frozen=True)
class TimelineEntry:
    """One phase a job entered: `attempt` 0 the first time, n after its n-th re-queue; `at` ISO 8601."""

    phase: str
    attempt: int
    at: str
    reason: str = ""
    message: str = ""
    source: str = ""

    @classmethod
    def from_api(cls, data: dict) -> TimelineEntry:
        """From a timeline entry of the API (job detail, /timeline/ or /wait/)."""
        return cls(phase=data["phase"], attempt=data.get("attempt", 0), at=data.get("at") or "",
                   reason=data.get("reason") or "", message=data.get("message") or "", source=data.get("source") or "")


@dataclass(frozen=True)
class Job:
    """A gang job as the API returned it (list, detail or wait form: fields a form lacks are empty)."""

    id: int
    name: str
    phase: str
    queue: str = ""
    cluster: str = ""
    namespace: str = ""
    phase_reason: str = ""
    phase_message: str = ""
    why_pending: dict | None = None
    timeline: tuple[TimelineEntry, ...] = ()
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def failure(self) -> dict | None:
        """The first failure of a failed job (detail form only: pod_set, index, container, exit_code, reason,
        message, summary, ...; docs/observability.md "The failure"), None when nothing failed or the form lacks it."""
        found = self.raw.get("failure")
        return found if isinstance(found, dict) else None

    @property
    def terminal(self) -> bool:
        """Succeeded, Failed or Cancelled: the job will not change again."""
        return self.phase in TERMINAL_PHASES

    @classmethod
    def from_api(cls, data: dict) -> Job:
        """From any job representation of the API (`uid`-and-name-only forms included)."""
        return cls(id=data["id"], name=data.get("name", ""), phase=data.get("phase", ""), queue=data.get("queue") or "",
                   cluster=data.get("cluster") or "", namespace=data.get("namespace") or "",
                   phase_reason=data.get("phase_reason") or "", phase_message=data.get("phase_message") or "",
                   why_pending=data.get("why_pending"),
                   timeline=tuple(TimelineEntry.from_api(e) for e in data.get("timeline") or ()), raw=data)


@dataclass(frozen=True)
class WaitResult:
    """What `Client.wait` ends with: every job's state when the wait ended, and whether it ran out of time."""

    jobs: tuple[Job, ...]
    timed_out: bool = False

    @property
    def exit_code(self) -> int:
        """1 any Failed, 2 any Cancelled (none Failed), 3 timed out, else 0 (all Succeeded)."""
        phases = {job.phase for job in self.jobs}
        if "Failed" in phases:
            return exitcodes.FAILED
        if "Cancelled" in phases:
            return exitcodes.CANCELLED
        if self.timed_out or not all(job.terminal for job in self.jobs):
            return exitcodes.TIMEOUT
        return exitcodes.OK

    def by_phase(self, phase: str) -> list[Job]:
        """The jobs now in `phase`."""
        return [job for job in self.jobs if job.phase == phase]
