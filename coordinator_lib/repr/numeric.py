"""numeric's documented bound: every numeric value is a `numeric(38, 10)`.

Rows live in Arrow (`decimal128(38, 10)`) and Spark (`DecimalType(38, 10)`,
Spark's widest decimal), so a numeric value has at most 28 digits before the
decimal point and exactly 10 after it. Each value is brought into that
domain where it is made (a literal, a text cast, an arithmetic result) the
way PostgreSQL assigns to a `numeric(38, 10)` column: more fractional digits
round half away from zero, a value that does not fit is SQLSTATE 22003
"numeric field overflow". Arithmetic in between runs with PostgreSQL's
precision (1000 significant digits), so `1e100 * 1e100` is exact before it
is found too big, never a decimal-context error.
"""

from __future__ import annotations

import decimal

NUMERIC_PRECISION = 38
NUMERIC_SCALE = 10
NUMERIC_LIMIT = decimal.Decimal(1).scaleb(NUMERIC_PRECISION - NUMERIC_SCALE)
_QUANTUM = decimal.Decimal(1).scaleb(-NUMERIC_SCALE)

# PostgreSQL's numeric computes with up to 1000 digits; exponents far beyond
# anything that fits are still representable, so overflow is ours to report.
ARITHMETIC = decimal.Context(
    prec=1000,
    rounding=decimal.ROUND_HALF_UP,
    Emax=10**6,
    Emin=-(10**6),
    traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow],
)

OVERFLOW_DETAIL = (
    f"A field with precision {NUMERIC_PRECISION}, scale {NUMERIC_SCALE} must round to an "
    f"absolute value less than 10^{NUMERIC_PRECISION - NUMERIC_SCALE}."
)


class NumericFieldOverflow(ArithmeticError):
    """A value outside numeric(38, 10): PostgreSQL's 22003 "numeric field overflow"."""

    code = "22003"
    message = "numeric field overflow"
    detail = OVERFLOW_DETAIL


def to_numeric(value: decimal.Decimal | int) -> decimal.Decimal:
    """`value` as a stored numeric: rounded half away from zero to 10 places.
    Raises NumericFieldOverflow if it has more than 28 integer digits (or is
    not finite: NaN and infinities have no place in decimal128)."""
    number = decimal.Decimal(value)
    if not number.is_finite():
        raise NumericFieldOverflow(NumericFieldOverflow.message)
    if number.adjusted() >= NUMERIC_PRECISION - NUMERIC_SCALE + 1:  # cheap early exit
        raise NumericFieldOverflow(NumericFieldOverflow.message)
    rounded = number.quantize(_QUANTUM, context=ARITHMETIC)
    if rounded.copy_abs() >= NUMERIC_LIMIT:  # abs() would round to 28 digits
        raise NumericFieldOverflow(NumericFieldOverflow.message)
    return rounded


def numeric_display(value: decimal.Decimal | int) -> decimal.Decimal:
    """`value` as clients see it: without trailing fractional zeros, as
    Materialize prints numeric (`avg` of 1, 2, 2, 2 is 1.75, not the stored
    1.7500000000), and never with an exponent."""
    value = decimal.Decimal(value)
    if not value.is_finite():
        return value
    if value == value.to_integral_value():
        return value.quantize(decimal.Decimal(1), context=ARITHMETIC)
    return value.normalize(context=ARITHMETIC)
