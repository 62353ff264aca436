"""The start estimate's words: amounts, work and durations as people read them (queueing/estimate.py's reasons
and evidence, and the API's minutes). Pure."""
from __future__ import annotations

import math

from ..amounts import in_people_units

NOUNS = {"gpu": ("GPU", "GPUs"), "cpu": ("CPU core", "CPU cores"), "memory": ("GiB", "GiB")}


def amount(resource: str, amount: float) -> str:
    """A KAI amount in the pages' units (scheduling/amounts.py): 3 -> "3 GPUs", 1 -> "1 GPU", 8000 (millicores) ->
    "8 CPU cores", 4295 (MB) -> "4 GiB"."""
    n = number(resource, amount)
    one, many = NOUNS[resource]
    return f"{n} {one if n == '1' else many}"


def number(resource: str, amount: float) -> str:
    """A KAI amount as a bare number in the unit `amount` names (amounts.in_people_units)."""
    return in_people_units(resource, amount)


WORK_NOUNS = {"gpu": "GPU·h", "cpu": "CPU core·h", "memory": "GiB·h"}


def arrival_work(resource: str, amount_seconds: float) -> str:
    """Expected work (a KAI amount x seconds) in people's units per hour, to two significant digits (it is an
    expectation: "~16", never "~15.99"): 43200 GPU-seconds -> "12 GPU·h", 1800 -> "0.5 GPU·h", 57564 -> "16 GPU·h";
    8000 millicores for 1 h -> "8 CPU core·h"."""
    return f"{number(resource, _two_digits(amount_seconds / 3600))} {WORK_NOUNS[resource]}"


def _two_digits(x: float) -> float:
    """`x` rounded to two significant digits (0 stays 0)."""
    if not math.isfinite(x) or x == 0:
        return x
    return round(x, 1 - int(math.floor(math.log10(abs(x)))))


def minutes(seconds: float) -> int:
    """Whole minutes, rounded up (a start 30 s away is "in 1 min")."""
    return int(math.ceil(max(seconds, 0.0) / 60 - 1e-9))


def span(seconds: float) -> str:
    """A duration for people: "21 s" under 2 minutes (a 21-s run is not "1 min"), else "42 min", "3 h 10 min",
    "2 d 4 h" (to the nearest minute)."""
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{int(math.floor(seconds + 0.5))} s"
    m = int(math.floor(seconds / 60 + 0.5))
    if m < 120:
        return f"{m} min"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(h, 24)
    return f"{d} d {h} h" if h else f"{d} d"
