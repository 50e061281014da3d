"""What the planner hands the adapter: one frozen dataclass per statement kind.

Plans are resolved (names to GlobalIds, columns to indexes), typed (every
RelationExpr knows its desc) and self-contained: the adapter executes them
without looking at SQL again. DDL plans carry `create_sql`, the statement as
the Tidemark dialect prints it, for the durable catalog to store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.sql.catalog import ItemKind, QualifiedName
from coordinator_lib.sql.constraints import UniqueConstraint


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
    retain_history_ms: int | None = None  # WITH (RETAIN HISTORY FOR ...)
    unique: tuple[UniqueConstraint, ...] = ()  # PRIMARY KEY first (sql/constraints.py)


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
    # WITH (REFRESH EVERY '<interval>'): refreshed on that period (Dagster's
    # schedule); None is REFRESH ON COMMIT, the default.
    refresh_every_ms: int | None = None


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
    retain_history_ms: int | None = None  # WITH (RETAIN HISTORY FOR ...)


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
    retain_history_ms: int | None = None  # WITH (RETAIN HISTORY FOR ...)


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
    their qualified names, for readable `Get` lines. `options` are the
    output modifiers of `WITH (...)` it honours (`sql.explain.EXPLAIN_OPTIONS`)."""

    plan: Plan | None
    expr: RelationExpr
    item: GlobalId | None = None
    stage: str | None = None
    names: Mapping[GlobalId, str] = field(default_factory=dict)
    options: tuple[str, ...] = ()


# --- statements added for the coordinator (issue 4) -------------------------------


@dataclass(frozen=True)
class CreateDatabasePlan(Plan):
    name: str
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateSchemaPlan(Plan):
    """CREATE SCHEMA [db.]name: `database` is the session's when not written."""

    database: str
    name: str
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropSchemaPlan(Plan):
    """DROP SCHEMA / DROP DATABASE (`schema` None). Whether the objects inside
    block the drop is the catalog's decision (`cascade`)."""

    database: str
    schema: str | None
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True)
class AlterRenamePlan(Plan):
    """ALTER <kind> <name> RENAME TO <new>: `new_name` is in the item's schema.
    `kind` is what the statement said (checked against the item)."""

    kind: ItemKind
    id: GlobalId
    name: QualifiedName
    new_name: QualifiedName


@dataclass(frozen=True)
class AlterRetainHistoryPlan(Plan):
    """ALTER <kind> <name> SET (RETAIN HISTORY [=] FOR '<interval>') or
    RESET (RETAIN HISTORY) (`retain_history_ms` None: back to the default)."""

    kind: ItemKind
    id: GlobalId
    name: QualifiedName
    retain_history_ms: int | None


class ShowKind(StrEnum):
    """What SHOW <kind> lists."""

    OBJECTS = "objects"
    TABLES = "tables"
    SOURCES = "sources"
    SINKS = "sinks"
    VIEWS = "views"
    MATERIALIZED_VIEWS = "materialized-views"
    INDEXES = "indexes"
    SCHEMAS = "schemas"
    DATABASES = "databases"
    CLUSTERS = "clusters"
    CONNECTIONS = "connections"
    SECRETS = "secrets"
    CONTINUAL_TASKS = "continual-tasks"


@dataclass(frozen=True)
class ShowObjectsPlan(Plan):
    """SHOW OBJECTS | TABLES | SOURCES | VIEWS | MATERIALIZED VIEWS | INDEXES |
    SCHEMAS | DATABASES [FROM <schema or database>] [ON <relation>] [LIKE
    '<pattern>']. `database`/`schema` are resolved (the session's first
    search-path schema when not written); `on` is the relation SHOW INDEXES ON
    names; `like` the LIKE pattern as written."""

    kind: ShowKind
    database: str | None = None
    schema: str | None = None
    on: GlobalId | None = None
    like: str | None = None


@dataclass(frozen=True)
class ShowColumnsPlan(Plan):
    """SHOW COLUMNS FROM <relation>: name, nullable, type of each column."""

    id: GlobalId
    name: QualifiedName


@dataclass(frozen=True)
class ShowCreatePlan(Plan):
    """SHOW CREATE TABLE | VIEW | MATERIALIZED VIEW | SOURCE | INDEX <name>:
    the stored create_sql (kind checked against the item)."""

    kind: ItemKind
    id: GlobalId
    name: QualifiedName


@dataclass(frozen=True)
class ShowVariablePlan(Plan):
    """SHOW <variable> | SHOW ALL (`name` "all"). Names are lower-cased;
    `SHOW TRANSACTION ISOLATION LEVEL` is `transaction_isolation`."""

    name: str


@dataclass(frozen=True)
class SetVariablePlan(Plan):
    """SET [SESSION|LOCAL] <name> {=|TO} <value>[, ...] | SET <name> TO DEFAULT
    | RESET <name> (`value` None: back to the default). The value is kept as
    PostgreSQL prints it: comma-separated lists (search_path) joined by ", ",
    quotes removed. `SET TRANSACTION ISOLATION LEVEL x` is `transaction_isolation`."""

    name: str
    value: str | None
    local: bool = False


