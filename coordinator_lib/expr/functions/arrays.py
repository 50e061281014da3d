"""Array functions: `x = ANY (array)`, string_to_array, ARRAY[...] and
subscripts, array_length, cardinality, array_ndims, array_dims,
array_lower and array_upper."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import functions as F

from coordinator_lib.expr.functions.registry import Pseudo, SparkCall, scalar_function, sig
from coordinator_lib.repr.relation import ScalarType


@scalar_function("array_contains", sig(Pseudo.ANY, Pseudo.ANY, result=ScalarType.BOOLEAN), sql=())
def array_contains(values: Any, x: Any) -> bool | None:
    """`x = ANY (values)` with PostgreSQL's NULLs: TRUE if an element equals
    x, else NULL if an element is NULL, else FALSE."""
    if any(v is not None and v == x for v in values):
        return True
    return None if any(v is None for v in values) else False


def _text_nullable(nullable: Sequence[bool]) -> bool:
    return nullable[0]


def _string_to_array_on_spark(call: SparkCall) -> Any:
    """The Python implementation as a UDF giving a list (Spark's arrays)."""

    def split(*args: str | None) -> list[str | None] | None:
        parts = string_to_array(*args)
        return None if parts is None else list(parts)

    return F.udf(split, call.out)(*call.args)


@scalar_function(
    "string_to_array",
    sig(ScalarType.TEXT, ScalarType.TEXT, result=ScalarType.TEXT_ARRAY),
    sig(ScalarType.TEXT, ScalarType.TEXT, ScalarType.TEXT, result=ScalarType.TEXT_ARRAY),
    spark=_string_to_array_on_spark,
    nulls=_text_nullable,
)
def string_to_array(
    text: str | None, delimiter: str | None, null_text: str | None = None
) -> tuple[str | None, ...] | None:
    """PostgreSQL's: NULL text gives NULL, '' an empty array; a NULL
    delimiter splits into characters, '' keeps the text whole; elements
    equal to `null_text` (when not NULL) become NULL."""
    if text is None:
        return None
    if text == "":
        return ()
    if delimiter is None:
        parts = list(text)
    elif delimiter == "":
        parts = [text]
    else:
        parts = text.split(delimiter)
    return tuple(None if null_text is not None and p == null_text else p for p in parts)


# ARRAY[...] and array[i] (sql/function_calls.py binds them: the element type
# is the arguments' common type, so the call's own type is the result's).
def _array_on_spark(call: SparkCall) -> Any:
    return F.array(*call.args).cast(call.out)


@scalar_function(
    "array_build",
    sig(result=ScalarType.TEXT_ARRAY, variadic=(Pseudo.ANY,)),
    sql=(),
    spark=_array_on_spark,
    nulls=lambda nullable: False,
)
def array_build(*elements: Any) -> tuple[Any, ...]:
    """ARRAY[a, b, ...]: elements may be NULL, the array is not."""
    return tuple(elements)


def _index_on_spark(call: SparkCall) -> Any:
    values, index = call.args
    inside = (index >= 1) & (index <= F.size(values))
    return F.when(inside, values.getItem((index - 1).cast("int"))).cast(call.out)


@scalar_function(
    "array_index",
    sig(Pseudo.ANY, ScalarType.BIGINT, result=ScalarType.TEXT),
    sql=(),
    spark=_index_on_spark,
)
def array_index(values: Sequence[Any], index: int) -> Any:
    """array[i]: 1-based; NULL outside the array (PostgreSQL's)."""
    return values[index - 1] if 1 <= index <= len(values) else None


# array_length(array, dimension) and cardinality(array), PostgreSQL's: an
# empty array has no dimension 1 (array_length is NULL), cardinality 0.
def _array_length_on_spark(call: SparkCall) -> Any:
    values, dimension = call.args
    return F.when((dimension == 1) & (F.size(values) > 0), F.size(values)).cast(call.out)


@scalar_function(
    "array_length",
    sig(Pseudo.ANY_ARRAY, ScalarType.INTEGER, result=ScalarType.INTEGER),
    spark=_array_length_on_spark,
    nulls=lambda nullable: True,
)
def array_length(values: Sequence[Any] | None, dimension: int | None) -> int | None:
    if values is None or dimension != 1 or not values:
        return None
    return len(values)


@scalar_function(
    "cardinality",
    sig(Pseudo.ANY_ARRAY, result=ScalarType.INTEGER),
    spark=lambda call: F.size(call.args[0]).cast(call.out),
)
def cardinality(values: Sequence[Any]) -> int:
    return len(values)


# array_ndims, array_dims, array_lower, array_upper of Tidemark's arrays,
# which are one-dimensional with lower bound 1 (PostgreSQL's answers for
# them): an empty array has no dimensions, so each is NULL for it.
def _when_dimension_one(call: SparkCall, value: Any) -> Any:
    values, dimension = call.args
    return F.when((dimension == 1) & (F.size(values) > 0), value).cast(call.out)


@scalar_function(
    "array_ndims",
    sig(Pseudo.ANY_ARRAY, result=ScalarType.INTEGER),
    spark=lambda call: F.when(F.size(call.args[0]) > 0, F.lit(1)).cast(call.out),
    nulls=lambda nullable: True,
)
def array_ndims(values: Sequence[Any]) -> int | None:
    return 1 if values else None


@scalar_function(
    "array_dims",
    sig(Pseudo.ANY_ARRAY, result=ScalarType.TEXT),
    spark=lambda call: F.when(
        F.size(call.args[0]) > 0,
        F.concat(F.lit("[1:"), F.size(call.args[0]).cast("string"), F.lit("]")),
    ),
    nulls=lambda nullable: True,
)
def array_dims(values: Sequence[Any]) -> str | None:
    """`[1:n]`, the bounds of each dimension."""
    return f"[1:{len(values)}]" if values else None


@scalar_function(
    "array_lower",
    sig(Pseudo.ANY_ARRAY, ScalarType.INTEGER, result=ScalarType.INTEGER),
    spark=lambda call: _when_dimension_one(call, F.lit(1)),
    nulls=lambda nullable: True,
)
def array_lower(values: Sequence[Any] | None, dimension: int | None) -> int | None:
    return 1 if values and dimension == 1 else None


@scalar_function(
    "array_upper",
    sig(Pseudo.ANY_ARRAY, ScalarType.INTEGER, result=ScalarType.INTEGER),
    spark=lambda call: _when_dimension_one(call, F.size(call.args[0])),
    nulls=lambda nullable: True,
)
def array_upper(values: Sequence[Any] | None, dimension: int | None) -> int | None:
    return len(values) if values and dimension == 1 else None


@scalar_function(
    "string_agg_of_array",
    sig(ScalarType.TEXT_ARRAY, ScalarType.TEXT, result=ScalarType.TEXT),
    sql=(),
    nulls=lambda nullable: True,
)
def string_agg_of_array(values: Sequence[str | None] | None, separator: str) -> str | None:
    """string_agg(v, sep ORDER BY other)'s last step (sql/aggregates.py): the
    values array_agg collected in its order, joined; NULL values are skipped
    and a group without any is NULL, as string_agg's."""
    parts = [v for v in values or () if v is not None]
    return separator.join(parts) if parts else None


# Ordering comparisons of arrays and lists (`a < b`): PostgreSQL's order,
# element by element, a NULL element above every value (and equal to another
# NULL), a prefix below the longer one (compute/local_ordered.py orders
# arrays the same way for ORDER BY, TopK and windows).
ORDERED_ELEMENTS = frozenset(
    {
        ScalarType.BOOLEAN,
        ScalarType.SMALLINT,
        ScalarType.INTEGER,
        ScalarType.BIGINT,
        ScalarType.REAL,
        ScalarType.DOUBLE,
        ScalarType.NUMERIC,
        ScalarType.TEXT,
        ScalarType.BYTEA,
        ScalarType.DATE,
        ScalarType.TIMESTAMP,
        ScalarType.TIMESTAMPTZ,
    }
)


def spark_order_key(column: Any) -> Any:
    """An array column as Spark orders it the way PostgreSQL does: each
    element a struct (is it NULL, the value), so NULL elements come last."""
    return F.transform(column, lambda e: F.struct(e.isNull().alias("n"), e.alias("v")))


def _array_cmp_on_spark(call: SparkCall) -> Any:
    a, b = (spark_order_key(c) for c in call.args)
    return F.when(a < b, F.lit(-1)).when(a > b, F.lit(1)).otherwise(F.lit(0))


def _element_cmp(x: Any, y: Any) -> int:
    if x is None or y is None:
        return 0 if x is y else (1 if x is None else -1)
    x_nan, y_nan = x != x, y != y  # NaN: above every number, equal to itself
    if x_nan or y_nan:
        return 0 if x_nan and y_nan else (1 if x_nan else -1)
    return -1 if x < y else (1 if y < x else 0)


@scalar_function(
    "array_cmp",
    sig(Pseudo.ANY, Pseudo.ANY, result=ScalarType.INTEGER),
    sql=(),
    spark=_array_cmp_on_spark,
)
def array_cmp(a: Sequence[Any], b: Sequence[Any]) -> int:
    """-1, 0 or 1 as `a` orders before, with or after `b` (the order above)."""
    for x, y in zip(a, b, strict=False):
        result = _element_cmp(x, y)
        if result:
            return result
    return (len(a) > len(b)) - (len(a) < len(b))
