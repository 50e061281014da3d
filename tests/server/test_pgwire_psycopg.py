"""psycopg 3 (libpq underneath) against the pgwire server over real sockets:
simple and extended queries, text and binary parameters and results, errors,
notices, transactions, cancel, COPY, authentication, shutdown."""

from __future__ import annotations

import datetime as dt
import decimal
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors

from coordinator_lib.server.pgwire import PgwireServer
from tests.server.fake_client import TYPED_COLUMNS, TYPED_ROWS, FakeClient, running_server

pytestmark = pytest.mark.timeout(60)

# What psycopg makes of TYPED_ROWS (jsonb parsed, the rest as the fake sends it).
EXPECTED_TYPED = [
    tuple({"a": [1, 2], "b": None} if i == 12 else v for i, v in enumerate(TYPED_ROWS[0])),
    TYPED_ROWS[1],
]
TYPE_OIDS = [16, 21, 23, 20, 700, 701, 1700, 25, 17, 1082, 1114, 1184, 3802]


@pytest.fixture
def client() -> FakeClient:
    return FakeClient(passwords={"alice": "s3cret"})


@pytest.fixture
def server(client: FakeClient) -> Iterator[PgwireServer]:
    with running_server(client) as server:
        yield server


def connect(server: PgwireServer, **kwargs: Any) -> psycopg.Connection[Any]:
    params: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": server.port,
        "user": "materialize",
        "dbname": "materialize",
        "connect_timeout": 10,
        "autocommit": True,
    }
    return psycopg.connect(**(params | kwargs))


@pytest.fixture
def conn(server: PgwireServer) -> Iterator[psycopg.Connection[Any]]:
    with connect(server) as conn:
        yield conn


def test_simple_query_all_types(conn: psycopg.Connection[Any], client: FakeClient) -> None:
    cursor = conn.execute("SELECT * FROM typed")
    assert cursor.fetchall() == EXPECTED_TYPED
    assert cursor.description is not None
    assert [d.name for d in cursor.description] == [c.name for c in TYPED_COLUMNS]
    assert [d.type_code for d in cursor.description] == TYPE_OIDS
    assert ("describe", "SELECT * FROM typed") not in client.log  # simple protocol
    assert conn.info.parameter_status("server_version") == "9.5.0"


def test_several_statements_in_one_query(conn: psycopg.Connection[Any]) -> None:
    cursor = conn.execute("SELECT 1; SELECT 2")
    assert cursor.fetchall() == [(1,)]
    assert cursor.nextset()
    assert cursor.fetchall() == [(2,)]


def test_binary_results(conn: psycopg.Connection[Any], client: FakeClient) -> None:
    cursor = conn.cursor(binary=True)
    assert cursor.execute("SELECT * FROM typed").fetchall() == EXPECTED_TYPED
    assert cursor.pgresult is not None and cursor.pgresult.fformat(0) == 1
    assert ("describe", "SELECT * FROM typed") in client.log  # extended protocol


def test_text_and_binary_params(conn: psycopg.Connection[Any]) -> None:
    values = [
        5,
        2**40,
        -1.25,
        decimal.Decimal("-12.340"),
        "héllo",
        b"\x00\x01",
        True,
        dt.date(2024, 1, 2),
        dt.datetime(2024, 1, 2, 3, 4, 5, 600000),
        dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
    ]
    casts = ["int8", "int8", "float8", "numeric", "text", "bytea", "bool", "date"]
    casts += ["timestamp", "timestamptz"]
    for placeholder in ("%s", "%b"):
        sql = "SELECT " + ", ".join(f"{placeholder}::{c}" for c in casts)
        for binary in (False, True):
            row = conn.cursor(binary=binary).execute(sql, values).fetchone()
            assert row == tuple(values), (placeholder, binary)
    assert conn.execute("SELECT %s, %b", [None, None]).fetchone() == (None, None)


def test_prepared_statements(conn: psycopg.Connection[Any], client: FakeClient) -> None:
    for i in range(3):
        assert conn.execute("SELECT %s::int4", [i], prepare=True).fetchone() == (i,)
    describes = [sql for kind, sql in client.log if kind == "describe"]
    assert describes == ["SELECT $1::int4"]


def test_deallocate(server: PgwireServer, client: FakeClient) -> None:
    """DEALLOCATE drops this connection's prepared statements; psycopg sends
    DEALLOCATE ALL itself when it rolls back a transaction it prepared in."""
    from psycopg.pq import DiagnosticField, ExecStatus

    with connect(server, autocommit=False) as conn:
        assert conn.execute("SELECT %s::int4", [1], prepare=True).fetchone() == (1,)
        conn.rollback()  # psycopg: DEALLOCATE ALL
        assert conn.execute("SELECT %s::int4", [2], prepare=True).fetchone() == (2,)
        conn.commit()
        pgconn = conn.pgconn
        assert pgconn.prepare(b"mine", b"SELECT 1").status == ExecStatus.COMMAND_OK
        assert pgconn.prepare(b"other", b"SELECT 1").status == ExecStatus.COMMAND_OK
        dropped = pgconn.exec_(b"DEALLOCATE mine")
        assert (dropped.status, dropped.command_status) == (ExecStatus.COMMAND_OK, b"DEALLOCATE")
        for name in (b"mine", b"nope"):
            missing = pgconn.exec_(b"DEALLOCATE PREPARE " + name)
            assert missing.status == ExecStatus.FATAL_ERROR
            assert missing.error_field(DiagnosticField.SQLSTATE) == b"26000"
        assert pgconn.exec_prepared(b"other", []).status == ExecStatus.TUPLES_OK
        everything = pgconn.exec_(b"deallocate all;")
        assert (everything.status, everything.command_status) == (
            ExecStatus.COMMAND_OK,
            b"DEALLOCATE ALL",
        )
        assert pgconn.exec_prepared(b"other", []).status == ExecStatus.FATAL_ERROR


