"""The whole front door against a real coordinator: pgwire (psql, psycopg,
pg8000, SQLAlchemy) and HTTP on 127.0.0.1, plus `tidemark serve` as a
process."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config
from tests.fixtures.served import dsn, served

pytestmark = pytest.mark.spark


@pytest.fixture
def environment(tmp_path: Path, spark: Any) -> Iterator[Environment]:
    config = fast_config(tmp_path / "env")  # no users: loopback is trusted
    env = Environment(config, pgwire_port=0, http_port=0, spark=spark)
    env.start()
    try:
        yield env
    finally:
        env.stop()


def test_psycopg_simple_extended_and_errors(environment: Environment) -> None:
    with psycopg.connect(dsn(environment), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id bigint NOT NULL, name text, price numeric)")
        conn.execute("INSERT INTO t VALUES (%s, %s, %s)", (1, "a", "1.50"))
        conn.execute("INSERT INTO t VALUES (%s, %s, %s)", (2, None, None))
        conn.execute("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n FROM t")
        rows = conn.execute("SELECT id, name, price FROM t WHERE id = %s", (1,)).fetchall()
        # numeric prints without trailing zeros, as Materialize prints it
        assert [(r[0], r[1], str(r[2])) for r in rows] == [(1, "a", "1.5")]
        assert conn.execute("SELECT n FROM mv").fetchone() == (2,)
        with conn.cursor(binary=True) as cur:
            cur.execute("SELECT id FROM t ORDER BY id")
            assert cur.fetchall() == [(1,), (2,)]
        with pytest.raises(psycopg.errors.SyntaxError) as syntax:
            conn.execute("SELECT FROM WHERE")
        assert syntax.value.diag.sqlstate == "42601"
        assert syntax.value.diag.statement_position is not None
        with pytest.raises(psycopg.errors.UndefinedTable) as unknown:
            conn.execute("SELECT * FROM nope")
        assert unknown.value.diag.sqlstate == "42P01"
        with pytest.raises(psycopg.Error) as early:
            conn.execute("SELECT * FROM t AS OF 1")
        assert "Timestamp (1) is not valid for all inputs" in str(early.value)
        assert early.value.diag.sqlstate == "72000"  # snapshot_too_old, not XX000
        # The connection (and server) stay usable after every error.
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_psycopg_cancel(environment: Environment) -> None:
    with psycopg.connect(dsn(environment), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (a int)")
        far = int(time.time() * 1000) + 3_600_000
        threading.Timer(0.5, conn.cancel_safe).start()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute(f"SELECT * FROM t AS OF {far}")
        assert conn.execute("SELECT 2").fetchone() == (2,)


@pytest.fixture
def password_environment(tmp_path: Path) -> Iterator[Environment]:
    """A configured user: every connection gives a password (tests/server/test_auth.py)."""
    config = fast_config(tmp_path / "env", users={"alice": "s3cret"})
    env = Environment(config, pgwire_port=0, http_port=0)
    env.start()
    try:
        yield env
    finally:
        env.stop()


def test_password_authentication(password_environment: Environment) -> None:
    environment = password_environment
    with pytest.raises(psycopg.OperationalError) as wrong:
        psycopg.connect(dsn(environment, "alice", "nope"))
    assert 'password authentication failed for user "alice"' in str(wrong.value)
    # libpq keeps a startup failure's SQLSTATE to itself; pg8000 reports the
    # ErrorResponse's fields.
    import pg8000.exceptions
    import pg8000.native

    with pytest.raises(pg8000.exceptions.DatabaseError) as refused:
        pg8000.native.Connection(
            "alice", host="127.0.0.1", port=environment.pgwire.port, password="nope"
        )
    fields = refused.value.args[0]
    assert (fields["C"], fields["S"]) == ("28P01", "FATAL")
    with psycopg.connect(dsn(environment, "alice", "s3cret"), autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("alice",)


def test_psql_and_copy_subscribe(environment: Environment) -> None:
    def psql(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                "psql",
                "-h",
                "127.0.0.1",
                "-p",
                str(environment.pgwire.port),
                "-U",
                "materialize",
                "-d",
                "materialize",
                "-X",
                "-A",
                "-t",
                "-c",
                command,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=os.environ | {"PGCONNECT_TIMEOUT": "10"},
        )

    assert psql("CREATE TABLE t (a int)").returncode == 0
    assert psql("INSERT INTO t VALUES (7), (8)").returncode == 0
    result = psql("SELECT a FROM t ORDER BY a")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["7", "8"]
    error = psql("SELECT * FROM missing")
    assert error.returncode != 0 and "unknown catalog item 'missing'" in error.stderr
    explained = psql("EXPLAIN TIMESTAMP AS JSON FOR SELECT * FROM t")
    import json

    now = json.loads(explained.stdout)["determination"]["timestamp"]
    copied = psql(f"COPY (SUBSCRIBE t AS OF {now} UP TO {now + 1}) TO STDOUT")
    assert copied.returncode == 0, copied.stderr
    lines = sorted(copied.stdout.strip().splitlines())
    assert [line.split("\t")[1:] for line in lines] == [["1", "7"], ["1", "8"]]


def test_pg8000_and_sqlalchemy(environment: Environment) -> None:
    import pg8000.native
    import sqlalchemy

    conn = pg8000.native.Connection(
        "materialize", host="127.0.0.1", port=environment.pgwire.port, database="materialize"
    )
    conn.run("CREATE TABLE t (a int, b text)")
    conn.run("INSERT INTO t VALUES (:a, :b)", a=1, b="x")
    assert conn.run("SELECT a, b FROM t WHERE a = :a", a=1) == [[1, "x"]]
    conn.close()
    # Default options: psycopg's dialect looks up hstore in pg_type with
    # to_regtype / ::regtype when it connects.
    for driver in ("pg8000", "psycopg"):
        engine = sqlalchemy.create_engine(
            f"postgresql+{driver}://materialize@127.0.0.1:{environment.pgwire.port}/materialize"
        )
        with engine.connect() as connection:
            rows = connection.execute(sqlalchemy.text("SELECT a, b FROM t")).fetchall()
            assert [tuple(r) for r in rows] == [(1, "x")]
        engine.dispose()


@pytest.fixture
def local_environment(tmp_path: Path) -> Iterator[Environment]:
    """An environment whose Spark starts only if a statement needs it."""
    with served(tmp_path / "env") as env:
        yield env


def test_sqlalchemy_default_psycopg_dialect(local_environment: Environment) -> None:
    """create_engine("postgresql+psycopg://...") with no options: on connect
    the dialect asks pg_type for hstore (none here), then Core statements
    with bound parameters round-trip."""
    import sqlalchemy

    port = local_environment.pgwire.port
    engine = sqlalchemy.create_engine(
        f"postgresql+psycopg://materialize@127.0.0.1:{port}/materialize"
    )
    try:
        metadata = sqlalchemy.MetaData()
        t = sqlalchemy.Table(
            "t",
            metadata,
            sqlalchemy.Column("a", sqlalchemy.Integer, nullable=False),
            sqlalchemy.Column("b", sqlalchemy.Text),
        )
        with engine.connect() as connection:
            assert engine.dialect.use_native_hstore
            assert engine.dialect._has_native_hstore is False  # looked up, not there
        # DDL cannot run inside a transaction block (as in Materialize). An
        # engine of its own: SQLAlchemy would reset a pooled connection to
        # the default level it read, "strict serializable", which it refuses.
        ddl = sqlalchemy.create_engine(engine.url, isolation_level="AUTOCOMMIT")
        with ddl.connect() as connection:
            connection.execute(sqlalchemy.text("CREATE TABLE t (a int NOT NULL, b text)"))
        ddl.dispose()
        with engine.connect() as connection:
            connection.execute(t.insert(), [{"a": 1, "b": "x"}, {"a": 2, "b": None}])
            connection.commit()
            rows = connection.execute(sqlalchemy.select(t).where(t.c.a >= 1).order_by(t.c.a))
            assert [tuple(r) for r in rows] == [(1, "x"), (2, None)]
            looked_up = connection.execute(
                sqlalchemy.text(
                    "SELECT typname, oid::regtype::text FROM pg_catalog.pg_type "
                    "WHERE oid = to_regtype(:name)"
                ),
                {"name": "integer"},
            ).fetchall()
            assert [tuple(r) for r in looked_up] == [("int4", "integer")]
    finally:
        engine.dispose()


def test_http_api_against_the_coordinator(environment: Environment) -> None:
    url = f"http://127.0.0.1:{environment.http.port}"
    body = {"query": "CREATE TABLE h (a int); INSERT INTO h VALUES (1), (2); SELECT sum(a) FROM h"}
    results = requests.post(f"{url}/api/sql", json=body, timeout=60).json()["results"]
    assert results[0]["ok"] == "CREATE TABLE"
    assert results[1]["ok"] == "INSERT 0 2"
    assert results[2]["rows"] == [["3"]] or results[2]["rows"] == [[3]]
    extended = {"queries": [{"query": "SELECT a FROM h WHERE a = $1", "params": ["2"]}]}
    results = requests.post(f"{url}/api/sql", json=extended, timeout=60).json()["results"]
    assert results[0]["rows"] == [[2]]
    error = requests.post(f"{url}/api/sql", json={"query": "SELECT * FROM nope"}, timeout=60)
    assert error.json()["results"][0]["error"]["code"] == "42P01"
    assert requests.get(f"{url}/api/health", timeout=10).status_code == 200
    metrics = requests.get(f"{url}/metrics", timeout=10).text
    assert "tidemark_statements_total" in metrics


# -------------------------------------------- strict serializability, 2 processes
def _writer(port: int, count: int, seed: int, acks: multiprocessing.Queue) -> None:
    rng = random.Random(seed)
    with psycopg.connect(
        f"host=127.0.0.1 port={port} user=materialize dbname=materialize", autocommit=True
    ) as conn:
        for value in range(1, count + 1):
            conn.execute("INSERT INTO t VALUES (%s)", (value,))
            acks.put((value, time.time()))
            time.sleep(rng.random() * 0.05)
    acks.put(None)


def _reader(port: int, seed: int, relation: str, reads: multiprocessing.Queue) -> None:
    rng = random.Random(seed)
    with psycopg.connect(
        f"host=127.0.0.1 port={port} user=materialize dbname=materialize", autocommit=True
    ) as conn:
        deadline = time.time() + 8
        while time.time() < deadline:
            began = time.time()
            (seen,) = conn.execute(f"SELECT coalesce(max(a), 0) FROM {relation}").fetchone()
            reads.put((began, seen))
            time.sleep(rng.random() * 0.03)
    reads.put(None)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_strict_serializable_reads_see_every_acknowledged_write(
    environment: Environment, seed: int
) -> None:
    """A writer process and two reader processes (the table, and a
    materialized view over it) with random pauses: a read that began after a
    write was acknowledged always sees it (invariant 8)."""
    with psycopg.connect(dsn(environment), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (a int)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT max(a) AS a FROM t")
    ctx = multiprocessing.get_context("spawn")
    acks, reads = ctx.Queue(), ctx.Queue()
    port = environment.pgwire.port
    procs = [
        ctx.Process(target=_writer, args=(port, 40, seed, acks)),
        ctx.Process(target=_reader, args=(port, seed + 10, "t", reads)),
        ctx.Process(target=_reader, args=(port, seed + 20, "m", reads)),
    ]
    for proc in procs:
        proc.start()
    acked: list[tuple[int, float]] = []
    while (item := acks.get(timeout=120)) is not None:
        acked.append(item)
    observed: list[tuple[float, int]] = []
    done = 0
    while done < 2:
        item = reads.get(timeout=120)
        if item is None:
            done += 1
        else:
            observed.append(item)
    for proc in procs:
        proc.join(timeout=30)
    assert len(acked) == 40 and len(observed) > 20
    for began, seen in observed:
        must_see = max((v for v, at in acked if at < began), default=0)
        assert seen >= must_see, f"read at {began} saw {seen}, but {must_see} was acknowledged"


# ------------------------------------------------------------ tidemark serve
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_tidemark_serve_runs_until_stopped(tmp_path: Path) -> None:
    pg_port, http_port = _free_port(), _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coordinator_lib.cli",
            "serve",
            "--data-dir",
            str(tmp_path / "d"),
            "--pgwire-port",
            str(pg_port),
            "--http-port",
            str(http_port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 120
        while True:
            try:
                conn = psycopg.connect(
                    f"host=127.0.0.1 port={pg_port} user=materialize dbname=materialize",
                    autocommit=True,
                    connect_timeout=5,
                )
                break
            except psycopg.OperationalError:
                if time.time() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.5)
        with conn:
            conn.execute("CREATE TABLE t (a int)")
            conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n FROM t")
            assert conn.execute("SELECT n FROM mv").fetchone() == (1,)
        health = requests.get(f"http://127.0.0.1:{http_port}/api/health", timeout=10)
        assert health.status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output


def test_notices_carry_their_sqlstate(local_environment: Environment) -> None:
    notices: list[tuple[str | None, str | None, str | None]] = []

    def keep(diag: psycopg.errors.Diagnostic) -> None:  # valid only during the call
        notices.append((diag.sqlstate, diag.severity_nonlocalized, diag.message_primary))

    with psycopg.connect(dsn(local_environment), autocommit=True) as conn:
        conn.add_notice_handler(keep)
        conn.execute("CREATE TABLE t (a int)")
        conn.execute("CREATE TABLE IF NOT EXISTS t (a int)")
        conn.execute("SET LOCAL statement_timeout = 5")  # outside a transaction: a warning
    assert notices == [
        ("42P07", "NOTICE", "catalog item 'materialize.public.t' already exists, skipping"),
        ("25P01", "WARNING", "SET LOCAL can only be used in transaction blocks"),
    ]


def test_serve_maintains_views_without_reads(local_environment: Environment) -> None:
    """`tidemark serve`'s maintenance loop steps a materialized view as its
    input advances, with nobody reading it: only the frontiers relation is
    read (a read of the view itself would step it)."""
    query = (
        "SELECT f.write_frontier FROM mz_internal.mz_frontiers f "
        "JOIN mz_materialized_views v ON f.object_id = v.id WHERE v.name = 'mv'"
    )
    with psycopg.connect(dsn(local_environment), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (a int)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n FROM t")
        ((first,),) = conn.execute(query).fetchall()
        uppers = [first]
        deadline = time.monotonic() + 30
        while len(set(uppers)) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
            uppers.append(conn.execute(query).fetchone()[0])
    assert uppers == sorted(uppers)  # never back
    assert len(set(uppers)) >= 4, uppers  # it kept moving, unread


def test_array_agg_over_pgwire_and_http(local_environment: Environment) -> None:
    """array_agg's arrays reach psycopg as Python lists (text and binary
    results, int4[] and text[] OIDs, text elements quoted as PostgreSQL
    does), from a query and a materialized view, and HTTP as JSON arrays."""
    with psycopg.connect(dsn(local_environment), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (k int, v int, s text)")
        conn.execute(
            "INSERT INTO t VALUES (1, 3, 'b c'), (1, NULL, NULL), (1, 1, ''), (2, 5, 'NULL')"
        )
        query = (
            "SELECT k, array_agg(v ORDER BY v DESC NULLS LAST) AS vs,"
            " array_agg(s ORDER BY v NULLS FIRST) AS ss FROM t GROUP BY k ORDER BY k"
        )
        want = [(1, [3, 1, None], [None, "", "b c"]), (2, [5], ["NULL"])]
        cursor = conn.execute(query)
        assert cursor.fetchall() == want
        assert cursor.description is not None
        assert [d.type_code for d in cursor.description] == [23, 1007, 1009]
        assert conn.cursor(binary=True).execute(query).fetchall() == want
        text = conn.execute(
            "SELECT array_agg(s ORDER BY v NULLS FIRST)::text FROM t WHERE k = 1"
        ).fetchall()
        assert text == [('{NULL,"","b c"}',)]
        conn.execute(
            "CREATE MATERIALIZED VIEW mv AS"
            " SELECT k, array_agg(v ORDER BY v) AS vs FROM t GROUP BY k"
        )
        conn.execute("INSERT INTO t VALUES (2, 4, 'x')")
        rows = conn.execute("SELECT k, vs FROM mv ORDER BY k").fetchall()
        assert rows == [(1, [1, 3, None]), (2, [4, 5])]
    url = f"http://127.0.0.1:{local_environment.http.port}/api/sql"
    response = requests.post(url, json={"query": "SELECT vs FROM mv WHERE k = 1"}, timeout=30)
    response.raise_for_status()
    assert response.json()["results"][0]["rows"] == [[[1, 3, None]]]
