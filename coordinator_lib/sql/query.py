"""Planning queries: SELECT, set operations, VALUES and WITH become a
RelationExpr plus the output column names and the finishing (ORDER BY,
LIMIT, OFFSET) that only the top level of a peek applies.

The shape of a SELECT's plan, bottom up:

    Join(FROM items, equivalences)      -- one input: the item itself; a
                                        -- predicate reading one item filters it
    Filter(residual ON and WHERE predicates)
    Reduce(group keys, aggregates)      -- if grouped; global: + default row
    Filter(HAVING)
    Map(select-list and ORDER BY expressions) -> Project(output columns)
    Distinct                            -- SELECT DISTINCT

Equalities between different FROM items, in ON or WHERE, become the Join's
equivalence classes (for inner joins the two are the same); a predicate
that reads one FROM item only and cannot fail filters that item (sql/joins.py
push_down); everything else is a Filter above the Join.

A query without GROUP BY that aggregates has exactly one output row, even on
empty input, but a Reduce with an empty key yields no row for no input. As
Materialize does, the plan adds the missing row: `Union(R, Map(Union(
Constant[()], Negate(Project(R, ()))), defaults))` where R is the Reduce and
the defaults are 0 for count and NULL otherwise. The Reduce node is shared
(the same object appears twice in the tree).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sqlglot import exp

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
    OrderKey,
    Project,
    Reduce,
    RelationExpr,
    Threshold,
    TopK,
    Union,
)
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    CallVariadic,
    Cast,
    Column,
    If,
    Literal,
    ScalarExpr,
    VariadicFunc,
    conjuncts,
)
from coordinator_lib.repr.relation import RESERVED_COLUMNS, ColumnType, RelationDesc, ScalarType
from coordinator_lib.sql import function_calls, interval_keys
from coordinator_lib.sql.aggregates import (
    EXTRA_AGGREGATES,
    Call,
    extra_result,
    plan_extra_aggregate,
    plan_interval_sum,
)
from coordinator_lib.sql.catalog import ItemKind
from coordinator_lib.sql.coercion import (
    INTERNAL_NAMES,
    can_assign,
    can_cast_implicitly,
    common_type,
    parse_text_as,
    scalar_type_of,
)
from coordinator_lib.sql.context import CteBinding, PlanContext
from coordinator_lib.sql.dialect import WRITTEN_NAME
from coordinator_lib.sql.errors import (
    AmbiguousColumn,
    DuplicateAlias,
    GroupingError,
    InvalidColumnReference,
    InvalidParameter,
    ParseError,
    ReservedName,
    SqlError,
    TypeMismatch,
    UnknownColumn,
    UnsupportedFeature,
    WrongObjectType,
)
from coordinator_lib.sql.joins import equivalence_classes, outer_join, push_down
from coordinator_lib.sql.lateral import (
    lateral_join,
    lateral_subquery,
    plan_lateral_join,
)
from coordinator_lib.sql.ordered import WindowingError, check_no_windows, plan_windows
from coordinator_lib.sql.outer import has_outer, has_subquery
from coordinator_lib.sql.plans import ColumnOrder, RowSetFinishing
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.scalar import (
    TRUE,
    Grouping,
    ScalarBinder,
    Typed,
    avg_result_type,
    check_aggregate_argument,
    contains_aggregate,
    finalize,
    is_aggregate,
    null_of,
    unsupported_call,
)
from coordinator_lib.sql.scope import MERGED_USING, Scope, ScopeItem, ident_name, table_parts
from coordinator_lib.sql.select_srf import lift_select_set_functions
from coordinator_lib.sql.subquery import lower_filter, lower_subqueries
from coordinator_lib.sql.table_functions import (
    is_scalar_call,
    is_table_function,
    plan_table_function,
    reference_name,
)

S = ScalarType
EMPTY_DESC = RelationDesc((), ())
ONE_EMPTY_ROW = Constant((((), 1),), EMPTY_DESC)


@dataclass
class BoundQuery:
    """A planned query. `expr` may carry extra trailing columns that only
    ORDER BY needs; `finishing.project` lists the visible ones. `unknowns`
    maps visible columns that are bare untyped literals to their text (None
    for NULL), so UNION and INSERT can still give them a type as PostgreSQL does."""

    expr: RelationExpr
    names: list[str]
    finishing: RowSetFinishing
    unknowns: dict[int, str | None] = field(default_factory=dict)

    @property
    def arity(self) -> int:
        return len(self.names)

    @property
    def types(self) -> tuple[ColumnType, ...]:
        types = self.expr.desc.types
        return tuple(types[i] for i in self.finishing.project)


def check_column_name(name: str, node: exp.Expr | None = None) -> str:
    if name in RESERVED_COLUMNS:
        raise ReservedName(f'column name "{name}" is reserved', position_of(node))
    return name


def visible(query: BoundQuery, node: exp.Expr | None = None) -> RelationExpr:
    """The query as a relation of its visible columns, for use inside another
    query. ORDER BY without LIMIT means nothing there and is dropped; with
    LIMIT or OFFSET it is a TopK (maintained, as in Materialize)."""
    fin = query.finishing
    expr = query.expr
    if fin.limit is not None or fin.offset:
        keys = tuple(OrderKey(o.column, o.desc, o.nulls_last) for o in fin.order_by)
        expr = interval_keys.ordered(TopK(expr, (), keys, fin.limit, fin.offset))
    if fin.project == tuple(range(expr.desc.arity)):
        return expr
    return Project(expr, fin.project, tuple(query.names))


# --- entry point -------------------------------------------------------------------


def plan_query(node: exp.Expr, ctx: PlanContext) -> BoundQuery:
    """Plan any query expression (with its WITH clause)."""
    with_ = node.args.get("with_")
    if with_ is None:
        return _plan_query_body(node, ctx)
    if with_.args.get("recursive"):
        raise UnsupportedFeature("WITH RECURSIVE is not supported", position_of(with_))
    frame: dict[str, CteBinding] = {}
    ctx.ctes.append(frame)
    try:
        for cte in with_.expressions:
            name = ident_name(cte.args["alias"].this)
            if name in frame:
                raise DuplicateAlias(
                    f'WITH query name "{name}" specified more than once', position_of(cte)
                )
            bound = plan_query(cte.this, ctx)
            expr = visible(bound, cte)
            names = list(bound.names)
            alias = cte.args.get("alias")
            columns = [ident_name(c) for c in (alias.columns if alias else [])]
            if len(columns) > len(names):
                raise InvalidColumnReference(
                    f'WITH query "{name}" has {len(names)} columns available but '
                    f"{len(columns)} columns specified",
                    position_of(cte),
                )
            names[: len(columns)] = columns
            frame[name] = CteBinding(expr, tuple(names), expr.desc.types, len(ctx.outer))
        return _plan_query_body(node, ctx)
    finally:
        ctx.ctes.pop()


def _plan_query_body(node: exp.Expr, ctx: PlanContext) -> BoundQuery:
    if isinstance(node, exp.Select):
        return plan_select(node, ctx)
    if isinstance(node, exp.Union | exp.Except | exp.Intersect):
        return plan_set_operation(node, ctx)
    if isinstance(node, exp.Subquery):
        inner = plan_query(node.this, ctx)
        if node.args.get("order") or node.args.get("limit") or node.args.get("offset"):
            return _apply_outer_finishing(node, inner)
        return inner
    if isinstance(node, exp.Values):
        return plan_values(node, ctx)
    if isinstance(node, exp.Table) and node.args.get("joins"):
        raise UnsupportedFeature("parenthesized joins are not supported yet", position_of(node))
    raise UnsupportedFeature(f"{type(node).__name__} queries are not supported", position_of(node))


# --- FROM --------------------------------------------------------------------------


def plan_lateral(node: exp.Expr, ctx: PlanContext, scope: Scope) -> tuple[RelationExpr, ScopeItem]:
    """Plan `LATERAL (query) [alias]` with `scope` (the items to its left)
    as the enclosing query, and add its item to `scope`. The plan reads the
    left items' columns as OuterColumn(1, i) (`lateral.py` joins them)."""
    factor = lateral_subquery(node)
    ctx.outer.append(ScalarBinder(scope, "FROM"))
    try:
        rel, item = plan_table_factor(factor, ctx)
    finally:
        ctx.outer.pop()
    scope.add(item, node)
    return rel, item


