"""A bound scalar expression with its type: what every binder of sql/
passes around (the bottom of the binder's modules)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from coordinator_lib.expr.scalar import Literal, RaiseError, ScalarExpr
from coordinator_lib.repr.numeric import NumericFieldOverflow, to_numeric
from coordinator_lib.repr.relation import ColumnType, ScalarType

S = ScalarType


@dataclass(frozen=True)
class Typed:
    """A bound expression with its type. `unknown` marks an untyped literal
    (a string constant or NULL) whose type its context decides; until then
    it is a text literal."""

    expr: ScalarExpr
    type: ColumnType
    unknown: bool = False
    # A numeric constant's value as written, beyond numeric's bound
    # (repr/numeric.py): a cast to a float type reads it (`1e-20::float8`).
    exact: Decimal | None = None

    @property
    def scalar(self) -> ScalarType:
        return self.type.scalar_type


def literal(value: Any, st: ScalarType) -> Typed:
    ctype = ColumnType(st, value is None)
    return Typed(Literal(value, ctype), ctype)


def number(value: Any, st: ScalarType) -> Typed:
    """A numeric constant: a numeric one is rounded into numeric's bound,
    and one beyond it fails (22003) where it is evaluated as a numeric, as
    a value computed at runtime does; a cast to a float type folds its
    exact value instead."""
    if st is not S.NUMERIC:
        return literal(value, st)
    ctype = ColumnType(st, False)
    expr: ScalarExpr
    try:
        expr = Literal(to_numeric(value), ctype)
    except NumericFieldOverflow as error:
        expr = RaiseError(error.code, error.message, ctype)
    return Typed(expr, ctype, exact=value)


def null_of(st: ScalarType) -> Literal:
    return Literal(None, ColumnType(st, True))


def as_varchar(value: Typed) -> Typed:
    """A text literal typed varchar (no length): an untyped literal that
    PostgreSQL resolves to its varchar neighbours' type (UNION, CASE, COALESCE)."""
    if not isinstance(value.expr, Literal) or value.scalar is not S.TEXT:
        return value
    ctype = ColumnType(S.TEXT, value.type.nullable, varchar=True)
    return Typed(Literal(value.expr.value, ctype), ctype)


__all__ = ["Typed", "as_varchar", "literal", "null_of", "number"]
