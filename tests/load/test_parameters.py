"""`$n` parameters as loaders send them: psycopg writes `%s,%s,%s` as
`$1,$2,$3` (no spaces), which the tokenizer once read as a dollar-quoted
string ("unterminated quoted string or identifier"); executemany, multi-row
VALUES, pg8000, SQLAlchemy Core bulk insert and pandas `to_sql` (which
also asks pg_class whether the table exists, and creates it inside BEGIN)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pg8000.dbapi
import psycopg
import pytest
import sqlalchemy as sa

from coordinator_lib.server.environment import Environment
from tests.load.conftest import dsn, url

pytestmark = pytest.mark.timeout(120)


def exec_params(conn: psycopg.Connection, query: str, *params: str | None) -> list[tuple]:
    """Send `query` with server-side `$n` parameters as written (extended
    protocol, text values): psycopg's own API only takes `%s`."""
    values = [None if p is None else p.encode() for p in params]
    result = conn.pgconn.exec_params(query.encode(), values)
    if result.status not in (psycopg.pq.ExecStatus.COMMAND_OK, psycopg.pq.ExecStatus.TUPLES_OK):
        raise psycopg.errors.lookup(
            result.error_field(psycopg.pq.DiagnosticField.SQLSTATE).decode()
        )(result.error_message.decode())
    return [
        tuple(
            None if v is None else v.decode()
            for v in (result.get_value(r, c) for c in range(result.nfields))
        )
        for r in range(result.ntuples)
    ]


def rows_of(env: Environment, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn(env), autocommit=True) as conn:
        return conn.execute(query).fetchall()


def test_psycopg_execute_executemany_and_multirow_values(environment: Environment) -> None:
    with psycopg.connect(dsn(environment), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (a int, b bigint, c text)")
        conn.execute("INSERT INTO t VALUES (%s,%s,%s)", (1, 2, "x"))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO t VALUES (%s,%s,%s)", [(i, i * 10, f"r{i}") for i in (3, 4)]
            )
        conn.execute("INSERT INTO t VALUES (%s,%s,%s),(%s,%s,%s)", (5, 50, "$1", 6, 60, None))
        # a parameter next to an operator, a cast and in WHERE, without spaces
        exec_params(conn, "INSERT INTO t SELECT $1::int+1,$2,$3", "6", "70", "$$")
        got = conn.execute("SELECT a,b,c FROM t WHERE a>=%s ORDER BY a,b", (3,)).fetchall()
    assert got == [(3, 30, "r3"), (4, 40, "r4"), (5, 50, "$1"), (6, 60, None), (7, 70, "$$")]


def test_dollar_quotes_and_prepare(environment: Environment) -> None:
    with psycopg.connect(dsn(environment), autocommit=True) as conn:
        assert exec_params(conn, "SELECT $$a,$1$$,$t$x$$y$t$,$1", "p") == [("a,$1", "x$$y", "p")]
        conn.execute("CREATE TABLE p (a int, b text)")
        conn.execute("PREPARE ins AS INSERT INTO p VALUES ($1,$2),($1+1,$2)")
        conn.execute("EXECUTE ins (1, 'one')")
        assert conn.execute("SELECT a, b FROM p ORDER BY a").fetchall() == [(1, "one"), (2, "one")]
        with pytest.raises(psycopg.errors.SyntaxError) as junk:
            conn.execute("SELECT $1abc")
        assert "trailing junk after parameter" in str(junk.value)
        with pytest.raises(psycopg.errors.SyntaxError) as lone:
            conn.execute("SELECT $abc")
        assert 'syntax error at or near "$"' in str(lone.value)


def test_pg8000_executemany(environment: Environment) -> None:
    with psycopg.connect(dsn(environment), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (a int, b text)")
    con = pg8000.dbapi.connect(
        user="materialize", host="127.0.0.1", port=environment.pgwire.port, database="materialize"
    )
    try:
        cur = con.cursor()
        cur.executemany("INSERT INTO t VALUES (%s,%s)", [(1, "a"), (2, "b")])
        cur.execute("INSERT INTO t VALUES (%s,%s),(%s,%s)", (3, "c", 4, None))
        con.commit()
    finally:
        con.close()
    assert rows_of(environment, "SELECT a, b FROM t ORDER BY a") == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
        (4, None),
    ]