def plan_table_factor(
    node: exp.Expr, ctx: PlanContext, ignore_joins: bool = False
) -> tuple[RelationExpr, ScopeItem]:
    """One FROM item: a catalog item (views inlined), a CTE, a subquery or
    VALUES (with `ignore_joins`, the joins attached to it are the caller's)."""
    alias_node = node.args.get("alias")
    alias = ident_name(alias_node.this) if alias_node is not None and alias_node.this else None
    renames = [ident_name(c) for c in alias_node.columns] if alias_node is not None else []
    qualified = None
    whole_row = False
    if node.args.get("joins") and not ignore_joins:
        raise UnsupportedFeature("parenthesized joins are not supported", position_of(node))
    if is_table_function(node):
        binder = ScalarBinder(
            Scope(outer=ctx.outer[-1] if ctx.outer else None, context=ctx), "FROM"
        )
        rel, names = plan_table_function(node, binder)
        types = rel.desc.types
        alias = alias or reference_name(node)
        renames = []
        whole_row = is_scalar_call(node)
    elif isinstance(node, exp.Table):
        if not isinstance(node.this, exp.Identifier):
            raise UnsupportedFeature(
                "table functions in FROM are not supported yet", position_of(node)
            )
        for unsupported in ("sample", "pivots", "hints", "version", "when"):
            if node.args.get(unsupported):
                raise UnsupportedFeature(
                    f"{node.sql(dialect='postgres')} is not supported", position_of(node)
                )
        parts = table_parts(node)
        cte = ctx.cte(parts[0]) if len(parts) == 1 else None
        if cte is not None:
            rel: RelationExpr = cte.expr
            names, types = list(cte.names), cte.types
        else:
            item = ctx.resolve(parts, node)
            if item.kind is ItemKind.INDEX:
                raise WrongObjectType(
                    f"'{item.name}' is an index; indexes cannot be selected from",
                    position_of(node),
                )
            if item.kind is ItemKind.SECRET:
                raise WrongObjectType(
                    f"'{item.name}' is a secret; secrets cannot be selected from",
                    position_of(node),
                )
            if item.kind is ItemKind.VIEW:
                if item.expr is None:
                    raise WrongObjectType(
                        f"view '{item.name}' has no plan to inline", position_of(node)
                    )
                rel = item.expr
            else:
                rel = Get(item.id, item.desc)
            names, types = list(item.desc.names), item.desc.types
            if alias is None:
                qualified = item.name
        alias = alias or parts[-1]
    elif isinstance(node, exp.Subquery):
        bound = plan_query(node.this, ctx)
        rel = visible(bound, node)
        names, types = list(bound.names), bound.types
        whole_row = bool(node.meta.get("scalar_function"))  # a lateral call
    elif isinstance(node, exp.Values):
        bound = plan_values(node, ctx)
        rel = bound.expr
        names, types = list(bound.names), bound.types
    else:
        raise UnsupportedFeature(
            f"{node.sql(dialect='postgres')!r} in FROM is not supported", position_of(node)
        )
    if len(renames) > len(names):
        raise InvalidColumnReference(
            f'table "{alias}" has {len(names)} columns available but {len(renames)} '
            "columns specified",
            position_of(alias_node),
        )
    for name in renames:
        check_column_name(name, alias_node)
    names[: len(renames)] = renames
    item = ScopeItem(alias, tuple(names), tuple(types), qualified=qualified)
    item.whole_row = whole_row and len(names) == 1
    return rel, item


def plan_from(
    select: exp.Select, ctx: PlanContext
) -> tuple[list[RelationExpr], Scope, list[ScalarExpr]]:
    """The FROM clause's inputs, their scope, and the join predicates (ON and
    USING) as conjuncts over the concatenated columns. An outer join closes
    what is left of it into one input (sql/joins.py lowers it)."""
    scope = Scope(outer=ctx.outer[-1] if ctx.outer else None, context=ctx)
    from_ = select.args.get("from_")
    if from_ is None:
        if select.args.get("joins"):
            raise ParseError("JOIN without FROM", position_of(select))
        return [ONE_EMPTY_ROW], scope, []
    inputs, predicates = _plan_join_tree(from_.this, select.args.get("joins") or [], ctx, scope)
    return inputs, scope, predicates


def _plan_join_tree(
    first: exp.Expr, joins: list[exp.Expr], ctx: PlanContext, scope: Scope
) -> tuple[list[RelationExpr], list[ScalarExpr]]:
    """`first` (its own joins ignored) joined with each of `joins` in turn."""
    if isinstance(first, exp.Lateral):  # nothing to its left: a plain subquery
        first = lateral_subquery(first)
    rel, _ = _add_factor(first, ctx, scope, ignore_joins=True)
    inputs = [rel]
    predicates: list[ScalarExpr] = []
    joins = list(joins)
    while joins:
        join = joins.pop(0)
        group = _comma_group(join, joins)
        if group:  # `, b FULL JOIN c`: the comma binds looser than JOIN
            del joins[: len(group)]
            if not any(_is_lateral(j.this) for j in [join, *group]):
                rel, _ = _add_join_group(join.this, group, ctx, scope, join)
                inputs.append(rel)
                continue
            # a LATERAL item in the group may read the items before the comma:
            # the group is evaluated for each of their rows
            ctx.outer.append(ScalarBinder(scope, "FROM"))
            try:
                rel, _ = _add_join_group(join.this, group, ctx, scope, join)
            finally:
                ctx.outer.pop()
            inputs = [lateral_join(build_join(inputs, predicates), rel)]
            predicates = []
            continue
        side = (join.args.get("side") or "").upper()
        kind = (join.args.get("kind") or "").upper()
        method = (join.args.get("method") or "").upper()
        if kind not in ("", "INNER", "CROSS", "OUTER") or method not in ("", "NATURAL"):
            raise UnsupportedFeature(f"{method or kind} JOIN is not supported", position_of(join))
        left_star = scope.star(None)
        left_arity = scope.arity
        left_items = list(scope.items)
        lateral = _is_lateral(join.this)
        if lateral:
            rel, item = plan_lateral(join.this, ctx, scope)
            items = [item]
        else:
            rel, items = _add_factor(join.this, ctx, scope)
        using = list(join.args.get("using") or [])
        if using or method == "NATURAL":
            if len(items) != 1:
                raise UnsupportedFeature(
                    "USING / NATURAL with a parenthesized join is not supported",
                    position_of(join),
                )
            if method == "NATURAL":
                using = _natural_columns(scope, left_star, items[0])
        join_predicates: list[ScalarExpr] = []
        if using:
            join_predicates += _plan_using(scope, left_star, left_arity, items[0], using)
        on = join.args.get("on")
        if on is not None:
            check_no_windows(on, "ON")  # Materialize's words (PostgreSQL: "JOIN conditions")
            value = ScalarBinder(scope, "JOIN conditions").bind_boolean(on, "JOIN/ON")
            join_predicates += conjuncts(value.expr)
        if not side and lateral:
            inputs = [lateral_join(build_join(inputs, predicates), rel)]
            predicates = join_predicates
            continue
        if not side:
            inputs.append(rel)
            predicates += join_predicates
            continue
        if on is None and not using and method != "NATURAL":
            raise ParseError(f"{side} JOIN needs ON or USING", position_of(join))
        left = build_join(inputs, predicates)
        if lateral:
            names = {i.alias for i in left_items if i.alias}
            outer = plan_lateral_join(left, rel, join_predicates, side, build_join, join, names)
        else:
            outer = outer_join(left, rel, join_predicates, side, build_join)
        if side in ("LEFT", "FULL"):
            _make_nullable(items)
        if side in ("RIGHT", "FULL"):
            _make_nullable(left_items)
        if using and side != "LEFT":
            outer = _merge_using(scope, outer, items[0], using, side)
        inputs, predicates = [outer], []
    return inputs, predicates


