"""The errs half of Map, Filter and Reduce on Spark: which rows a scalar fails on.

With ANSI mode a division by zero fails the whole Spark job. Instead, each
scalar that can fail gets an error column, a struct (code, message) that is
the first error the local engine (`local_scalar.eval_scalar`) raises on that
row, in its evaluation order, or NULL; the value itself is only computed
where the error is NULL. The operator then splits its rows: errors to the
step's error collection (`StepContext.errors`, compute/error_collection.py),
the others on as data. Covered: division and modulo by zero (22012) and
`RaiseError` (a subquery's second row, 21000); other failures (overflow,
bad casts, function errors) still fail the Spark job.
"""

from __future__ import annotations

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from coordinator_lib.compute.scalar import to_spark
from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    CallVariadic,
    If,
    RaiseError,
    ScalarExpr,
    VariadicFunc,
)
from coordinator_lib.repr.relation import ColumnType

ERROR = "__error"
ERROR_TYPE = T.StructType(
    [T.StructField("code", T.StringType(), True), T.StructField("message", T.StringType(), True)]
)


def _no_error() -> SparkColumn:
    return F.lit(None).cast(ERROR_TYPE)


def _error(code: str, message: str) -> SparkColumn:
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
    if isinstance(expr, RaiseError):
        return _error(expr.code, expr.message)
    if isinstance(expr, If):
        branches = [error_column(expr.then, types), error_column(expr.els, types)]
        branch = None
        if any(b is not None for b in branches):
            then, els = (_no_error() if b is None else b for b in branches)
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
    own = None
    if isinstance(expr, CallBinary) and expr.func in (BinaryFunc.DIV, BinaryFunc.MOD):
        left, right = to_spark(expr.left, types), to_spark(expr.right, types)
        zero = left.isNotNull() & right.isNotNull() & (right == F.lit(0))
        own = F.when(zero, _error("22012", "division by zero"))
    return first_error([*(error_column(child, types) for child in expr.children()), own])


def can_fail(expr: ScalarExpr) -> bool:
    """Whether `error_column` has anything to say about `expr`."""
    if isinstance(expr, RaiseError):
        return True
    if isinstance(expr, CallBinary) and expr.func in (BinaryFunc.DIV, BinaryFunc.MOD):
        return True
    return any(can_fail(child) for child in expr.children())


def plan_can_fail(expr: RelationExpr) -> bool:
    """Whether any scalar of the plan can fail (it then has an error collection)."""
    return any(can_fail(s) for s in _scalars(vars(expr).values())) or any(
        plan_can_fail(child) for child in expr.inputs()
    )


def _scalars(values: object) -> list[ScalarExpr]:
    """The scalar expressions in an operator's fields (tuples, AggregateExprs)."""
    if isinstance(values, ScalarExpr):
        return [values]
    if isinstance(values, tuple | list) or type(values).__name__ == "dict_values":
        return [s for v in values for s in _scalars(v)]  # type: ignore[attr-defined]
    inner = getattr(values, "expr", None)  # an AggregateExpr
    return [inner] if isinstance(inner, ScalarExpr) else []


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
