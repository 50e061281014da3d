"""SQL-level `PREPARE name [(type, ...)] AS statement` and
`EXECUTE name [(value, ...)]`: the same prepared statements as the
extended protocol's Parse/Bind (one namespace per connection, as in
PostgreSQL), so `$n` works the same way in both.

EXECUTE's arguments are constants (string or number literals, NULL,
optionally cast); each becomes the text of its parameter, typed by the
PREPARE's declared type, else from context like a protocol parameter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.pg_catalog import type_oid
from coordinator_lib.sql.dialect import parse_sql
from coordinator_lib.sql.errors import SqlError

_NAME = r'(?P<name>"(?:[^"]|"")+"|[a-z_][a-z0-9_$]*)'
_PREPARE = re.compile(
    rf"\s*prepare\s+{_NAME}\s*(?:\((?P<types>[^)]*)\))?\s+as\s+(?P<body>.*?)\s*;?\s*",
    re.IGNORECASE | re.DOTALL,
)
_EXECUTE = re.compile(
    rf"\s*execute\s+{_NAME}\s*(?:\((?P<args>.*)\))?\s*;?\s*", re.IGNORECASE | re.DOTALL
)


def statement_name(quoted_or_plain: str) -> str:
    """A prepared statement's name as PostgreSQL folds it."""
    if quoted_or_plain.startswith('"'):
        return quoted_or_plain[1:-1].replace('""', '"')
    return quoted_or_plain.lower()


@dataclass(frozen=True)
class Prepare:
    name: str
    body: str
    param_oids: tuple[int, ...]


@dataclass(frozen=True)
class Execute:
    name: str
    values: tuple[str | None, ...]


def parse_prepare(sql: str) -> Prepare | None:
    """`PREPARE ...` read, or None when `sql` is not one."""
    match = _PREPARE.fullmatch(sql)
    if match is None:
        return None
    oids: list[int] = []
    for name in (match.group("types") or "").split(","):
        if not name.strip():
            continue
        oid = type_oid(name)
        if oid is None:
            raise AdapterError(f'type "{name.strip()}" does not exist', code="42704")
        oids.append(oid)
    return Prepare(statement_name(match.group("name")), match.group("body"), tuple(oids))


def _constant(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Cast):
        node = node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return "-" + str(node.this.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    raise AdapterError(
        f"EXECUTE takes constant arguments, not {node.sql(dialect='postgres')}", code="0A000"
    )


def parse_execute(sql: str) -> Execute | None:
    """`EXECUTE name (args)` read, or None when `sql` is not one."""
    match = _EXECUTE.fullmatch(sql)
    if match is None:
        return None
    args = match.group("args")
    values: tuple[str | None, ...] = ()
    if args and args.strip():
        try:
            (select,) = parse_sql(f"SELECT {args}")
        except (SqlError, ValueError) as error:
            raise AdapterError(f"EXECUTE arguments: {error}", code="42601") from None
        values = tuple(
            _constant(e.this if isinstance(e, exp.Alias) else e) for e in select.expressions
        )
    return Execute(statement_name(match.group("name")), values)


__all__ = ["Execute", "Prepare", "parse_execute", "parse_prepare", "statement_name"]
