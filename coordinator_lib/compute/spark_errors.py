"""The errs half of Map, Filter and Reduce on Spark: which rows a scalar fails on.

With ANSI mode a division by zero fails the whole Spark job. Instead, each
scalar that can fail gets an error column, a struct (code, message) that is
the first error the local engine (`local_scalar.eval_scalar`) raises on that
row, in its evaluation order, or NULL; the value itself is only computed
where the error is NULL. The operator then splits its rows: errors to the
step's error collection (`StepContext.errors`, compute/error_collection.py),
the others on as data. Covered natively: division and modulo by zero
(22012) and `RaiseError` (a subquery's second row, 21000).

Every other scalar error (integer, numeric or float overflow, a bad cast, a
function's error) fails the Spark job, as ANSI mode and `to_spark`'s checks
raise it. Such a step is planned again with *exact errors*
(`exact_errors()`, `is_data_error`; dataflow.step): every scalar that can
fail at all gets an error column computed by the local engine itself (a
Python UDF over the columns it reads), so the rows it fails on leave the
data with the SQLSTATE the in-process engine gives them. Only steps that
meet a failing row (it is new, or still in an operator's old contents) pay
for the UDFs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from coordinator_lib.compute.error_collection import never_fails
from coordinator_lib.compute.local_scalar import EvalError, eval_scalar
from coordinator_lib.compute.scalar import column_name, to_spark
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    CallVariadic,
    If,
    RaiseError,
    ScalarExpr,
    VariadicFunc,
)
from coordinator_lib.repr.interval import from_struct
from coordinator_lib.repr.relation import ColumnType, ScalarType

R = TypeVar("R")
ERROR = "__error"
ERROR_TYPE = T.StructType(
    [T.StructField("code", T.StringType(), True), T.StructField("message", T.StringType(), True)]
)


def no_error() -> SparkColumn:
    return F.lit(None).cast(ERROR_TYPE)


def error_struct(code: str, message: str) -> SparkColumn:
    return F.struct(F.lit(code).alias("code"), F.lit(message).alias("message")).cast(ERROR_TYPE)


def first_error(errors: list[SparkColumn | None]) -> SparkColumn | None:
    """The first non-NULL of `errors`; each is evaluated only if those
    before it are NULL (CASE is lazy), so a later one may assume they are."""
    present = [e for e in errors if e is not None]
    if not present:
        return None
    result = present[-1]
    for error in reversed(present[:-1]):
        result = F.when(error.isNotNull(), error).otherwise(result)
    return result


def error_column(expr: ScalarExpr, types: tuple[ColumnType, ...]) -> SparkColumn | None:
    """`expr`'s first error on a row, or NULL; None if it cannot fail here."""
    if _EXACT.get():
        return None if never_fails(expr) else _evaluated_error(expr, types)
    if isinstance(expr, RaiseError):
        return error_struct(expr.code, expr.message)
    if isinstance(expr, If):
        branches = [error_column(expr.then, types), error_column(expr.els, types)]
        branch = None
        if any(b is not None for b in branches):
            then, els = (no_error() if b is None else b for b in branches)
            taken = F.coalesce(to_spark(expr.cond, types), F.lit(False))
            branch = F.when(taken, then).otherwise(els)
        return first_error([error_column(expr.cond, types), branch])
    if isinstance(expr, CallVariadic) and expr.func is VariadicFunc.COALESCE:
        # Arguments after the first non-NULL one are not evaluated.
        rest: SparkColumn | None = None
        for arg in reversed(expr.exprs):
            later = None if rest is None else F.when(to_spark(arg, types).isNull(), rest)
            rest = first_error([error_column(arg, types), later])
        return rest
    if isinstance(expr, CallVariadic) and expr.func in (VariadicFunc.AND, VariadicFunc.OR):
        # Left to right, operands after the first FALSE (AND) / TRUE (OR)
        # are not evaluated (local_scalar._eval; Spark's And/Or alike).
        decisive = F.lit(expr.func is VariadicFunc.OR)
        rest = None
        for arg in reversed(expr.exprs):
            value = to_spark(arg, types)
            undecided = value.isNull() | (value != decisive)
            later = None if rest is None else F.when(undecided, rest)
            rest = first_error([error_column(arg, types), later])
        return rest
    own = None
    if isinstance(expr, CallBinary) and expr.func in (BinaryFunc.DIV, BinaryFunc.MOD):
        left, right = to_spark(expr.left, types), to_spark(expr.right, types)
        zero = left.isNotNull() & right.isNotNull() & (right == F.lit(0))
        own = F.when(zero, error_struct("22012", "division by zero"))
    return first_error([*(error_column(child, types) for child in expr.children()), own])


