"""Subqueries in expressions: scalar subqueries, EXISTS, IN and quantified
comparisons (ANY/SOME/ALL), correlated or not.

Binding plans the subquery as a query of its own, the enclosing query's
columns visible as OuterColumns, and returns a `SubqueryExpr` placeholder.
Lowering (`lower_subqueries`), where an expression is attached to its
relation R, replaces each placeholder by a column of a join, as
Materialize's HIR-to-MIR lowering does:

    D = distinct(the columns of R the subquery reads)    -- one empty row if none
    B = apply_outer(subquery, D)                          -- sql/decorrelate.py
    V = exactly one (D columns, value) row per row of D, from B
    R' = R ⋈ V on the D columns (equal or both NULL)

so every construct is made of Join, Reduce, Distinct, Union, Negate, Map and
Filter, all incrementally maintained. The value per row of D:

- scalar: B's row, NULL where B has none; where B has two or more rows the
  value is a runtime error "more than one record produced in subquery"
  (SQLSTATE 21000), so evaluating the query fails as in PostgreSQL
  (skipped when the subquery is a global aggregate: one row). Count and
  value come from one Reduce (count, max) over B's rows and a padding row
  per outer row: B is read once, as nested subqueries need (reading it
  three times made plans exponential in the depth);
- EXISTS: TRUE where B has a row, else FALSE (B's rows counted per outer
  row in one Reduce, with a padding row per outer row that no count sees,
  so rows without a match get 0 without an anti-join);
- ANY (IN is `= ANY`; ALL is `NOT (NOT op ANY)`): the subquery's column
  compared with the left side is TRUE for some row: TRUE; else NULL for
  some row: NULL; else (also for no rows) FALSE -- SQL's NULL semantics.

A subquery in a CASE branch (THEN or ELSE) is evaluated only for the rows
that reach the branch, as in PostgreSQL and Materialize: D is then the
distinct columns of the rows whose conditions lead there (`_guards`), and
the other rows of R get NULL, so an error in a branch not taken (a division
by zero, more than one row) does not fail the query. Subqueries in those
conditions are lowered first (`_deciding_conditions`). Where a condition
reads an enclosing query, the subquery is evaluated for every row of R.
Each guarded subquery reads its own copy of R joined with those
conditions' values, narrowed (`_Joined.narrow`) to R and the values its
guard reads: a value relation has one row per key of the rows before it,
so leaving out one nobody reads keeps the rows. Without that, each guard
read the join of every condition lowered so far and a SELECT list of n
CASEs planned that join n times (quadratic in n).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from coordinator_lib.expr.relation import (
    AggregateExpr,
    AggregateFunc,
    Constant,
    Distinct,
    Filter,
    Join,
    Map,
    Negate,
    Project,
    Reduce,
    RelationExpr,
    Union,
)
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    Column,
    If,
    Literal,
    RaiseError,
    ScalarExpr,
    UnaryFunc,
)
from coordinator_lib.repr.relation import ColumnType, RelationDesc, ScalarType
from coordinator_lib.sql.decorrelate import apply_outer, is_global_aggregate
from coordinator_lib.sql.joins import distinct_keys, null_safe_equivalences
from coordinator_lib.sql.outer import (
    SubqueryExpr,
    SubqueryKind,
    has_outer,
    has_subquery,
    outer_columns,
    rewrite,
    subqueries_in,
)

if TYPE_CHECKING:
    pass

S = ScalarType
BOOL = ColumnType(S.BOOLEAN, False)
_ONE_ROW = Constant((((), 1),), RelationDesc((), ()))
TOO_MANY_ROWS = "more than one record produced in subquery"
CARDINALITY_VIOLATION = "21000"


# --- lowering ---------------------------------------------------------------------


def lower_subqueries(
    rel: RelationExpr, exprs: list[ScalarExpr]
) -> tuple[RelationExpr, list[ScalarExpr]]:
    """`rel` joined with one value column per subquery in `exprs` (rel's
    columns first and unchanged, each row once), and `exprs` over it with
    the subqueries replaced by those columns."""
    joined, lowered = _lower(_Joined((rel,), ()), exprs)
    return joined.expr, lowered


@dataclass(frozen=True)
class _Joined:
    """A relation being lowered: its driver (`inputs[0]`, the relation the
    subqueries were attached to) joined with value relations, each with
    exactly one row per distinct value of its key columns in the join of
    the inputs before it (`pairs`: key column, value relation's column,
    over the concatenated columns). Dropping a value relation whose
    columns nothing reads keeps the join's rows, so a guarded subquery's
    outer rows are found from the driver and the values its guard reads
    (`narrow`), not from every value relation joined so far."""

    inputs: tuple[RelationExpr, ...]
    pairs: tuple[tuple[int, int], ...]

    @cached_property
    def expr(self) -> RelationExpr:
        if len(self.inputs) == 1:
            return self.inputs[0]
        types = tuple(t for i in self.inputs for t in i.desc.types)
        return Join(self.inputs, tuple(null_safe_equivalences(list(self.pairs), types)))

    @cached_property
    def arity(self) -> int:
        return sum(i.desc.arity for i in self.inputs)

    def _input_of(self, column: int) -> int:
        for n, width in enumerate(i.desc.arity for i in self.inputs):
            if column < width:
                return n
            column -= width
        raise AssertionError(f"column {column} past the join's inputs")

    def joined(self, value: RelationExpr, pairs: list[tuple[int, int]]) -> _Joined:
        return _Joined((*self.inputs, value), (*self.pairs, *pairs))

    def narrow(self, columns: set[int]) -> tuple[RelationExpr, dict[int, int]]:
        """The join of the driver and the value relations holding
        `columns` (and those their keys read), and where each of this
        join's columns (of those inputs) is in it."""
        keep = {0} | {self._input_of(c) for c in columns}
        pending = list(keep)
        while pending:  # the inputs a kept one's keys are read from
            n = pending.pop()
            for key, col in self.pairs:
                if self._input_of(col) == n and self._input_of(key) not in keep:
                    keep.add(self._input_of(key))
                    pending.append(self._input_of(key))
        if len(keep) == len(self.inputs):
            return self.expr, {c: c for c in range(self.arity)}
        where: dict[int, int] = {}
        old = new = 0
        for n, child in enumerate(self.inputs):
            if n in keep:
                where.update({old + c: new + c for c in range(child.desc.arity)})
                new += child.desc.arity
            old += child.desc.arity
        pairs = [(where[a], where[b]) for a, b in self.pairs if b in where]
        return _Joined(tuple(self.inputs[n] for n in sorted(keep)), tuple(pairs)).expr, where


