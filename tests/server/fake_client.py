"""A fake adapter `Client` for the pgwire tests.

It knows just enough SQL to exercise the protocol with real client libraries:
typed SELECTs, `$n` parameters echoed back, an error with a position, a
statement that blocks until canceled, COPY ... TO STDOUT (also an endless
SUBSCRIBE), transactions, password users and the statements that clients send
on their own at connect time (`version()`, `SHOW ...`, psycopg's type lookup).
`FakeClient.log` records every statement described or executed.

It does not import `coordinator_lib.adapter.client` (that loads the whole
coordinator): its StartupResponse / StatementDescription are look-alikes with
the same fields, which is all the server reads.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coordinator_lib.adapter.errors import (
    AdapterError,
    AdapterNotice,
    InFailedTransaction,
    InvalidPassword,
    QueryCanceled,
)
from coordinator_lib.adapter.responses import (
    ExecuteResponse,
    ExecuteResponseKind,
    ResultColumn,
    StartupResponse,
    StatementDescription,
)
from coordinator_lib.adapter.scram import make_verifier
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.server.pgwire import PgwireServer

K = ExecuteResponseKind
T = ScalarType
BLOCK_LIMIT = 30.0  # seconds a blocking statement waits for a cancel before failing

TYPE_NAMES = {
    "bool": T.BOOLEAN,
    "boolean": T.BOOLEAN,
    "int2": T.SMALLINT,
    "smallint": T.SMALLINT,
    "int4": T.INTEGER,
    "int": T.INTEGER,
    "integer": T.INTEGER,
    "int8": T.BIGINT,
    "bigint": T.BIGINT,
    "float4": T.REAL,
    "real": T.REAL,
    "float8": T.DOUBLE,
    "numeric": T.NUMERIC,
    "text": T.TEXT,
    "bytea": T.BYTEA,
    "date": T.DATE,
    "timestamp": T.TIMESTAMP,
    "timestamptz": T.TIMESTAMPTZ,
    "jsonb": T.JSONB,
}

# `SELECT * FROM typed`: one column per type, a row of values and a row of NULLs.
TYPED_COLUMNS = tuple(
    ResultColumn(name, scalar_type)
    for name, scalar_type in [
        ("b", T.BOOLEAN),
        ("i2", T.SMALLINT),
        ("i4", T.INTEGER),
        ("i8", T.BIGINT),
        ("f4", T.REAL),
        ("f8", T.DOUBLE),
        ("n", T.NUMERIC),
        ("t", T.TEXT),
        ("by", T.BYTEA),
        ("d", T.DATE),
        ("ts", T.TIMESTAMP),
        ("tz", T.TIMESTAMPTZ),
        ("j", T.JSONB),
    ]
)
TYPED_ROW = (
    True,
    -2,
    40000,
    2**40,
    1.5,
    0.1,
    decimal.Decimal("-12345.678900"),
    'tab\there "q", back\\slash\nnewline',
    b"\x00\xffab",
    dt.date(2024, 2, 29),
    dt.datetime(2024, 2, 29, 12, 34, 56, 789000),
    dt.datetime(2024, 2, 29, 12, 34, 56, tzinfo=dt.UTC),
    '{"a": [1, 2], "b": null}',
)
TYPED_ROWS = [TYPED_ROW, (None,) * len(TYPED_COLUMNS)]
SUBSCRIBE_COLUMNS = (
    ResultColumn("mz_timestamp", T.NUMERIC),
    ResultColumn("mz_diff", T.BIGINT),
    ResultColumn("x", T.TEXT),
)
NAME = r'"?\w+"?'  # a savepoint name, maybe quoted (psycopg sends "_pg3_1")
VERSION = "PostgreSQL 9.5.0 on x86_64-pc-linux-gnu (Tidemark fake)"


def parse_value(text: str | None, scalar_type: ScalarType) -> Any:
    """A text parameter as the Python value of `scalar_type`."""
    if text is None:
        return None
    if scalar_type is T.BOOLEAN:
        return text.lower() in ("t", "true", "1", "on", "yes", "y")
    if scalar_type in (T.SMALLINT, T.INTEGER, T.BIGINT):
        return int(text)
    if scalar_type in (T.REAL, T.DOUBLE):
        return float(text)
    if scalar_type is T.NUMERIC:
        return decimal.Decimal(text)
    if scalar_type is T.BYTEA:
        return bytes.fromhex(text[2:]) if text.startswith("\\x") else text.encode()
    if scalar_type is T.DATE:
        return dt.date.fromisoformat(text)
    if scalar_type is T.TIMESTAMP:
        return dt.datetime.fromisoformat(text)
    if scalar_type is T.TIMESTAMPTZ:
        value = dt.datetime.fromisoformat(text)
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    if scalar_type is T.JSONB:
        return json.dumps(json.loads(text), sort_keys=True)
    return text


@dataclass
class Plan:
    """One statement: its description and how to run it."""

    param_types: tuple[ScalarType | None, ...]
    columns: tuple[ResultColumn, ...] | None
    run: Callable[[Sequence[str | None]], ExecuteResponse]


def rows_response(
    columns: Sequence[ResultColumn], rows: Sequence[tuple[Any, ...]] | Iterator[tuple[Any, ...]]
) -> ExecuteResponse:
    return ExecuteResponse(K.SENDING_ROWS, "SELECT", tuple(columns), iter(rows))


def query_plan(columns: Sequence[ResultColumn], rows: Sequence[tuple[Any, ...]]) -> Plan:
    return Plan((), tuple(columns), lambda _: rows_response(columns, rows))


def command_plan(
    kind: ExecuteResponseKind, tag: str, action: Callable[[], None] = lambda: None
) -> Plan:
    def run(_: Sequence[str | None]) -> ExecuteResponse:
        action()
        return ExecuteResponse(kind, tag)

    return Plan((), None, run)


class FakeSession:
    def __init__(self, client: FakeClient, session_id: int, options: Mapping[str, str]) -> None:
        self.client = client
        self.session_id = session_id
        self.settings = dict(options)
        self.startup_response = StartupResponse(
            session_id=session_id,
            secret_key=0xDEADBEEF ^ session_id,
            parameter_status={
                "server_version": "9.5.0",
                "server_version_num": "90500",
                "client_encoding": "UTF8",
                "DateStyle": "ISO, MDY",
                "TimeZone": "UTC",
                "IntervalStyle": "postgres",
                "integer_datetimes": "on",
                "standard_conforming_strings": "on",
                "application_name": options.get("application_name", ""),
            },
        )
        self.status = "I"
        self.canceled = threading.Event()
        self.blocking = threading.Event()  # set while a statement waits for a cancel
        self.terminated = False

    @property
    def transaction_status(self) -> str:
        return self.status

    def cursor_columns(self, name: str) -> tuple[ResultColumn, ...] | None:
        return None  # the fake has no DECLARE

    # -- the interface ---------------------------------------------------------

    def execute(
        self,
        sql: str,
        params: Sequence[str | None] = (),
        param_types: Sequence[ScalarType | None] = (),
    ) -> Iterator[ExecuteResponse]:
        statements = split(sql)
        if not statements:
            yield ExecuteResponse(K.EMPTY_QUERY, "")
            return
        for statement in statements:
            self.client.log.append(("execute", statement))
            self.canceled.clear()
            try:
                if self.status == "E" and not re.match(r"(?i)(commit|rollback)\b", statement):
                    raise InFailedTransaction(
                        "current transaction is aborted, "
                        "commands ignored until end of transaction block"
                    )
                plan = self.plan(statement, param_types)
                response = plan.run(params)
            except AdapterError:
                if self.status == "T":
                    self.status = "E"
                raise
            yield response

    def describe(
        self, sql: str, param_types: Sequence[ScalarType | None] = ()
    ) -> StatementDescription:
        statements = split(sql)
        if len(statements) > 1:
            raise AdapterError(
                "cannot insert multiple commands into a prepared statement", code="42601"
            )
        self.client.log.append(("describe", statements[0] if statements else ""))
        if not statements:
            return StatementDescription((), None)
        plan = self.plan(statements[0], param_types)
        return StatementDescription(plan.param_types, plan.columns)

    def cancel(self) -> None:
        self.canceled.set()

    def terminate(self) -> None:
        self.terminated = True
        self.client.sessions.pop(self.session_id, None)

    # -- the fake SQL ----------------------------------------------------------

    def plan(self, statement: str, param_types: Sequence[ScalarType | None]) -> Plan:
        s = " ".join(statement.split())
        low = s.lower()
        if low in ("begin", "start transaction", "begin transaction"):
            return command_plan(K.STARTED_TRANSACTION, "BEGIN", lambda: self.set_status("T"))
        if low in ("commit", "rollback") or re.fullmatch(rf"rollback to (savepoint )?{NAME}", low):
            to_savepoint = low.startswith("rollback to")
            tag = "ROLLBACK" if low != "commit" or self.status == "E" else "COMMIT"
            kind = K.COMMITTED if tag == "COMMIT" else K.ROLLED_BACK
            return command_plan(kind, tag, lambda: self.set_status("T" if to_savepoint else "I"))
        if re.fullmatch(rf"savepoint {NAME}", low):
            return command_plan(K.STARTED_TRANSACTION, "SAVEPOINT")
        if re.fullmatch(rf"release (savepoint )?{NAME}", low):
            return command_plan(K.COMMITTED, "RELEASE")
        if low.startswith("set "):
            return command_plan(K.SET_VARIABLE, "SET")
        if m := re.fullmatch(r"show (.+)", low):
            name = m.group(1)
            values = {
                "standard_conforming_strings": "on",
                "transaction isolation level": "strict serializable",
                "transaction_isolation": "strict serializable",
            }
            value = values.get(name, self.settings.get(name, ""))
            return query_plan([ResultColumn(name, T.TEXT)], [(value,)])
        if low in ("select pg_catalog.version()", "select version()"):
            return query_plan([ResultColumn("version", T.TEXT)], [(VERSION,)])
        if low == "select current_schema()":
            return query_plan([ResultColumn("current_schema", T.TEXT)], [("public",)])
        if "from pg_type" in low:  # psycopg's TypeInfo.fetch: no such type
            cols = [("name", T.TEXT), ("oid", T.BIGINT), ("array_oid", T.BIGINT)]
            cols += [("regtype", T.TEXT), ("delimiter", T.TEXT)]
            return Plan((T.TEXT,), tuple(ResultColumn(n, t) for n, t in cols), self.no_type_rows)
        if m := re.fullmatch(r"select (-?\d+)", low):
            return query_plan([ResultColumn("?column?", T.INTEGER)], [(int(m.group(1)),)])
        if low == "select * from typed":
            return query_plan(TYPED_COLUMNS, TYPED_ROWS)
        if m := re.fullmatch(r"select generate_series\(1, ?(\d+)\)", low):
            rows = [(i,) for i in range(1, int(m.group(1)) + 1)]
            return query_plan([ResultColumn("generate_series", T.BIGINT)], rows)
        if low == "select error" or low.startswith("select error "):
            position = statement.lower().index("error") + 1
            raise AdapterError(
                'column "error" does not exist', code="42703", position=position, hint="a hint"
            )
        if low == "select fail_midway":
            return Plan((), (ResultColumn("x", T.INTEGER),), self.fail_midway)
        if low == "select block":
            return Plan((), (ResultColumn("x", T.INTEGER),), self.block)
        if m := re.fullmatch(r"drop table if exists (\w+)", low):
            return Plan((), None, lambda _: self.dropped(m.group(1)))
        if low.startswith("insert into"):
            return command_plan(K.INSERTED, "INSERT 0 1")
        if m := re.fullmatch(r"copy \((.*)\) to stdout(?: with \(format (\w+)\))?", low):
            return Plan((), None, lambda _: self.copy(m.group(1), m.group(2) or "text"))
        if low.startswith("select $"):
            return self.echo_plan(s, param_types)
        raise AdapterError(f"the fake cannot run: {statement}", code="42601", position=1)

    def set_status(self, status: str) -> None:
        self.status = status

    def no_type_rows(self, params: Sequence[str | None]) -> ExecuteResponse:
        columns = self.plan("from pg_type", ()).columns
        assert columns is not None
        return rows_response(columns, [])

    def echo_plan(self, s: str, given: Sequence[ScalarType | None]) -> Plan:
        """`SELECT $1::int8, $2, ...`: each parameter back, typed by its cast,
        else by the type the client gave, else text."""
        items = [item.strip() for item in s[len("select ") :].split(",")]
        refs: list[tuple[int, ScalarType]] = []
        for item in items:
            m = re.fullmatch(r"\$(\d+)(?:::(\w+))?", item)
            if not m:
                raise AdapterError(f"the fake cannot run: {s}", code="42601", position=1)
            n = int(m.group(1)) - 1
            cast = TYPE_NAMES.get((m.group(2) or "").lower())
            refs.append((n, cast or (given[n] if n < len(given) and given[n] else T.TEXT)))
        count = max(n for n, _ in refs) + 1
        param_types = tuple(next((t for n, t in refs if n == i), T.TEXT) for i in range(count))
        columns = tuple(ResultColumn("?column?", t) for _, t in refs)

        def run(params: Sequence[str | None]) -> ExecuteResponse:
            if len(params) != count:
                raise AdapterError(f"expected {count} parameters, got {len(params)}", code="08P01")
            row = tuple(parse_value(params[n], t) for n, t in refs)
            return rows_response(columns, [row])

        return Plan(param_types, columns, run)

    def fail_midway(self, params: Sequence[str | None]) -> ExecuteResponse:
        def rows() -> Iterator[tuple[Any, ...]]:
            yield (1,)
            raise AdapterError("division by zero", code="22012")

        return rows_response([ResultColumn("x", T.INTEGER)], rows())

    def wait_for_cancel(self) -> None:
        self.blocking.set()
        try:
            if not self.canceled.wait(BLOCK_LIMIT):
                raise AdapterError("the fake's blocking statement was never canceled")
        finally:
            self.blocking.clear()
        raise QueryCanceled("canceling statement due to user request")

    def block(self, params: Sequence[str | None]) -> ExecuteResponse:
        self.wait_for_cancel()
        raise AssertionError("unreachable")

    def dropped(self, name: str) -> ExecuteResponse:
        notice = AdapterNotice(f'table "{name}" does not exist, skipping')
        return ExecuteResponse(K.DROPPED, "DROP TABLE", notices=[notice])

    def copy(self, query: str, copy_format: str) -> ExecuteResponse:
        if query.startswith("subscribe"):
            return ExecuteResponse(
                K.COPY_TO, "COPY", SUBSCRIBE_COLUMNS, self.subscribe_rows(), copy_format
            )
        plan = self.plan(query, ())
        response = plan.run(())
        return ExecuteResponse(K.COPY_TO, "COPY", response.columns, response.rows, copy_format)

    def subscribe_rows(self) -> Iterator[tuple[Any, ...]]:
        """Three updates, then nothing until canceled (like a SUBSCRIBE)."""
        for i in range(3):
            yield (decimal.Decimal(1000 + i), 1, f"row {i}")
        self.wait_for_cancel()


def split(sql: str) -> list[str]:
    """Statements of a query string (the fake's SQL never has `;` in literals)."""
    return [part.strip() for part in sql.split(";") if part.strip()]


class FakeClient:
    """The adapter `Client` interface over `FakeSession`s."""

    def __init__(
        self,
        passwords: Mapping[str, str] | None = None,
        databases: Sequence[str] = ("materialize",),
    ) -> None:
        self.passwords = dict(passwords or {})
        self.databases = set(databases)
        self.sessions: dict[int, FakeSession] = {}
        self.log: list[tuple[str, str]] = []
        self.startups: list[dict[str, Any]] = []
        self.cancel_requests: list[tuple[int, int]] = []
        self.ids = itertools.count(1)

    def password_required(self, user: str, loopback: bool) -> bool:
        return user in self.passwords

    def scram_verifier(self, user: str) -> str | None:
        password = self.passwords.get(user)
        return None if password is None else make_verifier(password)

    def startup(
        self,
        user: str,
        database: str,
        password: str | None = None,
        options: Mapping[str, str] = {},
        loopback: bool = True,
        authenticated: bool = False,
    ) -> FakeSession:
        self.startups.append(
            {"user": user, "database": database, "options": dict(options), "loopback": loopback}
        )
        if user in self.passwords and password != self.passwords[user] and not authenticated:
            raise InvalidPassword(f'password authentication failed for user "{user}"')
        if database not in self.databases:
            raise AdapterError(f'database "{database}" does not exist', code="3D000")
        session = FakeSession(self, next(self.ids), options)
        self.sessions[session.session_id] = session
        return session

    def cancel_request(self, session_id: int, secret_key: int) -> None:
        self.cancel_requests.append((session_id, secret_key))
        session = self.sessions.get(session_id)
        if session is not None and session.startup_response.secret_key == secret_key:
            session.cancel()

    def statements(self) -> list[str]:
        """Every statement executed so far (not the describes)."""
        return [sql for kind, sql in self.log if kind == "execute"]

    def only_session(self, timeout: float = 10.0) -> FakeSession:
        """The one live session (waiting for a connection to finish startup)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.sessions) == 1:
                return next(iter(self.sessions.values()))
            time.sleep(0.02)
        raise AssertionError(f"expected one session, have {len(self.sessions)}")


@contextlib.contextmanager
def running_server(client: FakeClient) -> Iterator[PgwireServer]:
    """A PgwireServer over `client` on a free loopback port."""
    server = PgwireServer(client, host="127.0.0.1", port=0)
    server.start()
    try:
        yield server
    finally:
        server.shutdown()
