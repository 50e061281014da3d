"""ExecuteResponse: what `SessionClient.execute` returns for one statement.

One dataclass with a `kind` rather than a class per kind, so the servers
handle every statement the same way: send `columns` (if any) as a row
description, stream `rows`, then the command `tag` (PostgreSQL's
CommandComplete text: "SELECT 3", "INSERT 0 1", "CREATE TABLE").

`rows` is an iterator: for SELECT it is already materialized; for SUBSCRIBE
(COPY ... TO STDOUT) it yields as updates arrive and ends at UP TO, on
cancel (raising QueryCanceled) or when the session ends.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from coordinator_lib.adapter.errors import AdapterNotice
from coordinator_lib.adapter.pg_catalog import column_pg_type
from coordinator_lib.repr.relation import ColumnType, ScalarType

Row = tuple[Any, ...]


class ExecuteResponseKind(StrEnum):
    CREATED_DATABASE = "created-database"
    CREATED_SCHEMA = "created-schema"
    CREATED_TABLE = "created-table"
    CREATED_VIEW = "created-view"
    CREATED_MATERIALIZED_VIEW = "created-materialized-view"
    CREATED_INDEX = "created-index"
    CREATED_SOURCE = "created-source"
    CREATED_SECRET = "created-secret"
    CREATED_CONNECTION = "created-connection"
    CREATED_SINK = "created-sink"
    CREATED_CLUSTER = "created-cluster"
    CREATED_CONTINUAL_TASK = "created-continual-task"
    CREATED_ROLE = "created-role"
    GRANTED = "granted"
    REVOKED = "revoked"
    DROPPED = "dropped"
    ALTERED = "altered"
    INSERTED = "inserted"
    UPDATED = "updated"
    DELETED = "deleted"
    SENDING_ROWS = "sending-rows"
    SET_VARIABLE = "set-variable"
    STARTED_TRANSACTION = "started-transaction"
    COMMITTED = "committed"
    ROLLED_BACK = "rolled-back"
    DECLARED_CURSOR = "declared-cursor"
    FETCHED = "fetched"
    CLOSED_CURSOR = "closed-cursor"
    COPY_TO = "copy-to"
    COPY_IN = "copy-in"
    EMPTY_QUERY = "empty-query"


@dataclass(frozen=True)
class ResultColumn:
    """One column of a result: the name the client sees and its SQL type
    (the servers derive PostgreSQL type OIDs and JSON encodings from it;
    `type_oid` and `typmod` are set for varchar[(n)] and char(n), which
    keep their declared type, as pg_attribute shows it)."""

    name: str
    scalar_type: ScalarType
    nullable: bool = True
    type_oid: int | None = None
    typmod: int = -1

    @staticmethod
    def of(name: str, column: ColumnType, nullable: bool | None = None) -> ResultColumn:
        """The column `name` of type `column` (`nullable` overriding its own)."""
        nullable = column.nullable if nullable is None else nullable
        if column.scalar_type not in (ScalarType.TEXT, ScalarType.BPCHAR):
            return ResultColumn(name, column.scalar_type, nullable)
        pg_type, typmod = column_pg_type(column)
        return ResultColumn(name, column.scalar_type, nullable, pg_type.oid, typmod)


@dataclass
class ExecuteResponse:
    """The outcome of one statement.

    - `tag`: CommandComplete text. For SENDING_ROWS / FETCHED it is filled
      in by whoever drains `rows` via `complete_tag(count)` ("SELECT n" /
      "FETCH n"); COPY_TO's is "COPY n".
    - `columns`/`rows`: present for SENDING_ROWS, FETCHED and COPY_TO.
    - `copy_format`: "text" | "csv" | "binary" for COPY_TO.
    - `copy_in`: for COPY_IN, the `adapter.copy_from.CopyIn` the server feeds
      the client's data to (then "COPY n" from its `finish`).
    - `notices`: NoticeResponses to send before the completion.
    """

    kind: ExecuteResponseKind
    tag: str
    columns: tuple[ResultColumn, ...] | None = None
    rows: Iterator[Row] | None = None
    copy_format: str | None = None
    copy_in: Any = None
    notices: list[AdapterNotice] = field(default_factory=list)

    def complete_tag(self, count: int) -> str:
        """The tag once `count` rows were sent ("SELECT 3", "FETCH 3", "COPY 3")."""
        if self.kind is ExecuteResponseKind.SENDING_ROWS:
            return f"SELECT {count}"
        if self.kind is ExecuteResponseKind.FETCHED:
            return f"FETCH {count}"
        if self.kind is ExecuteResponseKind.COPY_TO:
            return f"COPY {count}"
        return self.tag


@dataclass(frozen=True)
class StatementDescription:
    """What Describe answers before execution: the type of each `$n`
    parameter (None: unknown, sent as text) and the result columns (None:
    the statement returns no rows)."""

    param_types: tuple[ScalarType | None, ...]
    columns: tuple[ResultColumn, ...] | None


@dataclass(frozen=True)
class StartupResponse:
    """`parameter_status`: what pgwire reports as ParameterStatus at startup."""

    session_id: int
    secret_key: int
    parameter_status: Mapping[str, str] = field(default_factory=dict)