def _lower(
    joined: _Joined, exprs: list[ScalarExpr], reaching: _Guards | None = None
) -> tuple[_Joined, list[ScalarExpr]]:
    """`lower_subqueries` over `joined`; `reaching`: the guards of
    subqueries in `exprs` that the enclosing expressions' CASEs decide."""
    found = [s for e in exprs for s in subqueries_in(e)]
    if not found:
        return joined, list(exprs)
    conditions = _deciding_conditions(exprs)
    if conditions:  # lowered first, so that they can guard the branches (_guards)
        # with the guards the CASEs around them give where those read only
        # the relation's columns (`CASE WHEN x = 0 THEN 0 WHEN (SELECT ...)`).
        # A guard reading an earlier WHEN's value is left out: each value
        # relation would hold a copy of every earlier one's (a plan
        # exponential in the number of WHENs), so such a WHEN's subquery is
        # evaluated for every row (an error there fails the query).
        width = joined.inputs[0].desc.arity
        around = {
            i: g
            for i, g in _guards(exprs).items()
            if all(c < width for cond in g for c in cond.columns())
        }
        joined, lowered = _lower(joined, conditions, {**around, **(reaching or {})})
        by_id = {id(c): new for c, new in zip(conditions, lowered, strict=True)}
        return _lower(joined, [rewrite(e, lambda n: by_id.get(id(n))) for e in exprs], reaching)
    arity = joined.arity
    joined, args = _lower(joined, [a for s in found for a in s.args])
    arg_columns: list[int] = []
    extra: list[ScalarExpr] = []
    for arg in args:
        if isinstance(arg, Column):
            arg_columns.append(arg.index)
        else:
            arg_columns.append(joined.arity + len(extra))
            extra.append(arg)
    if extra:  # the arguments' columns: the join becomes the driver
        joined = _Joined((Map(joined.expr, tuple(extra)),), ())
    before = joined
    replacements: dict[int, ScalarExpr] = {}
    first_arg = 0
    guards = {**_guards(exprs), **(reaching or {})}
    for sub in found:
        if sub.base > arity:
            raise AssertionError(f"subquery bound over {sub.base} columns, lowered over {arity}")
        refs = sorted(outer_columns(sub.plan))
        keys = [i if i < sub.base else arg_columns[first_arg + i - sub.base] for i in refs]
        first_arg += len(sub.args)
        guard = guards.get(id(sub))
        outer = None
        if keys or guard is not None:
            read = set(keys) | {c for g in guard or () for c in g.columns()}
            rel, where = before.narrow(read)
            if guard is not None:
                rel = Filter(rel, tuple(_moved(g, where) for g in guard))
            outer = distinct_keys(rel, [where[k] for k in keys])
        positions = {i: p for p, i in enumerate(refs)}
        body = apply_outer(sub.plan, outer, positions, gated=guard is not None and not keys)
        values = _values(sub, body, outer, len(keys))
        if guard is not None and outer is not None:  # rows not reaching it: NULL
            if keys:
                rel, where = before.narrow(set(keys))
                every = distinct_keys(rel, [where[k] for k in keys])
            else:
                every = _ONE_ROW
            null = Literal(None, ColumnType(sub.type.scalar_type, True))
            values = Union((values, Map(Union((every, Negate(outer))), (null,))))
        width = joined.arity
        joined = joined.joined(values, [(key, width + p) for p, key in enumerate(keys)])
        replacements[id(sub)] = Column(width + len(keys))
    lowered = [rewrite(e, lambda n: replacements.get(id(n))) for e in exprs]
    return joined, lowered


