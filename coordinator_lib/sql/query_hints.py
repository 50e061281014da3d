"""Materialize's query hints, `SELECT ... GROUP BY ... OPTIONS (AGGREGATE
INPUT GROUP SIZE = 100, ...) [HAVING ...]`: sizes of the groups a
hierarchical reduction (min/max, TopK, DISTINCT ON) expects, which size
Materialize's reduction trees. Tidemark's reductions keep no such trees, so a
hint is checked (a known name, a non-negative integer) and then has no
effect: the query means what it means without it."""

from __future__ import annotations

from typing import Any

from sqlglot.tokens import TokenType

HINTS: tuple[tuple[str, ...], ...] = (
    ("AGGREGATE", "INPUT", "GROUP", "SIZE"),
    ("DISTINCT", "ON", "INPUT", "GROUP", "SIZE"),
    ("LIMIT", "INPUT", "GROUP", "SIZE"),
    ("EXPECTED", "GROUP", "SIZE"),
)


def at_query_hints(p: Any) -> bool:
    """The parser stands at `OPTIONS (` (so OPTIONS is no alias there)."""
    tokens, i = p._tokens, p._index
    return (
        i + 1 < len(tokens)
        and tokens[i].text.upper() == "OPTIONS"
        and tokens[i + 1].token_type == TokenType.L_PAREN
    )


def skip_query_hints(p: Any) -> None:
    """At `OPTIONS (`: parse the hint list and drop it (see the module)."""
    p._advance(2)
    while True:
        first = p._curr
        words = [w for w in HINTS if p._match_text_seq(*w)]
        if not words:
            p.raise_error(
                "Expecting AGGREGATE INPUT GROUP SIZE, DISTINCT ON INPUT GROUP SIZE"
                " or LIMIT INPUT GROUP SIZE",
                first,
            )
        p._match(TokenType.EQ)
        value = p._curr
        if value is None or value.token_type != TokenType.NUMBER or not value.text.isdigit():
            p.raise_error(f"{' '.join(words[0])} must be a non-negative integer", value)
        p._advance()
        if not p._match(TokenType.COMMA):
            break
    if not p._match(TokenType.R_PAREN):
        p.raise_error("Expecting )")


__all__ = ["HINTS", "at_query_hints", "skip_query_hints"]
