"""MAP[key => value, ...], Materialize's map constructor: keys are text,
values take their common type T (as CASE's do; all untyped literals: text)
and the map is a `map[text=>T]` (a nested MAP[...] makes a map of maps). Of
equal keys the last value stays, a NULL key is left out (as map_agg does);
the map itself is never NULL. MAP(subquery) is 0A000."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from coordinator_lib.expr.functions import CallFunction
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.errors import UnsupportedFeature
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.typed import Typed, literal

if TYPE_CHECKING:
    from coordinator_lib.expr.scalar import ScalarExpr
    from coordinator_lib.sql.scalar import ScalarBinder

S = ScalarType


def _key(b: ScalarBinder, node: exp.Expr) -> ScalarExpr:
    value = b.as_text(b.bind(node), node)
    if value.scalar is not S.TEXT:
        raise UnsupportedFeature(
            f"MAP keys of type {value.scalar.value} are not supported (map keys are text)",
            position_of(node),
        )
    return value.expr


def bind_map(b: ScalarBinder, node: exp.ToMap) -> Typed:
    entries = node.this
    if not isinstance(entries, exp.Struct):
        raise UnsupportedFeature("MAP(subquery) is not supported", position_of(node))
    keys = [_key(b, entry.this) for entry in entries.expressions]
    value_nodes: list[exp.Expr | None] = [entry.expression for entry in entries.expressions]
    values = [b.bind(n) for n in value_nodes if n is not None]
    if values and all(v.unknown for v in values):
        values = [b.as_text(v, n) for v, n in zip(values, value_nodes, strict=True)]
    value_type = S.TEXT
    if values:
        values, value_type = b.unify(values, value_nodes, "MAP")
    try:
        map_type = value_type.map_of()
    except ValueError:
        raise UnsupportedFeature(
            f"MAP values of type {value_type.value} are not supported", position_of(node)
        ) from None
    args: list[ScalarExpr] = [literal(value_type.value, S.TEXT).expr]
    for key, value in zip(keys, values, strict=True):
        args += [key, value.expr]
    call = CallFunction("map_build_entries", tuple(args), ColumnType(map_type, False))
    return b.typed(call)


__all__ = ["bind_map"]