def _moved(expr: ScalarExpr, where: dict[int, int]) -> ScalarExpr:
    """`expr` reading column `where[i]` for each column i it reads."""
    return rewrite(expr, lambda n: Column(where[n.index]) if isinstance(n, Column) else None)


def _deciding_conditions(exprs: list[ScalarExpr]) -> list[ScalarExpr]:
    """The CASE conditions that hold a subquery and decide which rows reach
    a branch holding one, the outermost only: those in their branches are
    lowered once these are columns, guarded by them (`_guards`)."""
    found: list[ScalarExpr] = []

    def visit(node: ScalarExpr) -> None:
        if isinstance(node, SubqueryExpr):
            return
        deciding = isinstance(node, If) and has_subquery(node.cond)
        branches = (node.then, node.els) if isinstance(node, If) else ()
        if isinstance(node, If) and deciding and any(map(has_subquery, branches)):
            found.append(node.cond)
            return
        for child in node.children():
            visit(child)

    for expr in exprs:
        visit(expr)
    return found


_Guards = dict[int, tuple[ScalarExpr, ...]]


def _guards(exprs: list[ScalarExpr]) -> _Guards:
    """For each subquery (by id) in a CASE branch of `exprs`: the conditions
    a row must meet to reach it (THEN: its WHEN is true; ELSE and later
    WHENs: the earlier ones are not). Subqueries that every row reaches, or
    whose conditions hold a subquery or an enclosing query's column, have none."""
    guards: _Guards = {}

    def visit(node: ScalarExpr, path: tuple[ScalarExpr, ...] | None) -> None:
        if isinstance(node, SubqueryExpr):
            if path:
                guards[id(node)] = path
            return
        if not isinstance(node, If):
            for child in node.children():
                visit(child, path)
            return
        visit(node.cond, path)
        plain = path is not None and not has_subquery(node.cond) and not has_outer(node.cond)
        reached = CallUnary(UnaryFunc.IS_TRUE, node.cond)
        visit(node.then, (*path, reached) if plain and path is not None else None)
        missed = CallUnary(UnaryFunc.NOT, reached)
        visit(node.els, (*path, missed) if plain and path is not None else None)

    for expr in exprs:
        visit(expr, ())
    return guards


def lower_filter(rel: RelationExpr, predicates: list[ScalarExpr]) -> RelationExpr:
    """Filter(rel, predicates) where predicates may hold subqueries; the
    result has rel's columns."""
    if not predicates:
        return rel
    arity = rel.desc.arity
    lowered, preds = lower_subqueries(rel, predicates)
    out: RelationExpr = Filter(lowered, tuple(preds))
    if lowered.desc.arity != arity:
        out = Project(out, tuple(range(arity)), rel.desc.names)
    return out


