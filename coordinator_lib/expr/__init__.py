"""The plan language between sql/ (which produces it) and compute/ (which
renders it on Spark): scalar expressions and relation expressions, each node
knowing its output type. Like Materialize's MIR: a small set of operators
that every SQL construct is lowered to."""

from coordinator_lib.expr.relation import (
    AggregateExpr,
    AggregateFunc,
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    Map,
    Negate,
    Project,
    Reduce,
    RelationExpr,
    Threshold,
    Union,
)
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    Column,
    If,
    Literal,
    RaiseError,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)

__all__ = [
    "AggregateExpr",
    "AggregateFunc",
    "BinaryFunc",
    "CallBinary",
    "CallUnary",
    "CallVariadic",
    "Cast",
    "Column",
    "Constant",
    "Distinct",
    "Filter",
    "Get",
    "If",
    "Join",
    "Literal",
    "Map",
    "Negate",
    "Project",
    "RaiseError",
    "Reduce",
    "RelationExpr",
    "ScalarExpr",
    "Threshold",
    "UnaryFunc",
    "Union",
    "VariadicFunc",
]
