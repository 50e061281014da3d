"""Set-returning functions in the SELECT list, as PostgreSQL (10 and later)
and Materialize run them: each row of the FROM clause gives one row per
value of the function, and the function may sit inside an expression
(`generate_series(1, 3) + 1`, `abs(-unnest(a))`).

The SELECT is rewritten before it is planned, so views maintain the result
with the rules of LATERAL joins and outer joins:
- Each call becomes a column of a LATERAL item joined after the FROM items:
  `SELECT k, generate_series(1, k) * 2 FROM t` is `SELECT k, s.c * 2 FROM t,
  LATERAL generate_series(1, k) AS s(c)`.
- Several calls at the same level run in lockstep: as many rows as the
  longest gives, the shorter ones padded with NULL. They are one LATERAL
  `ROWS FROM (f(...), g(...))` item, planned as one FlatMap zipping the
  calls (sql/table_functions.py).
- A call inside another call's arguments (`generate_series(1,
  generate_series(1, 3))`) is a level below it: its LATERAL item comes first
  and the outer call reads its column.
- In a grouped query (GROUP BY, HAVING, aggregates) or one with window
  functions, the functions run after the grouping and windows: the query
  without them (its FROM, WHERE, GROUP BY, HAVING) is a subquery giving the
  values the SELECT list reads, and the LATERAL items follow it; DISTINCT,
  ORDER BY, LIMIT and OFFSET apply to the expanded rows.

A call inside CASE, COALESCE, an aggregate or a window function is 0A000 in
PostgreSQL's words; a two-column function (jsonb_each) is a record there,
which Tidemark has no type for: 0A000.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from coordinator_lib.expr.table_functions import JSONB_FUNCTIONS, TableFunc
from coordinator_lib.sql.errors import UnsupportedFeature
from coordinator_lib.sql.positions import position_of

_JSONB = {f.value: f for f in JSONB_FUNCTIONS}
_TWO_COLUMNS = (TableFunc.JSONB_EACH, TableFunc.JSONB_EACH_TEXT)
_PREFIX = "__srf"
_SUBQUERY = (exp.Query, exp.Subquery)


def is_set_returning(node: exp.Expr) -> bool:
    """A set-returning call as it parses in an expression."""
    return isinstance(node, exp.ExplodingGenerateSeries | exp.Explode | exp.Unnest) or (
        isinstance(node, exp.Anonymous) and node.name.lower() in _JSONB
    )


def _calls(node: exp.Expr) -> list[exp.Expr]:
    """The set-returning calls in `node`, outside its subqueries, outermost first."""
    found: list[exp.Expr] = []
    for sub in node.walk(prune=lambda n: isinstance(n, _SUBQUERY)):
        if is_set_returning(sub) and not isinstance(sub, _SUBQUERY):
            found.append(sub)
    return found


def _depth(call: exp.Expr) -> int:
    """1 for a call whose arguments hold none, else one more than the deepest."""
    inner = [c for c in _calls(call) if c is not call]
    return 1 + max((_depth(c) for c in inner), default=0)


_NOT_IN = (
    (exp.Case, "set-returning functions are not allowed in CASE"),
    (exp.If, "set-returning functions are not allowed in CASE"),
    (exp.Coalesce, "set-returning functions are not allowed in COALESCE"),
    (exp.Window, "window function calls cannot contain set-returning function calls"),
    (exp.AggFunc, "aggregate function calls cannot contain set-returning function calls"),
)


def _check_placement(call: exp.Expr, root: exp.Expr) -> None:
    if isinstance(call, exp.Anonymous) and _JSONB[call.name.lower()] in _TWO_COLUMNS:
        raise UnsupportedFeature(
            f"{call.name.lower()} in the SELECT list is not supported (it gives a record;"
            " call it in FROM)",
            position_of(call),
        )
    node = call.parent
    while node is not None and node is not root.parent:
        for kind, message in _NOT_IN:
            if isinstance(node, kind):
                raise UnsupportedFeature(
                    message,
                    position_of(call),
                    hint="You might be able to move the set-returning function into a"
                    " LATERAL FROM item.",
                )
        node = node.parent


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _column(table: str, name: str) -> exp.Column:
    return exp.Column(this=_ident(name), table=_ident(table))


def _rows_from_item(call: exp.Expr) -> exp.Expr:
    """`call` as one function of ROWS FROM (...)."""
    if isinstance(call, exp.Explode):  # sqlglot's name for unnest(...) in a SELECT list
        return exp.Unnest(expressions=[call.this]).update_positions(call)
    if isinstance(call, exp.Unnest):
        return call
    return exp.Table(this=call)


def _level_item(calls: list[exp.Expr], level: int) -> tuple[exp.Expr, list[exp.Column]]:
    """The LATERAL item of one level's calls and the column of each."""
    table = f"{_PREFIX}_{level}"
    names = [f"c{i}" for i in range(len(calls))]
    alias = exp.TableAlias(this=_ident(table), columns=[_ident(n) for n in names])
    if len(calls) == 1:  # LATERAL f(...) AS t(c)
        call = calls[0]
        if isinstance(call, exp.Explode):
            call = exp.Unnest(expressions=[call.this]).update_positions(call)
        return exp.Lateral(this=call, alias=alias), [_column(table, names[0])]
    # lockstep: LATERAL ROWS FROM (f0(...), f1(...), ...) AS t(c0, c1, ...),
    # one FlatMap zipping the calls
    rows_from = exp.Table(rows_from=[_rows_from_item(c) for c in calls])
    return exp.Lateral(this=rows_from, alias=alias), [_column(table, n) for n in names]


