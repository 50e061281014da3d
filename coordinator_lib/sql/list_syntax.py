"""Materialize's one-layer lists (`int list`): `LIST[...]`, slices
`l[first:last]`, list_length, list_cat, list_append, list_prepend and `||`,
bound to the registry's list functions (expr/functions/lists.py) with
Materialize's rules: the elements take their common type, slices are
1-based and inclusive (a bound left out is the list's end, a slice past the
end is shorter, an empty slice is NULL), list_cat of a NULL list is the
other list, appending NULL appends a NULL element and appending to a NULL
list gives a list of the element (Materialize's list.slt). Two arrays (or
lists), or an array and an element, of different types meet at their common
type (`int[] || numeric` is numeric[]). A list is held as an array is
(repr/relation.py), so indexing is array_index. Lists of lists are 0A000."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from coordinator_lib.expr.functions import CallFunction
from coordinator_lib.expr.scalar import Literal, ScalarExpr
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.array_subquery import as_aggregate, gathered_query
from coordinator_lib.sql.coercion import common_type
from coordinator_lib.sql.errors import (
    IndeterminateDatatype,
    TypeMismatch,
    UndefinedOperator,
    UnsupportedFeature,
)
from coordinator_lib.sql.positions import operator_position, position_of
from coordinator_lib.sql.typed import Typed

if TYPE_CHECKING:
    from coordinator_lib.sql.scalar import ScalarBinder

S = ScalarType
_INTEGERS = (S.SMALLINT, S.INTEGER, S.BIGINT)


def bind_list(b: ScalarBinder, node: exp.List) -> Typed:
    """LIST[e1, e2, ...]: a list of the elements' common type."""
    query = gathered_query(node)
    if query is not None:
        return b.bind(as_aggregate(node, query))
    nodes = list(node.expressions)
    if not nodes:
        raise IndeterminateDatatype("cannot determine type of empty list", position_of(node))
    if any(isinstance(n, exp.Array | exp.List) for n in nodes):
        raise UnsupportedFeature("lists of lists are not supported", position_of(nodes[0]))
    values = [b.bind(n) for n in nodes]
    if all(v.unknown for v in values):
        values = [b.resolve_unknown(v, S.TEXT, n) for v, n in zip(values, nodes, strict=True)]
    elements, target = b.unify(values, nodes, "LIST")
    if target.element is not None:
        raise UnsupportedFeature("lists of lists are not supported", position_of(nodes[0]))
    call = CallFunction(
        "array_build", tuple(e.expr for e in elements), ColumnType(target.list(), False)
    )
    return b.typed(call)


def is_empty_list(node: exp.Expr) -> bool:
    """`LIST[]`, which sqlglot reads as the type `list[]`."""
    if not isinstance(node, exp.DataType) or node.this is not exp.DType.ARRAY:
        return False
    inner = node.expressions
    return len(inner) == 1 and inner[0].this is exp.DType.LIST and not inner[0].expressions


def bind_slice(b: ScalarBinder, value: Typed, node: exp.Slice) -> Typed:
    """list[first:last], either bound optional."""
    bounds: list[ScalarExpr] = []
    for side, default in (("this", 1), ("expression", 2**62)):
        bound_node = node.args.get(side)
        if bound_node is None:
            bounds.append(Literal(default, ColumnType(S.BIGINT, False)))
            continue
        bound = b.bind(bound_node)
        if bound.unknown:
            bound = b.resolve_unknown(bound, S.BIGINT, bound_node)
        if bound.scalar not in _INTEGERS:
            raise TypeMismatch("list slice bounds must have type integer", position_of(bound_node))
        bounds.append(b.cast_to(bound, S.BIGINT, bound_node).expr)
    call = CallFunction("list_slice", (value.expr, *bounds), ColumnType(value.scalar, True))
    return b.typed(call)


def _list_argument(b: ScalarBinder, value: Typed, node: exp.Expr, name: str) -> Typed:
    if value.unknown or not value.scalar.is_list:
        shown = "unknown" if value.unknown else value.scalar.value
        raise UndefinedOperator.no_overload(f"{name}({shown})", position_of(node))
    return value


def _element(b: ScalarBinder, value: Typed, element: ScalarType, node: exp.Expr) -> Typed:
    if value.unknown:
        return b.resolve_unknown(value, element, node)
    return b.coerce(value, element, node, "list element")


def _common_element(first: ScalarType, second: ScalarType) -> ScalarType | None:
    """The element type both sides take (PostgreSQL's anycompatible: UNION's
    resolution, so `int[] || numeric[]` is numeric[]); None if there is none."""
    chosen = common_type([first, second])
    return None if chosen is None or chosen.element is not None else chosen


def _widened(b: ScalarBinder, value: Typed, element: ScalarType, node: exp.Expr) -> Typed:
    """An array (or list) cast element by element to hold `element`s."""
    if value.scalar.element is element:
        return value
    kind = element.array() if value.scalar.is_array else element.list()
    return b.cast_to(value, kind, node)


