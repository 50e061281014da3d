"""A scripted stand-in for the coordinator's `Client`, for the HTTP server's
tests: the server is tested on its own, without catalog, Spark or storage.

Statements are looked up by their exact text in `FakeClient.statements`
(a function of the bound parameters returning an ExecuteResponse, or raising
AdapterError); an unknown statement fails as a syntax error. A request's
text is split at every `;` (the scripts hold no quoted semicolons). Like the
real coordinator, sessions and statements are counted in the `Metrics` given.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal

from coordinator_lib.adapter.errors import AdapterError, AdapterNotice, InvalidPassword
from coordinator_lib.adapter.metrics import Metrics
from coordinator_lib.adapter.responses import (
    ExecuteResponse,
    ExecuteResponseKind,
    ResultColumn,
    Row,
)
from coordinator_lib.repr.relation import ScalarType

Script = Callable[[Sequence[str | None]], ExecuteResponse]


def rows(columns: Sequence[tuple[str, ScalarType]], *values: Row) -> ExecuteResponse:
    """A SELECT's response."""
    return ExecuteResponse(
        ExecuteResponseKind.SENDING_ROWS,
        "SELECT",
        columns=tuple(ResultColumn(name, scalar_type) for name, scalar_type in columns),
        rows=iter(values),
    )


def ok(kind: ExecuteResponseKind, tag: str, *notices: AdapterNotice) -> ExecuteResponse:
    return ExecuteResponse(kind, tag, notices=list(notices))


def _fail(error: AdapterError) -> Script:
    def script(params: Sequence[str | None]) -> ExecuteResponse:
        raise error

    return script


def default_statements() -> dict[str, Script]:
    return {
        "SELECT 1": lambda p: rows([("?column?", ScalarType.INTEGER)], (1,)),
        "SELECT 2": lambda p: rows([("?column?", ScalarType.INTEGER)], (2,)),
        "SELECT $1::int + 1": lambda p: rows(
            [("?column?", ScalarType.INTEGER)], (None if p[0] is None else int(p[0]) + 1,)
        ),
        "SELECT $1::text": lambda p: rows([("text", ScalarType.TEXT)], (p[0],)),
        "SELECT * FROM every_type": lambda p: rows(
            [
                ("b", ScalarType.BOOLEAN),
                ("i2", ScalarType.SMALLINT),
                ("i8", ScalarType.BIGINT),
                ("f4", ScalarType.REAL),
                ("f8", ScalarType.DOUBLE),
                ("n", ScalarType.NUMERIC),
                ("t", ScalarType.TEXT),
                ("by", ScalarType.BYTEA),
                ("d", ScalarType.DATE),
                ("ts", ScalarType.TIMESTAMP),
                ("tz", ScalarType.TIMESTAMPTZ),
                ("j", ScalarType.JSONB),
            ],
            (
                True,
                -3,
                2**62,
                0.1,
                1.5,
                Decimal("12345678901234567890.125"),
                "héllo",
                b"\x00\xffA",
                date(2024, 2, 29),
                datetime(2024, 1, 2, 3, 4, 5, 250000),
                datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
                '{"a": [1, 2.5, null], "b": "x"}',
            ),
            (None,) * 12,
            (False, 0, 0, float("nan"), float("inf"), Decimal("-1E+3"), "", b"", *((None,) * 4)),
        ),
        "CREATE TABLE t (a int)": lambda p: ok(ExecuteResponseKind.CREATED_TABLE, "CREATE TABLE"),
        "INSERT INTO t VALUES ($1)": lambda p: ok(ExecuteResponseKind.INSERTED, "INSERT 0 1"),
        "DROP TABLE IF EXISTS missing": lambda p: ok(
            ExecuteResponseKind.DROPPED,
            "DROP TABLE",
            AdapterNotice('table "missing" does not exist, skipping', code="00000"),
        ),
        "SELECT missing": _fail(
            AdapterError(
                'column "missing" does not exist', code="42703", position=8, hint="check it"
            )
        ),
        "SUBSCRIBE t": lambda p: ExecuteResponse(
            ExecuteResponseKind.COPY_TO,
            "SUBSCRIBE",
            columns=(ResultColumn("a", ScalarType.INTEGER),),
            rows=iter(()),
            copy_format="text",
        ),
        "EXPLAIN SUBSCRIBE t": lambda p: ExecuteResponse(
            ExecuteResponseKind.COPY_TO, "COPY 0", rows=iter(()), copy_format="text"
        ),
    }


@dataclass
class FakeClient:
    """`passwords`: users that need a password, and theirs."""

    metrics: Metrics = field(default_factory=Metrics)
    passwords: dict[str, str] = field(default_factory=dict)
    statements: dict[str, Script] = field(default_factory=default_statements)
    # What the tests look at afterwards.
    executed: list[str] = field(default_factory=list)
    startups: list[dict[str, object]] = field(default_factory=list)
    terminated: int = 0
    active: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def password_required(self, user: str, loopback: bool) -> bool:
        return user in self.passwords

    def startup(
        self,
        user: str,
        database: str,
        password: str | None = None,
        options: Mapping[str, str] = {},
        loopback: bool = True,
    ) -> FakeSession:
        if user in self.passwords and password != self.passwords[user]:
            raise InvalidPassword(f'password authentication failed for user "{user}"')
        if database != "materialize":
            raise AdapterError(f'database "{database}" does not exist', code="3D000")
        with self._lock:
            self.startups.append(
                {"user": user, "database": database, "options": dict(options), "loopback": loopback}
            )
            self.active += 1
        self.metrics.session_opened()
        return FakeSession(self)

    def _ended(self) -> None:
        with self._lock:
            self.terminated += 1
            self.active -= 1
        self.metrics.session_closed()


class FakeSession:
    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self.closed = False

    def execute(
        self,
        sql: str,
        params: Sequence[str | None] = (),
        param_types: Sequence[ScalarType | None] = (),
    ) -> Iterator[ExecuteResponse]:
        assert not self.closed, "execute after terminate"
        for statement in (s.strip() for s in sql.split(";")):
            if not statement:
                continue
            self.client.executed.append(statement)
            kind = statement.split()[0].lower()
            self.client.metrics.statement_started()
            started = time.monotonic()
            status = "error"
            try:
                script = self.client.statements.get(statement)
                if script is None:
                    raise AdapterError(
                        f'syntax error at or near "{statement.split()[0]}"',
                        code="42601",
                        position=1,
                    )
                response = script(params)
                status = "ok"
            finally:
                self.client.metrics.statement_finished(kind, status, time.monotonic() - started)
            yield response

    def terminate(self) -> None:
        if not self.closed:
            self.closed = True
            self.client._ended()
