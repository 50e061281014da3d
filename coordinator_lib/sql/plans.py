"""What the planner hands the adapter: one frozen dataclass per statement kind.

Plans are resolved (names to GlobalIds, columns to indexes), typed (every
RelationExpr knows its desc) and self-contained: the adapter executes them
without looking at SQL again. DDL plans carry `create_sql`, the statement as
the Tidemark dialect prints it, for the durable catalog to store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.sql.catalog import ItemKind, QualifiedName


@dataclass(frozen=True)
class ColumnOrder:
    """One ORDER BY key: PostgreSQL's default is ASC NULLS LAST, DESC NULLS FIRST."""

    column: int
    desc: bool = False
    nulls_last: bool = True


@dataclass(frozen=True)
class RowSetFinishing:
    """Applied to a peek's result, not maintained: sort by `order_by`, skip
    `offset` rows, keep `limit` (None: all), then keep the columns `project`
    (ORDER BY may sort on columns the SELECT list does not show)."""

    order_by: tuple[ColumnOrder, ...] = ()
    limit: int | None = None
    offset: int = 0
    project: tuple[int, ...] = ()

    def is_trivial(self, arity: int) -> bool:
        return (
            not self.order_by
            and self.limit is None
            and self.offset == 0
            and self.project == tuple(range(arity))
        )


@dataclass(frozen=True)
class AsOfTime:
    """`AS OF [AT LEAST] t`, `t` in milliseconds since the epoch."""

    timestamp: int
    at_least: bool = False


class Plan:
    """Base of all plans (for isinstance and type hints)."""


@dataclass(frozen=True)
class CreateTablePlan(Plan):
    name: QualifiedName
    desc: RelationDesc
    if_not_exists: bool = False
    create_sql: str = ""


@dataclass(frozen=True)
class CreateViewPlan(Plan):
    """CREATE [MATERIALIZED] VIEW. `expr.desc == desc` (names included).
    `replace` is the id of the view CREATE OR REPLACE replaces; `depends_on`
    the items the query names (views included although inlined)."""

    name: QualifiedName
    expr: RelationExpr
    desc: RelationDesc
    materialized: bool
    retain_history_ms: int | None = None
    cluster: str | None = None
    if_not_exists: bool = False
    replace: GlobalId | None = None
    depends_on: frozenset[GlobalId] = field(default_factory=frozenset)
    create_sql: str = ""


@dataclass(frozen=True)
class CreateIndexPlan(Plan):
    """An index (arrangement) of `on` keyed by the columns `key`."""

    name: QualifiedName
    on: GlobalId
    key: tuple[int, ...]
    cluster: str | None = None
    if_not_exists: bool = False
    default: bool = False
    create_sql: str = ""


@dataclass(frozen=True)
class CreateSourcePlan(Plan):
    """A load generator source. `outputs` maps each generator output to its
    schema; `subsources` maps each output to the catalog name that holds it:
    the source's own name for a single-output generator (COUNTER), one
    subsource per table beside the source for FOR ALL TABLES (AUCTION; the
    source item itself then holds no rows). `options` are the keyword
    arguments for `make_generator(generator, **options)`."""

    name: QualifiedName
    generator: str
    options: Mapping[str, object]
    outputs: Mapping[str, RelationDesc]
    subsources: Mapping[str, QualifiedName]
    tick_interval_ms: int | None = None
    cluster: str | None = None
    if_not_exists: bool = False
    create_sql: str = ""


@dataclass(frozen=True)
class InsertPlan(Plan):
    """Rows to append to table `id`: `expr` has the table's column types in
    table order (nullability may be wider: NOT NULL is checked on the rows)."""

    id: GlobalId
    expr: RelationExpr
    name: QualifiedName | None = None


@dataclass(frozen=True)
class DeletePlan(Plan):
    """Read-then-write: retract the rows `retract` yields (a Filter over the table)."""

    id: GlobalId
    retract: RelationExpr
    name: QualifiedName | None = None


@dataclass(frozen=True)
class UpdatePlan(Plan):
    """Read-then-write: retract the rows `retract` yields and insert the rows
    `insert` yields (the same rows with the SET columns replaced, in table order)."""

    id: GlobalId
    retract: RelationExpr
    insert: RelationExpr
    name: QualifiedName | None = None


@dataclass(frozen=True)
class DropPlan(Plan):
    """Drop the items `ids` (the names that resolved). `missing` lists names
    that did not exist under IF EXISTS (PostgreSQL reports each as a notice).
    Whether dependents block the drop is the catalog's decision (`cascade`)."""

    kind: ItemKind
    names: tuple[QualifiedName, ...]
    if_exists: bool = False
    cascade: bool = False
    ids: tuple[GlobalId, ...] = ()
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class SelectPlan(Plan):
    """A peek: evaluate `expr` at the chosen time, then apply `finishing`.
    `column_names` are the names the client sees (they may repeat;
    `expr.desc.names` are made unique; empty means those of `desc`)."""

    expr: RelationExpr
    finishing: RowSetFinishing
    as_of: AsOfTime | None = None
    column_names: tuple[str, ...] = ()

    @property
    def desc(self) -> RelationDesc:
        """The result's desc after finishing's projection."""
        d = self.expr.desc
        cols = self.finishing.project or tuple(range(d.arity))
        return RelationDesc(tuple(d.names[i] for i in cols), tuple(d.types[i] for i in cols))


@dataclass(frozen=True)
class ExplainPlan(Plan):
    """EXPLAIN: print `expr` (see `sql.explain.explain`). `plan` is the plan of
    the explained statement; `item` the existing object explained
    (`EXPLAIN MATERIALIZED VIEW mv`). `names` maps the ids the plan reads to
    their qualified names, for readable `Get` lines."""

    plan: Plan | None
    expr: RelationExpr
    item: GlobalId | None = None
    stage: str | None = None
    names: Mapping[GlobalId, str] = field(default_factory=dict)


__all__ = [
    "AsOfTime",
    "ColumnOrder",
    "CreateIndexPlan",
    "CreateSourcePlan",
    "CreateTablePlan",
    "CreateViewPlan",
    "DeletePlan",
    "DropPlan",
    "ExplainPlan",
    "InsertPlan",
    "Plan",
    "RowSetFinishing",
    "SelectPlan",
    "UpdatePlan",
]
