"""verify_datum_desc: rows checked against their RelationDesc before they are
written or returned.

The check is a pandera schema derived from the RelationDesc (one column per
column: the Python type each SQL type is carried as, integer ranges,
nullability). A row that does not fit is a bug or bad input, never something
to send on: the error names the column, the row and what was wrong. The
schema's element rule (`_fits`) runs first over plain rows; pandera, which
costs milliseconds a call, runs only to report rows that fail.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import itertools
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pandas as pd
import pandera.pandas as pa
from pandera.errors import SchemaError, SchemaErrorReason

from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.repr.interval import Interval
from coordinator_lib.repr.relation import RelationDesc, ScalarType

_PYTHON_TYPES: dict[ScalarType, tuple[type, ...]] = {
    ScalarType.BOOLEAN: (bool,),
    ScalarType.SMALLINT: (int,),
    ScalarType.INTEGER: (int,),
    ScalarType.BIGINT: (int,),
    ScalarType.REAL: (float, int),
    ScalarType.DOUBLE: (float, int),
    ScalarType.NUMERIC: (decimal.Decimal, int),
    ScalarType.TEXT: (str,),
    ScalarType.BPCHAR: (str,),
    **{st: (str,) for st in ScalarType if st.is_map},
    ScalarType.BYTEA: (bytes,),
    ScalarType.DATE: (dt.date,),
    ScalarType.TIMESTAMP: (dt.datetime,),
    ScalarType.TIMESTAMPTZ: (dt.datetime,),
    ScalarType.JSONB: (str,),
    ScalarType.INTERVAL: (Interval,),
    ScalarType.TIME: (dt.time,),
}
_BITS = {ScalarType.SMALLINT: 16, ScalarType.INTEGER: 32, ScalarType.BIGINT: 64}


def _fits(scalar_type: ScalarType, value: Any) -> bool:
    if value is None:
        return True
    element = scalar_type.element
    if element is not None:  # arrays are tuples of element values (NULLs allowed)
        return isinstance(value, tuple) and all(_fits(element, v) for v in value)
    if isinstance(value, bool) and scalar_type is not ScalarType.BOOLEAN:
        return False
    if not isinstance(value, _PYTHON_TYPES[scalar_type]):
        return False
    if scalar_type is ScalarType.DATE:
        return not isinstance(value, dt.datetime)
    if scalar_type is ScalarType.TIMESTAMP:
        return value.tzinfo is None
    if scalar_type is ScalarType.TIMESTAMPTZ:
        return value.tzinfo is not None
    bits = _BITS.get(scalar_type)
    return bits is None or -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


@functools.lru_cache(maxsize=256)
def pandera_schema(desc: RelationDesc) -> pa.DataFrameSchema:
    """The pandera schema of rows of `desc` (columns by name, as object)."""
    columns = {}
    for name, column in zip(desc.names, desc.types, strict=True):
        scalar = column.scalar_type
        columns[name] = pa.Column(
            object,
            checks=pa.Check(
                functools.partial(_fits, scalar),
                element_wise=True,
                error=f"value is not a {scalar.value}",
            ),
            nullable=column.nullable,
        )
    return pa.DataFrameSchema(columns, strict=True, coerce=False)


# A column whose values are all of exactly these types (and, for integers,
# whose least and greatest values are in range) fits without a per-value
# rule: `set(map(type, ...))`, min and max run in C. Anything else (a
# subclass, a timestamp's zone, an array) takes `_fits` value by value.
_EXACT_TYPES: dict[ScalarType, frozenset[type]] = {
    scalar_type: frozenset(types) for scalar_type, types in _PYTHON_TYPES.items()
}
_ZONE = operator.attrgetter("tzinfo")
_NONE = type(None)


def _column_fits(scalar_type: ScalarType, nullable: bool, values: Sequence[Any]) -> bool:
    kinds = set(map(type, values))
    present = values
    if _NONE in kinds:
        if not nullable:
            return False
        kinds.discard(_NONE)
        present = [v for v in values if v is not None]
    if not present:
        return True
    exact = _EXACT_TYPES.get(scalar_type) if scalar_type.element is None else None
    if exact is not None and kinds <= exact:
        if scalar_type is ScalarType.TIMESTAMP:
            return not any(map(_ZONE, present))
        if scalar_type is ScalarType.TIMESTAMPTZ:
            return all(map(_ZONE, present))
        bits = _BITS.get(scalar_type)
        return bits is None or (
            -(2 ** (bits - 1)) <= min(present) and max(present) < 2 ** (bits - 1)
        )
    return all(_fits(scalar_type, v) for v in present)


def _all_fit(desc: RelationDesc, rows: Sequence[tuple[Any, ...]]) -> bool:
    """The schema's rule (`_fits` and nullability) applied column by column
    without building a frame: pandera costs milliseconds per call, which a
    one-row INSERT cannot afford. Only rows that fail go through pandera,
    which names the column and row."""
    columns = zip(*rows, strict=True)
    return all(
        _column_fits(column.scalar_type, column.nullable, values)
        for column, values in zip(desc.types, columns, strict=False)
    )


def verify_datum_desc(desc: RelationDesc, rows: Sequence[tuple[Any, ...]]) -> None:
    """Raise AdapterError (XX000, or 23502 for a NULL in a NOT NULL column)
    naming the first column and row of `rows` that does not match `desc`."""
    if not rows:
        return
    if set(map(len, rows)) != {desc.arity}:
        position, row = next((p, r) for p, r in enumerate(rows) if len(r) != desc.arity)
        raise AdapterError(
            f"row {position} has {len(row)} columns, expected {desc.arity}", code="XX000"
        )
    if _all_fit(desc, rows):
        return
    frame = pd.DataFrame(list(rows), columns=list(desc.names), dtype=object)
    try:
        pandera_schema(desc).validate(frame)
    except SchemaError as error:
        column = str(error.schema.name) if error.schema is not None else "?"
        cases = error.failure_cases
        row = int(cases["index"].iloc[0]) if cases is not None and len(cases) else None
        if error.reason_code is SchemaErrorReason.SERIES_CONTAINS_NULLS:
            raise AdapterError(
                f'null value in column "{column}" violates not-null constraint', code="23502"
            ) from None
        value = rows[row][desc.names.index(column)] if row is not None else None
        index = desc.names.index(column) if column in desc.names else -1
        expected = desc.types[index].scalar_type.value if index >= 0 else "?"
        raise AdapterError(
            f'column "{column}" row {row}: {value!r} is not a {expected}', code="XX000"
        ) from None


VERIFY_BATCH = 1024


def verified_rows(desc: RelationDesc, rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """`rows` checked by verify_datum_desc a batch at a time as they are
    consumed, so a streamed result never sits whole in a DataFrame."""
    iterator = iter(rows)
    while batch := list(itertools.islice(iterator, VERIFY_BATCH)):
        verify_datum_desc(desc, batch)
        yield from batch
