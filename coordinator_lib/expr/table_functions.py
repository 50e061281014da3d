"""Table functions: each call gives a row zero or more rows (the FlatMap
operator, expr/relation.py), with PostgreSQL's meaning:

- generate_series(start, stop, step) of integers: start, start + step, ...
  while not past stop (below it for a negative step); no rows when a value
  is NULL or step points away from stop. step 0 is PostgreSQL's error 22023,
  which the planner (sql/table_functions.py) raises in a Map below the
  FlatMap, so the error takes the path every scalar error takes;
- unnest(array): one row per element, NULL elements included; no rows for
  a NULL array.

Both engines read this: the in-process backend calls `expand`, the Spark
backend explodes arrays built the same way (compute/spark_backend.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from coordinator_lib.repr.relation import ColumnType


class TableFunc(StrEnum):
    GENERATE_SERIES = "generate_series"
    UNNEST = "unnest"


def output_type(func: TableFunc, args: Sequence[ColumnType]) -> ColumnType:
    """The type of the column the function gives (its arguments' types)."""
    if func is TableFunc.GENERATE_SERIES:
        return ColumnType(args[0].scalar_type, False)
    element = args[0].scalar_type.element
    if element is None:
        raise TypeError(f"unnest of a non-array {args[0].scalar_type.value}")
    return ColumnType(element, True)


class StepIsZero(ValueError):
    code = "22023"

    def __init__(self) -> None:
        super().__init__("step size cannot equal zero")


def expand(func: TableFunc, args: Sequence[Any]) -> list[Any]:
    """The values one call gives, in order."""
    if func is TableFunc.UNNEST:
        return [] if args[0] is None else list(args[0])
    if any(a is None for a in args):
        return []
    start, stop, step = args
    if step == 0:
        raise StepIsZero()
    return list(range(start, stop + 1, step) if step > 0 else range(start, stop - 1, step))


__all__ = ["StepIsZero", "TableFunc", "expand", "output_type"]
