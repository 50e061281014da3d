"""Statements to plans: `plan_statement(sql, catalog)` parses one statement
with the Tidemark dialect, resolves and types it against the catalog and
returns one of the dataclasses in `plans.py`; `plan_statements` does the same
for `;`-separated text.

`plan_statements` plans every statement against the catalog as it is; when a
statement needs objects an earlier one creates (`CREATE TABLE t ...; INSERT
INTO t ...`), the adapter parses with `parse_statements` and plans and
executes one at a time with `plan_parsed` (binding `$n` parameters first with
`params.bind_parameters`; an unbound one is refused).

This module dispatches each statement to its planner and plans EXPLAIN;
queries, CREATE, DROP and INSERT/UPDATE/DELETE are planned in `plan_core.py`,
the catalog statements (ALTER, SHOW objects, schemas) in `plan_catalog.py`,
the session ones (SET/SHOW variables, transactions, SUBSCRIBE, cursors, COPY)
in `plan_session.py`, and so on; they all build on `plan_core.py`'s helpers.
It is the top of sql/: it hands the modules below it the planner
(`PLANNER`, as `PlanContext.planner`) they call back when planning recurses.
"""

from __future__ import annotations

import functools
import re
import threading

from sqlglot import exp

from coordinator_lib.expr.relation import Get, RelationExpr
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc, ScalarType
from coordinator_lib.sql import (
    plan_catalog,
    plan_cluster,
    plan_continual_task,
    plan_iceberg,
    plan_postgres,
    plan_role,
    plan_session,
    plan_webhook,
)
from coordinator_lib.sql.catalog import CatalogItem, ItemKind, SqlCatalog
from coordinator_lib.sql.context import PlanContext
from coordinator_lib.sql.depth import too_deep
from coordinator_lib.sql.dialect import (
    CreateSource,
    Explain,
    parse_sql,
)
from coordinator_lib.sql.errors import (
    ParseError,
    SqlError,
    UndefinedParameter,
    UnsupportedFeature,
    WrongObjectType,
)
from coordinator_lib.sql.explain import explain_options
from coordinator_lib.sql.plan_core import (
    QUERY_TYPES,
    plan_create_index,
    plan_create_source,
    plan_create_table,
    plan_create_view,
    plan_delete,
    plan_drop,
    plan_insert,
    plan_select_statement,
    plan_update,
)
from coordinator_lib.sql.plans import (
    CommitTransactionPlan,
    CreateIndexPlan,
    CreateViewPlan,
    ExplainPlan,
    Plan,
    SelectPlan,
)
from coordinator_lib.sql.positions import parameter_start, position_of
from coordinator_lib.sql.query import BoundQuery, coerce_columns, plan_query, visible
from coordinator_lib.sql.scope import table_parts
from coordinator_lib.sql.temporal import refuse_in_writes

_CACHED_TEXT = 4096  # longer texts (a bulk INSERT) are parsed each time, never kept


@functools.lru_cache(maxsize=512)
def _parsed(text: str) -> tuple[exp.Expr, ...]:
    return tuple(parse_sql(text))


# Texts seen once (insertion-ordered, the oldest forgotten first): a text
# is kept parsed only when it comes again.
_SEEN: dict[str, None] = {}
_SEEN_MAX = 4096
_SEEN_LOCK = threading.Lock()


def parse_statements(text: str) -> list[exp.Expr]:
    """The statements in `text`, parsed (positions refer to `text`). A
    statement run again (a prepared statement's every Execute, a client's
    repeated query) is parsed once: the cache hands out copies, which
    binding and planning may change (a copy costs a sixth of a parse). A
    text seen for the first time is parsed and not copied: statements with
    their values written in (pgbench's, most loaders') never repeat."""
    if len(text) > _CACHED_TEXT:
        return parse_sql(text)
    with _SEEN_LOCK:
        again = text in _SEEN
        if not again:
            _SEEN[text] = None
            if len(_SEEN) > _SEEN_MAX:
                del _SEEN[next(iter(_SEEN))]
    if not again:
        return parse_sql(text)
    return [statement.copy() for statement in _parsed(text)]


