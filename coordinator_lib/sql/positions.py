"""Where a syntax node was written: 1-based character offsets into the
statement text, as PostgreSQL reports them in errors.

sqlglot keeps `meta["start"]` (0-based) on identifiers, literals and function
calls; the Tidemark parser adds it to every operand and puts the operator's
offset of binary operators, BETWEEN and IN into `meta["op_start"]`.
"""

from __future__ import annotations

from sqlglot import exp


def start_offset(node: exp.Expr | None) -> int | None:
    """The smallest 0-based start offset recorded anywhere in the subtree."""
    if node is None:
        return None
    best: int | None = None
    for child in node.walk():
        meta = child._meta
        if meta:
            start = meta.get("start")
            if start is not None and (best is None or start < best):
                best = start
    return best


def position_of(node: exp.Expr | None) -> int | None:
    """PostgreSQL's position of an expression: its leftmost character, 1-based."""
    start = start_offset(node)
    return None if start is None else start + 1


def operator_position(node: exp.Expr | None) -> int | None:
    """Position of a binary operator's symbol (what PostgreSQL points at for
    "operator does not exist"), else of the whole expression."""
    if node is not None and node._meta and node._meta.get("op_start") is not None:
        return node._meta["op_start"] + 1
    return position_of(node)


def parameter_start(param: exp.Expr) -> int | None:
    """0-based offset of a `$n` parameter's `$` (where only the number's start
    is recorded, the `$` is just before it)."""
    meta = param._meta
    if meta and meta.get("start") is not None:
        return meta["start"]
    inner = start_offset(param.this)
    return inner - 1 if inner else None
