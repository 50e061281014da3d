"""Syntax of webhook sources and secrets, in Materialize's grammar:

    CREATE SOURCE [IF NOT EXISTS] name [IN CLUSTER c] FROM WEBHOOK
      BODY FORMAT { TEXT | BYTES | JSON [ARRAY] [(column type [NOT NULL], ...)] }
      [ INCLUDE HEADERS [( [NOT] 'header', ... )]
      | INCLUDE HEADER 'header' AS column [BYTES] ] ...
      [ CHECK ( [WITH ( HEADERS [AS alias] | BODY [AS alias] [BYTES]
                        | SECRET name [AS alias] [BYTES], ... )]
                boolean_expression ) ]
    CREATE SECRET [IF NOT EXISTS] name AS value
    ALTER SECRET [IF EXISTS] name AS value

The column list after `JSON` is Tidemark's typed body schema (Materialize
keeps the whole body in one jsonb column): each JSON object's fields become
typed columns. `TidemarkParser` calls the `parse_*` functions from its CREATE
and ALTER parsers; `TRANSFORMS` prints the nodes back. A secret's value is
never printed (`AS '********'`), so statement logs and stored SQL hold none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.tokens import TokenType

REDACTED = "'********'"


class CreateWebhookSource(exp.Expression):
    """`format` is TEXT, BYTES or JSON (`array` for JSON ARRAY); `columns` an
    `exp.Schema` of the typed body; `includes` IncludeHeaders / IncludeHeader
    in written order; `check` a WebhookCheck."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "exists": False,
        "cluster": False,
        "format": True,
        "array": False,
        "columns": False,
        "includes": False,
        "check": False,
    }


class IncludeHeaders(exp.Expression):
    """`INCLUDE HEADERS [(filters)]`: the `headers` jsonb column."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": False}


class HeaderFilter(exp.Expression):
    """`[NOT] 'header'` in INCLUDE HEADERS (...): `this` is the name, lower-cased."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "negated": False}


class IncludeHeader(exp.Expression):
    """`INCLUDE HEADER 'header' AS column [BYTES]`: `this` is the name, lower-cased."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "alias": True, "bytes": False}


class WebhookCheck(exp.Expression):
    """`CHECK ( [WITH (options)] expression )`: `this` is the expression."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "options": False}


class CheckOption(exp.Expression):
    """One `HEADERS | BODY | SECRET name` of CHECK's WITH list: `kind` upper
    case, `this` the secret's name (an exp.Table, so stored SQL qualifies it)."""

    arg_types: ClassVar[dict[str, bool]] = {
        "kind": True,
        "this": False,
        "alias": False,
        "bytes": False,
    }


class CreateSecret(exp.Expression):
    arg_types: ClassVar[dict[str, bool]] = {"this": True, "exists": False, "value": True}


class AlterSecret(exp.Expression):
    arg_types: ClassVar[dict[str, bool]] = {"this": True, "exists": False, "value": True}


# --- parsing (p is the TidemarkParser) ------------------------------------------------


def parse_webhook_source(p: Any, name: exp.Table, exists: bool, cluster: Any) -> exp.Expr:
    """After `CREATE SOURCE name [IN CLUSTER c] FROM WEBHOOK`."""
    if not p._match_text_seq("BODY", "FORMAT"):
        p.raise_error("Expecting BODY FORMAT")
    format_token = p._curr
    array = False
    columns = None
    if p._match_text_seq("JSON"):
        body_format = "JSON"
        array = p._match_text_seq("ARRAY")
        if p._match(TokenType.L_PAREN, advance=False):
            columns = p._parse_schema()
    elif p._match_text_seq("TEXT"):
        body_format = "TEXT"
    elif p._match_text_seq("BYTES"):
        body_format = "BYTES"
    else:
        p.raise_error("Expecting TEXT, JSON, JSON ARRAY or BYTES", format_token)
        body_format = ""
    includes: list[exp.Expr] = []
    while p._match_text_seq("INCLUDE"):
        includes.append(_parse_include(p))
    check = _parse_check(p) if p._match_text_seq("CHECK") else None
    node = CreateWebhookSource(
        this=name,
        exists=exists,
        cluster=cluster,
        format=body_format,
        array=array,
        columns=columns,
        includes=includes,
        check=check,
    )
    return p.expression(node)


def _header_name(p: Any) -> str:
    token = p._curr
    if token is not None and token.token_type == TokenType.STRING:
        p._advance()
        return token.text.lower()
    ident = p._parse_id_var(any_token=True)
    if ident is None:
        p.raise_error("Expecting a header name")
        return ""
    return ident.name.lower()


def _parse_include(p: Any) -> exp.Expr:
    start = p._prev
    if p._match_text_seq("HEADERS"):
        filters: list[exp.Expr] = []
        if p._match(TokenType.L_PAREN):
            filters = p._parse_csv(lambda: _parse_header_filter(p))
            p._match_r_paren()
        return p.expression(IncludeHeaders(expressions=filters), start)
    if not p._match_text_seq("HEADER"):
        p.raise_error("Expecting HEADER or HEADERS after INCLUDE")
    header = _header_name(p)
    if not p._match_text_seq("AS"):
        p.raise_error("Expecting AS and a column name")
    alias = p._parse_id_var()
    if alias is None:
        p.raise_error("Expecting a column name")
    as_bytes = p._match_text_seq("BYTES")
    return p.expression(IncludeHeader(this=header, alias=alias, bytes=as_bytes), start)


def _parse_header_filter(p: Any) -> exp.Expr:
    start = p._curr
    negated = p._match(TokenType.NOT)
    return p.expression(HeaderFilter(this=_header_name(p), negated=bool(negated)), start)


