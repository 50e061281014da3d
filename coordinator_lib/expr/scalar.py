"""Scalar expressions over the columns of one input row.

Columns are referred to by index. Every node computes its type from its
inputs' types (`typ(column_types)`), with PostgreSQL's rules: integer
arithmetic stays integer (division truncates, overflow is an error), any NULL
operand makes a NULL result except in AND/OR/COALESCE/IS NULL.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from coordinator_lib.repr.relation import ColumnType, ScalarType, common_column_type

_INTEGERS = (ScalarType.SMALLINT, ScalarType.INTEGER, ScalarType.BIGINT)
_FLOATS = (ScalarType.REAL, ScalarType.DOUBLE)
NUMERIC_RANK = {
    ScalarType.SMALLINT: 0,
    ScalarType.INTEGER: 1,
    ScalarType.BIGINT: 2,
    ScalarType.NUMERIC: 3,
    ScalarType.REAL: 4,
    ScalarType.DOUBLE: 5,
}


def is_numeric(st: ScalarType) -> bool:
    return st in NUMERIC_RANK


def is_integer(st: ScalarType) -> bool:
    return st in _INTEGERS


def common_numeric(a: ScalarType, b: ScalarType) -> ScalarType:
    """PostgreSQL's implicit widening for arithmetic between two numerics."""
    return a if NUMERIC_RANK[a] >= NUMERIC_RANK[b] else b


class UnaryFunc(StrEnum):
    NOT = "not"
    NEG = "neg"
    IS_NULL = "is_null"
    IS_NOT_NULL = "is_not_null"
    IS_TRUE = "is_true"
    IS_FALSE = "is_false"
    ABS = "abs"
    LOWER = "lower"
    UPPER = "upper"
    LENGTH = "length"