def plan_statements(text: str, catalog: SqlCatalog) -> list[Plan]:
    """Plan each `;`-separated statement against `catalog` as it is now."""
    return [plan_parsed(statement, catalog, text) for statement in parse_sql(text)]


def plan_statement(text: str, catalog: SqlCatalog) -> Plan:
    """Plan exactly one statement."""
    statements = parse_sql(text)
    if len(statements) != 1:
        raise ParseError(f"expected exactly one statement, found {len(statements)}")
    return plan_parsed(statements[0], catalog, text)


def plan_parsed(statement: exp.Expr, catalog: SqlCatalog, text: str = "") -> Plan:
    """Plan one parsed statement (from `parse_statements`; with `$n`
    parameters, after `params.bind_parameters`)."""
    try:
        check_no_parameters(statement)
        ctx = PlanContext(catalog, text, PLANNER)
        return plan_in_context(statement, ctx)
    except RecursionError:
        raise too_deep() from None


def check_no_parameters(statement: exp.Expr) -> None:
    """Refuse a `$n` that has no value (PostgreSQL's undefined_parameter)."""
    unbound = list(statement.find_all(exp.Parameter))
    if unbound:
        first = min(unbound, key=lambda p: parameter_start(p) or 0)
        start = parameter_start(first)
        raise UndefinedParameter(
            f"there is no parameter ${first.name}", start + 1 if start is not None else None
        )


def plan_in_context(statement: exp.Expr, ctx: PlanContext) -> Plan:
    if isinstance(statement, QUERY_TYPES):
        return plan_select_statement(statement, ctx)
    role_text = plan_role.role_statement_text(statement)
    if role_text is not None:
        return plan_role.plan_role_command(role_text, ctx)
    planner = (
        plan_session.PLANNERS.get(type(statement))
        or plan_catalog.PLANNERS.get(type(statement))
        or plan_webhook.PLANNERS.get(type(statement))
        or plan_cluster.PLANNERS.get(type(statement))
        or plan_continual_task.PLANNERS.get(type(statement))
        or plan_postgres.PLANNERS.get(type(statement))
        or plan_iceberg.PLANNERS.get(type(statement))
    )
    if planner is not None:
        return planner(statement, ctx)
    if isinstance(statement, exp.EndStatement):  # `END` after other statements
        return CommitTransactionPlan()
    if isinstance(statement, exp.Create):
        kind = (statement.args.get("kind") or "").upper()
        if kind == "TABLE":
            return plan_create_table(statement, ctx)
        if kind == "VIEW":
            return plan_create_view(statement, ctx)
        if kind == "INDEX":
            return plan_create_index(statement, ctx)
        if kind in ("SCHEMA", "DATABASE"):
            return plan_catalog.plan_create_namespace(statement, ctx)
        raise UnsupportedFeature(f"CREATE {kind} is not supported", position_of(statement))
    if isinstance(statement, CreateSource):
        return plan_create_source(statement, ctx)
    if isinstance(statement, exp.Insert):
        insert = plan_insert(statement, ctx)
        refuse_in_writes([insert.expr], ctx.text)
        return insert
    if isinstance(statement, exp.Update):
        update = plan_update(statement, ctx)
        refuse_in_writes([update.retract, update.insert], ctx.text)
        return update
    if isinstance(statement, exp.Delete):
        delete = plan_delete(statement, ctx)
        refuse_in_writes([delete.retract], ctx.text)
        return delete
    if isinstance(statement, exp.Drop):
        if str(statement.args.get("kind") or "").upper() in ("SCHEMA", "DATABASE"):
            return plan_catalog.plan_drop_namespace(statement, ctx)
        if str(statement.args.get("kind") or "").upper() == "CLUSTER":
            return plan_cluster.plan_drop_cluster(statement, ctx)
        return plan_drop(statement, ctx)
    if isinstance(statement, exp.Alter):
        raise UnsupportedFeature(
            "this ALTER is not supported (only ALTER ... RENAME TO and "
            "ALTER ... SET/RESET (RETAIN HISTORY))",
            position_of(statement) or 1,
        )
    if isinstance(statement, Explain):
        return plan_explain(statement, ctx)
    if isinstance(statement, exp.Command):
        rest = statement.expression
        rest_text = rest.name if isinstance(rest, exp.Literal) else str(rest or "")
        words = f"{statement.this} {rest_text}".split()
        shown = " ".join([words[0].upper(), *words[1:3]])
        raise UnsupportedFeature(f"{shown} ... is not supported", 1)
    kind = re.sub(r"(?<!^)(?=[A-Z])", " ", type(statement).__name__).upper()
    raise UnsupportedFeature(f"{kind} statements are not supported", 1)