def _add_factor(
    node: exp.Expr, ctx: PlanContext, scope: Scope, ignore_joins: bool = False
) -> tuple[RelationExpr, list[ScopeItem]]:
    """Plan one FROM item into `scope`: a table-like item, or a
    parenthesized join `(a JOIN b ...)` whose items all become visible."""
    inner = node.this if isinstance(node, exp.Subquery) else None
    if (
        inner is not None
        and node.args.get("alias") is None
        and isinstance(inner, exp.Table | exp.Subquery)
        and inner.args.get("joins")
    ):
        return _add_join_group(inner, inner.args["joins"], ctx, scope, node)
    rel, item = plan_table_factor(node, ctx, ignore_joins)
    scope.add(item, node)
    return rel, [item]


def _comma_group(join: exp.Expr, rest: list[exp.Expr]) -> list[exp.Expr]:
    """The JOINs after the comma item `join` up to the next comma, when one
    of them is an outer join: `a, b FULL JOIN c` is `a, (b FULL JOIN c)`, so
    the outer join must not see `a`. Empty when grouping changes nothing (no
    outer join)."""
    if not _is_comma(join):
        return []
    group: list[exp.Expr] = []
    for other in rest:
        if _is_comma(other):
            break
        group.append(other)
    return group if any(j.args.get("side") for j in group) else []


def _is_lateral(node: exp.Expr) -> bool:
    """A FROM item that may read the items to its left."""
    return isinstance(node, exp.Lateral) or is_table_function(node)


def _is_comma(join: exp.Expr) -> bool:
    return not any(join.args.get(k) for k in ("side", "kind", "method", "on", "using"))


def _add_join_group(
    first: exp.Expr, joins: list[exp.Expr], ctx: PlanContext, scope: Scope, node: exp.Expr
) -> tuple[RelationExpr, list[ScopeItem]]:
    """`first JOIN ... JOIN ...` planned on its own and added to `scope` as
    one input whose items all become visible (a lateral group's enclosing
    query, ctx.outer[-1], is the items before it)."""
    sub = Scope(outer=ctx.outer[-1] if ctx.outer else None, context=ctx)
    inputs, predicates = _plan_join_tree(first, joins, ctx, sub)
    rel = build_join(inputs, predicates)
    star = scope.star(None)
    offset = scope.arity
    natural = scope.star_order is None and sub.star_order is None
    for item in sub.items:
        scope.add(item, node)
    for name, column in sub.merged.items():
        scope.merged[name] = column + offset
    if not natural:
        scope.star_order = star + [c + offset for c in sub.star(None)]
    return rel, list(sub.items)


def _make_nullable(items: list[ScopeItem]) -> None:
    """The columns of the side an outer join pads with NULLs."""
    for item in items:
        item.types = tuple(ColumnType(t.scalar_type, True) for t in item.types)


def _natural_columns(scope: Scope, left_star: list[int], right: ScopeItem) -> list[exp.Expr]:
    """NATURAL JOIN: USING the column names both sides have, in the left
    side's order (the order `*` shows the merged columns in)."""
    left_names = dict.fromkeys(scope.column_name(i) for i in left_star)
    return [exp.to_identifier(n, quoted=True) for n in left_names if n in right.names]


def _merge_using(
    scope: Scope, rel: RelationExpr, right: ScopeItem, using: list[exp.Expr], side: str
) -> RelationExpr:
    """The merged USING columns of a RIGHT join (the right side's) or FULL
    join (coalesce of both, as hidden columns appended to `rel`)."""
    names = [ident_name(i) for i in using]
    rights = [right.offset + right.names.index(n) for n in names]
    lefts = [scope.merged[n] for n in names]
    order = scope.star_order or []
    if side == "RIGHT":
        merged = rights
    else:
        arity = rel.desc.arity
        types = rel.desc.types
        rel = Map(
            rel,
            tuple(
                CallVariadic(VariadicFunc.COALESCE, (Column(a), Column(b)))
                for a, b in zip(lefts, rights, strict=True)
            ),
            tuple(names),
        )
        hidden = ScopeItem(
            None,
            tuple(f"{MERGED_USING}{n}" for n in names),
            tuple(
                ColumnType(types[a].scalar_type, types[a].nullable and types[b].nullable)
                for a, b in zip(lefts, rights, strict=True)
            ),
        )
        scope.add(hidden)
        merged = list(range(arity, arity + len(names)))
        order = [c for c in order if c < arity]
    for name, old, new in zip(names, lefts, merged, strict=True):
        scope.merged[name] = new
        order = [new if c == old else c for c in order]
    scope.star_order = order
    return rel


def _plan_using(
    scope: Scope,
    left_star: list[int],
    left_arity: int,
    right: ScopeItem,
    using: list[exp.Expr],
) -> list[ScalarExpr]:
    """JOIN ... USING (cols): equalities, and the merged columns that `*` shows
    first and unqualified names mean."""
    binder = ScalarBinder(scope, "JOIN conditions")
    predicates: list[ScalarExpr] = []
    left_cols: list[int] = []
    right_cols: list[int] = []
    for ident in using:
        name = ident_name(ident)
        if name in scope.merged:
            left = scope.merged[name]
        else:
            found = [i for i in range(left_arity) if scope.column_name(i) == name]
            if not found:
                raise InvalidColumnReference(
                    f'column "{name}" specified in USING clause does not exist in left table',
                    position_of(ident),
                )
            if len(found) > 1:
                raise AmbiguousColumn(
                    f'common column name "{name}" appears more than once in left table',
                    position_of(ident),
                )
            left = found[0]
        if name not in right.names:
            raise InvalidColumnReference(
                f'column "{name}" specified in USING clause does not exist in right table',
                position_of(ident),
            )
        right_index = right.offset + right.names.index(name)
        lt, rt = (
            Typed(Column(left), scope.types[left]),
            Typed(Column(right_index), scope.types[right_index]),
        )
        predicates.append(binder.compare(ident, BinaryFunc.EQ, "=", lt, rt, (ident, ident)).expr)
        scope.merged[name] = left
        left_cols.append(left)
        right_cols.append(right_index)
    rest_left = [i for i in left_star if i not in left_cols]
    rest_right = [i for i in range(right.offset, right.offset + right.arity) if i not in right_cols]
    scope.star_order = left_cols + rest_left + rest_right
    return predicates


