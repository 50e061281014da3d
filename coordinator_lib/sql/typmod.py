"""What a column's type modifier does to a value written into it.

A `varchar(n)` or `char(n)` column (ColumnType.length) refuses a value with
more than `n` characters other than trailing blanks (22001), cuts those
blanks, and for char(n) pads to `n` (expr/functions/character.py). An
`interval <fields>(p)` column (ColumnType.interval_typmod) drops the fields
right of the qualifier's last and rounds the seconds to p, as PostgreSQL's
interval_scale (`'1 day 3 hours 5 minutes'` into `interval hour` is
`1 day 03:00:00`), and reads text with the qualifier (`'5'` is 5 hours).
INSERT and UPDATE wrap the value written (`fit_expr`); COPY and INSERT of
constants fit each value as it is converted (`fit_value`, `read_text`).
"""

from __future__ import annotations

from typing import Any

from coordinator_lib.expr.functions import CallFunction, FunctionError, evaluate
from coordinator_lib.expr.scalar import Literal, ScalarExpr
from coordinator_lib.repr.interval import Interval
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.errors import StringDataRightTruncation
from coordinator_lib.sql.function_calls import parse_interval

_FIT = {ScalarType.TEXT: "varchar_fit", ScalarType.BPCHAR: "bpchar_fit"}
_RESTRICT = "interval_restrict"


def has_modifier(column: ColumnType) -> bool:
    """Whether a write into `column` changes or checks the value."""
    if column.scalar_type is ScalarType.INTERVAL:
        return column.interval_typmod is not None
    return column.length is not None and column.scalar_type in _FIT


def _arguments(column: ColumnType) -> tuple[str, tuple[Literal, ...]]:
    """The function that fits a value to `column`, and its other arguments."""
    if column.interval_typmod is not None:
        fields, precision = column.interval_typmod
        return _RESTRICT, (
            Literal(fields, ColumnType(ScalarType.TEXT, False)),
            Literal(precision, ColumnType(ScalarType.INTEGER, False)),
        )
    return _FIT[column.scalar_type], (
        Literal(column.length, ColumnType(ScalarType.INTEGER, False)),
    )


def fit_expr(expr: ScalarExpr, column: ColumnType) -> ScalarExpr:
    """`expr` as written into `column` (unchanged without a modifier)."""
    if not has_modifier(column):
        return expr
    name, args = _arguments(column)
    return CallFunction(name, (expr, *args), ColumnType(column.scalar_type))


def fit_value(value: Any, column: ColumnType) -> Any:
    """A value as written into `column`; StringDataRightTruncation if too long."""
    if value is None or not has_modifier(column):
        return value
    name, args = _arguments(column)
    try:
        return evaluate(name, (value, *(a.value for a in args)))
    except FunctionError as error:
        raise StringDataRightTruncation(str(error)) from None


def read_text(text: str, column: ColumnType) -> Any:
    """Text given for `column` as its modifier reads it (COPY, an untyped
    literal): an interval with the column's qualifier, else fitted text."""
    if column.interval_typmod is not None:
        fields, precision = column.interval_typmod
        return Interval(*parse_interval(text, fields or None, precision))
    return fit_value(text, column)


__all__ = ["fit_expr", "fit_value", "has_modifier", "read_text"]
