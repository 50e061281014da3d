"""Functions whose value is the session's: version(), current_schema(),
current_database(), current_user, pg_backend_pid(), mz_version(),
current_setting('name'), and now() / current_timestamp (the system clock
when the transaction began, as in PostgreSQL and Materialize; a statement
outside BEGIN is its own transaction) and current_date (that time's date in
UTC, the session's time zone).

now() and current_date are replaced only in queries and DML: in a view it would be frozen at
creation, so there it stays and the planner refuses it (it is not
materializable; Materialize's mz_now() is the query time for temporal
filters), and a webhook CHECK binds it to the request's receipt time.

They are replaced by literals in the parsed statement before planning (the
planner knows nothing of sessions). Client libraries send several of them
when they connect (SQLAlchemy: `select pg_catalog.version()`,
`select current_schema()`), and the `regtype` conversions psycopg's
type lookup uses (`to_regtype('name')`, `'name'::regtype`,
`oid::regtype::text`; adapter/pg_catalog.py).
"""

from __future__ import annotations

import datetime as dt
import time

from sqlglot import exp

from coordinator_lib.adapter.pg_catalog import PG_TYPE_ROWS, type_oid
from coordinator_lib.adapter.session import Session
from coordinator_lib.sql.dialect import unqualified_call
from coordinator_lib.sql.errors import SqlError, UnsupportedFeature

SERVER_VERSION = "PostgreSQL 9.5.0 on x86_64-pc-linux-gnu (Tidemark 0.1.0)"


_NOT_SESSION = object()


class UndefinedType(SqlError):
    code = "42704"


def _value(node: exp.Expr, session: Session) -> object:
    """The value for `node`, or _NOT_SESSION if it is no such call."""
    if isinstance(node, exp.CurrentSchema):
        return session.search_path[0] if session.search_path else None
    if isinstance(node, exp.CurrentDatabase):
        return session.database
    if isinstance(node, exp.CurrentUser | exp.SessionUser):
        return session.user
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        if name == "version":
            return SERVER_VERSION
        if name == "mz_version":
            return session.get("mz_version")
        if name == "pg_backend_pid":
            return session.id
        if name in ("current_role", "current_user"):
            return session.user
        if name == "current_setting" and node.expressions:
            argument = node.expressions[0]
            if isinstance(argument, exp.Literal) and argument.is_string:
                return session.get(argument.this)
    return _NOT_SESSION


def _now_literal(session: Session) -> exp.Expr:
    transaction = session.transaction
    seconds = transaction.wall_time if transaction is not None else time.time()
    now = dt.datetime.fromtimestamp(seconds, dt.UTC).replace(tzinfo=None)
    text = now.isoformat(sep=" ", timespec="microseconds") + "+00"
    return exp.Cast(this=exp.Literal.string(text), to=exp.DataType.build("timestamptz"))


def _today_literal(now: exp.Expr) -> exp.Expr:
    """current_date: the date of now() in the session's time zone (UTC)."""
    day = now.this.this[:10]
    return exp.Cast(this=exp.Literal.string(day), to=exp.DataType.build("date"))


def _is_now(node: exp.Expr) -> bool:
    if isinstance(node, exp.CurrentTimestamp):
        return not node.args.get("this")  # current_timestamp(precision): left to the planner
    return (
        isinstance(node, exp.Anonymous) and str(node.this).lower() == "now" and not node.expressions
    )


def _string_constant(node: exp.Expr | None) -> str | None:
    """The text of a string literal (maybe cast to a text type), else None."""
    while isinstance(node, exp.Cast) and node.to.is_type(*exp.DataType.TEXT_TYPES):
        node = node.this
    if isinstance(node, exp.Literal) and node.is_string:
        return node.this
    return None


def _is_regtype_cast(node: exp.Expr) -> bool:
    if not isinstance(node, exp.Cast):
        return False
    to = node.args.get("to")
    return to is not None and to.sql().lower() in ("regtype", "pg_catalog.regtype")


def _regtype(node: exp.Expr) -> exp.Expr | None:
    """`to_regtype('name')` and `x::regtype` resolved (pg_catalog.py), or
    None if `node` is neither."""
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "to_regtype":
        name = _string_constant(node.expressions[0]) if len(node.expressions) == 1 else None
        if name is None:
            if node.expressions and isinstance(node.expressions[0], exp.Null):
                return exp.cast(exp.Null(), "int")
            raise UnsupportedFeature("to_regtype takes a constant type name")
        oid = type_oid(name)
        return exp.Literal.number(oid) if oid is not None else exp.cast(exp.Null(), "int")
    if not _is_regtype_cast(node):
        return None
    name = _string_constant(node.this)
    if name is not None:  # 'name'::regtype: the type's OID, compared as one
        oid = type_oid(name)
        if oid is None:
            raise UndefinedType(f'type "{name}" does not exist')
        return exp.Literal.number(oid)
    # oid::regtype (::text): the type's name, PostgreSQL's number for others.
    value = node.this
    cases = exp.Case(this=value.copy())
    for row in PG_TYPE_ROWS:
        cases = cases.when(exp.Literal.number(row.oid), exp.Literal.string(row.regtype))
    return cases.else_(exp.cast(value.copy(), "text"))


def substitute_session_functions(statement: exp.Expr, session: Session) -> exp.Expr:
    replace_now = isinstance(statement, exp.Query | exp.Insert | exp.Update | exp.Delete)
    now: list[exp.Expr] = []  # built at the first call: one value for all of them

    def now_literal() -> exp.Expr:
        if not now:
            now.append(_now_literal(session))
        return now[0]

    def replace(node: exp.Expr) -> exp.Expr:
        if (
            isinstance(node, exp.Dot)
            and isinstance(node.expression, exp.Anonymous)
            and str(node.this).lower() in ("pg_catalog", "mz_catalog")
        ):
            node = unqualified_call(node.expression)
        if replace_now and _is_now(node):
            return now_literal().copy()
        if replace_now and isinstance(node, exp.CurrentDate) and not node.args:
            return _today_literal(now_literal())
        resolved = _regtype(node)
        if resolved is not None:
            return resolved
        value = _value(node, session)
        if value is _NOT_SESSION:
            return node
        if value is None:
            return exp.Null()
        if isinstance(value, int):
            return exp.Literal.number(value)
        return exp.Literal.string(str(value))

    return statement.transform(replace, copy=True)