def build_join(inputs: list[RelationExpr], predicates: list[ScalarExpr]) -> RelationExpr:
    """Join the inputs, turning equalities between different inputs into
    equivalence classes and everything else into a Filter above; predicates
    with subqueries are lowered (sql/subquery.py) above that."""
    predicates = [p for p in predicates if p != TRUE]
    nested = [p for p in predicates if has_subquery(p)]
    predicates = [p for p in predicates if not has_subquery(p)]
    if len(inputs) == 1:
        rel = inputs[0]
        rel = Filter(rel, tuple(predicates)) if predicates else rel
        return lower_filter(rel, nested)
    starts = Join(tuple(inputs), ()).input_offsets()

    def input_of(column: int) -> int:
        return max(i for i, start in enumerate(starts) if start <= column)

    classes: list[list[ScalarExpr]] = []
    residual: list[ScalarExpr] = []
    for predicate in predicates:
        if isinstance(predicate, CallBinary) and predicate.func is BinaryFunc.EQ:
            left, right = predicate.left, predicate.right
            left_inputs = {input_of(c) for c in left.columns()}
            right_inputs = {input_of(c) for c in right.columns()}
            if left_inputs and right_inputs and not left_inputs & right_inputs:
                equivalence_classes(classes, left, right)
                continue
        residual.append(predicate)
    inputs, residual = push_down(inputs, residual)
    rel = Join(tuple(inputs), tuple(tuple(c) for c in classes))
    rel = Filter(rel, tuple(residual)) if residual else rel
    return lower_filter(rel, nested)


# --- SELECT ------------------------------------------------------------------------

_UNSUPPORTED_SELECT_ARGS = {
    "laterals": "LATERAL",
    "qualify": "QUALIFY",
    "windows": "WINDOW",
    "into": "SELECT INTO",
    "locks": "FOR UPDATE/SHARE",
    "connect": "CONNECT BY",
    "sample": "TABLESAMPLE",
    "prewhere": "PREWHERE",
    "cluster": "CLUSTER BY",
    "distribute": "DISTRIBUTE BY",
    "sort": "SORT BY",
    "match": "MATCH_RECOGNIZE",
}


def figure_colname(node: exp.Expr) -> str:
    """The column name PostgreSQL gives an unaliased select item."""
    if isinstance(node, exp.Alias):
        return ident_name(node.args["alias"])
    if isinstance(node, exp.Column):
        return ident_name(node.this)
    if isinstance(node, exp.Paren):
        return figure_colname(node.this)
    if isinstance(node, exp.Cast):
        inner = figure_colname(node.this)
        # a name from a column or call wins; a type's or CASE's does not
        if inner != "?column?" and not isinstance(node.this.unnest(), exp.Cast | exp.Case):
            return inner
        try:
            target = scalar_type_of(node.to)
        except SqlError:
            return "?column?"
        if node.to.this in (exp.DType.VARCHAR, exp.DType.NVARCHAR):
            return "varchar"  # text, named after the type written
        if target.is_list:  # Materialize's name for a list
            return "list"
        # `'{1}'::int[]` is named as PostgreSQL names it: after the element type.
        return INTERNAL_NAMES.get(target.element or target, "?column?")
    if isinstance(node, exp.Boolean):
        return "bool"
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Filter | exp.Window):
        return figure_colname(node.this)
    if isinstance(node, exp.Anonymous):
        return ident_name(node.this) if isinstance(node.this, exp.Identifier) else str(node.this)
    if isinstance(node, exp.Func) and node.meta.get(WRITTEN_NAME):
        return str(node.meta[WRITTEN_NAME])
    if isinstance(node, exp.Trim):  # btrim, ltrim or rtrim, as PostgreSQL calls it
        return function_calls.called_name(node)
    if type(node) in _POSTGRES_NAMES:
        return _POSTGRES_NAMES[type(node)]
    if isinstance(node, _OPERATORS):
        return "?column?"
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return "?column?"


# Operators sqlglot parses as functions: unnamed, as any operator.
_OPERATORS = (
    exp.JSONBContainsTopKey,
    exp.JSONBContainsAllTopKeys,
    exp.JSONBContainsAnyTopKeys,
    exp.ArrayContainsAll,
    exp.ArrayContainedBy,
)
# Functions sqlglot names after another dialect's spelling of them.
_POSTGRES_NAMES: dict[type[exp.Expr], str] = {
    exp.GroupConcat: "string_agg",
    exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
    exp.StrPosition: "position",
}


@dataclass
class _AggregatePlan:
    """Aggregates of one SELECT: the distinct AggregateExprs and, per call
    node, how to compute it from the Reduce output (a column, or for avg a
    sum/count pair)."""

    aggregates: list[AggregateExpr] = field(default_factory=list)
    calls: dict[int, Call] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)

    def index(self, agg: AggregateExpr) -> int:
        if agg not in self.aggregates:
            self.aggregates.append(agg)
        return self.aggregates.index(agg)


def _collect_aggregates(nodes: list[exp.Expr]) -> list[exp.Expr]:
    found: list[exp.Expr] = []

    def visit(node: exp.Expr) -> None:
        # A window call's own function is not an aggregate of this query
        # (is_aggregate), but its arguments, PARTITION BY and ORDER BY may call one.
        if isinstance(node, exp.Subquery | exp.Select):
            return
        if is_aggregate(node):
            found.append(node)
            call = node.this if isinstance(node, exp.Filter) else node
            for child in call.iter_expressions():
                if contains_aggregate(child):
                    raise GroupingError(
                        "aggregate function calls cannot be nested", position_of(child)
                    )
            return
        for child in node.iter_expressions():
            visit(child)

    for node in nodes:
        visit(node)
    return found


