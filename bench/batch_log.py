"""The worker log's per-batch lines (scheduling/reconcile/jobs/batch.py), read back to say where a reconcile round's
time went: how long its batches waited to start, the snapshot, the passes, the API requests and the client rate
limit's waits.

Lines look like ``... reconcile batch start: jobs=50 first=101 waited_s=0.412 pid=12 at=1764673000.123`` and
``... reconcile batch end: jobs=50 first=101 ok=50 failed=0 requeued=0 read_s=0.2 passes_s=3.1 total_s=3.3
requests=206 throttle_wait_s=0.0 throttle_waits=0 threads=4 pid=12 at=1764673003.4`` (since issue 36 also
``fresh``, ``list_s``, ``lists``, ``listed`` and ``kinds``); a single submit's task adds ``... reconcile claim: job=7
found=claimed claim_s=0.012 jobs=3 ids=7,5,6 pid=12 at=1764673000.1`` (reconcile/jobs/coalesce.py), from which
`dispatch_split` says where each submit's time to Dispatched went.
"""
from __future__ import annotations

import re
from pathlib import Path

LINE = re.compile(r"reconcile batch (start|end): (.*)$")
CLAIM = re.compile(r"reconcile claim: (.*)$")
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


def parse_claims(text: str) -> dict[int, dict]:
    """{job id: its task's claim line} of every "reconcile claim" line in `text` (reconcile/jobs/coalesce.py: `at`
    the task's start, `found`, `claim_s`, `ids` as a list of ints, [] when it claimed none); a later line of the
    same job (a retried task) replaces an earlier one."""
    out: dict[int, dict] = {}
    for line in text.splitlines():
        found = CLAIM.search(line)
        if not found:
            continue
        fields = {k: _value(v) for k, v in FIELD.findall(found.group(1))}
        if not isinstance(fields.get("job"), int):
            continue
        ids = str(fields.get("ids", "-"))
        fields["ids"] = [int(i) for i in ids.split(",") if i.isdigit()]
        out[fields["job"]] = fields
    return out


def read_claims(path: Path) -> dict[int, dict]:
    """`parse_claims` of the log file at `path` ({} when it does not exist)."""
    return parse_claims(path.read_text(errors="replace")) if path.exists() else {}


def dispatch_split(claims: dict[int, dict], batches: dict[int, dict], posted: dict[int, float],
                   dispatched: dict[int, float]) -> dict[int, dict]:
    """Where each single submit's time to Dispatched went, per job id of `posted` (epoch seconds of its POST's
    start) with a `dispatched` time (epoch seconds its Dispatched entry was recorded), in seconds:

    - `task_wait`: POST -> its own task started (the broker, and a worker process free to take it);
    - `to_claimed`: POST -> the start of the task that claimed it into a batch (its own, or an earlier one's);
    - `claim`: that claim's transaction; `read`: the batch's backends and snapshot (`read_s`), `list` of it the
      LISTs (`list_s`);
    - `pass`: the batch's read done -> its Dispatched recorded (its pass, and its place among the batch's).

    A job whose claim or batch line is missing gets the parts that are known."""
    taken = {i: c for c in claims.values() if c.get("found") == "claimed" for i in c["ids"]}
    out: dict[int, dict] = {}
    for job_id, began in posted.items():
        row: dict[str, float] = {}
        own = claims.get(job_id)
        if own is not None:
            row["task_wait"] = own["at"] - began
        claim = taken.get(job_id)
        if claim is not None:
            row["to_claimed"] = claim["at"] - began
            row["claim"] = claim.get("claim_s", 0.0)
            batch = batches.get(min(claim["ids"])) or {}
            end, start = batch.get("end") or {}, batch.get("start") or {}
            if "read_s" in end:
                row["read"] = end["read_s"]
                row["list"] = end.get("list_s", 0.0)
                if job_id in dispatched:
                    row["pass"] = dispatched[job_id] - (start.get("at", claim["at"] + row["claim"]) + end["read_s"])
        out[job_id] = row
    return out


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
        "list_s_max": round(max((e.get("list_s", 0.0) for e in ends), default=0.0), 3),
        "lists": sum(e.get("lists", 0) for e in ends),
        "listed": sum(e.get("listed", 0) for e in ends),
        "fresh": sum(e.get("fresh", 0) for e in ends),
        "kinds": [e["kinds"] for e in ends if e.get("kinds") not in (None, "-")],
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