def _parse_check(p: Any) -> exp.Expr:
    start = p._prev
    if not p._match(TokenType.L_PAREN):
        p.raise_error("Expecting ( after CHECK")
    options: list[exp.Expr] = []
    if p._match(TokenType.WITH):
        if not p._match(TokenType.L_PAREN):
            p.raise_error("Expecting ( after CHECK (WITH")
        options = p._parse_csv(lambda: _parse_check_option(p))
        p._match_r_paren()
    expression = p._parse_assignment()
    if expression is None:
        p.raise_error("Expecting a boolean expression in CHECK")
    p._match_r_paren()
    return p.expression(WebhookCheck(this=expression, options=options), start)


def _parse_check_option(p: Any) -> exp.Expr:
    start = p._curr
    secret = None
    if p._match_text_seq("HEADERS"):
        kind = "HEADERS"
    elif p._match_text_seq("BODY"):
        kind = "BODY"
    elif p._match_text_seq("SECRET"):
        kind = "SECRET"
        secret = p._parse_object_name("a secret name")
    else:
        p.raise_error("Expecting HEADERS, BODY or SECRET")
        kind = ""
    alias = p._parse_id_var() if p._match_text_seq("AS") else None
    as_bytes = p._match_text_seq("BYTES")
    node = CheckOption(kind=kind, this=secret, alias=alias, bytes=as_bytes)
    return p.expression(node, start)


def parse_create_secret(p: Any) -> exp.Expr:
    """After `CREATE SECRET`."""
    exists = p._parse_exists(not_=True)
    name = p._parse_object_name("a secret name")
    if not p._match_text_seq("AS"):
        p.raise_error("Expecting AS and the secret's value")
    value = p._parse_assignment()
    if value is None:
        p.raise_error("Expecting the secret's value")
    return p.expression(CreateSecret(this=name, exists=exists, value=value))


def parse_alter_secret(p: Any) -> exp.Expr:
    """After `ALTER SECRET`."""
    exists = p._parse_exists()
    name = p._parse_object_name("a secret name")
    if not p._match_text_seq("AS"):
        p.raise_error("Expecting AS and the secret's new value")
    value = p._parse_assignment()
    if value is None:
        p.raise_error("Expecting the secret's value")
    return p.expression(AlterSecret(this=name, exists=exists, value=value))


# --- printing ------------------------------------------------------------------------


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _source_sql(g: Any, e: CreateWebhookSource) -> str:
    parts = ["CREATE SOURCE"]
    if e.args.get("exists"):
        parts.append("IF NOT EXISTS")
    parts.append(g.sql(e, "this"))
    if e.args.get("cluster"):
        parts.append(g.sql(e, "cluster"))
    body = e.args["format"] + (" ARRAY" if e.args.get("array") else "")
    parts.append(f"FROM WEBHOOK BODY FORMAT {body}")
    if e.args.get("columns") is not None:
        parts.append(g.sql(e, "columns"))
    parts += [g.sql(include) for include in e.args.get("includes") or []]
    if e.args.get("check") is not None:
        parts.append(g.sql(e, "check"))
    return " ".join(parts)


def _include_headers_sql(g: Any, e: IncludeHeaders) -> str:
    filters = [("NOT " if f.args.get("negated") else "") + _quoted(f.name) for f in e.expressions]
    return "INCLUDE HEADERS" + (f" ({', '.join(filters)})" if filters else "")


def _include_header_sql(g: Any, e: IncludeHeader) -> str:
    as_bytes = " BYTES" if e.args.get("bytes") else ""
    return f"INCLUDE HEADER {_quoted(e.name)} AS {g.sql(e, 'alias')}{as_bytes}"


def _check_sql(g: Any, e: WebhookCheck) -> str:
    options = e.args.get("options") or []
    with_sql = f"WITH ({', '.join(g.sql(o) for o in options)}) " if options else ""
    return f"CHECK ({with_sql}{g.sql(e, 'this')})"


def _check_option_sql(g: Any, e: CheckOption) -> str:
    text = e.args["kind"]
    if e.args.get("this") is not None:
        text += f" {g.sql(e, 'this')}"
    if e.args.get("alias") is not None:
        text += f" AS {g.sql(e, 'alias')}"
    return text + (" BYTES" if e.args.get("bytes") else "")


def _secret_sql(verb: str, g: Any, e: exp.Expr) -> str:
    exists = ""
    if e.args.get("exists"):
        exists = " IF NOT EXISTS" if verb == "CREATE" else " IF EXISTS"
    return f"{verb} SECRET{exists} {g.sql(e, 'this')} AS {REDACTED}"


TRANSFORMS: dict[type[exp.Expr], Callable[[Any, Any], str]] = {
    CreateWebhookSource: _source_sql,
    IncludeHeaders: _include_headers_sql,
    IncludeHeader: _include_header_sql,
    WebhookCheck: _check_sql,
    CheckOption: _check_option_sql,
    CreateSecret: lambda g, e: _secret_sql("CREATE", g, e),
    AlterSecret: lambda g, e: _secret_sql("ALTER", g, e),
}

# Statements whose text holds a secret: logs print them with TRANSFORMS instead.
SENSITIVE = (CreateSecret, AlterSecret)


__all__ = [
    "REDACTED",
    "SENSITIVE",
    "TRANSFORMS",
    "AlterSecret",
    "CheckOption",
    "CreateSecret",
    "CreateWebhookSource",
    "HeaderFilter",
    "IncludeHeader",
    "IncludeHeaders",
    "WebhookCheck",
    "parse_alter_secret",
    "parse_create_secret",
    "parse_webhook_source",
]
