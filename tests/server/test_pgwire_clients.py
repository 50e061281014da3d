"""Other real clients against the pgwire server: pg8000 (native and DB-API),
the psql binary and SQLAlchemy 2 over psycopg and pg8000. The SQLAlchemy
tests also pin the statements those clients send by themselves on connect,
which the real coordinator has to answer."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import os
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import pg8000.dbapi
import pg8000.native
import pytest
import sqlalchemy as sa

from coordinator_lib.server.pgwire import PgwireServer
from tests.server.fake_client import TYPED_ROWS, FakeClient, running_server

pytestmark = pytest.mark.timeout(60)

PSQL = "/usr/bin/psql"
# What pg8000 makes of TYPED_ROWS (jsonb parsed, lists for rows).
EXPECTED_TYPED = [
    [{"a": [1, 2], "b": None} if i == 12 else v for i, v in enumerate(TYPED_ROWS[0])],
    list(TYPED_ROWS[1]),
]


@pytest.fixture
def client() -> FakeClient:
    return FakeClient(passwords={"alice": "s3cret"})


@pytest.fixture
def server(client: FakeClient) -> Iterator[PgwireServer]:
    with running_server(client) as server:
        yield server


# -- pg8000 -------------------------------------------------------------------


def native(server: PgwireServer, user: str = "materialize", **kwargs: Any):
    return pg8000.native.Connection(
        user, host="127.0.0.1", port=server.port, database="materialize", timeout=10, **kwargs
    )


def test_pg8000_native(server: PgwireServer, client: FakeClient) -> None:
    con = native(server)
    try:
        assert con.run("SELECT * FROM typed") == EXPECTED_TYPED  # simple protocol
        assert con.columns is not None and con.columns[11]["type_oid"] == 1184
        row = con.run("SELECT :a::int8, :b, :c::numeric", a=5, b="x", c=decimal.Decimal("1.50"))
        assert row == [[5, "x", decimal.Decimal("1.50")]]
        when = dt.datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=dt.UTC)
        assert con.run("SELECT :t::timestamptz", t=when) == [[when]]
        statement = con.prepare("SELECT :v::int4")
        assert [statement.run(v=i) for i in range(3)] == [[[0]], [[1]], [[2]]]
        statement.close()
        con.run("DROP TABLE IF EXISTS nope")
        assert con.notices[-1][b"M"] == b'table "nope" does not exist, skipping'
        stream = io.BytesIO()
        con.run("COPY (SELECT generate_series(1, 3)) TO STDOUT", stream=stream)
        assert stream.getvalue() == b"1\n2\n3\n"
    finally:
        con.close()
    assert ("describe", "SELECT $1::int4") in client.log


def test_pg8000_native_errors(server: PgwireServer) -> None:
    con = native(server)
    try:
        for params in ({}, {"x": 1}):  # simple, then extended protocol
            with pytest.raises(pg8000.native.DatabaseError) as info:
                con.run("SELECT error" + (" :x" if params else ""), **params)
            fields = info.value.args[0]
            assert (fields["C"], fields["P"], fields["H"]) == ("42703", "8", "a hint")
            assert con.run("SELECT 1") == [[1]]
    finally:
        con.close()


def test_pg8000_password(server: PgwireServer, client: FakeClient) -> None:
    native(server, "alice", password="s3cret").close()
    with pytest.raises(pg8000.native.DatabaseError) as info:
        native(server, "alice", password="wrong")
    assert info.value.args[0]["C"] == "28P01"
    assert info.value.args[0]["S"] == "FATAL"


def test_pg8000_dbapi(server: PgwireServer, client: FakeClient) -> None:
    conn = pg8000.dbapi.connect(
        user="materialize", host="127.0.0.1", port=server.port, database="materialize", timeout=10
    )
    try:
        cursor = conn.cursor()
        cursor.execute("SELECT %s::int8, %s", (5, "x"))
        assert cursor.fetchall() == ([5, "x"],)
        assert cursor.description[0][0] == "?column?"
        conn.commit()
        with pytest.raises(pg8000.dbapi.DatabaseError) as info:
            cursor.execute("SELECT error")
        assert info.value.args[0]["C"] == "42703"
        conn.rollback()
    finally:
        conn.close()
    assert client.statements()[:3] == ["begin transaction", "SELECT $1::int8, $2", "commit"]
    assert client.statements()[-1] == "rollback"


# -- psql ---------------------------------------------------------------------


def psql_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    return env | {"PGCONNECT_TIMEOUT": "10"} | extra


def psql_args(server: PgwireServer, *args: str, user: str = "materialize") -> list[str]:
    port = str(server.port)
    return [PSQL, "-X", "-h", "127.0.0.1", "-p", port, "-U", user, "-d", "materialize", *args]


def psql(
    server: PgwireServer, *args: str, user: str = "materialize", **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        psql_args(server, *args, user=user),
        capture_output=True,
        text=True,
        timeout=30,
        env=psql_env(**env),
        check=False,
    )


def test_psql_queries(server: PgwireServer, client: FakeClient) -> None:
    result = psql(server, "-A", "-t", "-c", "SELECT 1")
    assert (result.returncode, result.stdout, result.stderr) == (0, "1\n", "")
    result = psql(server, "-A", "-t", "-c", "SELECT 1; SELECT 2")
    assert result.stdout == "1\n2\n"
    result = psql(server, "-A", "-F", "|", "-c", "SELECT generate_series(1, 2)")
    assert result.stdout == "generate_series\n1\n2\n(2 rows)\n"
    startup = client.startups[-1]
    assert startup["user"] == "materialize" and startup["options"]["application_name"] == "psql"


def test_psql_error_and_notice(server: PgwireServer) -> None:
    result = psql(server, "-v", "ON_ERROR_STOP=1", "-c", "SELECT error")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        'ERROR:  column "error" does not exist',
        "LINE 1: SELECT error",
        "               ^",
        "HINT:  a hint",
    ]
    result = psql(server, "-c", "DROP TABLE IF EXISTS nope")
    assert result.stderr == 'NOTICE:  table "nope" does not exist, skipping\n'
    assert result.stdout == "DROP TABLE\n"


def test_psql_copy_to_stdout(server: PgwireServer) -> None:
    result = psql(server, "-c", "COPY (SELECT * FROM typed) TO STDOUT")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split("\t") == [
        "t",
        "-2",
        "40000",
        "1099511627776",
        "1.5",
        "0.1",
        "-12345.6789",  # numeric prints without trailing zeros, as in Materialize
        'tab\\there "q", back\\\\slash\\nnewline',
        "\\\\x00ff6162",
        "2024-02-29",
        "2024-02-29 12:34:56.789",
        "2024-02-29 12:34:56+00",
        '{"a": [1, 2], "b": null}',
    ]
    assert lines[1] == "\t".join(["\\N"] * 13)
    csv = psql(server, "-c", "COPY (SELECT generate_series(1, 2)) TO STDOUT WITH (FORMAT csv)")
    assert csv.stdout == "1\n2\n"


def test_psql_password(server: PgwireServer) -> None:
    result = psql(server, "-A", "-t", "-c", "SELECT 7", user="alice", PGPASSWORD="s3cret")
    assert (result.returncode, result.stdout) == (0, "7\n")
    result = psql(server, "-c", "SELECT 7", user="alice", PGPASSWORD="wrong")
    assert result.returncode == 2
    assert 'FATAL:  password authentication failed for user "alice"' in result.stderr


def test_psql_ctrl_c_cancels(server: PgwireServer, client: FakeClient) -> None:
    """psql's Ctrl-C sends a CancelRequest with libpq's PQcancel."""
    process = subprocess.Popen(
        psql_args(server, "-c", "SELECT block"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=psql_env(),
    )
    try:
        session = client.only_session()
        assert session.blocking.wait(10)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
    assert "ERROR:  canceling statement due to user request" in stderr
    assert process.returncode == 1


# -- SQLAlchemy ---------------------------------------------------------------

# What SQLAlchemy's PostgreSQL dialect runs when it first connects, besides
# the BEGIN / ROLLBACK around it. psycopg also looks up the hstore type inside
# a savepoint (TypeInfo.fetch), which needs SAVEPOINT / RELEASE.
SQLALCHEMY_STARTUP = [
    "select pg_catalog.version()",
    "select current_schema()",
    "show transaction isolation level",
    "show standard_conforming_strings",
]
PSYCOPG_TYPE_QUERY = """SELECT
    typname AS name, oid, typarray AS array_oid,
    oid::regtype::text AS regtype, typdelim AS delimiter
