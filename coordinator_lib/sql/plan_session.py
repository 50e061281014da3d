"""Planning the statements a session runs around its queries: SHOW/SET/RESET
of variables, transactions, SUBSCRIBE, cursors (DECLARE/FETCH/CLOSE), COPY
TO STDOUT and EXPLAIN TIMESTAMP.

Variables are not checked here (the adapter knows which exist); names are
lower-cased and values kept as PostgreSQL prints them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from coordinator_lib.expr.relation import Get, RelationExpr
from coordinator_lib.sql.catalog import ItemKind
from coordinator_lib.sql.context import PlanContext
from coordinator_lib.sql.dialect import MzOption, Tidemark
from coordinator_lib.sql.errors import (
    DuplicateColumn,
    InvalidParameter,
    ParseError,
    UnknownColumn,
    UnsupportedFeature,
    WrongObjectType,
)
from coordinator_lib.sql.plan_core import (
    QUERY_TYPES,
    interval_option,
    plan_as_of,
    plan_select_statement,
    plan_time,
    writable_table,
)
from coordinator_lib.sql.plans import (
    AbortTransactionPlan,
    ClosePlan,
    CommitTransactionPlan,
    CopyFromPlan,
    CopyToPlan,
    DeclarePlan,
    ExplainTimestampPlan,
    FetchPlan,
    Plan,
    SavepointPlan,
    SelectPlan,
    SetVariablePlan,
    ShowVariablePlan,
    StartTransactionPlan,
    SubscribePlan,
)
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.query import plan_query, visible
from coordinator_lib.sql.scope import ident_name, table_parts
from coordinator_lib.sql.statements import (
    AbortTransaction,
    CloseCursor,
    CommitTransaction,
    CopyFrom,
    CopyTo,
    DeclareCursor,
    ExplainTimestamp,
    FetchCursor,
    ResetVariable,
    Savepoint,
    SetTransaction,
    SetVariable,
    ShowVariable,
    StartTransaction,
    Subscribe,
)
from coordinator_lib.sql.temporal import plan_temporal_filters

COPY_FORMATS = ("text", "csv", "binary")
_BOOLEAN_WORDS = {"true": True, "on": True, "false": False, "off": False}


# --- variables ---------------------------------------------------------------------


def set_value_text(node: exp.Expr) -> str:
    """One SET value as PostgreSQL keeps it: strings unquoted, unquoted
    words lower-cased, numbers as written."""
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Neg):
        return f"-{set_value_text(node.this)}"
    if isinstance(node, exp.Identifier):
        return node.this if node.quoted else node.this.lower()
    return node.sql(dialect=Tidemark).lower()


def plan_show_variable(statement: ShowVariable, ctx: PlanContext) -> ShowVariablePlan:
    return ShowVariablePlan(statement.name)


def plan_set_variable(statement: SetVariable, ctx: PlanContext) -> SetVariablePlan:
    local = bool(statement.args.get("local"))
    if statement.args.get("default"):
        return SetVariablePlan(statement.name, None, local)
    value = ", ".join(set_value_text(v) for v in statement.expressions)
    return SetVariablePlan(statement.name, value, local)


def plan_reset_variable(statement: ResetVariable, ctx: PlanContext) -> SetVariablePlan:
    return SetVariablePlan(statement.name, None)


def plan_set_transaction(statement: SetTransaction, ctx: PlanContext) -> SetVariablePlan:
    """SET TRANSACTION applies to the current transaction (SET LOCAL); SET
    SESSION CHARACTERISTICS AS TRANSACTION to the session's later ones."""
    local = not statement.args.get("session")
    isolation = statement.args.get("isolation")
    read_only = statement.args.get("read_only")
    if isolation is not None and read_only is not None:
        raise UnsupportedFeature(
            "set the isolation level and READ ONLY/WRITE in two statements",
            position_of(statement),
        )
    if isolation is not None:
        return SetVariablePlan("transaction_isolation", isolation, local)
    return SetVariablePlan("transaction_read_only", "on" if read_only else "off", local)


# --- transactions ------------------------------------------------------------------


