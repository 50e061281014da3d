"""Syntax of CREATE CLUSTER, in Materialize's grammar (managed clusters):

    CREATE CLUSTER [IF NOT EXISTS] name
      [ ( { REPLICATION FACTOR [=] n | SIZE [=] 'size' } [, ...] ) ]

DROP CLUSTER is sqlglot's `exp.Drop` (kind CLUSTER), parsed by the dialect's
DROP. `TidemarkParser` calls `parse_create_cluster` after `CREATE CLUSTER`;
`TRANSFORMS` prints the node back.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.tokens import TokenType


class CreateCluster(exp.Expression):
    """`this` is the name (an Identifier); `replication_factor` and `size`
    are literals, absent when not given."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "exists": False,
        "replication_factor": False,
        "size": False,
    }


def parse_create_cluster(p: Any) -> exp.Expr:
    """After `CREATE CLUSTER`."""
    exists = p._parse_exists(not_=True)
    name = p._parse_name("a cluster name")
    args: dict[str, Any] = {"this": name, "exists": exists}
    if p._match(TokenType.L_PAREN):
        while True:
            if p._match_text_seq("REPLICATION", "FACTOR"):
                p._match(TokenType.EQ)
                value = p._parse_number()
                if value is None:
                    p.raise_error("Expecting a number after REPLICATION FACTOR")
                args["replication_factor"] = value
            elif p._match_text_seq("SIZE"):
                p._match(TokenType.EQ)
                value = p._parse_string()
                if value is None:
                    p.raise_error("Expecting a string after SIZE")
                args["size"] = value
            else:
                p.raise_error("Expecting REPLICATION FACTOR or SIZE")
            if not p._match(TokenType.COMMA):
                break
        if not p._match(TokenType.R_PAREN):
            p.raise_error("Expecting )")
    return p.expression(CreateCluster(**args))


def _create_cluster_sql(g: Any, e: CreateCluster) -> str:
    exists = " IF NOT EXISTS" if e.args.get("exists") else ""
    options = []
    if e.args.get("replication_factor") is not None:
        options.append(f"REPLICATION FACTOR = {g.sql(e, 'replication_factor')}")
    if e.args.get("size") is not None:
        options.append(f"SIZE = {g.sql(e, 'size')}")
    tail = f" ({', '.join(options)})" if options else ""
    return f"CREATE CLUSTER{exists} {g.sql(e, 'this')}{tail}"


TRANSFORMS: dict[type[exp.Expr], Any] = {CreateCluster: _create_cluster_sql}

__all__ = ["TRANSFORMS", "CreateCluster", "parse_create_cluster"]