FROM pg_type t
WHERE t.oid = to_regtype($1)
ORDER BY t.oid"""


@pytest.mark.parametrize("driver", ["psycopg", "pg8000"])
def test_sqlalchemy(server: PgwireServer, client: FakeClient, driver: str) -> None:
    connect_args = {"connect_timeout": 10} if driver == "psycopg" else {"timeout": 10}
    url = f"postgresql+{driver}://materialize@127.0.0.1:{server.port}/materialize"
    engine = sa.create_engine(url, connect_args=connect_args)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
            assert conn.execute(sa.text("SELECT :x"), {"x": "hi"}).scalar() == "hi"
            rows = conn.execute(sa.text("SELECT generate_series(1, 3)")).all()
            assert [r[0] for r in rows] == [1, 2, 3]
        assert engine.dialect.server_version_info == (9, 5, 0)
    finally:
        engine.dispose()
    statements = client.statements()
    if driver == "psycopg":
        assert statements[:8] == [
            "BEGIN",
            *SQLALCHEMY_STARTUP,
            'SAVEPOINT "_pg3_1"',
            PSYCOPG_TYPE_QUERY,
            'RELEASE "_pg3_1"',
        ]
        assert statements[8:10] == ["ROLLBACK", "BEGIN"]
    else:
        assert statements[:6] == ["begin transaction", *SQLALCHEMY_STARTUP, "rollback"]
        assert statements[6] == "begin transaction"
    assert statements[-1].lower() == "rollback"
