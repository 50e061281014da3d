"""Scalar expressions as Spark Columns, with PostgreSQL semantics.

Columns of a rendered collection are named `c0, c1, ...` (see render.py), so
`Column(i)` is `F.col("c{i}")`. Spark runs with ANSI mode (its default in
4.x): integer overflow and division by zero raise errors, as in PostgreSQL.
Integer division truncates toward zero (`div`), as PostgreSQL's does.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F
from pyspark.sql import types as T

from coordinator_lib.compute.spark_numeric import numeric_add, numeric_div, numeric_mul
from coordinator_lib.expr.functions import REGISTRY, CallFunction, SparkCall, evaluate
from coordinator_lib.expr.scalar import (
    COMPARISON_OPERATORS,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    Column,
    If,
    Literal,
    RaiseError,
    Record,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
    is_integer,
)
from coordinator_lib.persist.spark_batches import spark_type
from coordinator_lib.repr.interval import Interval, from_struct, to_struct
from coordinator_lib.repr.relation import ColumnType, ScalarType


def column_name(index: int) -> str:
    return f"c{index}"


def _numeric_text(column: SparkColumn) -> SparkColumn:
    """numeric as text without trailing zeros (local_scalar's numeric_display):
    decimal(38, 10) prints all 10 places."""
    plain = F.regexp_replace(column.cast("string"), r"(\.[0-9]*?)0+$", "$1")
    return F.regexp_replace(F.regexp_replace(plain, r"\.$", ""), r"^-0$", "0")


def _array_to_text(column: SparkColumn, source: ScalarType) -> SparkColumn:
    """`array::text` through the local engine's formatting (a Python UDF), so
    both engines print `{1,2,NULL}` alike. timestamptz elements go as UTC
    wall-clock times (the session time zone is UTC)."""
    from coordinator_lib.compute.local_scalar import to_text

    element = source.element
    assert element is not None
    if element is ScalarType.TIMESTAMPTZ:
        column = column.cast(T.ArrayType(T.TimestampNTZType()))

    def text(values):  # no hints: they make Spark guess a pandas UDF
        if values is None:
            return None
        if element is ScalarType.TIMESTAMPTZ:
            values = [None if v is None else v.replace(tzinfo=dt.UTC) for v in values]
        return to_text(tuple(values), source)

    return F.udf(text, T.StringType())(column)


def _local_cast(column: SparkColumn, source: ScalarType, to: ScalarType) -> SparkColumn:
    """A cast to or from interval through the local engine's (a Python UDF):
    its text is PostgreSQL's, which no Spark cast of a struct gives; also
    casts to arrays and lists element by element (the local engine's)."""
    from coordinator_lib.compute.local_scalar import cast_value

    def cast(value):  # no hints: they make Spark guess a pandas UDF
        out = cast_value(from_struct(value), source, to)
        if isinstance(out, tuple) and to.element is not None:  # an array: a list for Spark
            return [to_struct(v) for v in out]
        return to_struct(out)

    return F.udf(cast, spark_type(to))(column)


def to_spark(expr: ScalarExpr, types: tuple[ColumnType, ...]) -> SparkColumn:
    """Translate `expr` over input columns typed `types`."""
    if isinstance(expr, Column):
        return F.col(column_name(expr.index))
    if isinstance(expr, Literal):
        if isinstance(expr.value, Interval):
            fields = expr.value.as_struct()
            return F.struct(*[F.lit(v).alias(k) for k, v in fields.items()]).cast(
                spark_type(ScalarType.INTERVAL)
            )
        value = list(expr.value) if isinstance(expr.value, tuple) else expr.value  # an array
        return F.lit(value).cast(spark_type(expr.type.scalar_type))
    if isinstance(expr, Cast):
        source = expr.expr.typ(types).scalar_type
        if source.element is not None and expr.to.element is source.element:
            return to_spark(expr.expr, types)  # an array as a list: the same values
        if source.element is not None and expr.to.element is not None:
            return _local_cast(to_spark(expr.expr, types), source, expr.to)
        if source.element is not None and source is not expr.to:
            return _array_to_text(to_spark(expr.expr, types), source)
        if expr.to.element is not None:  # text to a list: the local engine's parsing
            return _local_cast(to_spark(expr.expr, types), source, expr.to)
        if source is ScalarType.BPCHAR and expr.to is not ScalarType.BPCHAR:
            text = F.rtrim(to_spark(expr.expr, types))  # char(n) as text drops its padding
            return text if expr.to is ScalarType.TEXT else text.cast(spark_type(expr.to))
        if source is ScalarType.NUMERIC and expr.to is ScalarType.TEXT:
            return _numeric_text(to_spark(expr.expr, types))
        local = {ScalarType.INTERVAL, ScalarType.TIME}
        if (local & {source, expr.to} or source.is_map or expr.to.is_map) and source is not expr.to:
            return _local_cast(to_spark(expr.expr, types), source, expr.to)
        if expr.to in _FLOAT_CAST_SOURCES.get(source, ()):
            return _float_cast_checked(to_spark(expr.expr, types), source, expr.to)
        return to_spark(expr.expr, types).cast(spark_type(expr.to))
    if isinstance(expr, Record):  # array_agg's input: fields f0 (the value), f1...
        return F.struct(*[to_spark(f, types).alias(f"f{i}") for i, f in enumerate(expr.fields)])
    if isinstance(expr, If) and isinstance(expr.then, Record):  # FILTER of array_agg
        return F.when(to_spark(expr.cond, types), to_spark(expr.then, types))
    if isinstance(expr, If):
        cond = to_spark(expr.cond, types)
        out = expr.typ(types).scalar_type
        then = to_spark(expr.then, types).cast(spark_type(out))
        els = to_spark(expr.els, types).cast(spark_type(out))
        return F.when(cond, then).otherwise(els)
    if isinstance(expr, CallUnary):
        return _unary(expr, types)
    if isinstance(expr, CallBinary):
        return _binary(expr, types)
    if isinstance(expr, CallVariadic):
        return _variadic(expr, types)
    if isinstance(expr, CallFunction) and not REGISTRY[expr.name].local_only:
        args = [to_spark(arg, types) for arg in expr.args]
        return _call_function(expr, args, [arg.typ(types) for arg in expr.args])
    if isinstance(expr, RaiseError):
        return F.raise_error(F.lit(f"{expr.message} (SQLSTATE {expr.code})")).cast(
            spark_type(expr.type.scalar_type)
        )
    raise TypeError(f"cannot render {expr!r} on Spark")


def _call_function(
    expr: CallFunction, args: list[SparkColumn], types: list[ColumnType]
) -> SparkColumn:
    """A registered function over its rendered `args`: its Spark builder,
    else its Python implementation as a UDF; NULL when an argument is
    (unless the function takes NULLs)."""
    function = REGISTRY[expr.name]
    out = spark_type(expr.type.scalar_type)
    if function.spark is not None:
        result = function.spark(SparkCall(expr, args, types, out))
    else:
        result = _python_udf(expr.name, out)(*args)
    if function.nulls is not None:
        return result
    nullable = [a for a, t in zip(args, types, strict=True) if t.nullable]
    if not nullable:
        return result
    any_null = nullable[0].isNull()
    for arg in nullable[1:]:
        any_null = any_null | arg.isNull()
    return F.when(any_null, F.lit(None).cast(out)).otherwise(result)


def _from_spark(value: Any) -> Any:
    """A UDF's argument as the Python implementation takes it: an interval
    struct as an Interval, an array (a list) as a tuple of such values."""
    if isinstance(value, list):
        return tuple(from_struct(v) for v in value)
    return from_struct(value)


def _python_udf(name: str, out: T.DataType) -> Any:
    """A function's Python implementation as a Spark UDF; its errors carry
    their SQLSTATE in the message (as `RaiseError`'s do)."""

    def call(*args: Any) -> Any:
        try:
            return to_struct(evaluate(name, [_from_spark(arg) for arg in args]))
        except ValueError as error:
            code = getattr(error, "code", "22000")
            raise ValueError(f"{error} (SQLSTATE {code})") from None

    return F.udf(call, out)


def _unary(expr: CallUnary, types: tuple[ColumnType, ...]) -> SparkColumn:
    inner = to_spark(expr.expr, types)
    func = expr.func
    if func is UnaryFunc.NOT:
        return ~inner
    if func is UnaryFunc.NEG:
        return -inner
    if func is UnaryFunc.IS_NULL:
        return inner.isNull()
    if func is UnaryFunc.IS_NOT_NULL:
        return inner.isNotNull()
    if func is UnaryFunc.IS_TRUE:
        return F.coalesce(inner, F.lit(False))
    if func is UnaryFunc.IS_FALSE:
        return F.coalesce(~inner, F.lit(False))
    if func is UnaryFunc.ABS:
        return F.abs(inner)
    if func is UnaryFunc.LOWER:
        return F.lower(inner)
    if func is UnaryFunc.UPPER:
        return F.upper(inner)
    if func is UnaryFunc.LENGTH:
        return F.char_length(inner).cast("int")
    raise TypeError(f"cannot render {func} on Spark")


# numeric's operations with all its 10 places (Spark's own drop some).
_NUMERIC_OPERATIONS = {
    BinaryFunc.ADD: numeric_add,
    BinaryFunc.SUB: lambda left, right: numeric_add(left, right, negate=True),
    BinaryFunc.MUL: numeric_mul,
    BinaryFunc.DIV: numeric_div,
}


def _binary(expr: CallBinary, types: tuple[ColumnType, ...]) -> SparkColumn:
    left, right = to_spark(expr.left, types), to_spark(expr.right, types)
    func = expr.func
    result = expr.typ(types)
    out_type = spark_type(result.scalar_type)
    if func in (BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD):
        # Compute in the result type so overflow is checked at its width.
        left, right = left.cast(out_type), right.cast(out_type)
        st = result.scalar_type
        if st is ScalarType.NUMERIC and func in _NUMERIC_OPERATIONS:
            return _NUMERIC_OPERATIONS[func](left, right)
        if func is BinaryFunc.ADD:
            return _float_checked(func, st, left, right, (left + right).cast(out_type))
        if func is BinaryFunc.SUB:
            return _float_checked(func, st, left, right, (left - right).cast(out_type))
        if func is BinaryFunc.MUL:
            return _float_checked(func, st, left, right, (left * right).cast(out_type))
        if func is BinaryFunc.MOD:
            return (left % right).cast(out_type)
        if is_integer(result.scalar_type):
            # PostgreSQL integer division truncates toward zero; so does `div`.
            return F.call_function("div", left, right).cast(out_type)
        return _float_checked(func, result.scalar_type, left, right, (left / right).cast(out_type))
    if func in COMPARISON_OPERATORS:
        return COMPARISON_OPERATORS[func](left, right)
    if func is BinaryFunc.LIKE:
        return F.call_function("like", left, right)
    if func is BinaryFunc.CONCAT:
        return F.concat(left.cast("string"), right.cast("string"))
    raise TypeError(f"cannot render {func} on Spark")


def _float_checked(
    func: BinaryFunc, st: ScalarType, left: SparkColumn, right: SparkColumn, result: SparkColumn
) -> SparkColumn:
    """A real or double result checked as PostgreSQL (and the local engine,
    `local_scalar._float_result`) checks it: an infinite result of finite
    inputs is 22003 overflow, a zero product or quotient of non-zero inputs
    22003 underflow; Spark answers them with Infinity and 0. Other types
    pass as they are (ANSI mode checks integers and decimals)."""
    if st not in (ScalarType.REAL, ScalarType.DOUBLE):
        return result
    infinity = F.lit(float("inf"))
    finite = (F.abs(left) < infinity) & (F.abs(right) < infinity)
    overflow = finite & (F.abs(result) == infinity)
    underflow = F.lit(False)
    if func is BinaryFunc.MUL:
        underflow = (result == 0) & (left != 0) & (right != 0)
    elif func is BinaryFunc.DIV:
        underflow = (result == 0) & (left != 0) & (F.abs(right) < infinity)
    return (
        F.when(overflow, F.raise_error(F.lit("value out of range: overflow (SQLSTATE 22003)")))
        .when(underflow, F.raise_error(F.lit("value out of range: underflow (SQLSTATE 22003)")))
        .otherwise(result)
    )


# The casts to a float type whose value Spark answers with Infinity where
# PostgreSQL (and `local_scalar._cast`) raise 22003: by source type.
_FLOAT_CAST_SOURCES = {
    ScalarType.DOUBLE: (ScalarType.REAL,),
    ScalarType.NUMERIC: (ScalarType.REAL,),
    ScalarType.TEXT: (ScalarType.REAL, ScalarType.DOUBLE),
}
_INFINITIES = ("inf", "+inf", "-inf", "infinity", "+infinity", "-infinity")


def _float_cast_checked(value: SparkColumn, source: ScalarType, to: ScalarType) -> SparkColumn:
    """A cast to real or double checked as PostgreSQL checks it: a finite
    value beyond the type's range ('1e39'::real, 1e39::real, 1e300::real,
    '1e400'::float8) is 22003 overflow; Spark's cast answers it with
    Infinity. Text that spells infinity stays infinite."""
    result = value.cast(spark_type(to))
    infinity = F.lit(float("inf"))
    if source is ScalarType.TEXT:
        finite = ~F.lower(F.trim(value)).isin(*_INFINITIES)
    else:
        finite = F.abs(value.cast(T.DoubleType())) < infinity
    overflow = finite & (F.abs(result) == infinity)
    return F.when(
        overflow, F.raise_error(F.lit("value out of range: overflow (SQLSTATE 22003)"))
    ).otherwise(result)


def _variadic(expr: CallVariadic, types: tuple[ColumnType, ...]) -> SparkColumn:
    args = [to_spark(e, types) for e in expr.exprs]
    func = expr.func
    if func is VariadicFunc.AND:
        out = args[0]
        for arg in args[1:]:
            out = out & arg
        return out
    if func is VariadicFunc.OR:
        out = args[0]
        for arg in args[1:]:
            out = out | arg
        return out
    out_type = spark_type(expr.typ(types).scalar_type)
    casted = [a.cast(out_type) for a in args]
    if func is VariadicFunc.COALESCE:
        return F.coalesce(*casted)
    if func is VariadicFunc.GREATEST:
        return F.greatest(*casted)
    if func is VariadicFunc.LEAST:
        return F.least(*casted)
    raise TypeError(f"cannot render {func} on Spark")