def plan_start_transaction(statement: StartTransaction, ctx: PlanContext) -> StartTransactionPlan:
    return StartTransactionPlan(statement.args.get("isolation"), statement.args.get("read_only"))


# --- SUBSCRIBE ---------------------------------------------------------------------


def _bool_option(option: MzOption) -> bool:
    value = option.args.get("value")
    if value is None:
        return True
    if isinstance(value, exp.Boolean):
        return bool(value.this)
    word = None
    if isinstance(value, exp.Literal) and value.is_string:
        word = value.this.lower()
    elif isinstance(value, exp.Column) and not value.table:
        word = value.name.lower()
    if word in _BOOLEAN_WORDS:
        return _BOOLEAN_WORDS[word]
    raise InvalidParameter(f"option {option.name} needs a boolean", position_of(value))


def plan_subscribe(statement: Subscribe, ctx: PlanContext) -> SubscribePlan:
    target = statement.this
    from_id = None
    expr: RelationExpr
    if isinstance(target, exp.Table):
        item = ctx.resolve(table_parts(target), target)
        if item.kind is ItemKind.INDEX:
            raise WrongObjectType(
                f"'{item.name}' is an index; subscribe to the relation it indexes",
                position_of(target),
            )
        if item.kind is ItemKind.VIEW:
            if item.expr is None:
                raise WrongObjectType(f"view '{item.name}' has no plan", position_of(target))
            expr = item.expr
        else:
            expr = Get(item.id, item.desc)
        from_id = item.id
    else:
        query = target.this
        if query.args.get("as_of") is not None:
            raise ParseError(
                "write AS OF after SUBSCRIBE (...), not inside the query",
                position_of(query.args["as_of"]),
            )
        bound = plan_query(query, ctx)
        fin = bound.finishing
        if fin.order_by or fin.limit is not None or fin.offset:
            clause = query.args.get("order") or query.args.get("limit") or query.args.get("offset")
            raise UnsupportedFeature(
                "SUBSCRIBE streams changes and cannot apply ORDER BY, LIMIT or OFFSET",
                position_of(clause) or position_of(query),
            )
        expr = visible(bound, query)
    snapshot, progress = True, False
    seen: set[str] = set()
    for option in statement.args.get("options") or []:
        if option.name in seen:
            raise InvalidParameter(f"option {option.name} given twice", position_of(option))
        seen.add(option.name)
        if option.name == "SNAPSHOT":
            snapshot = _bool_option(option)
        elif option.name == "PROGRESS":
            progress = _bool_option(option)
        else:
            raise ParseError(
                f"unknown SUBSCRIBE option {option.name} (expected SNAPSHOT or PROGRESS)",
                position_of(option),
            )
    as_of_node = statement.args.get("as_of")
    as_of = plan_as_of(as_of_node) if as_of_node is not None else None
    up_to_node = statement.args.get("up_to")
    up_to = plan_time(up_to_node, "UP TO") if up_to_node is not None else None
    if as_of is not None and up_to is not None and up_to < as_of.timestamp:
        raise InvalidParameter(
            f"UP TO {up_to} is earlier than AS OF {as_of.timestamp}", position_of(up_to_node)
        )
    return SubscribePlan(
        expr=plan_temporal_filters(expr, ctx.text),  # maintained: mz_now() as in a view
        from_id=from_id,
        with_snapshot=snapshot,
        progress=progress,
        as_of=as_of,
        up_to=up_to,
        depends_on=frozenset(ctx.references | expr.depends_on()),
    )


# --- cursors ------------------------------------------------------------------------


def _row_statement_plan(statement: exp.Expr, ctx: PlanContext, what: str) -> Plan:
    """The plan of the SELECT or SUBSCRIBE a cursor or COPY reads."""
    if not isinstance(statement, (*QUERY_TYPES, Subscribe)):
        raise UnsupportedFeature(
            f"{what} only supports SELECT and SUBSCRIBE", position_of(statement)
        )
    return ctx.planner.plan_statement(statement, ctx)


