"""ARRAY[...] constructors and subscripts, bound to the registry's
array_build / array_index (expr/functions/arrays.py) with PostgreSQL's rules:
the elements take their common type (untyped literals alone are text), an
array subscript is 1-based and NULL outside the array, a jsonb subscript is
`->` (a text key, or a 0-based position). Slices and arrays of arrays are
0A000."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from coordinator_lib.expr.functions import CallFunction
from coordinator_lib.expr.scalar import Literal
from coordinator_lib.expr.text_input import ONE_DIMENSION
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.array_subquery import as_aggregate, gathered_query
from coordinator_lib.sql.errors import (
    IndeterminateDatatype,
    TypeMismatch,
    UnsupportedFeature,
)
from coordinator_lib.sql.list_syntax import bind_slice
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.typed import Typed

if TYPE_CHECKING:
    from coordinator_lib.sql.scalar import ScalarBinder

S = ScalarType


def bind_array(b: ScalarBinder, node: exp.Array) -> Typed:
    """ARRAY[e1, e2, ...]: a one-dimensional array of the elements' common type."""
    query = gathered_query(node)
    if query is not None:
        return b.bind(as_aggregate(node, query))
    nodes = list(node.expressions)
    if not nodes:
        raise IndeterminateDatatype("cannot determine type of empty array", position_of(node))
    values = [b.bind(n) for n in nodes]
    if all(v.unknown for v in values):
        values = [b.resolve_unknown(v, S.TEXT, n) for v, n in zip(values, nodes, strict=True)]
    elements, target = b.unify(values, nodes, "ARRAY")
    if target.is_array:
        raise UnsupportedFeature(
            "multidimensional arrays are not supported",
            position_of(nodes[0]),
            detail=ONE_DIMENSION,
        )
    call = CallFunction(
        "array_build", tuple(e.expr for e in elements), ColumnType(target.array(), False)
    )
    return b.typed(call)


def bind_subscript(b: ScalarBinder, node: exp.Bracket) -> Typed:
    """value[i]: an element of an array, or a jsonb field or element."""
    subscripts = list(node.expressions)
    value = b.bind(node.this)
    sliced = len(subscripts) == 1 and isinstance(subscripts[0], exp.Slice)
    if sliced and not value.unknown and value.scalar.is_list:
        return bind_slice(b, value, subscripts[0])
    if len(subscripts) != 1 or isinstance(subscripts[0], exp.Slice):
        raise UnsupportedFeature("array slices are not supported", position_of(node))
    index_node = subscripts[0]
    index = b.bind(index_node)
    if value.scalar is S.JSONB and not value.unknown:
        if index.unknown:
            index = b.resolve_unknown(index, S.TEXT, index_node)
        if index.scalar is not S.TEXT:
            index = _integer_subscript(b, index, index_node)
        return b.typed(
            CallFunction("jsonb_get", (value.expr, index.expr), ColumnType(S.JSONB, True))
        )
    if isinstance(node.this, exp.Bracket) and node.this.meta.get("array_element"):
        # `a[i][j]` of a one-dimensional array (Tidemark's only kind): the
        # number of subscripts is not the array's dimensions, so NULL, as in
        # PostgreSQL; the subscripts must still be integers
        _integer_subscript(b, index, index_node)
        node.meta["array_element"] = True
        return b.typed(Literal(None, ColumnType(value.scalar, True)))
    if value.unknown or value.scalar.element is None:
        shown = "unknown" if value.unknown else value.scalar.value
        raise TypeMismatch(
            f"cannot subscript type {shown} because it does not support subscripting",
            position_of(node.this),
        )
    index = _integer_subscript(b, index, index_node)
    element = value.scalar.element
    assert element is not None
    call = CallFunction("array_index", (value.expr, index.expr), ColumnType(element, True))
    if value.scalar.is_array:
        node.meta["array_element"] = True
    return b.typed(call)


def _integer_subscript(b: ScalarBinder, index: Typed, node: exp.Expr) -> Typed:
    if index.unknown:
        index = b.resolve_unknown(index, S.INTEGER, node)
    if index.scalar not in (S.SMALLINT, S.INTEGER, S.BIGINT):
        raise TypeMismatch("array subscript must have type integer", position_of(node))
    return b.cast_to(index, S.BIGINT, node)


__all__ = ["bind_array", "bind_subscript"]