def _is_grouped(select: exp.Select) -> bool:
    if select.args.get("group") or select.args.get("having"):
        return True
    for item in select.expressions:
        for node in item.walk(prune=lambda n: isinstance(n, _SUBQUERY)):
            if isinstance(node, exp.AggFunc | exp.Window):
                return True
    return False


def lift_select_set_functions(select: exp.Select, name_of: Callable[[exp.Expr], str]) -> exp.Select:
    """`select` with the set-returning calls of its SELECT list moved into
    LATERAL items (the module's docstring); `name_of` names an unaliased
    select item as PostgreSQL does, so the columns keep their names."""
    if not any(_calls(item) for item in select.expressions):
        return select
    for item in select.expressions:
        for call in _calls(item):
            _check_placement(call, item)
    if _is_grouped(select):
        select = _over_grouped_base(select, name_of)
    else:
        select = select.copy()
        items = []
        for item in select.expressions:
            if _calls(item) and not isinstance(item, exp.Alias):
                name = name_of(item)
                item = exp.Alias(this=item, alias=_ident(name)) if name != "?column?" else item
            items.append(item)
        select.set("expressions", items)
    calls = [(c, _depth(c)) for item in select.expressions for c in _calls(item)]
    laterals = []
    for level in range(1, max(d for _, d in calls) + 1):
        at_level = [c for c, d in calls if d == level]
        lateral, columns = _level_item([c.copy() for c in at_level], level)
        for call, column in zip(at_level, columns, strict=True):
            call.replace(column)
        laterals.append(lateral)
    if select.args.get("from_") is None:
        select.set("from_", exp.From(this=laterals.pop(0)))
    joins = [*(select.args.get("joins") or []), *(exp.Join(this=lat) for lat in laterals)]
    select.set("joins", joins)
    return select


def _over_grouped_base(select: exp.Select, name_of: Callable[[exp.Expr], str]) -> exp.Select:
    """`SELECT ... FROM (the grouped query's values) AS __srf_base`, the set-
    returning calls still in its SELECT list, to be lifted after it."""
    base_name = f"{_PREFIX}_base"
    base = select.copy()
    for key in ("order", "limit", "offset", "distinct", "with_", "with"):
        base.set(key, None)
    inner: list[exp.Expr] = []
    taken: set[str] = set()

    def moved(node: exp.Expr) -> exp.Column:
        name = f"{_PREFIX}_e{len(inner)}"
        inner.append(exp.Alias(this=node.copy(), alias=_ident(name)))
        return _column(base_name, name)

    def move_values(node: exp.Expr) -> exp.Expr:
        """`node` with its columns, aggregates, windows and subqueries read from the base."""
        if _stops(node):
            if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
                raise UnsupportedFeature(
                    "* beside a set-returning function in a grouped SELECT is not supported",
                    position_of(node),
                )
            return moved(node)
        node = node.copy()
        for sub in list(node.walk(prune=lambda n: n is not node and _stops(n))):
            if sub is not node and _stops(sub) and sub.parent is not None:
                sub.replace(moved(sub))
        return node

    # GROUP BY 1 names a select item: spell it out, the select list changes
    group = base.args.get("group")
    if group is not None:
        for key in group.expressions:
            if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
                k = int(key.this)
                if 1 <= k <= len(select.expressions):
                    target = select.expressions[k - 1]
                    target = target.this if isinstance(target, exp.Alias) else target
                    if not _calls(target):
                        key.replace(target.copy())

    outer_items: list[exp.Expr] = []
    for item in select.expressions:
        name = name_of(item)
        if isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        ):
            raise UnsupportedFeature(
                "* beside a set-returning function in a grouped SELECT is not supported",
                position_of(item),
            )
        body = item.this if isinstance(item, exp.Alias) else item
        if _calls(body):
            outer_items.append(exp.Alias(this=move_values(body), alias=_ident(name)))
            continue
        inner_name = name if isinstance(item, exp.Alias) and name not in taken else None
        if inner_name is None:
            inner_name = f"{_PREFIX}_v{len(outer_items)}"
        taken.add(inner_name)
        inner.append(exp.Alias(this=body.copy(), alias=_ident(inner_name)))
        outer_items.append(exp.Alias(this=_column(base_name, inner_name), alias=_ident(name)))

    outputs = {name_of(item) for item in select.expressions}

    def key_of(node: exp.Expr) -> exp.Expr:
        """An ORDER BY / DISTINCT ON key: an ordinal or output name as written."""
        if isinstance(node, exp.Literal) or (
            isinstance(node, exp.Column) and not node.table and node.name in outputs
        ):
            return node.copy()
        return move_values(node)

    outer = exp.Select(expressions=outer_items)
    for key in ("limit", "offset", "with_", "with"):
        if select.args.get(key) is not None:
            outer.set(key, select.args[key].copy())
    order = select.args.get("order")
    if order is not None:
        ordered = []
        for o in order.expressions:
            o = o.copy()
            o.set("this", key_of(o.this))
            ordered.append(o)
        outer.set("order", exp.Order(expressions=ordered))
    distinct = select.args.get("distinct")
    if distinct is not None:
        distinct = distinct.copy()
        on = distinct.args.get("on")
        if on is not None:
            on.set("expressions", [key_of(e) for e in on.expressions])
        outer.set("distinct", distinct)
    base.set("expressions", inner or [exp.Alias(this=exp.Literal.number(1), alias="_")])
    outer.set(
        "from_",
        exp.From(this=exp.Subquery(this=base, alias=exp.TableAlias(this=_ident(base_name)))),
    )
    return outer.update_positions(select) if hasattr(outer, "update_positions") else outer


def _stops(node: exp.Expr) -> bool:
    return isinstance(node, (exp.Column, exp.AggFunc, exp.Window, exp.Filter, *_SUBQUERY))


__all__ = ["is_set_returning", "lift_select_set_functions"]
