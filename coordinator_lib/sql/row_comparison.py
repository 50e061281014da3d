"""Row constructors compared (`(a, b) = (1, 2)`, `(x, y) < (u, v)`) as the
scalar comparisons PostgreSQL defines them by, so no operator is new:
`=` is the AND of the pairs' `=`, `<>` the OR of their `<>`, and `<`, `<=`,
`>`, `>=` are lexicographic: `a1 < b1 OR (a1 = b1 AND (rest))`, the last
pair compared with the operator itself. Three-valued AND/OR give
PostgreSQL's NULLs (a row comparison is NULL where the first pair that
is not equal is unknown)."""

from __future__ import annotations

from sqlglot import exp

from coordinator_lib.sql.errors import ParseError
from coordinator_lib.sql.positions import position_of

_STRICT = {exp.LT: exp.LT, exp.LTE: exp.LT, exp.GT: exp.GT, exp.GTE: exp.GT}


def is_row_comparison(node: exp.Binary) -> bool:
    return isinstance(node.this, exp.Tuple) and isinstance(node.expression, exp.Tuple)


def expand_row_comparison(node: exp.Binary) -> exp.Expr:
    """`node` (a comparison of two row constructors) as scalar comparisons."""
    left, right = node.this.expressions, node.expression.expressions
    if len(left) != len(right):
        raise ParseError("unequal number of entries in row expressions", position_of(node))
    pairs = [(a.copy(), b.copy()) for a, b in zip(left, right, strict=True)]
    op = type(node)
    if op is exp.EQ:
        return exp.Paren(this=exp.and_(*(exp.EQ(this=a, expression=b) for a, b in pairs)))
    if op is exp.NEQ:
        return exp.Paren(this=exp.or_(*(exp.NEQ(this=a, expression=b) for a, b in pairs)))
    last_a, last_b = pairs[-1]
    result: exp.Expr = op(this=last_a, expression=last_b)
    for a, b in reversed(pairs[:-1]):
        strict = _STRICT[op](this=a, expression=b)
        equal = exp.EQ(this=a.copy(), expression=b.copy())
        result = exp.or_(strict, exp.and_(equal, exp.Paren(this=result)))
    return exp.Paren(this=result)


def is_row_in(node: exp.In) -> bool:
    return isinstance(node.this, exp.Tuple)


def expand_row_in(node: exp.In) -> exp.Expr:
    """`(a, b) IN (list of rows)` as the OR of row equalities, and `(a, b) IN
    (SELECT x, y ...)` as PostgreSQL's three values from two semi-joins:
    TRUE if a row is equal, else NULL if a row's equality is unknown, else
    FALSE (so NOT IN is right with NULLs too)."""
    row = node.this
    query = node.args.get("query")
    if query is None:
        return exp.Paren(
            this=exp.or_(*(exp.EQ(this=row.copy(), expression=item) for item in node.expressions))
        )
    inner = query.unnest() if isinstance(query, exp.Subquery) else query
    if not isinstance(inner, exp.Query):
        raise ParseError("IN needs a subquery or a list", position_of(node))
    names = [f"_row_in_{i}" for i in range(len(row.expressions))]
    alias = exp.TableAlias(
        this=exp.to_identifier("_row_in"), columns=[exp.to_identifier(n) for n in names]
    )
    columns = exp.Tuple(expressions=[exp.column(n, "_row_in") for n in names])

    def matches(condition: exp.Expr) -> exp.Expr:
        source = exp.Subquery(this=inner.copy(), alias=alias.copy())
        return exp.Exists(this=exp.select("1").from_(source).where(condition))

    equal = exp.EQ(this=row.copy(), expression=columns)
    unknown = exp.Is(this=exp.Paren(this=equal.copy()), expression=exp.Null())
    return (
        exp.Case()
        .when(matches(equal), exp.true())
        .when(matches(unknown), exp.Null())
        .else_(exp.false())
    )
