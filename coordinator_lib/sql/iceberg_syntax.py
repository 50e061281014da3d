"""Syntax of Iceberg catalog connections and Iceberg sinks:

- `CREATE CONNECTION [IF NOT EXISTS] name TO ICEBERG CATALOG (URI '...',
  WAREHOUSE '...')` -> `CreateIcebergConnection` (pyiceberg's SQL catalog:
  a SQLAlchemy URI and a warehouse location);
- `CREATE SINK [IF NOT EXISTS] name [IN CLUSTER c] FROM relation INTO
  ICEBERG CATALOG CONNECTION conn (NAMESPACE 'n', TABLE 't') MODE APPEND |
  MODE UPSERT KEY (col, ...)` -> `CreateIcebergSink`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import exp

from coordinator_lib.sql.connection_syntax import connection_option

CATALOG_OPTIONS: tuple[tuple[str, ...], ...] = (("URI",), ("WAREHOUSE",))
SINK_OPTIONS: tuple[tuple[str, ...], ...] = (("NAMESPACE",), ("TABLE",))


class CreateIcebergConnection(exp.Expression):
    arg_types: ClassVar[dict[str, bool]] = {"this": True, "exists": False, "options": False}


class CreateIcebergSink(exp.Expression):
    """`key` (MODE UPSERT) a list of identifiers; absent for MODE APPEND."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "exists": False,
        "cluster": False,
        "source": True,
        "connection": True,
        "options": False,
        "key": False,
    }


def parse_iceberg_connection(p: Any, name: exp.Expr, exists: bool) -> exp.Expr:
    """After `CREATE CONNECTION name TO ICEBERG CATALOG`."""
    p._match_l_paren()
    options = p._parse_csv(lambda: connection_option(p, CATALOG_OPTIONS))
    p._match_r_paren()
    return p.expression(CreateIcebergConnection(this=name, exists=exists, options=options))


def parse_create_sink(p: Any) -> exp.Expr:
    """After `CREATE SINK`."""
    exists = p._parse_exists(not_=True)
    name = p._parse_object_name("a sink name")
    cluster = p._parse_in_cluster()
    if not p._match_text_seq("FROM"):
        p.raise_error("Expecting FROM and the relation to sink")
    source = p._parse_object_name("a relation name")
    if not p._match_text_seq("INTO", "ICEBERG", "CATALOG", "CONNECTION"):
        p.raise_error("Expecting INTO ICEBERG CATALOG CONNECTION (the only sink supported)")
    connection = p._parse_object_name("a connection name")
    p._match_l_paren()
    options = p._parse_csv(lambda: connection_option(p, SINK_OPTIONS))
    p._match_r_paren()
    key = None
    if not p._match_text_seq("MODE"):
        p.raise_error("Expecting MODE APPEND or MODE UPSERT KEY (...)")
    if p._match_text_seq("UPSERT"):
        if not p._match_text_seq("KEY"):
            p.raise_error("Expecting KEY (...) after MODE UPSERT")
        p._match_l_paren()
        key = p._parse_csv(lambda: p._parse_name("a key column"))
        p._match_r_paren()
    elif not p._match_text_seq("APPEND"):
        p.raise_error("Expecting MODE APPEND or MODE UPSERT KEY (...)")
    node = CreateIcebergSink(
        this=name,
        exists=exists,
        cluster=cluster,
        source=source,
        connection=connection,
        options=options,
        key=key,
    )
    return p.expression(node)


def _connection_sql(g: Any, e: CreateIcebergConnection) -> str:
    exists = " IF NOT EXISTS" if e.args.get("exists") else ""
    options = g.expressions(e, key="options", flat=True)
    return f"CREATE CONNECTION{exists} {g.sql(e, 'this')} TO ICEBERG CATALOG ({options})"


def _sink_sql(g: Any, e: CreateIcebergSink) -> str:
    exists = " IF NOT EXISTS" if e.args.get("exists") else ""
    cluster = f" {g.sql(e, 'cluster')}" if e.args.get("cluster") else ""
    options = g.expressions(e, key="options", flat=True)
    key = e.args.get("key")
    mode = f"MODE UPSERT KEY ({g.expressions(e, key='key', flat=True)})" if key else "MODE APPEND"
    return (
        f"CREATE SINK{exists} {g.sql(e, 'this')}{cluster} FROM {g.sql(e, 'source')} "
        f"INTO ICEBERG CATALOG CONNECTION {g.sql(e, 'connection')} ({options}) {mode}"
    )


TRANSFORMS: dict[type[exp.Expr], Callable[[Any, Any], str]] = {
    CreateIcebergConnection: _connection_sql,
    CreateIcebergSink: _sink_sql,
}

__all__ = [
    "TRANSFORMS",
    "CreateIcebergConnection",
    "CreateIcebergSink",
    "parse_create_sink",
    "parse_iceberg_connection",
]