def test_errors_carry_sqlstate_position_and_hint(conn: psycopg.Connection[Any]) -> None:
    for params in (None, [1]):  # simple, then extended protocol
        sql = "SELECT error" if params is None else "SELECT error %s"
        with pytest.raises(errors.UndefinedColumn) as info:
            conn.execute(sql, params)
        assert info.value.sqlstate == "42703"
        assert info.value.diag.statement_position == "8"
        assert info.value.diag.message_primary == 'column "error" does not exist'
        assert info.value.diag.message_hint == "a hint"
        assert info.value.diag.severity_nonlocalized == "ERROR"
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(errors.DivisionByZero):
        conn.execute("SELECT fail_midway").fetchall()
    assert conn.execute("SELECT 2").fetchone() == (2,)


def test_notices(conn: psycopg.Connection[Any]) -> None:
    notices: list[tuple[str | None, str | None]] = []
    conn.add_notice_handler(lambda d: notices.append((d.severity, d.message_primary)))
    conn.execute("DROP TABLE IF EXISTS nope")
    assert notices == [("NOTICE", 'table "nope" does not exist, skipping')]


def test_transactions(server: PgwireServer, client: FakeClient) -> None:
    with connect(server, autocommit=False) as conn:
        status = psycopg.pq.TransactionStatus
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.info.transaction_status == status.INTRANS
        with pytest.raises(errors.UndefinedColumn):
            conn.execute("SELECT error")
        assert conn.info.transaction_status == status.INERROR
        with pytest.raises(errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
        assert conn.info.transaction_status == status.IDLE
        with conn.transaction():
            conn.execute("SELECT 3")
        assert conn.info.transaction_status == status.IDLE
    assert client.statements()[:2] == ["BEGIN", "SELECT 1"]
    assert "COMMIT" in client.statements()


def test_cancel(conn: psycopg.Connection[Any], client: FakeClient) -> None:
    """`cancel_safe` only: the legacy `cancel()` (PQcancel) blocks holding the
    GIL until the server answers, and the server runs in this process. psql's
    Ctrl-C test in test_pgwire_clients covers PQcancel."""
    session = client.only_session()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            conn.execute("SELECT block")
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert session.blocking.wait(10)
    conn.cancel_safe(timeout=10)
    thread.join(10)
    assert isinstance(outcome[0], errors.QueryCanceled)
    assert outcome[0].sqlstate == "57014"
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_copy_to_stdout(conn: psycopg.Connection[Any]) -> None:
    cursor = conn.cursor()
    with cursor.copy("COPY (SELECT * FROM typed) TO STDOUT") as copy:
        data = b"".join(bytes(chunk) for chunk in copy)
    assert data.split(b"\n")[0].split(b"\t")[:3] == [b"t", b"-2", b"40000"]
    assert data.endswith(b"\t".join([b"\\N"] * 13) + b"\n")
    assert cursor.rowcount == 2
    with cursor.copy("COPY (SELECT * FROM typed) TO STDOUT") as copy:
        copy.set_types([c.scalar_type.value for c in TYPED_COLUMNS])
        assert list(copy.rows()) == EXPECTED_TYPED
    with cursor.copy("COPY (SELECT * FROM typed) TO STDOUT WITH (FORMAT binary)") as copy:
        copy.set_types([c.scalar_type.value for c in TYPED_COLUMNS])
        assert list(copy.rows()) == EXPECTED_TYPED


def test_copy_subscribe_until_canceled(conn: psycopg.Connection[Any], client: FakeClient) -> None:
    session = client.only_session()
    received: list[tuple[Any, ...]] = []

    def cancel_when_blocked() -> None:
        if session.blocking.wait(10):
            conn.cancel_safe(timeout=10)

    canceler = threading.Thread(target=cancel_when_blocked)
    canceler.start()
    with (
        pytest.raises(errors.QueryCanceled),
        conn.cursor().copy("COPY (SUBSCRIBE t) TO STDOUT") as copy,
    ):
        copy.set_types(["numeric", "int8", "text"])
        for row in copy.rows():
            received.append(row)
    canceler.join(10)
    assert received == [(decimal.Decimal(1000 + i), 1, f"row {i}") for i in range(3)]
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_password_authentication(server: PgwireServer, client: FakeClient) -> None:
    with connect(server, user="alice", password="s3cret") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert client.startups[-1]["user"] == "alice"
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        connect(server, user="alice", password="wrong")
    with pytest.raises(psycopg.OperationalError, match="password"):
        connect(server, user="alice")  # no password at all


def test_startup_options_and_unknown_database(server: PgwireServer, client: FakeClient) -> None:
    with connect(server, options="-c cluster=quickstart", application_name="app"):
        pass
    options = client.startups[-1]["options"]
    assert options["cluster"] == "quickstart" and options["application_name"] == "app"
    with pytest.raises(psycopg.OperationalError, match='database "nope" does not exist'):
        connect(server, dbname="nope")


def test_shutdown_ends_idle_connections(client: FakeClient) -> None:
    with running_server(client) as server:
        conn = connect(server)
        server.shutdown()
        with pytest.raises(psycopg.OperationalError, match="administrator command"):
            conn.execute("SELECT 1")
        conn.close()