@pytest.mark.parametrize("driver", ["psycopg", "pg8000"])
def test_sqlalchemy_core_bulk_insert(environment: Environment, driver: str) -> None:
    with psycopg.connect(dsn(environment), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (a int NOT NULL, b text)")
    engine = sa.create_engine(url(environment, driver))
    table = sa.Table("t", sa.MetaData(), sa.Column("a", sa.Integer), sa.Column("b", sa.Text))
    try:
        with engine.begin() as connection:
            connection.execute(sa.insert(table), [{"a": i, "b": f"v{i}"} for i in range(50)])
    finally:
        engine.dispose()
    assert rows_of(environment, "SELECT count(*), sum(a), min(b), max(b) FROM t") == [
        (50, sum(range(50)), "v0", "v9")
    ]


@pytest.mark.parametrize("driver", ["psycopg", "pg8000"])
def test_pandas_to_sql(environment: Environment, driver: str) -> None:
    engine = sa.create_engine(url(environment, driver))
    frame = pd.DataFrame({"x": [1, 2, 3], "y": ["a", None, "c"], "z": [1.5, 2.5, -3.0]})
    try:
        frame.to_sql("frame", engine, index=False)  # has_table, then CREATE TABLE inside BEGIN
        frame.to_sql("frame", engine, index=False, if_exists="append")  # has_table: it exists
        with pytest.raises(ValueError, match="already exists"):
            frame.to_sql("frame", engine, index=False)  # if_exists="fail"
        back = pd.read_sql("SELECT x, y, z FROM frame ORDER BY x", engine)
    finally:
        engine.dispose()
    assert back.to_dict("records") == [
        {"x": 1, "y": "a", "z": 1.5},
        {"x": 1, "y": "a", "z": 1.5},
        {"x": 2, "y": None, "z": 2.5},
        {"x": 2, "y": None, "z": 2.5},
        {"x": 3, "y": "c", "z": -3.0},
        {"x": 3, "y": "c", "z": -3.0},
    ]


def test_any_and_all_of_an_array_literal(environment: Environment) -> None:
    """SQLAlchemy's has_table writes `relkind = ANY (ARRAY[...])`."""
    with psycopg.connect(dsn(environment), autocommit=True) as conn:
        got = conn.execute(
            "SELECT 2 = ANY (ARRAY[1, 2]), 3 = ANY (ARRAY[1, 2]), 3 = ANY (ARRAY[1, NULL]), "
            "%s = ANY (ARRAY['r', 'v'])",
            ("v",),
        ).fetchone()
    assert got == (True, False, None, True)


@pytest.mark.parametrize("driver", ["psycopg", "pg8000"])
def test_a_list_parameter_is_an_array_for_any_and_all(
    environment: Environment, driver: str
) -> None:
    """`WHERE id = ANY(%s)` with a Python list, as psycopg's and pg8000's
    docs write IN lists: the list arrives as an array (untyped text or an
    array OID) and is read as an array of the other side's type, in
    SELECT, `<> ALL` and DELETE (was 0A000 "= ANY (...) needs a subquery
    or an array", and `ALL(...)` 42883 "function all(unknown)")."""
    table = f"any_{driver}"
    with psycopg.connect(dsn(environment), autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id int, s text)")
        conn.execute(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'c'), (NULL, NULL)")
    if driver == "psycopg":
        conn_ = psycopg.connect(dsn(environment), autocommit=True)
    else:
        conn_ = pg8000.dbapi.connect(
            user="materialize",
            host="127.0.0.1",
            port=environment.pgwire.port,
            database="materialize",
        )
        conn_.autocommit = True
    try:
        cur = conn_.cursor()
        cur.execute(f"SELECT id FROM {table} WHERE id = ANY(%s) ORDER BY id", ([1, 3],))
        assert [tuple(r) for r in cur.fetchall()] == [(1,), (3,)]
        cur.execute(f"SELECT s FROM {table} WHERE s = ANY(%s) ORDER BY s", (["c", "x"],))
        assert [tuple(r) for r in cur.fetchall()] == [("c",)]
        # NULL rows are neither equal nor unequal; a NULL element makes <> ALL unknown.
        cur.execute(f"SELECT id FROM {table} WHERE id <> ALL(%s) ORDER BY id", ([1, 3],))
        assert [tuple(r) for r in cur.fetchall()] == [(2,)]
        cur.execute(f"SELECT count(*) FROM {table} WHERE id <> ALL(%s)", ([1, None],))
        assert [tuple(r) for r in cur.fetchall()] == [(0,)]
        cur.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", ([1, 2],))
        cur.execute(f"SELECT id FROM {table} WHERE id IS NOT NULL")
        assert [tuple(r) for r in cur.fetchall()] == [(3,)]
    finally:
        conn_.close()
