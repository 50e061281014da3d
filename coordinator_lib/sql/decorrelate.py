"""Decorrelation: a correlated subquery's plan, evaluated for every row of
an outer relation at once, as one relation of plain operators.

`apply_outer(plan, outer, positions)` is Materialize's "apply" lowering:
`outer` holds the distinct values of the columns the subquery reads from the
enclosing query; the result has outer's columns first, then the plan's, and
holds for each outer row the plan's rows with the OuterColumns read from
that row. Every operator is rewritten to carry the outer columns along:

- a subtree that reads no outer column: a cross join with `outer`;
- Filter / Map / FlatMap / Project: the same, over the shifted input (outer columns
  become ordinary columns of the leading `outer` part);
- Join: inputs that read outer columns carry their own copy, joined to the
  leading one on equal (not distinct) values;
- Reduce: the outer columns join the group key. A global aggregate (with
  the planner's missing-row Union, query.global_aggregate) becomes one
  Reduce over its rows plus one all-NULL row per outer row, every aggregate
  argument NULL on that row: so each outer row has exactly one group, and
  `count(*)` of no rows is 0, `sum` NULL, as in PostgreSQL;
- Distinct / Union / Negate / Threshold: per outer row, as is.

Equalities a Filter puts between the outer part and the rest become join
equivalences, so `WHERE x.k = t.k` is an equi-join, not a filtered cross join.
"""

from __future__ import annotations

import dataclasses

from coordinator_lib.expr.relation import (
    Constant,
    Distinct,
    Filter,
    FlatMap,
    Get,
    Join,
    Map,
    Negate,
    Project,
    Reduce,
    RelationExpr,
    TableCall,
    Threshold,
    TopK,
    Union,
    Window,
)
from coordinator_lib.expr.scalar import BinaryFunc, CallBinary, Column, If, Literal, ScalarExpr
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.joins import equivalence_classes, null_safe_equivalences
from coordinator_lib.sql.outer import OuterColumn, has_outer, node_scalars, rewrite

BOOL = ColumnType(ScalarType.BOOLEAN, False)
_NULL_BOOL = Literal(None, ColumnType(ScalarType.BOOLEAN, True))


def _null_like(expr: ScalarExpr, rows: RelationExpr, apply: _Apply) -> Literal:
    """A NULL of the type `expr` has over the decorrelated `rows`."""
    st = apply.scalar(expr).typ(rows.desc.types).scalar_type
    return Literal(None, ColumnType(st, True))


def is_global_aggregate(plan: Union) -> bool:
    """`Union(R, Map(Union(Constant[()], Negate(Project(R, ())))))` with R a
    Reduce without key: query.global_aggregate's one row."""
    if len(plan.inputs_) != 2:
        return False
    reduce, default = plan.inputs_
    if not (isinstance(reduce, Reduce) and not reduce.group_key):
        return False
    if not (isinstance(default, Map) and isinstance(default.input, Union)):
        return False
    parts = default.input.inputs_
    return (
        len(parts) == 2
        and isinstance(parts[0], Constant)
        and parts[0].rows == (((), 1),)
        and isinstance(parts[1], Negate)
        and isinstance(parts[1].input, Project)
        and parts[1].input.input is reduce
        and parts[1].input.outputs == ()
    )


def reads_outer(node: RelationExpr) -> bool:
    """Whether any operator in `node` reads a column of an enclosing query.
    Remembered on the (immutable) node: each level of nested subqueries asks
    again about everything below it, which was quadratic in the depth."""
    cached = node.__dict__.get("_reads_outer")
    if cached is None:
        cached = any(has_outer(s) for s in node_scalars(node)) or any(
            reads_outer(child) for child in node.inputs()
        )
        node.__dict__["_reads_outer"] = cached  # a cache, not a field
    return bool(cached)