def split_errors(marked: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Rows with an `ERROR` column: (those without an error, the errors as
    (code, message) plus `__time` / `__diff`)."""
    bookkeeping = [c for c in ("__time", "__diff") if c in marked.columns]
    errors = marked.filter(F.col(ERROR).isNotNull()).select(
        F.col(f"{ERROR}.code").alias("code"),
        F.col(f"{ERROR}.message").alias("message"),
        *bookkeeping,
    )
    return marked.filter(F.col(ERROR).isNull()).drop(ERROR), errors


# ---------------------------------------------------------------- exact errors
_EXACT: ContextVar[bool] = ContextVar("exact_errors", default=False)

# A Spark job failed on a value: a data exception (SQLSTATE class 22, as
# Spark's ANSI errors and `to_spark`'s checks raise them, possibly wrapped
# in a task or write failure), a `raise_error` (P0001), or a Python UDF's
# evaluation error.
_DATA_ERROR = re.compile(r"SQLSTATE:? ?22[0-9A-Z]{3}|SQLSTATE: P0001|\b(EvalError|FunctionError)\b")


@contextlib.contextmanager
def exact_errors() -> Iterator[None]:
    """Render (within this block) every fallible scalar's error column with
    the local engine's evaluation (see the module docstring)."""
    token = _EXACT.set(True)
    try:
        yield
    finally:
        _EXACT.reset(token)


def is_data_error(error: BaseException) -> bool:
    """Whether a Spark job failed on a row's value (not on I/O or a bug)."""
    return _DATA_ERROR.search(str(error)) is not None


def exact_on_failure(run: Callable[[], R]) -> R:
    """`run()`, and, if its Spark job failed on a value, `run()` again with
    exact errors (a view's step, an index's step and a one-off query alike):
    only work that meets a failing row pays for the UDFs."""
    try:
        return run()
    except Exception as error:
        if not is_data_error(error):
            raise
        with exact_errors():
            return run()


def _from_spark(value: Any, st: ScalarType) -> Any:
    """A value as a Python UDF gets it, as the local engine holds it (what
    `repr.relation.column_pylist` reads from Arrow)."""
    if value is None:
        return None
    if st.element is not None:
        return tuple(_from_spark(v, st.element) for v in value)
    if st is ScalarType.TIMESTAMPTZ:  # a naive local time: the instant, in UTC
        return value.astimezone(dt.UTC)
    if st is ScalarType.BYTEA:
        return bytes(value)
    return from_struct(value)


def _evaluated_error(expr: ScalarExpr, types: tuple[ColumnType, ...]) -> SparkColumn:
    """`expr`'s first error on each row as the local engine raises it."""
    read = sorted(expr.columns())
    kinds = [types[i].scalar_type for i in read]
    width = len(types)

    def first(*values):  # no hints: they make Spark guess a pandas UDF
        row: list[Any] = [None] * width
        for i, st, value in zip(read, kinds, values, strict=True):
            row[i] = _from_spark(value, st)
        try:
            eval_scalar(expr, tuple(row), types)
        except EvalError as error:
            return (error.code, error.message)
        return None

    # Nondeterministic: Spark must not evaluate a later predicate or value
    # (pushed below it, or combined with its filter) before this column says
    # the row fails; that evaluation would fail the job again.
    udf = F.udf(first, ERROR_TYPE).asNondeterministic()
    return udf(*[F.col(column_name(i)) for i in read])