class BinaryFunc(StrEnum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MOD = "mod"
    EQ = "eq"
    NOT_EQ = "not_eq"
    LT = "lt"
    LTE = "lte"
    GT = "gt"
    GTE = "gte"
    LIKE = "like"
    CONCAT = "concat"


class VariadicFunc(StrEnum):
    AND = "and"
    OR = "or"
    COALESCE = "coalesce"
    GREATEST = "greatest"
    LEAST = "least"


_COMPARISONS = {
    BinaryFunc.EQ,
    BinaryFunc.NOT_EQ,
    BinaryFunc.LT,
    BinaryFunc.LTE,
    BinaryFunc.GT,
    BinaryFunc.GTE,
    BinaryFunc.LIKE,
}
# The comparison operators as Python functions: they apply as well to Python
# values (compute/local_scalar.py) as to Spark Columns (compute/scalar.py).
COMPARISON_OPERATORS: dict[BinaryFunc, Callable[[Any, Any], Any]] = {
    BinaryFunc.EQ: operator.eq,
    BinaryFunc.NOT_EQ: operator.ne,
    BinaryFunc.LT: operator.lt,
    BinaryFunc.LTE: operator.le,
    BinaryFunc.GT: operator.gt,
    BinaryFunc.GTE: operator.ge,
}
_ARITHMETIC = {BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD}
BOOL = ScalarType.BOOLEAN


class ScalarExpr:
    """Base of scalar expression nodes."""

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        raise TypeError(f"{type(self).__name__} has no type rule")  # every node overrides

    def children(self) -> tuple[ScalarExpr, ...]:
        return ()

    def columns(self) -> set[int]:
        """Indexes of the input columns this expression reads."""
        out: set[int] = set()
        for child in self.children():
            out |= child.columns()
        return out


@dataclass(frozen=True)
class Column(ScalarExpr):
    index: int

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        return column_types[self.index]

    def columns(self) -> set[int]:
        return {self.index}

    def __repr__(self) -> str:
        return f"#{self.index}"


@dataclass(frozen=True)
class Literal(ScalarExpr):
    value: Any
    type: ColumnType

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        return self.type

    def __repr__(self) -> str:
        return "null" if self.value is None else repr(self.value)


@dataclass(frozen=True)
class CallUnary(ScalarExpr):
    func: UnaryFunc
    expr: ScalarExpr

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        inner = self.expr.typ(column_types)
        if self.func in (UnaryFunc.IS_NULL, UnaryFunc.IS_NOT_NULL):
            return ColumnType(BOOL, False)
        if self.func in (UnaryFunc.IS_TRUE, UnaryFunc.IS_FALSE):
            return ColumnType(BOOL, False)
        if self.func is UnaryFunc.NOT:
            return ColumnType(BOOL, inner.nullable)
        if self.func is UnaryFunc.LENGTH:
            return ColumnType(ScalarType.INTEGER, inner.nullable)
        return inner

    def children(self) -> tuple[ScalarExpr, ...]:
        return (self.expr,)

    def __repr__(self) -> str:
        return f"{self.func.value}({self.expr!r})"


@dataclass(frozen=True)
class CallBinary(ScalarExpr):
    func: BinaryFunc
    left: ScalarExpr
    right: ScalarExpr

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        left = self.left.typ(column_types)
        right = self.right.typ(column_types)
        nullable = left.nullable or right.nullable
        if self.func in _COMPARISONS:
            return ColumnType(BOOL, nullable)
        if self.func is BinaryFunc.CONCAT:
            return ColumnType(ScalarType.TEXT, nullable)
        if self.func in _ARITHMETIC:
            a, b = left.scalar_type, right.scalar_type
            if not (is_numeric(a) and is_numeric(b)):
                raise TypeError(
                    f"operator {self.func.value} does not apply to {a.value}, {b.value}"
                )
            # Division by zero makes an error, not a NULL, so nullability is unchanged.
            return ColumnType(common_numeric(a, b), nullable)
        raise TypeError(f"no type rule for {self.func}")

    def children(self) -> tuple[ScalarExpr, ...]:
        return (self.left, self.right)

    def __repr__(self) -> str:
        return f"{self.func.value}({self.left!r}, {self.right!r})"


@dataclass(frozen=True)
class CallVariadic(ScalarExpr):
    func: VariadicFunc
    exprs: tuple[ScalarExpr, ...]

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        types = [e.typ(column_types) for e in self.exprs]
        if self.func in (VariadicFunc.AND, VariadicFunc.OR):
            return ColumnType(BOOL, any(t.nullable for t in types))
        scalar = types[0].scalar_type
        for t in types[1:]:
            if is_numeric(scalar) and is_numeric(t.scalar_type):
                scalar = common_numeric(scalar, t.scalar_type)
        # COALESCE, and GREATEST / LEAST, which ignore NULLs (PostgreSQL): NULL only if all are.
        return common_column_type(scalar, all(t.nullable for t in types), types)

    def children(self) -> tuple[ScalarExpr, ...]:
        return self.exprs

    def __repr__(self) -> str:
        return f"{self.func.value}({', '.join(map(repr, self.exprs))})"


@dataclass(frozen=True)
class If(ScalarExpr):
    cond: ScalarExpr
    then: ScalarExpr
    els: ScalarExpr

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        then, els = self.then.typ(column_types), self.els.typ(column_types)
        scalar = then.scalar_type
        if is_numeric(scalar) and is_numeric(els.scalar_type):
            scalar = common_numeric(scalar, els.scalar_type)
        return common_column_type(scalar, then.nullable or els.nullable, [then, els])

    def children(self) -> tuple[ScalarExpr, ...]:
        return (self.cond, self.then, self.els)

    def __repr__(self) -> str:
        return f"if({self.cond!r}, {self.then!r}, {self.els!r})"


@dataclass(frozen=True)
class Cast(ScalarExpr):
    expr: ScalarExpr
    to: ScalarType

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        return ColumnType(self.to, self.expr.typ(column_types).nullable)

    def children(self) -> tuple[ScalarExpr, ...]:
        return (self.expr,)

    def __repr__(self) -> str:
        return f"{self.expr!r}::{self.to.value}"


@dataclass(frozen=True)
class RaiseError(ScalarExpr):
    """Evaluating it is a runtime error with SQLSTATE `code`: a plan puts it
    only on rows that must not exist (a scalar subquery's second row), so the
    query fails exactly when PostgreSQL's would. `type` is the type it stands in for."""

    code: str
    message: str
    type: ColumnType

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        return self.type

    def __repr__(self) -> str:
        return f"error({self.message!r})"


@dataclass(frozen=True)
class Record(ScalarExpr):
    """A tuple of values (a Spark struct): only as the input of array_agg
    (`AggregateExpr` ARRAY_AGG), whose fields are the aggregated value then
    its ORDER BY keys. It is never NULL itself; a NULL record (an `If` with a
    NULL branch, as FILTER plans it) is a row the aggregate skips. It is typed
    as its first field, the aggregated value."""

    fields: tuple[ScalarExpr, ...]

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        return ColumnType(self.fields[0].typ(column_types).scalar_type, True)

    def children(self) -> tuple[ScalarExpr, ...]:
        return self.fields

    def __repr__(self) -> str:
        return f"record({', '.join(map(repr, self.fields))})"


def conjuncts(expr: ScalarExpr) -> list[ScalarExpr]:
    """Split nested ANDs into their parts (each becomes one Filter predicate)."""
    if isinstance(expr, CallVariadic) and expr.func is VariadicFunc.AND:
        out: list[ScalarExpr] = []
        for part in expr.exprs:
            out += conjuncts(part)
        return out
    return [expr]
