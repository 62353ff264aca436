"""KAI queue units, and conversion from and to what users type.

KAI `QueueResource` (`pkg/apis/scheduling/v2/resources.go`, KAI `docs/queues/README.md`; see
docs/upstream.md, KAI Queue) counts:

- ``gpu``: devices, fractions allowed (0.5 = half a GPU);
- ``cpu``: millicores (1000 = one core);
- ``memory``: decimal megabytes, 1 MB = 10^6 bytes (the scheduler multiplies by 1000*1000, `proportion.go`).

``-1`` means unlimited (quota or limit). A limit of 0, or an omitted one, means nothing can be allocated.

What users may send for a quota or limit, per resource field:

- a JSON **number** is taken as already in KAI units: ``"cpu_quota": 4000`` is 4 cores;
- a JSON **string** is a Kubernetes quantity, converted: ``"4"`` (GPU: 4 devices; CPU: 4 cores = 4000),
  ``"500m"`` (CPU: 500 millicores; GPU: 0.5), ``"64Gi"`` (memory: 68,719,476,736 bytes = 68720 MB, rounded up
  to whole MB), ``"8G"`` (memory: 8000 MB);
- ``-1``, ``"-1"`` or ``"unlimited"`` is unlimited.

CPU and memory round **up** to whole millicores and whole MB (as the API server rounds CPU requests), so a
converted amount is never smaller than what was typed. GPUs keep up to three decimals (milli-GPU).
"""
from __future__ import annotations

from decimal import ROUND_CEILING, Decimal
from functools import lru_cache

from django.core.exceptions import ValidationError

from . import quantities

RESOURCES = ("gpu", "cpu", "memory")
UNLIMITED = -1
UNLIMITED_WORDS = ("-1", "unlimited")
# Kubernetes resource names in Queue `status.allocated` / `status.requested` (ResourceLists of quantities).
STATUS_RESOURCE_NAMES = {"gpu": "nvidia.com/gpu", "cpu": "cpu", "memory": "memory"}
BYTES_PER_MB = Decimal(10) ** 6
GIB = 2**30
UNITS = {"gpu": "devices", "cpu": "millicores", "memory": "MB (10^6 bytes)"}
# Largest amount stored: keeps MB and millicores well inside a 64-bit integer column.
MAX_AMOUNT = 2**53


def _whole(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def from_quantity(resource: str, amount: Decimal) -> float | int:
    """A parsed quantity in base units (devices, cores, bytes) to KAI units (devices, millicores, MB)."""
    if resource == "gpu":
        return float(amount.quantize(Decimal("0.001"), rounding=ROUND_CEILING))
    if resource == "cpu":
        return quantities.to_millicores(amount)
    return _whole(amount / BYTES_PER_MB)


def kai_amounts(resources: dict) -> dict[str, float | int]:
    """What a gang asks (`kube.resources.gang_requests`: {"nvidia.com/gpu": Decimal devices, "cpu": cores, "memory":
    bytes}) in KAI units for gpu, cpu and memory: ``{"gpu": 3.0, "cpu": 8500, "memory": 7785}`` (0 when not asked;
    other resources are not queue resources and are left out)."""
    return {r: from_quantity(r, resources.get(name, Decimal(0))) for r, name in STATUS_RESOURCE_NAMES.items()}


def to_kai(resource: str, value, field: str, *, allow_unlimited: bool = True) -> float | int:
    """What a user sent for `resource` (number in KAI units, quantity string, or -1/"unlimited") to KAI units.

    Returns a float for GPUs and an int for CPU and memory. Raises ValidationError({field: ...}) for other
    types, negatives other than -1, fractional millicores or MB given as numbers, and absurd sizes.
    """
    if isinstance(value, str) and value.strip().lower() in UNLIMITED_WORDS or (
            not isinstance(value, bool) and isinstance(value, (int, float)) and value == UNLIMITED):
        if not allow_unlimited:
            raise ValidationError({field: "must not be -1 (unlimited) here"})
        return UNLIMITED
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValidationError({field: f"must be a number in {UNITS[resource]} or a quantity string such as "
                                      f"'4', '500m' or '64Gi', got {type(value).__name__}"})
    if isinstance(value, str):
        amount = from_quantity(resource, quantities.parse(value.strip(), field))
    else:
        if value != value or value in (float("inf"), float("-inf")):
            raise ValidationError({field: "must be a finite number"})
        if value < 0:
            raise ValidationError({field: f"must be -1 (unlimited) or at least 0, got {value}"})
        if resource != "gpu" and value != int(value):
            raise ValidationError({field: f"must be whole {UNITS[resource]} when given as a number, got {value}; "
                                          "send a quantity string such as '1.5' or '1500m' to convert"})
        amount = float(value) if resource == "gpu" else int(value)
    if amount > MAX_AMOUNT:
        raise ValidationError({field: f"'{value}' is too large"})
    return amount


# Pages show the same few amounts on every queue (1,000 queues x 6 amounts per tree); typed: 4 and 4.0 apart.
@lru_cache(maxsize=4096, typed=True)
def display(resource: str, amount) -> str:
    """A KAI amount as a short human string: "unlimited", "0.5" GPUs, "4" / "1500m" CPU, "64Gi" / "8G" / "68720M".
    Pure and cached: `amount` must be hashable (a number or None)."""
    if amount is None:
        return ""
    if amount == UNLIMITED:
        return "unlimited"
    if resource == "gpu":
        return format(Decimal(str(amount)).normalize(), "f")
    if resource == "cpu":
        amount = int(amount)
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    amount = int(amount)
    if amount == 0:
        return "0"
    size = amount * 10**6
    if size % GIB == 0:
        return f"{size // GIB}Gi"
    if amount % 1000 == 0:
        return f"{amount // 1000}G"
    return f"{amount}M"


def status_amounts(resource_list: dict | None) -> dict[str, float | int]:
    """A Queue `status.allocated` / `status.requested` ResourceList to KAI units for gpu, cpu and memory.

    ``{"nvidia.com/gpu": "2", "cpu": "4", "memory": "8Gi"}`` -> ``{"gpu": 2.0, "cpu": 4000, "memory": 8590}``.
    Missing resources are 0; unparsable values are skipped (0). Other resources (run.ai/gpu.memory) are ignored.
    A missing list (None: the scheduler has not reported, e.g. no KAI scheduler runs) is ``{}``, not zeros, so
    readers can tell "nothing reported" from "reported 0" and fall back to gangweb's own estimate.
    """
    if resource_list is None:
        return {}
    out: dict[str, float | int] = {}
    for resource, name in STATUS_RESOURCE_NAMES.items():
        raw = resource_list.get(name)
        try:
            out[resource] = from_quantity(resource, quantities.parse(raw, name)) if raw is not None else (
                0.0 if resource == "gpu" else 0)
        except ValidationError:
            out[resource] = 0.0 if resource == "gpu" else 0
    return out
