"""Relation expressions: the operators every view is lowered to.

Each node's `desc` is its output RelationDesc. Column names in descs are for
EXPLAIN and for the final output; operators refer to columns by index. The
compute layer renders each operator with a delta rule where it has one (see
DESIGN.md "Incremental maintenance") and otherwise by recompute-and-diff.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from coordinator_lib.expr.scalar import ScalarExpr, is_integer
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ColumnType, RelationDesc, ScalarType
from coordinator_lib.repr.update import Row


class RelationExpr:
    """Base of relation expression nodes."""

    @property
    def desc(self) -> RelationDesc:
        raise TypeError(f"{type(self).__name__} has no desc")  # every node overrides

    @property
    def types(self) -> tuple[ColumnType, ...]:
        return self.desc.types

    def inputs(self) -> tuple[RelationExpr, ...]:
        return ()

    def depends_on(self) -> set[GlobalId]:
        """The collections this expression reads."""
        out: set[GlobalId] = set()
        for child in self.inputs():
            out |= child.depends_on()
        return out


def _unique_names(names: list[str]) -> tuple[str, ...]:
    """Descs need unique names; joins can repeat them (`id`, `id`)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        if name in seen:
            seen[name] += 1
            candidate = f"{name}_{seen[name]}"
            while candidate in seen:
                seen[name] += 1
                candidate = f"{name}_{seen[name]}"
            seen[candidate] = 0
            out.append(candidate)
        else:
            seen[name] = 0
            out.append(name)
    return tuple(out)


@dataclass(frozen=True)
class Get(RelationExpr):
    """Read a collection (table, source, view output, index)."""

    id: GlobalId
    collection_desc: RelationDesc

    @property
    def desc(self) -> RelationDesc:
        return self.collection_desc

    def depends_on(self) -> set[GlobalId]:
        return {self.id}


@dataclass(frozen=True)
class Constant(RelationExpr):
    """Fixed rows with multiplicities (each diff at the dataflow's as_of)."""

    rows: tuple[tuple[Row, int], ...]
    constant_desc: RelationDesc

    @property
    def desc(self) -> RelationDesc:
        return self.constant_desc


@dataclass(frozen=True)
class Project(RelationExpr):
    """Keep (and reorder, or repeat) the columns `outputs`."""

    input: RelationExpr
    outputs: tuple[int, ...]
    names: tuple[str, ...] | None = None

    @cached_property
    def desc(self) -> RelationDesc:  # type: ignore[override]
        d = self.input.desc
        names = list(self.names) if self.names else [d.names[i] for i in self.outputs]
        return RelationDesc(_unique_names(names), tuple(d.types[i] for i in self.outputs))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Map(RelationExpr):
    """Append one column per scalar expression (each may use earlier ones)."""

    input: RelationExpr
    scalars: tuple[ScalarExpr, ...]
    names: tuple[str, ...] = ()

    @cached_property
    def desc(self) -> RelationDesc:  # type: ignore[override]
        d = self.input.desc
        types = list(d.types)
        for scalar in self.scalars:
            types.append(scalar.typ(tuple(types)))
        names = list(d.names) + [
            self.names[i] if i < len(self.names) else f"?column{i}?"
            for i in range(len(self.scalars))
        ]
        return RelationDesc(_unique_names(names), tuple(types))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Filter(RelationExpr):
    """Keep rows where every predicate is true (NULL and false drop the row)."""

    input: RelationExpr
    predicates: tuple[ScalarExpr, ...]

    @property
    def desc(self) -> RelationDesc:
        return self.input.desc

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Join(RelationExpr):
    """Inner join of all inputs; output columns are the inputs' columns
    concatenated. Each equivalence class lists expressions (over the
    concatenated columns) that must all be equal (and not NULL)."""

    inputs_: tuple[RelationExpr, ...]
    equivalences: tuple[tuple[ScalarExpr, ...], ...]

    @cached_property
    def desc(self) -> RelationDesc:  # type: ignore[override]
        names: list[str] = []
        types: list[ColumnType] = []
        for child in self.inputs_:
            names += child.desc.names
            types += child.desc.types
        return RelationDesc(_unique_names(names), tuple(types))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return self.inputs_

    def input_offsets(self) -> list[int]:
        """The index of each input's first column in the output."""
        offsets, total = [], 0
        for child in self.inputs_:
            offsets.append(total)
            total += child.desc.arity
        return offsets


