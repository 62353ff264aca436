"""`amounts.for_api`: the API's one way to write an amount as a JSON number (its fast paths included)."""
from __future__ import annotations

import math
from decimal import Decimal

import pytest

from scheduling.amounts import for_api


@pytest.mark.parametrize(("value", "written"), [
    (2, 2), (2.0, 2), (-1, -1), (-1.0, -1), (0.0, 0), (0.5, 0.5), (2147.483648, 2147.483648),
    (0.12345678, 0.123457), (1.0000000001, 1), (Decimal("2"), 2), (Decimal("0.25"), 0.25), (None, None),
    (True, True),
])
def test_a_whole_amount_is_an_integer_and_a_fraction_is_rounded_to_6_decimals(value, written):
    out = for_api(value)
    assert out == written and type(out) is type(written)


def test_an_amount_that_is_not_finite_is_left_as_it_is():
    assert for_api(math.inf) == math.inf and math.isnan(for_api(math.nan))