def _plan_aggregate(node: exp.Expr, binder: ScalarBinder, plan: _AggregatePlan) -> None:
    condition = None
    call = node
    if isinstance(node, exp.Filter):
        call = node.this
        where = node.expression
        if contains_aggregate(where):
            raise GroupingError("aggregate functions are not allowed in FILTER", position_of(where))
        condition = binder.bind_boolean(
            where.this if isinstance(where, exp.Where) else where, "FILTER"
        )
    if isinstance(call, EXTRA_AGGREGATES):  # the other aggregates: sql/aggregates.py
        plan.calls[id(node)] = plan_extra_aggregate(call, binder, plan.index, condition)
        return
    if not isinstance(call, exp.Count | exp.Sum | exp.Avg | exp.Min | exp.Max):
        raise unsupported_call(call.sql_name().lower(), True, position_of(call))
    name = call.sql_name().lower()
    arg_node = call.this
    distinct = isinstance(arg_node, exp.Distinct)
    if distinct:
        if len(arg_node.expressions) != 1:
            raise UnsupportedFeature(
                f"{name}(DISTINCT ...) takes exactly one argument", position_of(call)
            )
        arg_node = arg_node.expressions[0]
    if isinstance(call, exp.Count) and arg_node is None and not call.expressions:
        raise WrongObjectType(  # PostgreSQL's and Materialize's words
            "count(*) must be used to call a parameterless aggregate function", position_of(call)
        )
    if call.expressions or arg_node is None:
        args = [binder.bind(a) for a in [arg_node, *call.expressions] if a is not None]
        raise binder.no_function(call, name, args)
    if isinstance(call, exp.Count) and isinstance(arg_node, exp.Star):
        if distinct:
            raise ParseError("count(DISTINCT *) is not valid", position_of(call))
        arg: ScalarExpr = TRUE
        if condition is not None:
            arg = If(condition.expr, TRUE, null_of(S.BOOLEAN))
        plan.calls[id(node)] = (
            "plain",
            (plan.index(AggregateExpr(AggregateFunc.COUNT, arg)),),
            None,
        )
        return
    value = binder.bind(arg_node)
    if isinstance(call, exp.Sum | exp.Avg) and value.scalar is S.INTERVAL and not value.unknown:
        plan.calls[id(node)] = plan_interval_sum(call, value, plan.index, condition, distinct)
        return
    value = check_aggregate_argument(name, value, arg_node)
    if has_outer(value.expr) and not value.expr.columns():
        raise UnsupportedFeature(
            "aggregate functions that refer exclusively to outer columns not yet supported",
            position_of(call),
        )
    arg = value.expr
    if condition is not None:
        arg = If(condition.expr, arg, null_of(value.scalar))
    if isinstance(call, exp.Avg):
        total = plan.index(AggregateExpr(AggregateFunc.SUM, arg, distinct))
        count = plan.index(AggregateExpr(AggregateFunc.COUNT, arg, distinct))
        plan.calls[id(node)] = ("avg", (total, count), avg_result_type(value.scalar))
        return
    func = {
        exp.Count: AggregateFunc.COUNT,
        exp.Sum: AggregateFunc.SUM,
        exp.Min: AggregateFunc.MIN,
        exp.Max: AggregateFunc.MAX,
    }[type(call)]
    plan.calls[id(node)] = ("plain", (plan.index(AggregateExpr(func, arg, distinct)),), None)


def global_aggregate(reduce: Reduce) -> RelationExpr:
    """Exactly one row for an aggregate without GROUP BY (see module docstring)."""
    defaults: list[ScalarExpr] = []
    for agg, ctype in zip(reduce.aggregates, reduce.desc.types, strict=True):
        if agg.func is AggregateFunc.COUNT:
            defaults.append(Literal(0, ColumnType(S.BIGINT, False)))
        else:
            defaults.append(null_of(ctype.scalar_type))
    missing = Union((ONE_EMPTY_ROW, Negate(Project(reduce, ()))))
    return Union((reduce, Map(missing, tuple(defaults), reduce.desc.names)))


def _grouping_columns(group: exp.Group) -> list[exp.Expr]:
    """GROUP BY's expressions, a parenthesized list `(a, b)` read as its
    items (PostgreSQL's grouping element: `GROUP BY (a, b)` is `GROUP BY a, b`,
    and `GROUP BY ()` groups by nothing, one row as without GROUP BY)."""
    columns: list[exp.Expr] = []
    for node in group.expressions:
        columns.extend(node.expressions if isinstance(node, exp.Tuple) else [node])
    return columns


def _plan_grouping(
    select: exp.Select,
    rel: RelationExpr,
    scope: Scope,
    items: list[exp.Expr],
    aggregate_nodes: list[exp.Expr],
) -> tuple[RelationExpr, ScalarBinder]:
    """GROUP BY, aggregates and HAVING: the Reduce (plus default row and HAVING
    filter) and a binder for the expressions above it."""
    pre = ScalarBinder(scope, "GROUP BY")
    group = select.args.get("group")
    keys: list[Typed] = []
    key_names: list[str] = []
    if group is not None:
        for unsupported in ("grouping_sets", "cube", "rollup"):
            if group.args.get(unsupported):
                raise UnsupportedFeature(
                    f"GROUP BY {unsupported.replace('_', ' ').upper()} is not supported",
                    position_of(group),
                )
        for node in _grouping_columns(group):
            item = _output_reference(node, items, scope)
            target = item.this if isinstance(item, exp.Alias) else item
            key = finalize(pre.bind(target if target is not None else node))
            if all(key.expr != k.expr for k in keys):
                keys.append(key)
                key_names.append(figure_colname(item if item is not None else node))
    agg_binder = ScalarBinder(scope, "aggregate function calls")
    plan = _AggregatePlan()
    # An aggregate that is a whole select item takes that item's name, so the
    # Reduce's output needs no renaming Project.
    item_names = {
        id(item.this if isinstance(item, exp.Alias) else item): figure_colname(item)
        for item in items
    }
    for node in aggregate_nodes:
        _plan_aggregate(node, agg_binder, plan)
        kind, indexes, _ = plan.calls[id(node)]
        if kind == "plain" and id(node) in item_names:
            plan.names.setdefault(indexes[0], item_names[id(node)])
    names = key_names + [plan.names.get(i, a.func.value) for i, a in enumerate(plan.aggregates)]
    # Subqueries in keys or arguments become columns of the Reduce's input.
    rel, lowered = lower_subqueries(rel, [k.expr for k in keys] + [a.expr for a in plan.aggregates])
    aggregates = [
        replace(a, expr=e) for a, e in zip(plan.aggregates, lowered[len(keys) :], strict=True)
    ]
    reduce = interval_keys.distinct_by_key(
        Reduce(
            rel,
            tuple(lowered[: len(keys)]),
            tuple(aggregates),
            tuple(n if n != "?column?" else f"?column{i}?" for i, n in enumerate(names)),
        )
    )
    grouped = group is not None and bool(_grouping_columns(group))
    out = interval_keys.grouped(reduce) if grouped else global_aggregate(reduce)
    types = out.desc.types
    grouping = Grouping(pre, keys)
    binder = ScalarBinder(scope, "SELECT", types=types, grouping=grouping)
    width = len(keys)
    for node_id, (kind, indexes, result) in plan.calls.items():
        if kind == "plain":
            grouping.aggregates[node_id] = binder.typed(Column(width + indexes[0]))
            continue
        if kind != "avg":
            columns = tuple(width + i for i in indexes)
            grouping.aggregates[node_id] = binder.typed(extra_result(kind, columns, types, result))
            continue
        total = Column(width + indexes[0])
        count = Column(width + indexes[1])
        assert isinstance(result, ScalarType)
        numerator: ScalarExpr = total
        if types[width + indexes[0]].scalar_type is not result:
            numerator = Cast(total, result)
        expr = If(
            CallBinary(BinaryFunc.EQ, count, Literal(0, ColumnType(S.BIGINT, False))),
            null_of(result),
            CallBinary(BinaryFunc.DIV, numerator, Cast(count, result)),
        )
        grouping.aggregates[node_id] = binder.typed(expr)
    having = select.args.get("having")
    if having is not None:
        binder.clause = "HAVING"
        condition = binder.bind_boolean(having.this, "HAVING")
        out = build_join([out], conjuncts(condition.expr))
        binder.clause = "SELECT"
    return out, binder


def _output_reference(node: exp.Expr, items: list[exp.Expr], scope: Scope) -> exp.Expr | None:
    """GROUP BY 2 or GROUP BY alias: the select item it names, alias included (PostgreSQL
    prefers an input column over an output alias of the same name)."""
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        k = int(node.this)
        if not 1 <= k <= len(items):
            raise InvalidColumnReference(
                f"GROUP BY position {k} is not in select list", position_of(node)
            )
        item = items[k - 1]
        if isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        ):
            raise UnsupportedFeature("GROUP BY position of a * item", position_of(node))
        if contains_aggregate(item):
            raise GroupingError(
                "aggregate functions are not allowed in GROUP BY", position_of(node)
            )
        return item
    if isinstance(node, exp.Column) and not node.table and not isinstance(node.this, exp.Star):
        name = ident_name(node.this)
        if name in scope.names or name in scope.merged:
            return None
        named = [
            item
            for item in items
            if isinstance(item, exp.Alias) and ident_name(item.args["alias"]) == name
        ]
        if len({item.this.sql() for item in named}) > 1:  # two different outputs
            raise AmbiguousColumn(f'column reference "{name}" is ambiguous', position_of(node))
        return named[0] if named else None
    return None


