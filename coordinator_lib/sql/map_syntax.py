"""MAP[key => value, ...], Materialize's map constructor, for Tidemark's
`map[text=>text]`: keys and values are text (untyped literals read as
text); a value of another type is 0A000, as map_agg's is (Tidemark's maps
hold text values only). Of equal keys the last value stays, a NULL key is
left out (as map_agg does); the map itself is never NULL. MAP(subquery) is
0A000."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from coordinator_lib.expr.functions import CallFunction
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.errors import UnsupportedFeature
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.typed import Typed

if TYPE_CHECKING:
    from coordinator_lib.expr.scalar import ScalarExpr
    from coordinator_lib.sql.scalar import ScalarBinder

S = ScalarType


def _text(b: ScalarBinder, node: exp.Expr, what: str) -> ScalarExpr:
    value = b.as_text(b.bind(node), node)
    if value.scalar is not S.TEXT:
        raise UnsupportedFeature(
            f"MAP {what}s of type {value.scalar.value} are not supported"
            " (Tidemark's maps are map[text=>text])",
            position_of(node),
        )
    return value.expr


def bind_map(b: ScalarBinder, node: exp.ToMap) -> Typed:
    entries = node.this
    if not isinstance(entries, exp.Struct):
        raise UnsupportedFeature("MAP(subquery) is not supported", position_of(node))
    args: list[ScalarExpr] = []
    for entry in entries.expressions:
        args += [_text(b, entry.this, "key"), _text(b, entry.expression, "value")]
    call = CallFunction("map_build_entries", tuple(args), ColumnType(S.MAP_TEXT, False))
    return b.typed(call)


__all__ = ["bind_map"]