def plan_declare(statement: DeclareCursor, ctx: PlanContext) -> DeclarePlan:
    if statement.args.get("hold"):
        raise UnsupportedFeature(
            "DECLARE ... WITH HOLD is not supported (cursors end with their transaction)",
            position_of(statement),
        )
    inner = statement.expression
    plan = _row_statement_plan(inner, ctx, "DECLARE ... CURSOR FOR")
    return DeclarePlan(ident_name(statement.this), plan, inner.sql(dialect=Tidemark))


def plan_fetch(statement: FetchCursor, ctx: PlanContext) -> FetchPlan:
    count: int | None = 1
    if statement.args.get("all"):
        count = None
    elif statement.args.get("count") is not None:
        node = statement.args["count"]
        text = str(node.this)
        if not text.isdigit():
            raise InvalidParameter("FETCH needs a whole number of rows", position_of(node))
        count = int(text)
    timeout_ms = None
    for option in statement.args.get("options") or []:
        if option.name != "TIMEOUT":
            raise InvalidParameter(
                f"unknown FETCH option {option.name} (expected TIMEOUT)", position_of(option)
            )
        timeout_ms = interval_option(option)
    return FetchPlan(ident_name(statement.this), count, timeout_ms)


def plan_close(statement: CloseCursor, ctx: PlanContext) -> ClosePlan:
    return ClosePlan(ident_name(statement.this))


# --- COPY / EXPLAIN TIMESTAMP ---------------------------------------------------------


def plan_copy_to(statement: CopyTo, ctx: PlanContext) -> CopyToPlan:
    fmt = "text"
    seen: set[str] = set()
    for option in statement.args.get("options") or []:
        if option.name in seen:
            raise InvalidParameter(f"COPY option {option.name} given twice", position_of(option))
        seen.add(option.name)
        if option.name != "FORMAT":
            raise UnsupportedFeature(
                f"COPY option {option.name} is not supported", position_of(option)
            )
        value = option.args.get("value")
        fmt = set_value_text(value).lower() if value is not None else ""
        if fmt not in COPY_FORMATS:
            raise InvalidParameter(
                f'COPY format "{fmt}" not recognized (text, csv or binary)',
                position_of(value) or position_of(option),
            )
    target = statement.this
    if isinstance(target, exp.Table):
        columns = [exp.column(c.copy()) for c in statement.args.get("columns") or []]
        query = exp.Select(expressions=columns or [exp.Star()]).from_(target.copy())
        plan: Plan = plan_select_statement(query, ctx)
    else:
        plan = _row_statement_plan(target, ctx, "COPY (...) TO STDOUT")
    return CopyToPlan(plan, fmt)


_COPY_FROM_OPTIONS = ("FORMAT", "HEADER", "DELIMITER", "NULL", "QUOTE", "ESCAPE")


def _one_byte(option: exp.Expr, text: str) -> str:
    if len(text.encode()) != 1:
        what = {"DELIMITER": "delimiter", "QUOTE": "quote", "ESCAPE": "escape"}[option.name]
        raise InvalidParameter(
            f"COPY {what} must be a single one-byte character", position_of(option)
        )
    return text