def _cat(b: ScalarBinder, left: Typed, right: Typed, nodes: list[exp.Expr]) -> Typed:
    if left.unknown:
        left = b.resolve_unknown(left, right.scalar, nodes[0])
    if right.unknown:
        right = b.resolve_unknown(right, left.scalar, nodes[1])
    inner = [left.scalar.element, right.scalar.element]
    if (
        inner[0] is not None
        and inner[1] is not None
        and left.scalar.is_array == right.scalar.is_array
    ):
        chosen = _common_element(inner[0], inner[1])
        if chosen is not None:
            left = _widened(b, left, chosen, nodes[0])
            right = _widened(b, right, chosen, nodes[1])
    if left.scalar is not right.scalar:
        raise UndefinedOperator.no_overload(
            f"{left.scalar.value} || {right.scalar.value}", position_of(nodes[0])
        )
    nullable = left.type.nullable and right.type.nullable
    call = CallFunction("list_cat", (left.expr, right.expr), ColumnType(left.scalar, nullable))
    return b.typed(call)


def _append(b: ScalarBinder, values: Typed, element: Typed, node: exp.Expr, first: bool) -> Typed:
    inner = values.scalar.element
    assert inner is not None
    if not element.unknown and element.scalar is not inner:
        chosen = _common_element(inner, element.scalar)
        if chosen is not None:
            values = _widened(b, values, chosen, node)
            inner = chosen
    element = _element(b, element, inner, node)
    name = "list_prepend" if first else "list_append"
    args = (element.expr, values.expr) if first else (values.expr, element.expr)
    # typed nullable: a Spark step's intermediate rows may hold NULL here (not understood yet)
    return b.typed(CallFunction(name, args, ColumnType(values.scalar, True)))


def list_concat(b: ScalarBinder, node: exp.DPipe, left: Typed, right: Typed) -> Typed:
    """`||` with a list (or an array) on either side: list_cat, list_append or
    list_prepend (PostgreSQL's array_cat, array_append and array_prepend
    answer the same: a NULL array is left out, a NULL element kept)."""
    nodes = [node.this, node.expression]
    lists = [not v.unknown and v.scalar.element is not None for v in (left, right)]
    if all(lists) or (lists[0] and right.unknown) or (lists[1] and left.unknown):
        try:
            return _cat(b, left, right, nodes)
        except UndefinedOperator:
            if not all(lists):
                raise
            raise UndefinedOperator.no_overload(
                f"{left.scalar.value} || {right.scalar.value}", operator_position(node)
            ) from None
    try:
        if lists[0]:
            return _append(b, left, right, node.expression, first=False)
        return _append(b, right, left, node.this, first=True)
    except TypeMismatch:
        if any(not v.unknown and v.scalar.is_list for v in (left, right)):
            raise
        shown = " || ".join("unknown" if v.unknown else v.scalar.value for v in (left, right))
        raise UndefinedOperator(
            f"operator does not exist: {shown}", operator_position(node)
        ) from None


def bind_list_function(b: ScalarBinder, node: exp.Anonymous) -> Typed:
    """list_length(l), list_cat(a, b), list_append(l, e), list_prepend(e, l)."""
    name = node.name.lower()
    nodes = list(node.expressions)
    values = [b.bind(n) for n in nodes]
    counts = {"list_length": 1, "list_cat": 2, "list_append": 2, "list_prepend": 2}
    if len(values) != counts[name]:
        raise b.no_function(node, name, values)
    if name == "list_length":
        value = _list_argument(b, values[0], nodes[0], name)
        return b.typed(CallFunction("list_length", (value.expr,), ColumnType(S.INTEGER, True)))
    if name == "list_cat":
        if not any(not v.unknown and v.scalar.is_list for v in values):
            raise b.no_function(node, name, values)
        return _cat(b, values[0], values[1], nodes)
    if name == "list_append":
        listed = _list_argument(b, values[0], nodes[0], name)
        return _append(b, listed, values[1], nodes[1], first=False)
    listed = _list_argument(b, values[1], nodes[1], name)
    return _append(b, listed, values[0], nodes[0], first=True)


def bind_array_function(b: ScalarBinder, node: exp.Expr) -> Typed:
    """array_cat(a, b), array_append(a, e), array_prepend(e, a) (sqlglot puts
    the array first in each node)."""
    names: dict[type[exp.Expr], str] = {
        exp.ArrayConcat: "array_cat",
        exp.ArrayAppend: "array_append",
        exp.ArrayPrepend: "array_prepend",
    }
    name = names[type(node)]
    others = node.expressions if isinstance(node, exp.ArrayConcat) else [node.expression]
    nodes = [node.this, *others]
    values = [b.bind(n) for n in nodes]
    if len(values) != 2:
        raise b.no_function(node, name, values)
    array = values[0]
    if name == "array_cat":
        if not any(not v.unknown and v.scalar.is_array for v in values):
            raise b.no_function(node, name, values)
        return _cat(b, values[0], values[1], nodes)
    if array.unknown or not array.scalar.is_array:
        raise b.no_function(node, name, values)
    return _append(b, array, values[1], nodes[1], first=name == "array_prepend")


LIST_FUNCTIONS = ("list_length", "list_cat", "list_append", "list_prepend")

__all__ = [
    "LIST_FUNCTIONS",
    "bind_array_function",
    "bind_list",
    "bind_list_function",
    "bind_slice",
    "is_empty_list",
    "list_concat",
]