def _expr_of(item: CatalogItem) -> RelationExpr:
    return item.expr if item.expr is not None else Get(item.id, item.desc)


def plan_explain(statement: Explain, ctx: PlanContext) -> ExplainPlan:
    stage = statement.args.get("stage")
    options = explain_options(statement.args.get("options") or [], stage)
    kind = statement.args.get("kind")
    target = statement.this
    if kind:
        item = ctx.resolve(table_parts(target), target)
        wanted = {
            "MATERIALIZED VIEW": ItemKind.MATERIALIZED_VIEW,
            "VIEW": ItemKind.VIEW,
            "INDEX": ItemKind.INDEX,
        }[kind]
        if item.kind is not wanted:
            raise WrongObjectType(
                f"'{item.name}' is a {item.kind.sql_name}, not a {wanted.sql_name}",
                position_of(target),
            )
        if item.kind is ItemKind.INDEX and item.on is not None:
            on = _catalog_item(ctx, item.on)
            expr = _expr_of(on) if on is not None else Get(item.on, item.desc)
        else:
            expr = _expr_of(item)
        _record_gets(ctx, expr)
        return ExplainPlan(None, expr, item.id, stage, ctx.readable_names(), options)
    plan = plan_in_context(target, ctx)
    if isinstance(plan, SelectPlan | CreateViewPlan):
        expr = plan.expr
    elif isinstance(plan, CreateIndexPlan):
        on = _catalog_item(ctx, plan.on)
        expr = _expr_of(on) if on is not None else Get(plan.on, RelationDesc((), ()))
    else:
        raise UnsupportedFeature(
            f"EXPLAIN of {type(plan).__name__.removesuffix('Plan')} is not supported",
            position_of(target),
        )
    _record_gets(ctx, expr)
    return ExplainPlan(plan, expr, None, stage, ctx.readable_names(), options)


def _catalog_item(ctx: PlanContext, gid: GlobalId) -> CatalogItem | None:
    get = getattr(ctx.catalog, "get", None)
    if get is None:
        return None
    try:
        return get(gid)
    except SqlError:
        return None


def _record_gets(ctx: PlanContext, expr: RelationExpr) -> None:
    """Names for the Gets of an inlined or stored plan, for readable EXPLAIN."""
    for gid in expr.depends_on():
        if gid not in ctx.names:
            item = _catalog_item(ctx, gid)
            if item is not None:
                ctx.names[gid] = item.name


class _Planner:
    """The planner the modules below this one call back (`PlanContext.planner`):
    a subquery is a query of its own, EXPLAIN and COPY plan a statement."""

    def plan_query(self, node: exp.Expr, ctx: PlanContext) -> BoundQuery:
        return plan_query(node, ctx)

    def visible(self, query: BoundQuery, node: exp.Expr | None = None) -> RelationExpr:
        return visible(query, node)

    def coerce_columns(
        self,
        query: BoundQuery,
        targets: list[ScalarType],
        assignment: bool,
        nodes: list[exp.Expr | None],
        what: str,
    ) -> RelationExpr:
        return coerce_columns(query, targets, assignment, nodes, what)

    def plan_statement(self, statement: exp.Expr, ctx: PlanContext) -> Plan:
        return plan_in_context(statement, ctx)


PLANNER = _Planner()

__all__ = [
    "parse_statements",
    "plan_parsed",
    "plan_statement",
    "plan_statements",
]
