"""Row constructors compared (`(a, b) = (1, 2)`, `(x, y) < (u, v)`) as the
scalar comparisons PostgreSQL defines them by, so no operator is new:
`=` is the AND of the pairs' `=`, `<>` the OR of their `<>`, and `<`, `<=`,
`>`, `>=` are lexicographic: `a1 < b1 OR (a1 = b1 AND (rest))`, the last
pair compared with the operator itself. Three-valued AND/OR give
PostgreSQL's NULLs (a row comparison is NULL where the first pair that
is not equal is unknown). `ROW(a, b)` is the same constructor as `(a, b)`.
`IS [NOT] NULL` of a row tests every field (so `IS NOT NULL` is not `NOT
(... IS NULL)`), `IS [NOT] DISTINCT FROM` pairs the fields. `row op ANY|ALL (subquery)` and
`row IN (subquery)` are bound in sql/scalar.py (`_bind_row_any`) as one ANY
subquery whose test is the comparison above built on the bound pairs. A row is
never a value of its own (there is no record type): returning one is 0A000."""

from __future__ import annotations

from sqlglot import exp

from coordinator_lib.sql.errors import ParseError, UndefinedOperator, UnsupportedFeature
from coordinator_lib.sql.positions import position_of

_STRICT = {exp.LT: exp.LT, exp.LTE: exp.LT, exp.GT: exp.GT, exp.GTE: exp.GT}


def row_items(node: exp.Expr) -> list[exp.Expr] | None:
    """The fields of a row constructor, `(a, b)` or `ROW(a, ...)`; None for
    any other expression."""
    if isinstance(node, exp.Tuple):
        return list(node.expressions)
    if isinstance(node, exp.Anonymous) and node.name.lower() == "row":
        return list(node.expressions)
    return None


def is_row_constructor(node: exp.Expr) -> bool:
    return row_items(node) is not None


def no_record_values(node: exp.Expr | None) -> UnsupportedFeature:
    """The error for a row constructor used as a value."""
    return UnsupportedFeature(
        "record values are not supported",
        position_of(node),
        detail="A row constructor (ROW(a, b) or (a, b)) can be compared (=, <>, <, IN,"
        " IS NULL, IS DISTINCT FROM) but not returned, stored or passed to a function.",
    )


def _pairs(node: exp.Binary) -> list[tuple[exp.Expr, exp.Expr]]:
    left, right = row_items(node.this), row_items(node.expression)
    assert left is not None and right is not None
    if len(left) != len(right):
        raise ParseError("unequal number of entries in row expressions", position_of(node))
    return [(a.copy(), b.copy()) for a, b in zip(left, right, strict=True)]


def is_row_comparison(node: exp.Binary) -> bool:
    return is_row_constructor(node.this) and is_row_constructor(node.expression)


def expand_row_comparison(node: exp.Binary) -> exp.Expr:
    """`node` (a comparison of two row constructors) as scalar comparisons."""
    pairs = _pairs(node)
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


def expand_row_distinct(node: exp.NullSafeEQ | exp.NullSafeNEQ) -> exp.Expr:
    """`r IS DISTINCT FROM s`: some pair is distinct; `IS NOT DISTINCT FROM`:
    no pair is (never NULL)."""
    op = type(node)
    parts = [op(this=a, expression=b) for a, b in _pairs(node)]
    joined = exp.or_(*parts) if op is exp.NullSafeNEQ else exp.and_(*parts)
    return exp.Paren(this=joined)


def expand_row_null_test(row: exp.Expr, negated: bool) -> exp.Expr:
    """`row IS NULL`: every field is NULL; `row IS NOT NULL`: none is."""
    items = row_items(row)
    assert items is not None
    tests: list[exp.Expr] = [exp.Is(this=i.copy(), expression=exp.Null()) for i in items]
    if negated:
        tests = [exp.Not(this=t) for t in tests]
    return exp.Paren(this=exp.and_(*tests))


def quantified_subquery(node: exp.Binary, right: exp.Any | exp.All) -> exp.Subquery:
    """The subquery of `row op ANY|ALL (subquery)`; a row against an array
    is 42883."""
    query = right.this
    if isinstance(query, exp.Query):  # `<> ALL (SELECT ...)` comes without the Subquery
        return exp.Subquery(this=query.copy())
    if isinstance(query, exp.Subquery):
        return query.copy()
    raise UndefinedOperator(  # PostgreSQL: no `record < integer` operator
        "operator does not exist: a row constructor compared with ANY or ALL of an array",
        position_of(node),
    )


def is_row_in(node: exp.In) -> bool:
    return is_row_constructor(node.this)


def expand_row_in(node: exp.In) -> exp.Expr:
    """`(a, b) IN (list of rows)` as the OR of row equalities (`(a, b) IN
    (subquery)` is `= ANY`, bound by sql/scalar.py's `_bind_row_any`)."""
    row = node.this
    return exp.Paren(
        this=exp.or_(*(exp.EQ(this=row.copy(), expression=item) for item in node.expressions))
    )
