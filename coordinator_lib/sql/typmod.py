"""What a column's length modifier does to a value written into it.

A `varchar(n)` or `char(n)` column (ColumnType.length) refuses a value with
more than `n` characters other than trailing blanks (22001), cuts those
blanks, and for char(n) pads to `n` (expr/functions/character.py). INSERT
and UPDATE wrap the value written (`fit_expr`); COPY and INSERT of
constants fit each value as it is converted (`fit_value`).
"""

from __future__ import annotations

from typing import Any

from coordinator_lib.expr.functions import CallFunction, FunctionError, evaluate
from coordinator_lib.expr.scalar import Literal, ScalarExpr
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.errors import StringDataRightTruncation

_FIT = {ScalarType.TEXT: "varchar_fit", ScalarType.BPCHAR: "bpchar_fit"}


def has_length(column: ColumnType) -> bool:
    return column.length is not None and column.scalar_type in _FIT


def fit_expr(expr: ScalarExpr, column: ColumnType) -> ScalarExpr:
    """`expr` as written into `column` (unchanged without a length)."""
    if not has_length(column):
        return expr
    length = Literal(column.length, ColumnType(ScalarType.INTEGER, False))
    return CallFunction(_FIT[column.scalar_type], (expr, length), ColumnType(column.scalar_type))


def fit_value(value: Any, column: ColumnType) -> Any:
    """A value as written into `column`; StringDataRightTruncation if too long."""
    if value is None or not has_length(column):
        return value
    try:
        return evaluate(_FIT[column.scalar_type], (value, column.length))
    except FunctionError as error:
        raise StringDataRightTruncation(str(error)) from None


__all__ = ["fit_expr", "fit_value", "has_length"]