def apply_outer(
    plan: RelationExpr,
    outer: RelationExpr | None,
    positions: dict[int, int],
    gated: bool = False,
) -> RelationExpr:
    """`plan` for every row of `outer` (see module docstring). `positions`
    maps each enclosing column the plan reads (OuterColumn(1, i)) to its
    column in `outer`. `outer` None means one empty row (nothing
    correlated): then only deeper references move one level in. `gated`:
    `outer` is joined at the plan's leaves, so that no operator of the plan
    runs while `outer` is empty (a CASE branch no row reaches, whose
    subquery would fail: `outer` then has no columns and at most one row)."""
    return _Apply(outer, positions, gated).apply(plan)


class _Apply:
    def __init__(
        self, outer: RelationExpr | None, positions: dict[int, int], gated: bool = False
    ) -> None:
        self.outer = outer
        self.gated = gated and outer is not None
        self.k = 0 if outer is None else outer.desc.arity
        self.positions = positions
        self.memo: dict[int, RelationExpr] = {}

    def scalar(self, expr: ScalarExpr, column: dict[int, int] | None = None) -> ScalarExpr:
        """`expr` over the new layout: input column c -> column[c] (default
        c + k), level-1 outer columns -> the outer part, deeper ones one level in."""

        def replace(node: ScalarExpr) -> ScalarExpr | None:
            if isinstance(node, Column):
                return Column(column[node.index] if column is not None else node.index + self.k)
            if isinstance(node, OuterColumn):
                if node.depth == 1:
                    return Column(self.positions[node.index])
                return OuterColumn(node.depth - 1, node.index, node.type)
            return None

        return rewrite(expr, replace)

    def apply(self, node: RelationExpr) -> RelationExpr:
        key = id(node)
        if key not in self.memo:
            self.memo[key] = self._apply(node)
        return self.memo[key]

    def reads(self, node: RelationExpr) -> bool:
        """Whether `node` is rewritten (else cross-joined with outer whole)."""
        if self.gated:
            return not isinstance(node, Get | Constant)
        return reads_outer(node)

    def _apply(self, node: RelationExpr) -> RelationExpr:
        if not self.reads(node):
            if self.outer is None:
                return node
            if isinstance(node, Constant) and node.rows == (((), 1),):
                return self.outer  # one empty row: the outer rows themselves
            return Join((self.outer, node), ())
        if isinstance(node, Get | Constant):  # read nothing: handled above
            raise AssertionError(node)
        if isinstance(node, Filter):
            return self._filter(self.apply(node.input), [self.scalar(p) for p in node.predicates])
        if isinstance(node, Map):
            return Map(
                self.apply(node.input),
                tuple(self.scalar(s) for s in node.scalars),
                node.desc.names[node.input.desc.arity :],
            )
        if isinstance(node, FlatMap):
            return FlatMap(
                self.apply(node.input),
                node.func,
                tuple(self.scalar(e) for e in node.exprs),
                node.desc.names[node.input.desc.arity :],
                node.ordinality,
                tuple(
                    TableCall(c.func, tuple(self.scalar(e) for e in c.exprs)) for c in node.zipped
                ),
            )
        if isinstance(node, Project):
            outputs = tuple(range(self.k)) + tuple(o + self.k for o in node.outputs)
            return Project(self.apply(node.input), outputs, self._names(node))
        if isinstance(node, Join):
            return self._join(node)
        if isinstance(node, Reduce):
            keys = tuple(Column(i) for i in range(self.k))
            return Reduce(
                self.apply(node.input),
                keys + tuple(self.scalar(k) for k in node.group_key),
                tuple(dataclasses.replace(a, expr=self.scalar(a.expr)) for a in node.aggregates),
                self._names(node),
            )
        if isinstance(node, Distinct):
            return Distinct(self.apply(node.input))
        if isinstance(node, Negate):
            return Negate(self.apply(node.input))
        if isinstance(node, Threshold):
            return Threshold(self.apply(node.input))
        if isinstance(node, TopK | Window):  # per outer row: the outer columns join the key
            k = self.k
            outer_key = tuple(range(k))
            order = tuple(dataclasses.replace(o, column=o.column + k) for o in node.order_key)
            if isinstance(node, TopK):
                group = outer_key + tuple(c + k for c in node.group_key)
                return TopK(self.apply(node.input), group, order, node.limit, node.offset)
            functions = tuple(
                dataclasses.replace(f, args=tuple(a + k for a in f.args)) for f in node.functions
            )
            partition = outer_key + tuple(c + k for c in node.partition_key)
            return Window(self.apply(node.input), partition, order, functions, node.names)
        if isinstance(node, Union):
            if self.outer is not None and is_global_aggregate(node):
                reduce = node.inputs_[0]
                assert isinstance(reduce, Reduce)
                return self._global_aggregate(reduce)
            return Union(tuple(self.apply(child) for child in node.inputs_))
        raise TypeError(f"cannot decorrelate {type(node).__name__}")

    def _global_aggregate(self, reduce: Reduce) -> RelationExpr:
        """One group per outer row: the input's rows marked TRUE, plus an
        all-NULL row per outer row that no aggregate argument sees."""
        assert self.outer is not None
        rows = self.apply(reduce.input)
        marker = rows.desc.arity
        nulls = tuple(Literal(None, ColumnType(t.scalar_type, True)) for t in rows.desc.types)
        padding = Map(self.outer, (*nulls[self.k :], Literal(None, _NULL_BOOL.type)))
        marked = Union((Map(rows, (Literal(True, BOOL),)), padding))
        aggregates = tuple(
            dataclasses.replace(
                a, expr=If(Column(marker), self.scalar(a.expr), _null_like(a.expr, rows, self))
            )
            for a in reduce.aggregates
        )
        keys = tuple(Column(i) for i in range(self.k))
        return Reduce(marked, keys, aggregates, self._names(reduce))

    def _names(self, node: RelationExpr) -> tuple[str, ...]:
        outer_names = self.outer.desc.names if self.outer is not None else ()
        return tuple(outer_names) + tuple(node.desc.names)

    def _join(self, node: Join) -> RelationExpr:
        """Inputs that read outer columns get their own outer part, equated
        with the leading one and projected away."""
        inputs: list[RelationExpr] = [] if self.outer is None else [self.outer]
        column: dict[int, int] = {}
        prefixes: list[int] = []  # where each decorrelated input's outer part starts
        width = self.k
        for child, offset in zip(node.inputs_, node.input_offsets(), strict=True):
            if self.outer is not None and self.reads(child):
                inputs.append(self.apply(child))
                prefixes.append(width)
                width += self.k
            else:
                inputs.append(child if self.outer is not None else self.apply(child))
            for c in range(child.desc.arity):
                column[offset + c] = width + c
            width += child.desc.arity
        classes = [tuple(self.scalar(e, column) for e in cls) for cls in node.equivalences]
        types = tuple(t for i in inputs for t in i.desc.types)
        for prefix in prefixes:
            pairs = [(c, prefix + c) for c in range(self.k)]
            classes += null_safe_equivalences(pairs, types)
        joined = Join(tuple(inputs), tuple(classes))
        outputs = tuple(range(self.k)) + tuple(column[c] for c in range(node.desc.arity))
        if outputs == tuple(range(joined.desc.arity)):
            return joined
        return Project(joined, outputs, self._names(node))

    def _filter(self, rel: RelationExpr, predicates: list[ScalarExpr]) -> RelationExpr:
        """Filter, with equalities across a Join's inputs moved into its equivalences."""
        if not isinstance(rel, Join):
            return Filter(rel, tuple(predicates))
        offsets = rel.input_offsets()

        def inputs_of(expr: ScalarExpr) -> set[int]:
            return {max(i for i, o in enumerate(offsets) if o <= c) for c in expr.columns()}

        classes = [list(cls) for cls in rel.equivalences]
        residual: list[ScalarExpr] = []
        for p in predicates:
            if isinstance(p, CallBinary) and p.func is BinaryFunc.EQ and not has_outer(p):
                left, right = inputs_of(p.left), inputs_of(p.right)
                if left and right and not left & right:
                    equivalence_classes(classes, p.left, p.right)
                    continue
            residual.append(p)
        joined = Join(rel.inputs_, tuple(tuple(c) for c in classes))
        return Filter(joined, tuple(residual)) if residual else joined