def plan_copy_from(statement: CopyFrom, ctx: PlanContext) -> CopyFromPlan:
    """PostgreSQL's checks and defaults: text uses tab and `\\N`, csv a
    comma and the empty string; QUOTE, ESCAPE and HEADER are csv's only
    (HEADER also text's since PostgreSQL 15), nothing but FORMAT for binary."""
    item = writable_table(ctx, statement.this, "copy to")
    desc = item.desc
    columns: list[int] = []
    for ident in statement.args.get("columns") or []:
        name = ident_name(ident)
        if name not in desc.names:
            raise UnknownColumn(
                f'column "{name}" of relation "{item.name.item}" does not exist',
                position_of(ident),
            )
        if desc.names.index(name) in columns:
            raise DuplicateColumn(f'column "{name}" specified more than once', position_of(ident))
        columns.append(desc.names.index(name))
    given: dict[str, tuple[exp.Expr, str | None]] = {}
    for option in statement.args.get("options") or []:
        if option.name not in _COPY_FROM_OPTIONS:
            raise InvalidParameter(
                f'option "{option.name.lower()}" not recognized', position_of(option)
            )
        if option.name in given:
            raise InvalidParameter("conflicting or redundant options", position_of(option))
        value = option.args.get("value")
        given[option.name] = (option, set_value_text(value) if value is not None else None)
    fmt = (given.get("FORMAT", (None, "text"))[1] or "").lower()
    if fmt not in COPY_FORMATS:
        raise InvalidParameter(f'COPY format "{fmt}" not recognized', position_of(statement))
    header_value = (given.get("HEADER", (None, "true"))[1] or "true").lower()
    if header_value not in ("true", "on", "1", "false", "off", "0"):
        raise InvalidParameter(f"{header_value} requires a Boolean value", position_of(statement))
    header = "HEADER" in given and header_value in ("true", "on", "1")
    csv = fmt == "csv"
    for name in given:
        if fmt == "binary" and name != "FORMAT":
            raise InvalidParameter(
                f"cannot specify {name} in BINARY mode", position_of(given[name][0])
            )
        if name in ("QUOTE", "ESCAPE") and not csv:
            raise InvalidParameter(
                f"COPY {name.lower()} available only in CSV mode", position_of(given[name][0])
            )

    def text_of(name: str, default: str) -> str:
        option, value = given.get(name, (None, default))
        if value is None:
            raise InvalidParameter(f"{name.lower()} requires a parameter", position_of(option))
        return value

    delimiter = text_of("DELIMITER", "," if csv else "\t")
    if "DELIMITER" in given:
        _one_byte(given["DELIMITER"][0], delimiter)
    quote = text_of("QUOTE", '"')
    if "QUOTE" in given:
        _one_byte(given["QUOTE"][0], quote)
    escape = text_of("ESCAPE", quote)
    if "ESCAPE" in given:
        _one_byte(given["ESCAPE"][0], escape)
    null = text_of("NULL", "" if csv else "\\N")
    if delimiter in ("\n", "\r") or (not csv and delimiter == "\\"):
        raise InvalidParameter(
            "COPY delimiter cannot be newline, carriage return or backslash", position_of(statement)
        )
    if csv and delimiter == quote:
        raise InvalidParameter("COPY delimiter and quote must be different", position_of(statement))
    if delimiter in null:
        raise InvalidParameter(
            "COPY delimiter must not appear in the NULL specification", position_of(statement)
        )
    return CopyFromPlan(
        item.id,
        item.name,
        desc,
        tuple(columns) or tuple(range(desc.arity)),
        fmt,
        delimiter,
        null,
        quote,
        escape,
        header,
    )


def plan_explain_timestamp(statement: ExplainTimestamp, ctx: PlanContext) -> ExplainTimestampPlan:
    target = statement.this
    plan = ctx.planner.plan_statement(target, ctx) if isinstance(target, QUERY_TYPES) else None
    if not isinstance(plan, SelectPlan):
        raise UnsupportedFeature("EXPLAIN TIMESTAMP only explains SELECT", position_of(target))
    return ExplainTimestampPlan(plan, str(statement.args.get("format") or "TEXT").lower())


PLANNERS: dict[type, Callable[[Any, PlanContext], Plan]] = {
    ShowVariable: plan_show_variable,
    SetVariable: plan_set_variable,
    ResetVariable: plan_reset_variable,
    SetTransaction: plan_set_transaction,
    StartTransaction: plan_start_transaction,
    CommitTransaction: lambda statement, ctx: CommitTransactionPlan(),
    AbortTransaction: lambda statement, ctx: AbortTransactionPlan(),
    Savepoint: lambda statement, ctx: SavepointPlan(statement.args["action"], statement.this.name),
    Subscribe: plan_subscribe,
    DeclareCursor: plan_declare,
    FetchCursor: plan_fetch,
    CloseCursor: plan_close,
    CopyTo: plan_copy_to,
    CopyFrom: plan_copy_from,
    ExplainTimestamp: plan_explain_timestamp,
}


__all__ = [
    "COPY_FORMATS",
    "PLANNERS",
    "plan_copy_to",
    "plan_declare",
    "plan_explain_timestamp",
    "plan_fetch",
    "plan_subscribe",
    "set_value_text",
]
