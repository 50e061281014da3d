"""The one registry of scalar functions called by name (`CallFunction`).

A function is declared once, beside its Python implementation
(`@scalar_function(...)` in this package's family modules): the name the
plan uses, the names a query may call it by, PostgreSQL's overloads with
their result types, and optionally a Spark expression builder. Everything
else reads this registry:

- the SQL binder (`sql/function_calls.py`) resolves a call's name and
  overload and takes its result type from here;
- the in-process evaluator (`compute/local_scalar.py`) calls `evaluate`;
- the Spark renderer (`compute/scalar.py`) calls the Spark builder, or runs
  the Python implementation as a UDF when there is none.

A call is NULL when any argument is NULL, unless the function declares
`nulls` (then it sees NULL arguments and `nulls` says from the arguments'
nullability whether the result can be NULL).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from coordinator_lib.expr.scalar import Literal, ScalarExpr
from coordinator_lib.repr.relation import ColumnType, ScalarType


class FunctionError(ValueError):
    """A runtime error of a function, with PostgreSQL's SQLSTATE."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class Pseudo(Enum):
    """Parameter kinds that are not one type (PostgreSQL's pseudo-types)."""

    ANY = "any"  # any type, taken as it is (an untyped literal is text)
    ANY_TEXT = "any as text"  # any type, converted to its text form (concat's "any")
    ANY_ARRAY = "anyarray"  # an array of any element type
    ANY_MAP = "anymap"  # a map of any value type (Materialize's map[text=>T])


Param = ScalarType | Pseudo


@dataclass(frozen=True)
class Signature:
    """One overload: parameter types (then `variadic`, repeated one or more
    times) and the result type."""

    params: tuple[Param, ...]
    result: ScalarType
    variadic: tuple[Param, ...] = ()

    def params_for(self, count: int) -> tuple[Param, ...] | None:
        """The parameter list for `count` arguments, None if it does not fit."""
        if not self.variadic:
            return self.params if count == len(self.params) else None
        extra = count - len(self.params)
        if extra < len(self.variadic) or extra % len(self.variadic):
            return None
        return self.params + self.variadic * (extra // len(self.variadic))


def sig(*params: Param, result: ScalarType, variadic: tuple[Param, ...] = ()) -> Signature:
    return Signature(tuple(params), result, variadic)


@dataclass(frozen=True)
class SparkCall:
    """What a Spark builder gets: the call, its arguments as Spark Columns
    (NULL handling is the caller's), their types and the result's Spark type."""

    call: CallFunction
    args: list[Any]
    types: list[ColumnType]
    out: Any

    def constant(self, i: int) -> Any:
        """Argument `i`, which must be a constant to render on Spark."""
        arg = self.call.args[i]
        if not isinstance(arg, Literal):
            raise TypeError(f"{self.call.name} needs a constant argument {i} on Spark")
        return arg.value


SparkBuilder = Callable[[SparkCall], Any]
NullRule = Callable[[Sequence[bool]], bool]


@dataclass(frozen=True)
class ScalarFunction:
    name: str  # the CallFunction name (the plan's)
    sql_names: tuple[str, ...]  # what a query calls it by (empty: bound by syntax only)
    signatures: tuple[Signature, ...]
    python: Callable[..., Any]
    spark: SparkBuilder | None  # None: Spark runs `python` as a UDF
    nulls: NullRule | None  # None: NULL if any argument is
    local_only: bool  # in-process only (webhook CHECK expressions)

    def result_nullable(self, nullable: Sequence[bool]) -> bool:
        return self.nulls(nullable) if self.nulls is not None else any(nullable)

    def signature_for(self, types: Sequence[ScalarType]) -> Signature:
        """The overload whose parameters are exactly `types` (pseudo-types
        match anything): for plans built without the binder."""
        for signature in self.signatures:
            params = signature.params_for(len(types))
            if params is not None and all(
                isinstance(p, Pseudo) or p is t for p, t in zip(params, types, strict=True)
            ):
                return signature
        raise ValueError(f"{self.name} has no overload for {[t.value for t in types]}")


REGISTRY: dict[str, ScalarFunction] = {}
_BY_SQL_NAME: dict[str, list[ScalarFunction]] = {}


def scalar_function(
    name: str,
    *signatures: Signature,
    sql: tuple[str, ...] | None = None,
    spark: SparkBuilder | None = None,
    nulls: NullRule | None = None,
    local_only: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the decorated Python function as the scalar function `name`
    (callable from SQL as `sql`, by default `(name,)`)."""

    def register(python: Callable[..., Any]) -> Callable[..., Any]:
        if name in REGISTRY:
            raise ValueError(f"function {name!r} is declared twice")
        declared = ScalarFunction(
            name, (name,) if sql is None else sql, signatures, python, spark, nulls, local_only
        )
        REGISTRY[name] = declared
        for sql_name in declared.sql_names:
            _BY_SQL_NAME.setdefault(sql_name, []).append(declared)
        return python

    return register


def functions_named(sql_name: str) -> list[ScalarFunction]:
    """The functions a query may mean by `sql_name` (all their overloads compete)."""
    return _BY_SQL_NAME.get(sql_name, [])


def evaluate(name: str, args: Sequence[Any]) -> Any:
    """`name(*args)` in Python: NULL when any argument is (unless the
    function takes NULLs). Bad input raises ValueError (FunctionError)."""
    function = REGISTRY[name]
    if function.nulls is None and any(arg is None for arg in args):
        return None
    return function.python(*args)


@dataclass(frozen=True)
class CallFunction(ScalarExpr):
    """`name(args...)` of a registered function. `type` is the result's type,
    chosen by the binder from the argument types (the overload)."""

    name: str
    args: tuple[ScalarExpr, ...]
    type: ColumnType

    def __post_init__(self) -> None:
        if self.name not in REGISTRY:
            raise ValueError(f"unknown function {self.name!r}")

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        return self.type

    def children(self) -> tuple[ScalarExpr, ...]:
        return self.args

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(map(repr, self.args))})"


__all__ = [
    "REGISTRY",
    "CallFunction",
    "FunctionError",
    "Param",
    "Pseudo",
    "ScalarFunction",
    "Signature",
    "SparkCall",
    "evaluate",
    "functions_named",
    "scalar_function",
    "sig",
]
