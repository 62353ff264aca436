"""Amounts of resources for people: the one number and unit style of every page, API message and warning.

`format_number` writes a number ("1,020", "0.25", "0.001": thousands separators, never an exponent);
`for_people` writes an amount with its unit ("3 GPUs", "8.5 CPU cores", "1,020 GiB"). Memory stays in GiB however
large (no switch to TiB): a quota of 1,024 GiB and a use of 980 GiB compare at a glance, and GiB is the unit the
queue forms take (kubectl's Gi). Pure functions, unit-tested on plain values (tests/unit/test_units_for_people.py).

`for_api` is the API's one way to write an amount as a JSON number: a whole amount as an integer (2, never 2.0,
whether the column stores GPUs as floats or millicores as integers), a fraction as it is (0.5). The unit is the
field's, documented with it: KAI units (GPU devices, CPU millicores, memory MB = 10^6 bytes) for queues, their
usage and fair shares; Kubernetes base units (devices, cores, bytes) for a job's pod requests (`why_pending`).
"""
from __future__ import annotations

import math

UNLIMITED = -1  # KAI's unlimited quota or limit
GIB = 2**30
MIB = 2**20
BYTES_PER_KAI_MB = 10**6  # KAI counts memory in decimal megabytes (kube/kai_units.py)
MILLI = 1000  # KAI counts CPU in millicores
GPU_NAMES = ("gpu", "nvidia.com/gpu")


def format_number(x) -> str:
    """A number for people: thousands separators and no exponent ("1,024,000", "1,020"); at most 2 decimals
    from 1 to 100 ("7.25"), two significant digits below 1 ("0.5", "0.25", "0.015"), so a small amount never
    reads as 0 ("0.001": one millicore in cores). A value that is not finite is written as Python does ("inf")."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    if x == int(x) or abs(x) >= 100:  # a fraction of a megabyte or millicore is noise at that size
        return f"{round(x):,}"
    digits = 2 if abs(x) >= 1 else 1 - math.floor(math.log10(abs(x)))  # below 1: two significant digits
    return f"{x:,.{digits}f}".rstrip("0").rstrip(".")


def for_api(value):
    """An amount for the API's JSON: whole -> int ("gpus": 2), else a float rounded to 6 decimals (0.5,
    2147.483648: 2 GiB in MB); None stays None, as does a value that is not a finite number."""
    kind = type(value)  # the common cases first: the whole queue tree writes ~20,000 amounts (bench/, issue 36)
    if kind is int:
        return value
    if kind is float and value.is_integer():  # False for inf and nan
        return int(value)
    if value is None or isinstance(value, bool):
        return value
    x = float(value)
    if not math.isfinite(x):
        return value
    x = round(x, 6)
    return int(x) if x == int(x) else x


# The unit each queue resource is written in for people, plural (see for_people), and its size in KAI units.
PEOPLE_UNITS = {"gpu": ("GPUs", 1), "cpu": ("CPU cores", MILLI), "memory": ("GiB", GIB / BYTES_PER_KAI_MB)}


def in_answer(resource: str, value):
    """A KAI amount of queue resource `resource` as the JSON number of an answer about use (limit warnings,
    capacity): in its people's unit (PEOPLE_UNITS: GPU devices, CPU cores, memory GiB), through `for_api`; the
    answer names the unit beside it (`unit_of`). The pages and the warning's sentence write the same number
    (`for_people`), so API, CLI and page agree: 2000 millicores is 2 (CPU cores) everywhere. -1 stays -1."""
    if value is None or float(value) == UNLIMITED:
        return for_api(value)
    return for_api(float(value) / PEOPLE_UNITS[resource][1])


BASE_SIZES = {"gpu": 1, "cpu": 1, "memory": GIB}  # Kubernetes base units (devices, cores, bytes) per people unit


def base_in_answer(resource: str, value):
    """An amount in Kubernetes base units (GPU devices, CPU cores, memory bytes: node allocatable, pod requests)
    as the JSON number of an answer about use, in the same people units as `in_answer` (GPUs, CPU cores, GiB).
    `resource`: "gpu" (or "nvidia.com/gpu"), "cpu", "memory"."""
    if value is None:
        return None
    return for_api(float(value) / BASE_SIZES["gpu" if resource in GPU_NAMES else resource])


def unit_of(resource: str) -> str:
    """The unit `in_answer` writes `resource` in: "GPUs", "CPU cores", "GiB"."""
    return PEOPLE_UNITS[resource][0]


def unit_words(resource: str, number) -> str:
    """`unit_of(resource)` as it reads after `number` (a people-unit number): "1 GPU", "1 CPU core", "2 GPUs"."""
    unit = unit_of(resource)
    return unit[:-1] if number is not None and float(number) == 1 and unit.endswith("s") else unit


def in_people_units(resource: str, value) -> str:
    """A KAI amount of queue resource `resource` ("gpu", "cpu", "memory") as a bare number in its people's unit
    (PEOPLE_UNITS: GPUs, CPU cores, GiB), for sentences that name the unit once: 4294.97 (MB) -> "4", 8000
    (millicores) -> "8". Memory stays in GiB here however small, so a sentence never mixes units."""
    return format_number(float(value) / PEOPLE_UNITS[resource][1])


def for_people(resource: str, value, units: str = "kai") -> str:
    """One amount of one resource in the one unit style for people: "3 GPUs", "0.5 GPU", "8.5 CPU cores",
    "1 CPU core", "7.25 GiB" and "1,020 GiB" (binary: kubectl's Gi), "512 MiB" under 0.1 GiB; "unlimited" for -1
    (KAI's unlimited), "?" for None. Other resources keep their name: "2 example.com/fpga".

    - `resource`: "gpu" or "nvidia.com/gpu", "cpu", "memory", or any other resource name;
    - `units`: "kai" when `value` is in KAI queue units (devices, millicores, MB = 10^6 bytes: the dashboard's
      queue and job figures, kube/kai_units.py), "base" when in Kubernetes base units (devices, cores, bytes: what
      observe/ computes).

    KAI's raw units are shown only next to a KAI value itself (views.display.kai_raw); every other figure on every
    page goes through this function (templatetags `amount`, observe.why_pending `amount`).
    """
    if value is None:
        return "?"
    value = float(value)
    if value == UNLIMITED:
        return "unlimited"
    if resource in GPU_NAMES:
        return f"{format_number(value)} GPU{'' if value == 1 or 0 < value < 1 else 's'}"
    if resource == "cpu":
        cores = value / MILLI if units == "kai" else value
        return f"{format_number(cores)} CPU core{'' if cores == 1 else 's'}"
    if resource == "memory":
        size = value * BYTES_PER_KAI_MB if units == "kai" else value
        if size >= GIB / 10 or size == 0:
            return f"{format_number(size / GIB)} GiB"
        if size >= MIB:
            return f"{format_number(size / MIB)} MiB"
        return f"{format_number(size)} bytes"
    return f"{format_number(value)} {resource}"
