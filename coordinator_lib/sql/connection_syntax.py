"""The option list every `CREATE CONNECTION` and source or sink option
list shares: `NAME [=] 'text' | number`, and `PASSWORD SECRET name` for a
secret's name (never its value)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.tokens import TokenType


class ConnectionOption(exp.Expression):
    """`this`: the upper-cased option name; `value` a literal, or for
    PASSWORD SECRET the secret's name (`secret` set)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "value": True, "secret": False}


def connection_option(p: Any, names: tuple[tuple[str, ...], ...]) -> ConnectionOption:
    """One option whose name is one of `names` (each a tuple of words)."""
    first = p._curr
    for words in names:
        if p._match_text_seq(*words):
            name = " ".join(words)
            break
    else:
        p.raise_error(f"Expecting one of {', '.join(' '.join(w) for w in names)}")
    p._match(TokenType.EQ)
    if name == "PASSWORD":
        if not p._match_text_seq("SECRET"):
            p.raise_error("Expecting SECRET and the secret holding the password")
        secret = p._parse_object_name("a secret name")
        return p.expression(ConnectionOption(this=name, value=secret, secret=True), first)
    value = p._parse_primary()
    if not isinstance(value, exp.Literal):
        p.raise_error(f"Expecting a string or number for {name}")
    return p.expression(ConnectionOption(this=name, value=value), first)


def _option_sql(g: Any, e: ConnectionOption) -> str:
    if e.args.get("secret"):
        return f"{e.name} SECRET {g.sql(e, 'value')}"
    return f"{e.name} {g.sql(e, 'value')}"


TRANSFORMS: dict[type[exp.Expr], Callable[[Any, Any], str]] = {ConnectionOption: _option_sql}

__all__ = ["TRANSFORMS", "ConnectionOption", "connection_option"]
