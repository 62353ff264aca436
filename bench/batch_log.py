"""The worker log's per-batch lines (scheduling/reconcile/jobs/batch.py), read back to say where a reconcile round's
time went: how long its batches waited to start, the snapshot, the passes, the API requests and the client rate
limit's waits.

Lines look like ``... reconcile batch start: jobs=50 first=101 waited_s=0.412 pid=12 at=1764673000.123`` and
``... reconcile batch end: jobs=50 first=101 ok=50 failed=0 requeued=0 read_s=0.2 passes_s=3.1 total_s=3.3
requests=206 throttle_wait_s=0.0 throttle_waits=0 threads=4 pid=12 at=1764673003.4``.
"""
from __future__ import annotations

import re
from pathlib import Path

LINE = re.compile(r"reconcile batch (start|end): (.*)$")
FIELD = re.compile(r"(\w+)=(\S+)")


def _value(text: str):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def parse(text: str) -> dict[int, dict]:
    """{first job id: {"start": {...}, "end": {...}}} of every batch line in `text` (a later batch with the same
    first id replaces an earlier one's line of the same kind). Fields are ints or floats where they parse."""
    batches: dict[int, dict] = {}
    for line in text.splitlines():
        found = LINE.search(line)
        if not found:
            continue
        fields = {k: _value(v) for k, v in FIELD.findall(found.group(2))}
        if isinstance(fields.get("first"), int):
            batches.setdefault(fields["first"], {})[found.group(1)] = fields
    return batches


def read(path: Path) -> dict[int, dict]:
    """`parse` of the log file at `path` ({} when it does not exist)."""
    return parse(path.read_text(errors="replace")) if path.exists() else {}


def for_jobs(batches: dict[int, dict], job_ids: list[int], submitted_at: float | None = None) -> dict:
    """What the batches whose first job is one of `job_ids` say, over the round: their count, the longest wait to
    start (`waited_s_max`, and from `submitted_at`, epoch seconds of the submit request, to the last batch's start:
    `submit_to_last_start_s`), the longest snapshot read, passes and total, the API requests and the client rate
    limit's waits summed, and the requests per job."""
    mine = [batches[i] for i in sorted(set(job_ids)) if i in batches]
    starts = [b["start"] for b in mine if "start" in b]
    ends = [b["end"] for b in mine if "end" in b]
    jobs = sum(e.get("jobs", 0) for e in ends)
    out = {
        "batches": len(mine),
        "waited_s_max": round(max((s.get("waited_s", 0.0) for s in starts), default=0.0), 3),
        "read_s_max": round(max((e.get("read_s", 0.0) for e in ends), default=0.0), 3),
        "passes_s_max": round(max((e.get("passes_s", 0.0) for e in ends), default=0.0), 3),
        "total_s_max": round(max((e.get("total_s", 0.0) for e in ends), default=0.0), 3),
        "requests": sum(e.get("requests", 0) for e in ends),
        "requests_per_job": round(sum(e.get("requests", 0) for e in ends) / jobs, 2) if jobs else 0.0,
        "throttle_wait_s": round(sum(e.get("throttle_wait_s", 0.0) for e in ends), 3),
        "throttle_waits": sum(e.get("throttle_waits", 0) for e in ends),
    }
    if submitted_at is not None and starts:
        out["submit_to_last_start_s"] = round(max(s["at"] for s in starts) - submitted_at, 3)
    return out