def _values(
    sub: SubqueryExpr, body: RelationExpr, outer: RelationExpr | None, k: int
) -> RelationExpr:
    """One (k outer columns, value) row per row of `outer` (see module docstring)."""
    keys = list(range(k))
    zero = Literal(0, ColumnType(S.BIGINT, False))
    if sub.kind is SubqueryKind.SCALAR:
        if exactly_one_row(sub.plan):
            return body
        aggregates: list[tuple[AggregateFunc, ScalarExpr]] = [
            (AggregateFunc.COUNT, Column(k + 1)),
            (AggregateFunc.MAX, Column(k)),
        ]
        rows = _counted(body, outer, k, aggregates)
        value: ScalarExpr = Column(k + 1)
        if not at_most_one_row(sub.plan):
            error = RaiseError(CARDINALITY_VIOLATION, TOO_MANY_ROWS, sub.type)
            one = Literal(1, ColumnType(S.BIGINT, False))
            value = If(CallBinary(BinaryFunc.GT, Column(k), one), error, value)
        return Project(Map(rows, (value,)), (*keys, k + 2))
    if sub.kind is SubqueryKind.EXISTS:
        # count(marker) over B's rows and one unmarked row per outer row.
        rows = _counted(Project(body, tuple(keys)), outer, k, [(AggregateFunc.COUNT, Column(k))])
        value = CallBinary(BinaryFunc.GT, Column(k), zero)
        return Project(Map(rows, (value,)), (*keys, k + 1))
    # ANY: rows whose comparison is not FALSE decide; TRUE if one is TRUE.
    test = Column(k)
    undecided = Filter(body, (CallUnary(UnaryFunc.NOT, CallUnary(UnaryFunc.IS_FALSE, test)),))
    true_only = If(test, Literal(True, BOOL), Literal(None, ColumnType(S.BOOLEAN, True)))
    counts = [(AggregateFunc.COUNT, true_only), (AggregateFunc.COUNT, Column(k + 1))]
    rows = _counted(undecided, outer, k, counts)
    value = If(
        CallBinary(BinaryFunc.GT, Column(k), zero),
        Literal(True, BOOL),
        If(
            CallBinary(BinaryFunc.GT, Column(k + 1), zero),
            Literal(None, ColumnType(S.BOOLEAN, True)),
            Literal(False, BOOL),
        ),
    )
    return Project(Map(rows, (value,)), (*keys, k + 2))


def _counted(
    body: RelationExpr,
    outer: RelationExpr | None,
    k: int,
    aggregates: list[tuple[AggregateFunc, ScalarExpr]],
) -> RelationExpr:
    """One row per outer row: its k columns, then each aggregate (count or
    max of an expression over `body`'s columns and a TRUE marker after them)
    over `body`'s rows for it. An unmarked all-NULL row per outer row, which
    no aggregate sees, gives outer rows without rows a count of 0 (max
    NULL): one Reduce, no anti-join."""
    arity = body.desc.arity
    marked = Map(body, (Literal(True, BOOL),))
    types = marked.desc.types
    padding = Map(
        outer if outer is not None else _ONE_ROW,
        tuple(Literal(None, ColumnType(t.scalar_type, True)) for t in types[k:]),
    )
    guarded = tuple(
        AggregateExpr(
            func,
            If(Column(arity), e, Literal(None, ColumnType(e.typ(types).scalar_type, True))),
        )
        for func, e in aggregates
    )
    return Reduce(Union((marked, padding)), tuple(Column(i) for i in range(k)), guarded)


def exactly_one_row(plan: RelationExpr) -> bool:
    """Whether `plan` has exactly one row whatever its inputs hold: a global
    aggregate (with the planner's missing-row Union) under Map/Project."""
    if isinstance(plan, Map | Project):
        return exactly_one_row(plan.input)
    if isinstance(plan, Constant):
        return plan.rows == (((), 1),) or (len(plan.rows) == 1 and plan.rows[0][1] == 1)
    return isinstance(plan, Union) and is_global_aggregate(plan)


def at_most_one_row(plan: RelationExpr) -> bool:
    """Whether `plan` has at most one row whatever its inputs hold (a global
    aggregate, with the planner's missing-row Union, under Filter/Map/Project)."""
    if isinstance(plan, Filter | Map | Project | Distinct):
        return at_most_one_row(plan.input)
    if isinstance(plan, Reduce):
        return not plan.group_key
    if isinstance(plan, Constant):
        return sum(d for _, d in plan.rows if d > 0) <= 1
    return isinstance(plan, Union) and is_global_aggregate(plan)