def _select_items(
    select: exp.Select, scope: Scope, binder: ScalarBinder
) -> tuple[list[Typed], list[str], list[exp.Expr | None], dict[int, str | None]]:
    """The select list, `*` expanded: typed expressions, names, syntax nodes
    and which outputs are bare untyped literals."""
    typed: list[Typed] = []
    names: list[str] = []
    nodes: list[exp.Expr | None] = []
    unknowns: dict[int, str | None] = {}
    for item in select.expressions:
        star_qualifier = None
        is_star = isinstance(item, exp.Star)
        if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            is_star = True
            star_qualifier = tuple(ident_name(p) for p in item.parts[:-1])
        if is_star:
            if star_qualifier is None and not scope.items:
                raise ParseError(
                    "SELECT * with no tables specified is not valid", position_of(item)
                )
            for column in scope.star(star_qualifier or None, item):
                names.append(scope.column_name(column))
                nodes.append(item)
                typed.append(_star_column(column, scope, binder, item))
            continue
        node = item.this if isinstance(item, exp.Alias) else item
        name = check_column_name(figure_colname(item), item)
        value = binder.bind(node)
        if value.unknown:
            assert isinstance(value.expr, Literal)
            unknowns[len(typed)] = value.expr.value
        typed.append(finalize(value))
        names.append(name)
        nodes.append(node)
    return typed, names, nodes, unknowns


def _star_column(column: int, scope: Scope, binder: ScalarBinder, node: exp.Expr) -> Typed:
    if binder.grouping is None:
        return Typed(Column(column), scope.types[column])
    for k, key in enumerate(binder.grouping.keys):
        if key.expr == Column(column):
            return Typed(Column(k), key.type)
    raise GroupingError(
        f'column "{scope.describe(column)}" must appear in the GROUP BY clause or be used '
        "in an aggregate function",
        position_of(node),
    )


def _constant_int(node: exp.Expr | None, what: str) -> int | None:
    """LIMIT/OFFSET value: a non-negative integer constant, or None for ALL/NULL."""
    if node is None:
        return None
    if (isinstance(node, exp.Var) and node.name.upper() == "ALL") or isinstance(node, exp.Null):
        return None
    value = node
    negative = False
    if isinstance(value, exp.Neg):
        negative, value = True, value.this
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        number = -int(value.this) if negative else int(value.this)
        if number < 0:
            raise InvalidParameter(f"{what} must not be negative", position_of(node))
        return number
    raise UnsupportedFeature(f"{what} must be an integer constant", position_of(node))


def _limit_offset(node: exp.Expr) -> tuple[int | None, int]:
    limit_node = node.args.get("limit")
    limit = None
    if isinstance(limit_node, exp.Limit):
        limit = _constant_int(limit_node.expression, "LIMIT")
    elif isinstance(limit_node, exp.Fetch):
        options = limit_node.args.get("limit_options")
        for option, what in (("with_ties", "WITH TIES"), ("percent", "PERCENT")):
            if options is not None and options.args.get(option):  # not to be dropped
                raise UnsupportedFeature(
                    f"FETCH ... {what} not yet supported", position_of(limit_node)
                )
        limit = _constant_int(limit_node.args.get("count"), "FETCH FIRST")
    offset_node = node.args.get("offset")
    offset = _constant_int(offset_node.expression, "OFFSET") if offset_node is not None else None
    return limit, offset or 0


def _order_direction(ordered: exp.Ordered) -> tuple[bool, bool]:
    desc = bool(ordered.args.get("desc"))
    nulls_first = ordered.args.get("nulls_first")
    nulls_last = desc is False if nulls_first is None else not nulls_first
    return desc, nulls_last


def _check_no_calls_in_set_order(target: exp.Expr) -> None:
    """An aggregate or window call in a set operation's ORDER BY, in
    Materialize's words: `aggregate functions are not allowed in ORDER BY
    clause of a set expression (function pg_catalog.sum)`."""
    for node in target.walk():
        if isinstance(node, exp.Window):
            call, kind, error = node.this, "window", WindowingError
        elif is_aggregate(node):
            call, kind, error = node, "aggregate", GroupingError
        else:
            continue
        name = call.name if isinstance(call, exp.Anonymous) else call.sql_name()
        raise error(
            f"{kind} functions are not allowed in ORDER BY clause of a set expression "
            f"(function pg_catalog.{name.lower()})",
            position_of(node),
        )


def _output_column_by_name(node: exp.Expr, names: list[str], exprs: list[ScalarExpr]) -> int | None:
    """ORDER BY name: an output column of that name, if there is exactly one meaning."""
    if not (
        isinstance(node, exp.Column) and not node.table and isinstance(node.this, exp.Identifier)
    ):
        return None
    name = ident_name(node.this)
    matches = [i for i, n in enumerate(names) if n == name]
    if not matches:
        return None
    if len({exprs[i] for i in matches}) > 1:
        raise AmbiguousColumn(f'column reference "{name}" is ambiguous', position_of(node))
    return matches[0]


def _ordinal(node: exp.Expr, count: int) -> int | None:
    if isinstance(node, exp.Literal) and node.is_string:
        raise ParseError("non-integer constant in ORDER BY", position_of(node))
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        k = int(node.this)
        if not 1 <= k <= count:
            raise InvalidColumnReference(  # Materialize's wording; PostgreSQL's 42P10
                f"column reference {k} in ORDER BY clause is out of range (1 - {count})",
                position_of(node),
            )
        return k - 1
    return None