class AggregateFunc(StrEnum):
    COUNT = "count"  # count(expr): non-NULL values; count(*) is count of TRUE
    SUM = "sum"
    MIN = "min"
    MAX = "max"


@dataclass(frozen=True)
class AggregateExpr:
    func: AggregateFunc
    expr: ScalarExpr
    distinct: bool = False

    def typ(self, input_types: tuple[ColumnType, ...]) -> ColumnType:
        inner = self.expr.typ(input_types).scalar_type
        if self.func is AggregateFunc.COUNT:
            return ColumnType(ScalarType.BIGINT, False)
        if self.func is AggregateFunc.SUM:
            if inner in (ScalarType.SMALLINT, ScalarType.INTEGER):
                return ColumnType(ScalarType.BIGINT, True)
            if inner is ScalarType.BIGINT or is_integer(inner):
                return ColumnType(ScalarType.NUMERIC, True)
            if inner is ScalarType.REAL:
                return ColumnType(ScalarType.REAL, True)
            return ColumnType(inner, True)
        return ColumnType(inner, True)

    def __repr__(self) -> str:
        distinct = "distinct " if self.distinct else ""
        return f"{self.func.value}({distinct}{self.expr!r})"


@dataclass(frozen=True)
class Reduce(RelationExpr):
    """GROUP BY `group_key` computing `aggregates`; output = key columns then
    one column per aggregate. With no aggregates it is DISTINCT on the key."""

    input: RelationExpr
    group_key: tuple[ScalarExpr, ...]
    aggregates: tuple[AggregateExpr, ...] = ()
    names: tuple[str, ...] = field(default=())

    @cached_property
    def desc(self) -> RelationDesc:  # type: ignore[override]
        input_types = self.input.desc.types
        types = [k.typ(input_types) for k in self.group_key]
        types += [a.typ(input_types) for a in self.aggregates]
        count = len(types)
        names = [self.names[i] if i < len(self.names) else f"?column{i}?" for i in range(count)]
        key = (tuple(range(len(self.group_key))),) if self.group_key else ((),)
        return RelationDesc(_unique_names(names), tuple(types), key if count else ())

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Distinct(RelationExpr):
    """Each distinct row once (SELECT DISTINCT)."""

    input: RelationExpr

    @property
    def desc(self) -> RelationDesc:
        d = self.input.desc
        return RelationDesc(d.names, d.types, (tuple(range(d.arity)),))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Union(RelationExpr):
    """UNION ALL: multiplicities add up. Inputs have the same arity."""

    inputs_: tuple[RelationExpr, ...]

    @cached_property
    def desc(self) -> RelationDesc:  # type: ignore[override]
        first = self.inputs_[0].desc
        types = list(first.types)
        for child in self.inputs_[1:]:
            for i, t in enumerate(child.desc.types):
                types[i] = ColumnType(types[i].scalar_type, types[i].nullable or t.nullable)
        return RelationDesc(first.names, tuple(types))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return self.inputs_


@dataclass(frozen=True)
class Negate(RelationExpr):
    """Flip every multiplicity (for EXCEPT ALL and retractions)."""

    input: RelationExpr

    @property
    def desc(self) -> RelationDesc:
        return self.input.desc

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Threshold(RelationExpr):
    """Keep rows with positive multiplicity (after Negate, EXCEPT ALL)."""

    input: RelationExpr

    @property
    def desc(self) -> RelationDesc:
        return self.input.desc

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)
