"""Table functions: each call gives a row zero or more rows (the FlatMap
operator, expr/relation.py), with PostgreSQL's meaning:

- generate_series(start, stop, step) of integers: start, start + step, ...
  while not past stop (below it for a negative step); no rows when a value
  is NULL or step points away from stop. Of timestamps, the step is an
  interval (months, days, microseconds, three arguments), added again and
  again as PostgreSQL does (timestamp + interval, months first). step 0 is PostgreSQL's error 22023,
  which the planner (sql/table_functions.py) raises in a Map below the
  FlatMap, so the error takes the path every scalar error takes;
- unnest(array): one row per element, NULL elements included; no rows for
  a NULL array;
- jsonb_array_elements(jsonb) (as jsonb), jsonb_array_elements_text (as
  text, a JSON null as NULL), jsonb_object_keys(jsonb), jsonb_each(jsonb)
  and jsonb_each_text (two columns, key and value): an array's elements,
  an object's keys (in jsonb's key order); no rows for other values, as in
  Materialize (PostgreSQL raises 22023 there).

Several calls in one FlatMap (PostgreSQL's ROWS FROM (f(...), g(...)), and
how several set-returning calls in one SELECT list run) are zipped: row i
holds the i-th value of each call and NULL where a call gave fewer, as many
rows as the longest gives (`rows_from`).

Both engines read this: the in-process backend calls `expand` (and
`rows_from`), the Spark backend explodes arrays built the same way, zipped
by `arrays_zip`, which pads with NULL as `rows_from` does
(compute/spark_backend.py).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from coordinator_lib.expr.functions.datetime import add_interval
from coordinator_lib.repr.jsonb import canonical_jsonb
from coordinator_lib.repr.relation import ColumnType, ScalarType


class TableFunc(StrEnum):
    GENERATE_SERIES = "generate_series"
    UNNEST = "unnest"
    JSONB_ARRAY_ELEMENTS = "jsonb_array_elements"
    JSONB_ARRAY_ELEMENTS_TEXT = "jsonb_array_elements_text"
    JSONB_OBJECT_KEYS = "jsonb_object_keys"
    JSONB_EACH = "jsonb_each"
    JSONB_EACH_TEXT = "jsonb_each_text"


_KEY = ColumnType(ScalarType.TEXT, False)
# jsonb functions: the columns they give.
JSONB_FUNCTIONS: dict[TableFunc, tuple[ColumnType, ...]] = {
    TableFunc.JSONB_ARRAY_ELEMENTS: (ColumnType(ScalarType.JSONB, False),),
    TableFunc.JSONB_ARRAY_ELEMENTS_TEXT: (ColumnType(ScalarType.TEXT, True),),
    TableFunc.JSONB_OBJECT_KEYS: (_KEY,),
    TableFunc.JSONB_EACH: (_KEY, ColumnType(ScalarType.JSONB, False)),
    TableFunc.JSONB_EACH_TEXT: (_KEY, ColumnType(ScalarType.TEXT, True)),
}


def output_types(func: TableFunc, args: Sequence[ColumnType]) -> tuple[ColumnType, ...]:
    """The columns the function gives (its arguments' types); `expand` gives
    a tuple per row for more than one, else the value."""
    if func is TableFunc.GENERATE_SERIES:
        return (ColumnType(args[0].scalar_type, False),)
    if func in JSONB_FUNCTIONS:
        return JSONB_FUNCTIONS[func]
    element = args[0].scalar_type.element
    if element is None:
        raise TypeError(f"unnest of a non-array {args[0].scalar_type.value}")
    return (ColumnType(element, True),)


class StepIsZero(ValueError):
    code = "22023"

    def __init__(self) -> None:
        super().__init__("step size cannot equal zero")


def expand(func: TableFunc, args: Sequence[Any]) -> list[Any]:
    """The values one call gives, in order."""
    if func is TableFunc.UNNEST:
        return [] if args[0] is None else list(args[0])
    if func in JSONB_FUNCTIONS:
        return [] if args[0] is None else _jsonb_values(func, json.loads(args[0]))
    if any(a is None for a in args):
        return []
    if len(args) == 5:
        return _timestamps(*args)
    start, stop, step = args
    if step == 0:
        raise StepIsZero()
    return list(range(start, stop + 1, step) if step > 0 else range(start, stop - 1, step))


def rows_from(values: Sequence[list[Any]], widths: Sequence[int]) -> list[tuple[Any, ...]]:
    """The rows of calls zipped side by side (ROWS FROM): `values[j]` is what
    call j gave (`expand`), `widths[j]` its columns (several: a tuple per
    value). Row i holds the i-th value of each call's columns, NULL in each
    where the call gave fewer; as many rows as the longest gives."""
    rows: list[tuple[Any, ...]] = []
    for i in range(max((len(v) for v in values), default=0)):
        row: list[Any] = []
        for given, width in zip(values, widths, strict=True):
            if i >= len(given):
                row.extend([None] * width)
            elif width == 1:
                row.append(given[i])
            else:
                row.extend(given[i])
        rows.append(tuple(row))
    return rows


def _timestamps(
    start: dt.datetime, stop: dt.datetime, months: int, days: int, micros: int
) -> list[dt.datetime]:
    sign = months * 2_592_000_000_000 + days * 86_400_000_000 + micros
    if sign == 0:
        raise StepIsZero()
    out: list[dt.datetime] = []
    value = start
    while (value <= stop) if sign > 0 else (value >= stop):
        out.append(value)
        value = add_interval(value, months, days, micros)
    return out


def _jsonb_values(func: TableFunc, value: Any) -> list[Any]:
    if func is TableFunc.JSONB_OBJECT_KEYS:
        return _keys(value)
    if func is TableFunc.JSONB_EACH:
        return [(k, canonical_jsonb(value[k])) for k in _keys(value)]
    if func is TableFunc.JSONB_EACH_TEXT:
        return [(k, _text(value[k])) for k in _keys(value)]
    if not isinstance(value, list):
        return []
    if func is TableFunc.JSONB_ARRAY_ELEMENTS:
        return [canonical_jsonb(e) for e in value]
    return [_text(e) for e in value]


def _text(value: Any) -> str | None:
    """A JSON value as `->>` gives it: a string as itself, null as NULL."""
    return value if isinstance(value, str) or value is None else canonical_jsonb(value)


def _keys(value: Any) -> list[str]:
    """An object's keys in jsonb's order (by length, then bytes)."""
    if not isinstance(value, dict):
        return []
    return sorted(value, key=lambda k: (len(k.encode()), k.encode()))


__all__ = [
    "JSONB_FUNCTIONS",
    "StepIsZero",
    "TableFunc",
    "expand",
    "output_types",
    "rows_from",
]