def plan_select(select: exp.Select, ctx: PlanContext) -> BoundQuery:
    select = lift_select_set_functions(select, figure_colname)
    for key, what in _UNSUPPORTED_SELECT_ARGS.items():
        if select.args.get(key):
            raise UnsupportedFeature(f"{what} is not supported", position_of(select))
    distinct_node = select.args.get("distinct")
    distinct_on = distinct_node.args.get("on") if distinct_node is not None else None
    if select.args.get("kind"):
        raise UnsupportedFeature("SELECT AS STRUCT/VALUE is not supported", position_of(select))

    inputs, scope, predicates = plan_from(select, ctx)
    where = select.args.get("where")
    group_node = select.args.get("group")
    check_no_windows(where, "WHERE clause")  # Materialize's words (PostgreSQL's end at WHERE)
    check_no_windows(group_node, "GROUP BY")
    check_no_windows(select.args.get("having"), "HAVING")
    if where is not None:
        condition = ScalarBinder(scope, "WHERE clause").bind_boolean(where.this, "WHERE")
        predicates += conjuncts(condition.expr)
    rel = build_join(inputs, predicates)

    items = list(select.expressions)
    order = select.args.get("order")
    order_nodes = [o.this for o in order.expressions] if order is not None else []
    # DISTINCT ON's expressions may hold aggregates and window functions too
    # (PostgreSQL's and Materialize's `DISTINCT ON (row_number() OVER ())`)
    if distinct_on is None:
        on_nodes: list[exp.Expr] = []
    else:
        on_nodes = (
            list(distinct_on.expressions) if isinstance(distinct_on, exp.Tuple) else [distinct_on]
        )
    having = select.args.get("having")
    aggregate_nodes = _collect_aggregates(
        items + order_nodes + on_nodes + ([having.this] if having is not None else [])
    )
    if select.args.get("group") is not None or aggregate_nodes or having is not None:
        rel, binder = _plan_grouping(select, rel, scope, items, aggregate_nodes)
    else:
        binder = ScalarBinder(scope, "SELECT")
    rel, binder = plan_windows(rel, binder, items + order_nodes + on_nodes)  # sql/ordered.py

    typed, names, _, unknowns = _select_items(select, scope, binder)
    exprs = [t.expr for t in typed]
    distinct = distinct_node is not None and distinct_on is None

    orders: list[ColumnOrder] = []
    extra: list[Typed] = []
    for ordered in order.expressions if order is not None else []:
        node = ordered.this
        desc, nulls_last = _order_direction(ordered)
        index = _ordinal(node, len(typed))
        if index is None:
            index = _output_column_by_name(node, names, exprs)
        if index is None:
            binder.clause = "ORDER BY"
            value = finalize(binder.bind(node))
            binder.clause = "SELECT"
            all_exprs = exprs + [e.expr for e in extra]
            if value.expr in all_exprs:
                index = all_exprs.index(value.expr)
            elif distinct:
                raise InvalidColumnReference(
                    "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
                    position_of(node),
                )
            else:
                index = len(all_exprs)
                extra.append(value)
        orders.append(ColumnOrder(index, desc, nulls_last))

    on_columns = _distinct_on(distinct_on, binder, typed, names, extra, order, orders)
    all_typed = typed + extra
    out_names = names + ["?order?"] * len(extra)
    rel = _project(rel, all_typed, out_names)
    if distinct:
        rel = interval_keys.distinct(rel)
    if on_columns is not None:  # one row per DISTINCT ON value: the first in ORDER BY order
        keys = tuple(OrderKey(o.column, o.desc, o.nulls_last) for o in orders)
        rel = interval_keys.ordered(TopK(rel, on_columns, keys, 1))
    limit, offset = _limit_offset(select)
    finishing = RowSetFinishing(tuple(orders), limit, offset, tuple(range(len(typed))))
    return BoundQuery(rel, names, finishing, unknowns)


def _distinct_on(
    on: exp.Expr | None,
    binder: ScalarBinder,
    typed: list[Typed],
    names: list[str],
    extra: list[Typed],
    order: exp.Expr | None,
    orders: list[ColumnOrder],
) -> tuple[int, ...] | None:
    """The columns of SELECT DISTINCT ON (...) (expressions not in the select
    list are added to `extra`, as ORDER BY's are); PostgreSQL's rule that
    they match the leading ORDER BY expressions is checked."""
    if on is None:
        return None
    nodes = list(on.expressions) if isinstance(on, exp.Tuple) else [on]
    exprs = [t.expr for t in typed]
    columns: list[int] = []
    for node in nodes:
        index = _ordinal(node, len(typed))
        if index is None:
            index = _output_column_by_name(node, names, exprs)
        if index is None:
            binder.clause = "DISTINCT ON"
            value = finalize(binder.bind(node))
            binder.clause = "SELECT"
            all_exprs = exprs + [e.expr for e in extra]
            if value.expr in all_exprs:
                index = all_exprs.index(value.expr)
            else:
                index = len(all_exprs)
                extra.append(value)
        if index not in columns:
            columns.append(index)
    unmatched = set(columns)
    for ordered, column in zip(order.expressions if order is not None else [], orders, strict=True):
        if not unmatched:
            break
        if column.column not in unmatched:
            raise InvalidColumnReference(
                "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
                position_of(ordered),
            )
        unmatched.discard(column.column)
    return tuple(columns)


def _project(rel: RelationExpr, typed: list[Typed], names: list[str]) -> RelationExpr:
    """Map the non-column expressions, then Project to exactly `typed` in order."""
    rel, exprs = lower_subqueries(rel, [t.expr for t in typed])
    arity = rel.desc.arity
    scalars: list[ScalarExpr] = []
    outputs: list[int] = []
    mapped_names: list[str] = []
    for expr, name in zip(exprs, names, strict=True):
        if isinstance(expr, Column):
            outputs.append(expr.index)
        else:
            outputs.append(arity + len(scalars))
            scalars.append(expr)
            mapped_names.append(name)
    if scalars:
        rel = Map(rel, tuple(scalars), tuple(mapped_names))
    return _project_as(rel, outputs, names)


def _project_as(rel: RelationExpr, outputs: list[int], names: list[str]) -> RelationExpr:
    """Project(rel, outputs, names), or rel itself when that changes nothing."""
    projected = Project(rel, tuple(outputs), tuple(names))
    if tuple(outputs) == tuple(range(rel.desc.arity)) and projected.desc.names == rel.desc.names:
        return rel
    return projected


# --- set operations ---------------------------------------------------------------


def coerce_columns(
    query: BoundQuery,
    targets: list[ScalarType],
    assignment: bool,
    nodes: list[exp.Expr | None],
    what: str,
    column_names: list[str] | None = None,
    varchar: frozenset[int] = frozenset(),
) -> RelationExpr:
    """The query's visible columns cast to `targets` (implicit casts, or
    assignment casts for INSERT); bare untyped literals are parsed as the
    target, as varchar in the columns of `varchar`."""
    rel = visible(query)
    arity = rel.desc.arity
    types = rel.desc.types
    scalars: list[ScalarExpr] = []
    outputs: list[int] = []
    for k, target in enumerate(targets):
        st = types[k].scalar_type
        if k in query.unknowns and (st is not target or k in varchar):
            text = query.unknowns[k]
            parsed = None
            if text is not None:
                try:
                    parsed = parse_text_as(text, target)
                except SqlError as error:
                    raise error.at(position_of(nodes[k])) from None
            value: ScalarExpr = Literal(
                parsed, ColumnType(target, text is None, varchar=k in varchar)
            )
            outputs.append(arity + len(scalars))
            scalars.append(value)
        elif st is target:
            outputs.append(k)
        else:
            allowed = can_assign(st, target) if assignment else can_cast_implicitly(st, target)
            if not allowed:
                if assignment and column_names is not None:
                    raise TypeMismatch(
                        f'column "{column_names[k]}" is of type {target.value} but expression '
                        f"is of type {st.value}",
                        position_of(nodes[k]),
                        hint="You will need to rewrite or cast the expression.",
                    )
                raise TypeMismatch(
                    f"{what} could not convert type {st.value} to {target.value}",
                    position_of(nodes[k]),
                )
            outputs.append(arity + len(scalars))
            scalars.append(Cast(Column(k), target))
    names = column_names or list(query.names)
    if scalars:
        rel = Map(rel, tuple(scalars))
    return _project_as(rel, outputs, names)


