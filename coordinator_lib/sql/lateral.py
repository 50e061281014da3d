"""LATERAL subqueries in FROM: `FROM t, LATERAL (SELECT ... WHERE x = t.a
ORDER BY ... LIMIT k) s`, `JOIN LATERAL (...) ON ...`, `LEFT JOIN LATERAL`.

The subquery is planned with the FROM items to its left as its enclosing
query (their columns are `OuterColumn`s, as in a correlated subquery in an
expression), then lowered with the same "apply" as sql/subquery.py:

    L = the FROM items to the left, joined
    D = distinct(the columns of L the subquery reads)     -- one empty row if none
    B = apply_outer(subquery, D)                          -- sql/decorrelate.py
    L ⋈ B on the D columns (equal or both NULL), B's D columns projected away

so the subquery is evaluated once per distinct correlation value, and a
correlated `ORDER BY ... LIMIT k` becomes one TopK keyed by those values
(top k per group), all operators with delta rules.

`LEFT JOIN LATERAL (...) ON p` adds the rows of L for which no row of B
satisfies p, padded with NULL; whether a row of L matched depends only on
the columns the subquery and p read of it, so the unmatched rows are
`L - (L ⋈ distinct(those columns of the matches))`, as for outer joins
(sql/joins.py). RIGHT and FULL joins cannot reference their left side
(42P10, as in PostgreSQL); uncorrelated they are ordinary joins.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from coordinator_lib.expr.relation import (
    Constant,
    Filter,
    FlatMap,
    Join,
    Map,
    Project,
    RelationExpr,
    Union,
)
from coordinator_lib.expr.scalar import ScalarExpr
from coordinator_lib.sql.decorrelate import apply_outer
from coordinator_lib.sql.errors import InvalidColumnReference, UnsupportedFeature
from coordinator_lib.sql.joins import (
    distinct_keys,
    null_safe_equivalences,
    outer_join,
    pad,
    unmatched,
)
from coordinator_lib.sql.outer import columns_read, node_scalars, outer_columns, subqueries_in
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.table_functions import as_lateral_subquery, is_table_function


def lateral_subquery(node: exp.Expr) -> exp.Subquery:
    """The subquery of `LATERAL (query) [alias]`, with the alias, to plan as
    an ordinary FROM item; a table function's call (`LATERAL f(...)` or a
    function after a comma or JOIN) as the subquery `(SELECT * FROM f(...))`."""
    if is_table_function(node):  # `, f(...)`: PostgreSQL's implicit LATERAL
        return as_lateral_subquery(node, node.args.get("alias"))
    sub = node.this
    if (isinstance(sub, exp.Func) or is_table_function(sub)) and not node.args.get("view"):
        return as_lateral_subquery(sub, node.args.get("alias"))
    if not isinstance(sub, exp.Subquery) or node.args.get("view"):
        raise UnsupportedFeature(
            "LATERAL is only supported with a subquery (not a function)", position_of(node)
        )
    factor = sub.copy()
    factor.set("alias", node.args.get("alias"))
    return factor


def lateral_columns(plan: RelationExpr) -> list[int]:
    """The left side's columns a lateral subquery's plan reads."""
    return sorted(outer_columns(plan))


def _row_local(plan: RelationExpr) -> bool:
    """Whether `plan` gives each row's rows from that row alone: Maps,
    Filters, FlatMaps and Projects (no subqueries) over one empty row, as a
    table function call `(SELECT * FROM f(...))` is."""
    while isinstance(plan, Map | Filter | FlatMap | Project):
        if any(subqueries_in(s) for s in node_scalars(plan)):
            return False
        plan = plan.input
    return isinstance(plan, Constant) and plan.rows == (((), 1),)


def lateral_join(left: RelationExpr, plan: RelationExpr) -> RelationExpr:
    """`left` joined with the rows of `plan` evaluated for each of its rows:
    left's columns, then plan's. A row-local plan (a table function call)
    runs on left's rows themselves, as Materialize plans it: its FlatMap over
    `left`, no distinct correlation values to join back (so a view keeps it
    linear)."""
    refs = lateral_columns(plan)
    if refs and _row_local(plan):
        return apply_outer(plan, left, {c: c for c in refs})
    arity = left.desc.arity
    outer = distinct_keys(left, refs) if refs else None
    body = apply_outer(plan, outer, {c: p for p, c in enumerate(refs)})
    k = len(refs)
    pairs = [(c, arity + p) for p, c in enumerate(refs)]
    types = left.desc.types + body.desc.types
    joined = Join((left, body), tuple(null_safe_equivalences(pairs, types)))
    if k == 0:
        return joined
    outputs = tuple(range(arity)) + tuple(range(arity + k, arity + body.desc.arity))
    return Project(joined, outputs, left.desc.names + body.desc.names[k:])


def plan_lateral_join(
    left: RelationExpr,
    plan: RelationExpr,
    predicates: list[ScalarExpr],
    side: str,
    build: Callable[[list[RelationExpr], list[ScalarExpr]], RelationExpr],
    node: exp.Join,
    left_names: set[str],
) -> RelationExpr:
    """`left [side] JOIN LATERAL plan ON predicates` (predicates over left's
    columns then plan's); side "" is an inner join. `build` filters a
    relation by predicates (query.build_join). `left_names` are the left
    items' aliases, for the error a RIGHT or FULL join reading them gets."""
    refs = lateral_columns(plan)
    if side in ("RIGHT", "FULL"):
        if refs:
            raise _bad_reference(node, left_names)
        # it may still read the items before a comma (`a, b FULL JOIN
        # LATERAL (SELECT a.a)`): those references move one level in
        return outer_join(left, apply_outer(plan, None, {}), predicates, side, build)
    inner = build([lateral_join(left, plan)], predicates)
    if side != "LEFT":
        return inner
    arity = left.desc.arity
    keys = sorted(set(refs) | {c for p in predicates for c in columns_read(p) if c < arity})
    lost = unmatched(left, keys, distinct_keys(inner, keys))
    return Union((inner, pad(lost, plan.desc.types, before=False)))


def _bad_reference(node: exp.Join, left_names: set[str]) -> InvalidColumnReference:
    """PostgreSQL's error for a RIGHT / FULL JOIN LATERAL reading its left
    side, at the first qualified reference to a left item."""
    table = None
    at: exp.Expr = node.this
    for column in node.this.find_all(exp.Column):
        if column.table in left_names:
            table, at = column.table, column
            break
    what = f' "{table}"' if table else ""
    return InvalidColumnReference(
        f"invalid reference to FROM-clause entry for table{what}",
        position_of(at),
        detail="The combining JOIN type must be INNER or LEFT for a LATERAL reference.",
    )
