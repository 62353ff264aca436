"""Kubernetes resource quantities: parsing with bounds, and the unit conversions gangweb needs.

Parsing is the kubernetes client's `kubernetes.utils.parse_quantity` (decimal SI, binary IEC and exponent
suffixes, as in apimachinery's `resource.Quantity`); this module only adds the checks the API server would
apply (finite, not negative, fits in int64 milli-units) and errors that name the field.
"""
from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, InvalidOperation

from django.core.exceptions import ValidationError
from kubernetes.utils import parse_quantity

# apimachinery stores quantities as int64 scaled values; 2^63-1 milli-units is the largest a pod can carry.
MAX_QUANTITY = Decimal(2**63 - 1) / 1000


def parse(value, field: str) -> Decimal:
    """Parse a quantity ("4", "500m", "64Gi", 2) into a Decimal in base units (cores, bytes, devices).

    Raises ValidationError({field: ...}) for strings that do not parse ("1.5.3Gi"), negatives ("-2"),
    non-finite or absurd values ("1e999"), and for booleans or other non string/number types.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValidationError(
            {field: f"must be a quantity string such as '4', '500m' or '64Gi', got {type(value).__name__}"})
    try:
        amount = parse_quantity(value)
    except (ValueError, InvalidOperation, TypeError):
        raise ValidationError({field: f"'{value}' is not a valid quantity (examples: '4', '500m', '64Gi')"}) from None
    if not amount.is_finite() or amount > MAX_QUANTITY:
        raise ValidationError({field: f"'{value}' is too large"})
    if amount < 0:
        raise ValidationError({field: f"'{value}' must not be negative"})
    return amount


def is_extended_resource(resource: str) -> bool:
    """True for an extended resource such as ``nvidia.com/gpu``: a name with a domain outside ``kubernetes.io/``
    (Kubernetes `IsExtendedResourceName`: not a native resource and not a ``requests.`` quota name)."""
    return "/" in resource and not resource.startswith("kubernetes.io/") and not resource.startswith("requests.")


def parse_resource(resource: str, value, field: str) -> Decimal:
    """`parse`, plus the API server's rule for extended resources (GPUs are devices): their amount must be a whole
    number, so ``nvidia.com/gpu: "0.5"`` or ``"500m"`` is refused here rather than by the cluster after the gang
    objects exist. Source: Kubernetes pod validation, `ValidateResourceRequirements` ("must be an integer").

    Raises ValidationError({field: ...})."""
    amount = parse(value, field)
    if is_extended_resource(resource) and amount != amount.to_integral_value():
        raise ValidationError({field: f"'{value}' is not a whole number: {resource} is an extended resource, "
                                      "counted in whole devices (fractional GPUs are a scheduler feature, not a "
                                      "resource amount)"})
    return amount


def to_millicores(cores: Decimal) -> int:
    """CPU cores (Decimal) to integer millicores, rounding up as the API server does."""
    return int((cores * 1000).to_integral_value(rounding=ROUND_CEILING))


def format_quantity(amount: Decimal, resource: str) -> str:
    """Canonical quantity string for a resource amount in base units.

    CPU: whole cores when integral, else millicores ("4", "1500m"). Memory and others: the plain integer
    when integral ("68719476736"), else the decimal string.
    """
    if resource == "cpu" and amount != amount.to_integral_value():
        return f"{to_millicores(amount)}m"
    if amount == amount.to_integral_value():
        return str(int(amount))
    return format(amount.normalize(), "f")
