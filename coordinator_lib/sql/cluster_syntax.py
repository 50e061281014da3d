"""Syntax of CREATE CLUSTER, in Materialize's grammar (managed clusters):

    CREATE CLUSTER [IF NOT EXISTS] name
      [ [(] { REPLICATION FACTOR [=] n | SIZE [=] 'size'
            | REPLICAS [=] ( replica ( SIZE [=] 'size' ) [, ...] ) } [, ...] [)] ]

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
    are literals, absent when not given; `replicas` the REPLICAS list (an
    unmanaged cluster's replicas: Tuples of name and size)."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "exists": False,
        "replication_factor": False,
        "size": False,
        "replicas": False,
    }


# Options Materialize's CREATE CLUSTER takes that Tidemark's clusters (sets
# of worker processes) have nothing to do with: refused as 0A000, by name.
_OTHER_OPTIONS: tuple[tuple[str, ...], ...] = (
    ("AVAILABILITY", "ZONES"),
    ("INTROSPECTION", "DEBUGGING"),
    ("INTROSPECTION", "INTERVAL"),
    ("WORKLOAD", "CLASS"),
    ("MANAGED",),
    ("SCHEDULE",),
    ("DISK",),
)

_OPTION_WORDS = {"REPLICATION", "SIZE", "REPLICAS"} | {words[0] for words in _OTHER_OPTIONS}


def parse_create_cluster(p: Any) -> exp.Expr:
    """After `CREATE CLUSTER`. The option list's parentheses are optional,
    as in Materialize (`CREATE CLUSTER c SIZE '1'`)."""
    exists = p._parse_exists(not_=True)
    name = p._parse_name("a cluster name")
    args: dict[str, Any] = {"this": name, "exists": exists}
    paren = p._match(TokenType.L_PAREN)
    if paren or (p._curr is not None and p._curr.text.upper() in _OPTION_WORDS):
        while True:
            _parse_cluster_option(p, args)
            if not p._match(TokenType.COMMA):
                break
    if paren and not p._match(TokenType.R_PAREN):
        p.raise_error("Expecting )")
    return p.expression(CreateCluster(**args))


def _parse_cluster_option(p: Any, args: dict[str, Any]) -> None:
    first = p._curr
    if p._match_text_seq("REPLICATION", "FACTOR"):
        p._match(TokenType.EQ)
        value = p._parse_number()
        if value is None:
            p.raise_error("Expecting a number after REPLICATION FACTOR")
        args["replication_factor"] = value
    elif p._match_text_seq("SIZE"):
        args["size"] = _parse_size(p)
    elif p._match_text_seq("REPLICAS"):
        p._match(TokenType.EQ)
        args["replicas"] = _parse_replicas(p)
    else:
        other = p._match_words(_OTHER_OPTIONS)
        if other is not None:
            p._unsupported(f"CREATE CLUSTER option {other} is not supported", first)
        p.raise_error("Expecting REPLICATION FACTOR, SIZE or REPLICAS")


def _parse_size(p: Any) -> exp.Expr:
    """After SIZE: `[=] 'size'`."""
    p._match(TokenType.EQ)
    value = p._parse_string()
    if value is None:
        p.raise_error("Expecting a string after SIZE")
    return value


def _parse_replicas(p: Any) -> list[exp.Expr]:
    """`( name ( SIZE [=] 'size' ) [, ...] )`: each replica's name and
    size, as a Tuple of the two."""
    if not p._match(TokenType.L_PAREN):
        p.raise_error("Expecting ( after REPLICAS")
    replicas: list[exp.Expr] = []
    if p._match(TokenType.R_PAREN):
        return replicas
    while True:
        replica = p._parse_name("a replica name")
        if not p._match(TokenType.L_PAREN):
            p.raise_error("Expecting ( after the replica name")
        first = p._curr
        if not p._match_text_seq("SIZE"):
            p._unsupported("replica options other than SIZE are not supported", first)
        size = _parse_size(p)
        if not p._match(TokenType.R_PAREN):
            p.raise_error("Expecting )")
        replicas.append(exp.Tuple(expressions=[replica, size]))
        if not p._match(TokenType.COMMA):
            break
    if not p._match(TokenType.R_PAREN):
        p.raise_error("Expecting )")
    return replicas


def _create_cluster_sql(g: Any, e: CreateCluster) -> str:
    exists = " IF NOT EXISTS" if e.args.get("exists") else ""
    options = []
    if e.args.get("replication_factor") is not None:
        options.append(f"REPLICATION FACTOR = {g.sql(e, 'replication_factor')}")
    if e.args.get("size") is not None:
        options.append(f"SIZE = {g.sql(e, 'size')}")
    replicas = e.args.get("replicas")
    if replicas is not None:
        shown = ", ".join(
            f"{g.sql(r.expressions[0])} (SIZE = {g.sql(r.expressions[1])})" for r in replicas
        )
        options.append(f"REPLICAS ({shown})")
    tail = f" ({', '.join(options)})" if options else ""
    return f"CREATE CLUSTER{exists} {g.sql(e, 'this')}{tail}"


TRANSFORMS: dict[type[exp.Expr], Any] = {CreateCluster: _create_cluster_sql}

__all__ = ["TRANSFORMS", "CreateCluster", "parse_create_cluster"]
