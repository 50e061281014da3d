"""Materialize's list functions (sql/list_syntax.py binds them; a list is
held as an array is, so LIST[...] is array_build and l[i] array_index): the
call's own type is the list type, as array_build's is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import functions as F

from coordinator_lib.expr.functions.registry import Pseudo, SparkCall, scalar_function, sig
from coordinator_lib.repr.relation import ScalarType

S = ScalarType


@scalar_function("list_length", sig(Pseudo.ANY, result=S.INTEGER), sql=())
def list_length(values: Sequence[Any]) -> int:
    return len(values)


def _slice_on_spark(call: SparkCall) -> Any:
    values, first, last = call.args
    start = F.greatest(first, F.lit(1))
    end = F.least(last, F.size(values).cast("bigint"))
    length = end - start + 1
    sliced = F.slice(values, start.cast("int"), length.cast("int"))
    return F.when(length > 0, sliced).cast(call.out)


@scalar_function(
    "list_slice",
    sig(Pseudo.ANY, S.BIGINT, S.BIGINT, result=S.INTEGER_LIST),
    sql=(),
    spark=_slice_on_spark,
)
def list_slice(values: Sequence[Any], first: int, last: int) -> tuple[Any, ...] | None:
    """l[first:last], 1-based and inclusive; NULL when empty (Materialize's)."""
    start = max(first, 1)
    return tuple(values[start - 1 : max(last, 0)]) or None


def _cat_on_spark(call: SparkCall) -> Any:
    a, b = call.args
    both = F.concat(a, b)
    return F.when(a.isNull(), b).when(b.isNull(), a).otherwise(both).cast(call.out)


@scalar_function(
    "list_cat",
    sig(Pseudo.ANY, Pseudo.ANY, result=S.INTEGER_LIST),
    sql=(),
    spark=_cat_on_spark,
    nulls=lambda nullable: all(nullable),
)
def list_cat(a: Sequence[Any] | None, b: Sequence[Any] | None) -> tuple[Any, ...] | None:
    """a || b; a NULL list is left out (Materialize's list_cat)."""
    if a is None or b is None:
        return None if a is None and b is None else tuple(a or b or ())
    return (*a, *b)


def _append_on_spark(call: SparkCall) -> Any:
    values, element = call.args
    appended = F.concat(values, F.array(element))
    return F.when(values.isNull(), F.array(element)).otherwise(appended).cast(call.out)


def _prepend_on_spark(call: SparkCall) -> Any:
    element, values = call.args
    prepended = F.concat(F.array(element), values)
    return F.when(values.isNull(), F.array(element)).otherwise(prepended).cast(call.out)


@scalar_function(
    "list_append",
    sig(Pseudo.ANY, Pseudo.ANY, result=S.INTEGER_LIST),
    sql=(),
    spark=_append_on_spark,
    nulls=lambda nullable: False,  # a NULL list appends to {}
)
def list_append(values: Sequence[Any] | None, element: Any) -> tuple[Any, ...]:
    """l || e: a NULL element is appended as NULL, a NULL list is empty."""
    return (*(values or ()), element)


@scalar_function(
    "list_prepend",
    sig(Pseudo.ANY, Pseudo.ANY, result=S.INTEGER_LIST),
    sql=(),
    spark=_prepend_on_spark,
    nulls=lambda nullable: False,  # a NULL list prepends to {}
)
def list_prepend(element: Any, values: Sequence[Any] | None) -> tuple[Any, ...]:
    return (element, *(values or ()))
