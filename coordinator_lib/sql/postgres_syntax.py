"""Syntax of connections and PostgreSQL sources (Materialize's):

- `CREATE CONNECTION [IF NOT EXISTS] name TO POSTGRES (HOST 'h', PORT 5432,
  USER 'u', PASSWORD SECRET s, DATABASE 'd', SSL MODE 'disable')`
  -> `CreateConnection` (options `ConnectionOption`, PASSWORD's value the
  secret's name);
- `CREATE CONNECTION ... TO ICEBERG CATALOG (...)`: `iceberg_syntax.py`;
- `CREATE SOURCE [IF NOT EXISTS] name [IN CLUSTER c] FROM POSTGRES CONNECTION
  conn (PUBLICATION 'p') FOR ALL TABLES | FOR TABLES (t [AS sub], ...) |
  FOR SCHEMAS (s, ...)` -> `CreatePostgresSource`. The stored (purified)
  form adds `SLOT 'name'` to the options and each table's columns:
  `FOR TABLES (sch.t (a integer NOT NULL, b text) AS db.sch.sub, ...)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.tokens import TokenType

from coordinator_lib.sql.connection_syntax import TRANSFORMS as OPTION_TRANSFORMS
from coordinator_lib.sql.connection_syntax import connection_option
from coordinator_lib.sql.iceberg_syntax import parse_iceberg_connection


class CreateConnection(exp.Expression):
    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "exists": False,
        "connector": True,
        "options": False,
    }


class SourceTable(exp.Expression):
    """One FOR TABLES entry: `this` the upstream table, `alias` the
    subsource's name, `columns` (purified form) a list of ColumnDef."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "alias": False, "columns": False}


class CreatePostgresSource(exp.Expression):
    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "exists": False,
        "cluster": False,
        "connection": True,
        "options": False,
        "all_tables": False,
        "tables": False,
        "schemas": False,
    }


CONNECTION_OPTIONS: tuple[tuple[str, ...], ...] = (
    ("HOST",),
    ("PORT",),
    ("USER",),
    ("PASSWORD",),
    ("DATABASE",),
    ("SSL", "MODE"),
)
SOURCE_OPTIONS: tuple[tuple[str, ...], ...] = (("PUBLICATION",), ("SLOT",))


def parse_create_connection(p: Any) -> exp.Expr:
    """After `CREATE CONNECTION`."""
    exists = p._parse_exists(not_=True)
    name = p._parse_object_name("a connection name")
    if not p._match_text_seq("TO"):
        p.raise_error("Expecting TO POSTGRES or TO ICEBERG CATALOG")
    if p._match_text_seq("ICEBERG", "CATALOG"):
        return parse_iceberg_connection(p, name, exists)
    if not p._match_text_seq("POSTGRES"):
        p.raise_error("Expecting POSTGRES or ICEBERG CATALOG")
    p._match_l_paren()
    options = p._parse_csv(lambda: connection_option(p, CONNECTION_OPTIONS))
    p._match_r_paren()
    node = CreateConnection(this=name, exists=exists, connector="POSTGRES", options=options)
    return p.expression(node)


def _source_table(p: Any) -> SourceTable:
    first = p._curr
    table = p._parse_object_name("an upstream table name")
    columns = None
    if p._match(TokenType.L_PAREN, advance=False):
        columns = p._parse_wrapped_csv(p._parse_field_def)
    alias = p._parse_object_name("a subsource name") if p._match(TokenType.ALIAS) else None
    return p.expression(SourceTable(this=table, alias=alias, columns=columns), first)


def parse_postgres_source(p: Any, name: exp.Expr, exists: bool, cluster: Any) -> exp.Expr:
    """After `CREATE SOURCE name [IN CLUSTER c] FROM POSTGRES`."""
    if not p._match_text_seq("CONNECTION"):
        p.raise_error("Expecting CONNECTION and the connection's name")
    connection = p._parse_object_name("a connection name")
    options = []
    if p._match(TokenType.L_PAREN, advance=False):
        p._match_l_paren()
        options = p._parse_csv(lambda: connection_option(p, SOURCE_OPTIONS))
        p._match_r_paren()
    node = CreatePostgresSource(
        this=name, exists=exists, cluster=cluster, connection=connection, options=options
    )
    if p._match_text_seq("FOR", "ALL", "TABLES"):
        node.set("all_tables", True)
    elif p._match_text_seq("FOR", "TABLES"):
        p._match_l_paren()
        node.set("tables", p._parse_csv(lambda: _source_table(p)))
        p._match_r_paren()
    elif p._match_text_seq("FOR", "SCHEMAS"):
        p._match_l_paren()
        node.set("schemas", p._parse_csv(lambda: p._parse_name("a schema name")))
        p._match_r_paren()
    else:
        p.raise_error("Expecting FOR ALL TABLES, FOR TABLES (...) or FOR SCHEMAS (...)")
    return p.expression(node)


# --- printing ------------------------------------------------------------------------


def _connection_sql(g: Any, e: CreateConnection) -> str:
    exists = " IF NOT EXISTS" if e.args.get("exists") else ""
    options = g.expressions(e, key="options", flat=True)
    return f"CREATE CONNECTION{exists} {g.sql(e, 'this')} TO POSTGRES ({options})"


def _source_table_sql(g: Any, e: SourceTable) -> str:
    columns = g.expressions(e, key="columns", flat=True)
    columns_sql = f" ({columns})" if e.args.get("columns") else ""
    alias = f" AS {g.sql(e, 'alias')}" if e.args.get("alias") else ""
    return f"{g.sql(e, 'this')}{columns_sql}{alias}"


def _source_sql(g: Any, e: CreatePostgresSource) -> str:
    exists = " IF NOT EXISTS" if e.args.get("exists") else ""
    cluster = f" {g.sql(e, 'cluster')}" if e.args.get("cluster") else ""
    options = g.expressions(e, key="options", flat=True)
    options_sql = f" ({options})" if options else ""
    if e.args.get("all_tables"):
        target = "FOR ALL TABLES"
    elif e.args.get("schemas"):
        target = f"FOR SCHEMAS ({g.expressions(e, key='schemas', flat=True)})"
    else:
        target = f"FOR TABLES ({g.expressions(e, key='tables', flat=True)})"
    return (
        f"CREATE SOURCE{exists} {g.sql(e, 'this')}{cluster} FROM POSTGRES CONNECTION "
        f"{g.sql(e, 'connection')}{options_sql} {target}"
    )


TRANSFORMS: dict[type[exp.Expr], Callable[[Any, Any], str]] = {
    **OPTION_TRANSFORMS,
    CreateConnection: _connection_sql,
    SourceTable: _source_table_sql,
    CreatePostgresSource: _source_sql,
}

__all__ = [
    "TRANSFORMS",
    "CreateConnection",
    "CreatePostgresSource",
    "SourceTable",
    "parse_create_connection",
    "parse_postgres_source",
]
