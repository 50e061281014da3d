"""`ARRAY(subquery)` (PostgreSQL) and `LIST(subquery)` (Materialize): the
subquery's one column gathered into an array (a list) in the subquery's
order, and empty, not NULL, when the subquery has no rows.

Bound as `COALESCE((SELECT array_agg(_s.e ORDER BY _s.o1, ...) FROM
(subquery with its ORDER BY keys as extra columns) AS _s(e), '{}')`
(list_agg for a list): a scalar subquery over an ordered aggregate, so a
view maintains it as it maintains any correlated subquery and array_agg,
on both engines, and EXPLAIN names those rules."""

from __future__ import annotations

from sqlglot import exp

from coordinator_lib.sql.aggregate_syntax import ListAgg
from coordinator_lib.sql.errors import ParseError, UnsupportedFeature
from coordinator_lib.sql.positions import position_of

_ELEMENT = "_tm_element"
_SOURCE = "_tm_gathered"


def gathered_query(node: exp.Array | exp.List) -> exp.Query | None:
    """The subquery of `ARRAY(SELECT ...)` / `LIST(SELECT ...)`, else None
    (`ARRAY[(SELECT ...)]` is an array of one scalar subquery's value)."""
    items = node.expressions
    if len(items) == 1 and isinstance(items[0], exp.Query):
        return items[0]
    return None


def as_aggregate(node: exp.Array | exp.List, query: exp.Query) -> exp.Expr:
    """The COALESCE over an ordered aggregate that `node` means."""
    inner = query.copy()
    order_keys: list[exp.Ordered] = []
    if isinstance(inner, exp.Select):
        items = inner.expressions
        if any(isinstance(i, exp.Star) or i.is_star for i in items):
            raise UnsupportedFeature(
                f"{_written(node)}(SELECT *) is not supported: name the column",
                position_of(node),
            )
        if len(items) != 1:
            raise ParseError("subquery must return only one column", position_of(node))
        order = inner.args.get("order")
        extra = []
        for i, key in enumerate(order.expressions if order else []):
            name = f"_tm_order{i}"
            extra.append(exp.alias_(_resolved(key.this, items[0]), name))
            ordered = key.copy()
            ordered.set("this", exp.column(name, _SOURCE))
            order_keys.append(ordered)
        inner.set("expressions", [items[0], *extra])
    else:  # a set operation orders by its one output column
        order = inner.args.get("order")
        for key in order.expressions if order else []:
            order_keys.append(key.copy())
        for key in order_keys:
            key.set("this", exp.column(_ELEMENT, _SOURCE))
    element = exp.column(_ELEMENT, _SOURCE)
    argument: exp.Expr = element
    if order_keys:
        argument = exp.Order(this=element, expressions=order_keys)
    gatherer = exp.ArrayAgg if isinstance(node, exp.Array) else ListAgg
    aggregate = gatherer(this=argument)
    source = exp.Subquery(
        this=inner,
        alias=exp.TableAlias(
            this=exp.to_identifier(_SOURCE), columns=[exp.to_identifier(_ELEMENT)]
        ),
    )
    gather = exp.Select(expressions=[aggregate]).from_(source)
    return exp.Coalesce(this=exp.Subquery(this=gather), expressions=[exp.Literal.string("{}")])


def _resolved(key: exp.Expr, item: exp.Expr) -> exp.Expr:
    """An ORDER BY key as an expression over the FROM items: `1` and the
    item's output name mean the item (PostgreSQL looks output names up first)."""
    value = item.this if isinstance(item, exp.Alias) else item
    if isinstance(key, exp.Literal) and not key.is_string and key.name == "1":
        return value.copy()
    if (
        isinstance(key, exp.Column)
        and not key.table
        and isinstance(item, exp.Alias)
        and key.name == item.alias
    ):
        return value.copy()
    return key.copy()


def _written(node: exp.Array | exp.List) -> str:
    return "ARRAY" if isinstance(node, exp.Array) else "LIST"