@dataclass(frozen=True)
class StartTransactionPlan(Plan):
    """BEGIN / START TRANSACTION [ISOLATION LEVEL ...] [READ ONLY|READ WRITE]."""

    isolation: str | None = None
    read_only: bool | None = None


@dataclass(frozen=True)
class CommitTransactionPlan(Plan):
    """COMMIT / END."""


@dataclass(frozen=True)
class AbortTransactionPlan(Plan):
    """ROLLBACK / ABORT."""


@dataclass(frozen=True)
class SavepointPlan(Plan):
    """SAVEPOINT s / RELEASE [SAVEPOINT] s / ROLLBACK TO [SAVEPOINT] s
    (`action`: "savepoint", "release", "rollback")."""

    action: str
    name: str


@dataclass(frozen=True)
class SubscribePlan(Plan):
    """SUBSCRIBE [TO] <object> | (<query>) [WITH (SNAPSHOT [= bool], PROGRESS
    [= bool])] [AS OF [AT LEAST] t] [UP TO t]. Rows are (mz_timestamp
    numeric, [mz_progressed boolean when progress,] mz_diff bigint, columns of
    `expr`). `from_id` is the object subscribed to (None for a query);
    `depends_on` the items the query reads. `up_to` is a constant time in ms."""

    expr: RelationExpr
    from_id: GlobalId | None = None
    with_snapshot: bool = True
    progress: bool = False
    as_of: AsOfTime | None = None
    up_to: int | None = None
    depends_on: frozenset[GlobalId] = field(default_factory=frozenset)


@dataclass(frozen=True)
class DeclarePlan(Plan):
    """DECLARE <name> CURSOR [WITH HOLD|WITHOUT HOLD] FOR <SELECT or SUBSCRIBE>:
    `plan` is the statement's plan, `sql` its text."""

    name: str
    plan: Plan
    sql: str = ""


@dataclass(frozen=True)
class FetchPlan(Plan):
    """FETCH [FORWARD] [<count>|ALL] [FROM|IN] <cursor> [WITH (TIMEOUT [=]
    '<interval>')]. `count` None: ALL; default 1. `timeout_ms` None: wait
    for at least one row (SUBSCRIBE) / no wait (SELECT)."""

    name: str
    count: int | None = 1
    timeout_ms: int | None = None


@dataclass(frozen=True)
class ClosePlan(Plan):
    """CLOSE <cursor>."""

    name: str


@dataclass(frozen=True)
class CopyToPlan(Plan):
    """COPY (<SELECT or SUBSCRIBE>) TO STDOUT [WITH (FORMAT text|csv|binary)]."""

    plan: Plan
    format: str = "text"


@dataclass(frozen=True)
class CopyFromPlan(Plan):
    """COPY <table> [(cols)] FROM STDIN: the rows the client streams, in
    `format` (text, csv or binary), fill table `id`'s columns `columns` (table
    positions in the order the data has them; the others are NULL).
    `delimiter`, `null`, `quote`, `escape` and `header` are PostgreSQL's
    options with its defaults per format."""

    id: GlobalId
    name: QualifiedName
    desc: RelationDesc  # the table's
    columns: tuple[int, ...]
    format: str = "text"
    delimiter: str = "\t"
    null: str = "\\N"
    quote: str = '"'
    escape: str = '"'
    header: bool = False


@dataclass(frozen=True)
class ExplainTimestampPlan(Plan):
    """EXPLAIN TIMESTAMP [AS TEXT|AS JSON] FOR <SELECT>."""

    select: SelectPlan
    format: str = "text"


__all__ = [
    "AbortTransactionPlan",
    "AlterRenamePlan",
    "AlterRetainHistoryPlan",
    "AsOfTime",
    "ClosePlan",
    "ColumnOrder",
    "CommitTransactionPlan",
    "CopyFromPlan",
    "CopyToPlan",
    "CreateDatabasePlan",
    "CreateIndexPlan",
    "CreateSchemaPlan",
    "CreateSourcePlan",
    "CreateTablePlan",
    "CreateViewPlan",
    "DeclarePlan",
    "DeletePlan",
    "DropPlan",
    "DropSchemaPlan",
    "ExplainPlan",
    "ExplainTimestampPlan",
    "FetchPlan",
    "InsertPlan",
    "Plan",
    "RowSetFinishing",
    "SavepointPlan",
    "SelectPlan",
    "SetVariablePlan",
    "ShowColumnsPlan",
    "ShowCreatePlan",
    "ShowKind",
    "ShowObjectsPlan",
    "ShowVariablePlan",
    "StartTransactionPlan",
    "SubscribePlan",
    "UpdatePlan",
]