def plan_set_operation(node: exp.Expr, ctx: PlanContext) -> BoundQuery:
    for unsupported in ("by_name", "side", "kind"):
        if node.args.get(unsupported):
            raise UnsupportedFeature(
                f"this form of {type(node).__name__.upper()} is not supported", position_of(node)
            )
    left = plan_query(node.this, ctx)
    right = plan_query(node.expression, ctx)
    word = type(node).__name__.upper()
    if left.arity != right.arity:
        raise ParseError(
            f"each {word} query must have the same number of columns", position_of(node.expression)
        )
    targets: list[ScalarType] = []
    varchar: set[int] = set()
    for k, (lt, rt) in enumerate(zip(left.types, right.types, strict=True)):
        types = [
            None if k in left.unknowns else lt.scalar_type,
            None if k in right.unknowns else rt.scalar_type,
        ]
        target = common_type(types)
        if target is None:
            raise TypeMismatch(
                f"{word} types {lt.scalar_type.value} and {rt.scalar_type.value} cannot be matched",
                position_of(node),
            )
        targets.append(target)
        known = [t for t, side in ((lt, left), (rt, right)) if k not in side.unknowns]
        if target is ScalarType.TEXT and known and known[0].varchar:
            varchar.add(k)  # an untyped literal after varchar is varchar, as PostgreSQL
    nodes: list[exp.Expr | None] = [node] * left.arity
    names = list(left.names)
    lrel = coerce_columns(left, targets, False, nodes, word, names, frozenset(varchar))
    rrel = coerce_columns(right, targets, False, nodes, word, names, frozenset(varchar))
    distinct = node.args.get("distinct", True)
    rel: RelationExpr
    by_key = interval_keys.matched(lrel, rrel, isinstance(node, exp.Intersect), bool(distinct))
    if isinstance(node, exp.Union):
        rel = Union((lrel, rrel))
        if distinct:
            rel = interval_keys.distinct(rel)
    elif by_key is not None:
        rel = by_key
    elif isinstance(node, exp.Except):
        rel = Threshold(Union((Distinct(lrel) if distinct else lrel, Negate(rrel))))
    else:  # INTERSECT ALL is l - (l - r) clipped at zero: min of the two counts
        rel = Union((lrel, Negate(Threshold(Union((lrel, Negate(rrel)))))))
        if distinct:
            rel = Distinct(rel)
    query = BoundQuery(rel, list(left.names), RowSetFinishing(project=tuple(range(left.arity))))
    return _apply_outer_finishing(node, query)


def _apply_outer_finishing(node: exp.Expr, query: BoundQuery) -> BoundQuery:
    """ORDER BY / LIMIT / OFFSET on a set operation or parenthesized query:
    only output columns (by position or name) can be sorted on."""
    order = node.args.get("order")
    orders: list[ColumnOrder] = []
    exprs: list[ScalarExpr] = [Column(i) for i in range(query.arity)]
    for ordered in order.expressions if order is not None else []:
        target = ordered.this
        index = _ordinal(target, query.arity)
        if index is None:
            index = _output_column_by_name(target, query.names, exprs)
        if index is None and isinstance(target, exp.Column) and not target.table:
            # a plain name that is no output column names nothing (PostgreSQL's 42703)
            raise UnknownColumn(
                f'column "{ident_name(target.this)}" does not exist', position_of(target)
            )
        if index is None:
            _check_no_calls_in_set_order(target)
            raise UnsupportedFeature(
                "ORDER BY on a UNION/INTERSECT/EXCEPT result must name an output column",
                position_of(target),
            )
        desc, nulls_last = _order_direction(ordered)
        orders.append(ColumnOrder(index, desc, nulls_last))
    limit, offset = _limit_offset(node)
    if not orders and limit is None and not offset:
        return query
    rel = visible(query)  # an inner LIMIT / OFFSET is a TopK
    finishing = RowSetFinishing(tuple(orders), limit, offset, tuple(range(query.arity)))
    return BoundQuery(rel, query.names, finishing, query.unknowns)


# --- VALUES -----------------------------------------------------------------------


def plan_values(
    node: exp.Values,
    ctx: PlanContext,
    targets: list[tuple[str, ColumnType]] | None = None,
) -> BoundQuery:
    """VALUES rows: a Constant when every value is a literal, else a Union of
    one-row Maps. With `targets` (INSERT) values get assignment casts to the
    named columns' types; otherwise each column gets the rows' common type."""
    rows = [
        list(row.expressions) if isinstance(row, exp.Tuple) else [row] for row in node.expressions
    ]
    width = len(rows[0])
    for row in rows:
        if len(row) != width:
            raise ParseError("VALUES lists must all be the same length", position_of(row[0]))
    binder = ScalarBinder(Scope(outer=ctx.outer[-1] if ctx.outer else None, context=ctx), "VALUES")
    bound = [[binder.bind(value) for value in row] for row in rows]
    if targets is not None and width > len(targets):
        raise ParseError(
            "INSERT has more expressions than target columns", position_of(rows[0][len(targets)])
        )
    if targets is not None and width < len(targets):
        raise ParseError(
            "INSERT has more target columns than expressions", position_of(rows[0][-1])
        )
    if targets is None:
        columns: list[list[Typed]] = [[] for _ in range(width)]
        for k in range(width):
            column_nodes: list[exp.Expr | None] = [row[k] for row in rows]
            columns[k], _ = binder.unify([row[k] for row in bound], column_nodes, "VALUES")
    else:
        columns = assigned_columns(binder, rows, bound, targets)
    return BoundQuery(*values_relation(columns), RowSetFinishing(project=tuple(range(width))))


def assigned_columns(
    binder: ScalarBinder,
    rows: list[list[exp.Expr]],
    bound: list[list[Typed]],
    targets: list[tuple[str, ColumnType]],
) -> list[list[Typed]]:
    """INSERT's assignment casts: each column's bound values (of `rows`)
    into its target's type, a column at a time (the first error PostgreSQL
    reports is the first column's)."""
    columns: list[list[Typed]] = []
    for k, (name, into) in enumerate(targets[: len(rows[0])]):
        columns.append(
            [
                binder.assign(row[k], into, nodes[k], name)
                for row, nodes in zip(bound, rows, strict=True)
            ]
        )
    return columns


def values_relation(columns: list[list[Typed]]) -> tuple[RelationExpr, list[str]]:
    """VALUES of typed columns as a relation and its column names: a
    Constant when every value is a literal, else a Union of one-row Maps."""
    width = len(columns)
    names = [f"column{k + 1}" for k in range(width)]
    rows = range(len(columns[0]))
    typed_rows = [[columns[k][r] for k in range(width)] for r in rows]
    types = tuple(
        ColumnType(columns[k][0].scalar, any(v.type.nullable for v in columns[k]))
        for k in range(width)
    )
    desc = RelationDesc(tuple(names), types)
    if all(isinstance(v.expr, Literal) for row in typed_rows for v in row):
        constant_rows = tuple(
            (tuple(v.expr.value for v in row), 1)  # type: ignore[attr-defined]
            for row in typed_rows
        )
        rel: RelationExpr = Constant(constant_rows, desc)
    else:
        maps = [_values_row([v.expr for v in row], names) for row in typed_rows]
        rel = maps[0] if len(maps) == 1 else Union(tuple(maps))
    return rel, names


def _values_row(exprs: list[ScalarExpr], names: list[str]) -> RelationExpr:
    """One VALUES row of expressions (subqueries lowered) as a relation."""
    rel, exprs = lower_subqueries(ONE_EMPTY_ROW, exprs)
    if rel is ONE_EMPTY_ROW:
        return Map(rel, tuple(exprs), tuple(names))
    arity = rel.desc.arity
    mapped = Map(rel, tuple(exprs), tuple(names))
    return Project(mapped, tuple(range(arity, arity + len(exprs))), tuple(names))
