"""Repeated INSERTs are planned once (adapter/plan_cache.py): texts that
differ only in constants share one plan, and a prepared statement's every
Execute skips parsing and planning; the constants still land exactly and
are type-checked with their own SQLSTATE and position, and no DDL or
search_path change lets a plan outlive what it was planned against."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import pq

from coordinator_lib.server.environment import Environment
from coordinator_lib.sql import plan as sql_plan
from tests.fixtures.served import connect


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the server parsed and every INSERT it planned in full."""
    seen: list[str] = []
    parse_sql, plan_insert = sql_plan.parse_sql, sql_plan.plan_insert

    def counting_parse(text: str) -> Any:
        seen.append(f"parse {text}")
        return parse_sql(text)

    def counting_plan(statement: Any, ctx: Any) -> Any:
        seen.append("plan_insert")
        return plan_insert(statement, ctx)

    monkeypatch.setattr(sql_plan, "parse_sql", counting_parse)
    monkeypatch.setattr(sql_plan, "plan_insert", counting_plan)
    return seen


def _error(conn: psycopg.Connection[Any], sql: str) -> tuple[str | None, str | None]:
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(sql)
    diag = caught.value.diag
    return diag.sqlstate, diag.statement_position


Statement = tuple[str, list[str | None], list[int] | None]  # text, parameters, their type oids
ANSWER_FIELDS = (
    pq.DiagnosticField.SQLSTATE,
    pq.DiagnosticField.MESSAGE_PRIMARY,
    pq.DiagnosticField.STATEMENT_POSITION,
)


def _answers(
    environment: Environment, table: str, statements: list[Statement], select: str, moved: bool
) -> list[Any]:
    """Each statement's answer (command tag or SQLSTATE, message, position),
    run twice (the second from the plan cache when it is on) and, if
    `moved`, again with its positions moved; then the rows of `select`."""
    seen: list[object] = []
    with connect(environment) as conn:
        conn.execute("DROP TABLE IF EXISTS " + table.split()[2])
        conn.execute(table)
        for sql, values, types in statements:
            params = [None if v is None else v.encode() for v in values]
            texts = (sql, sql.replace("VALUES", "VALUES  ")) if moved else (sql,)
            for _ in range(2):
                for text in texts:
                    result = conn.pgconn.exec_params(text.encode(), params, types)
                    seen.append((result.command_status, *map(result.error_field, ANSWER_FIELDS)))
        rows = conn.execute(select).fetchall()
    return [*seen, rows]


def test_inserts_differing_in_constants_share_one_plan(
    environment: Environment, parses: list[str]
) -> None:
    with connect(environment) as conn:
        conn.execute("CREATE TABLE t (id integer NOT NULL, v text, d date)")
        parses.clear()
        conn.execute("INSERT INTO t VALUES (1, 'a', '2024-01-01')")
        conn.execute("INSERT INTO t VALUES (22, 'bb b', '2024-02-29')")
        conn.execute("INSERT  INTO t VALUES (333, 'it''s', '1999-12-31')  -- spaced")
        assert parses == ["parse INSERT INTO t VALUES (1, 'a', '2024-01-01')", "plan_insert"]
        # A bad constant in a cached plan: its own SQLSTATE, at its own position.
        assert _error(conn, "INSERT INTO t VALUES (1, 'x', '2024-13-45')") == ("22008", "31")
        assert _error(conn, "INSERT INTO t VALUES (12345678901, 'x', NULL)") == ("22003", "23")
        assert _error(conn, "INSERT INTO t VALUES (NULL, 'x', '2024-01-01')") == ("23502", "13")
        conn.execute("INSERT INTO t VALUES (%s, %s, %s)", (4, "p", None))  # its plan cached
        spaced = "INSERT   INTO  t VALUES (%s, %s, %s)"  # the same shape, the table further on
        with pytest.raises(psycopg.errors.NotNullViolation) as caught:
            conn.execute(spaced, (None, "q", None))
        assert caught.value.diag.statement_position == str(spaced.index(" t ") + 2)
        bad = "INSERT INTO t (v, d, id) VALUES ('a long text', DEFAULT, -12345678901)"
        planned = _error(conn, bad)  # planned in full: this shape is new
        conn.execute("INSERT INTO t (v, d, id) VALUES ('x', DEFAULT, -4)")  # its plan cached
        parses.clear()
        assert _error(conn, bad) == planned == ("22003", str(bad.index("-") + 1))
        assert parses == []
        rows = conn.execute("SELECT * FROM t WHERE id > -5 ORDER BY id").fetchall()
    assert [(r[0], r[1], str(r[2])) for r in rows] == [
        (-4, "x", "None"),
        (1, "a", "2024-01-01"),
        (4, "p", "None"),
        (22, "bb b", "2024-02-29"),
        (333, "it's", "1999-12-31"),
    ]


def test_prepared_inserts_skip_parsing_and_planning(
    environment: Environment, parses: list[str]
) -> None:
    with connect(environment) as conn:
        conn.execute("CREATE TABLE p (id bigint, v text)")
        parses.clear()
        for i in range(4):
            conn.execute("INSERT INTO p VALUES (%s, %s)", (i, f"v{i}"), prepare=True)
        # Parse describes it once; the four Bind/Executes neither parse nor plan.
        assert parses.count("plan_insert") == 1
        assert len([p for p in parses if p.startswith("parse")]) == 1
        with pytest.raises(psycopg.errors.NumericValueOutOfRange):
            conn.execute("INSERT INTO p VALUES (%s, %s)", (2**70, "x"), prepare=True)
        rows = conn.execute("SELECT * FROM p ORDER BY id").fetchall()
    assert rows == [(0, "v0"), (1, "v1"), (2, "v2"), (3, "v3")]


def test_a_cached_plan_is_not_reused_after_ddl_or_search_path(environment: Environment) -> None:
    with connect(environment) as conn:
        conn.execute("CREATE TABLE c (a integer, b text)")
        for _ in range(2):  # planned, then from the cache
            conn.execute("INSERT INTO c VALUES (1, '2')")
        conn.execute("DROP TABLE c")
        conn.execute("CREATE TABLE c (a text, b integer)")
        conn.execute("INSERT INTO c VALUES (1, '2')")
        assert conn.execute("SELECT a || '!', b + 1 FROM c").fetchall() == [("1!", 3)]
        conn.execute("DROP TABLE c")
        conn.execute("CREATE TABLE c (a integer, b integer)")
        assert _error(conn, "INSERT INTO c VALUES (1, 'x')") == ("22P02", "26")
        conn.execute("CREATE SCHEMA other")
        conn.execute("CREATE TABLE other.c (a integer, b text)")
        conn.execute("INSERT INTO c VALUES (1, '7')")  # public.c, planned at this version
        conn.execute("SET search_path = other")
        conn.execute("INSERT INTO c VALUES (2, '7')")
        assert conn.execute("SELECT * FROM other.c").fetchall() == [(2, "7")]
        assert conn.execute("SELECT * FROM public.c").fetchall() == [(1, 7)]


def test_a_cached_insert_binds_parameters_as_a_parse_does(
    environment: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cached INSERT binds a value that is one `$n` where it goes; every
    answer (command tag or SQLSTATE, message and position) and the rows are
    those of the statement planned in full (the cache turned off)."""
    statements: list[Statement] = [
        ("INSERT INTO q VALUES ($1, $2, $3)", ["7", "x", "2024-02-29"], None),
        ("INSERT INTO q VALUES ( $1 ,$2,$3)", [None, "x", None], None),  # NOT NULL
        ("INSERT INTO q VALUES ($1, $2, $3)", ["abc", "x", None], None),  # not an integer
        ("INSERT INTO q VALUES ($1, $2, $3)", ["99999999999", "x", None], None),  # out of range
        ("INSERT INTO q VALUES ($1, $2, $3)", ["1", "x", "2024-13-45"], None),  # not a date
        ("INSERT INTO q VALUES ($1, $2, $3)", ["9", "t", None], [20, 25, 0]),  # typed
        ("INSERT INTO q VALUES ($1, $2, $3)", ["abc", "t", None], [20, 25, 0]),
        ("INSERT INTO q VALUES ($1, $2, $3)", ["99999999999", "t", None], [20, 25, 0]),
        ("INSERT INTO q (v, id) VALUES ($2, -$1)", ["4", "z"], None),  # an operator over $1
        ("INSERT INTO q VALUES ($1, $2, $3), (8, $2, NULL)", ["5", "w", "2024-01-01"], None),
    ]
    table = "CREATE TABLE q (id integer NOT NULL, v text, d date)"
    select = "SELECT id, v, d::text FROM q ORDER BY id"

    def answers() -> list[Any]:
        return _answers(environment, table, statements, select, moved=False)

    cached = answers()
    assert cached[-1] == [
        (5, "w", "2024-01-01"),
        (5, "w", "2024-01-01"),
        (7, "x", "2024-02-29"),
        (7, "x", "2024-02-29"),
        (8, "w", None),
        (8, "w", None),
        (9, "t", None),
        (9, "t", None),
    ]
    monkeypatch.setattr(environment.handle.coordinator.plan_cache, "get", lambda key: None)
    assert answers() == cached


def test_a_cached_insert_of_constants_answers_as_a_parse_does(
    environment: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cached INSERT whose values are constants and `$n` is bound and cast
    to its columns without a VALUES tree (`plan_insert_rows`); every answer
    and row equals the statement's planned in full (the cache turned off),
    into columns with modifiers too, and for every kind of bad value."""
    table = (
        "CREATE TABLE m (id bigint NOT NULL, code varchar(3), tag char(2), price numeric(5,2),"
        " at timestamp(0), span interval minute, ok boolean, r real)"
    )
    row = "INSERT INTO m VALUES ({}, {}, {}, {}, {}, {}, {}, {})"
    values = [
        ("1", "'ab'", "'x'", "'1.005'", "'2024-01-01 10:00:00.6'", "'90'", "true", "'1.5'"),
        ("2", "'abcd'", "'x'", "1", "NULL", "'1'", "false", "2"),  # too long for varchar(3)
        ("3", "'ab '", "'xyz'", "2.5", "NULL", "NULL", "NULL", "-1"),  # too long for char(2)
        ("4", "'a'", "'x'", "'1000'", "NULL", "NULL", "NULL", "NULL"),  # numeric(5,2) overflow
        ("NULL", "'a'", "'x'", "1", "NULL", "NULL", "NULL", "NULL"),  # NOT NULL
        ("'5'", "1", "'x'", "1", "NULL", "NULL", "'yes'", "NULL"),  # an integer into text
        ("6", "'a'", "'x'", "'abc'", "NULL", "NULL", "NULL", "NULL"),  # not a numeric
        ("7", "'a'", "'x'", "1", "'2024-02-30'", "NULL", "NULL", "NULL"),  # not a date
        ("8", "'a'", "'x'", "1", "NULL", "'1 hour 30 seconds'", "'maybe'", "NULL"),
        ("9", "'a'", "'x'", "1", "NULL", "NULL", "NULL", "'1e50'"),  # out of real's range
        ("10", "'a'", "'x'", "1", "NULL", "NULL", "NULL", "1e50"),
        ("11", "'a'", "'x'", "1", "NULL", "NULL", "1", "NULL"),  # an integer into boolean
        ("12", "'a'", "'x'", "1", "NULL", "NULL", "NULL", "NULL"),
    ]
    statements = [row.format(*v) for v in values]
    statements += [
        "INSERT INTO m (id, price) VALUES (13, 1.25), (14, -2), (15, NULL)",
        "INSERT INTO m (id, price) VALUES (16, 1.25), (NULL, 3), (17, 'x')",  # 23502 or 22P02
        "INSERT INTO m (id, price) VALUES (18, 1.25), (19, 1000)",
        "INSERT INTO m (id, code) VALUES (20, 'a', 'b')",  # more values than columns
        "INSERT INTO m (price) VALUES (1)",  # id NOT NULL and not given
        "INSERT INTO m (id, code) VALUES (21, DEFAULT)",
    ]
    prepared: list[tuple[str, list[str | None]]] = [
        ("INSERT INTO m (id, code, at) VALUES ($1, $2, $3)", ["22", "abc", "2024-01-01 1:2:3.7"]),
        ("INSERT INTO m (id, code, at) VALUES ($1, $2, $3)", ["23", "abcd", None]),
        ("INSERT INTO m (id, code, at) VALUES ($1, $2, $3)", ["x", "a", None]),
        ("INSERT INTO m (id, price) VALUES ($1, 7), ($2, $1)", ["24", "25"]),
        ("INSERT INTO m (id, price) VALUES ($1, 7), ($2, $1)", ["26", None]),
        ("INSERT INTO m (id, price) VALUES ($1, 7), ($2, $1)", ["1000", "27"]),
    ]
    select = (
        "SELECT id, code, tag, price::text, at::text, span::text, ok, r FROM m ORDER BY id, code"
    )
    every: list[Statement] = [(sql, [], None) for sql in statements]
    every += [(sql, values, None) for sql, values in prepared]

    def answers() -> list[Any]:
        return _answers(environment, table, every, select, moved=True)

    cached = answers()
    assert [r[0] for r in cached[-1]].count(1) == 4 and len(cached[-1]) > 20
    monkeypatch.setattr(environment.handle.coordinator.plan_cache, "get", lambda key: None)
    assert answers() == cached


def test_a_prepared_insert_executed_again_reads_its_parameters_without_planning(
    environment: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prepared INSERT's third and later executions take its fast path
    (plan_cache.PreparedInsert): no VALUES planned (`plan_insert_rows` is not
    called), each `$n` read by its column type's input function; a value
    that function refuses and NULL go the planned way, so every answer
    (command tag or SQLSTATE, message, position) and the rows are those of
    the cache turned off."""
    from coordinator_lib.sql import insert_template

    planned: list[int] = []
    plan_rows = insert_template.plan_insert_rows

    def counting(*args: Any) -> Any:
        planned.append(1)
        return plan_rows(*args)

    monkeypatch.setattr(insert_template, "plan_insert_rows", counting)
    with connect(environment) as conn:
        conn.execute("CREATE TABLE f (id bigint NOT NULL, n smallint, v text, ok boolean)")
        sql = "INSERT INTO f VALUES (%s, 7, %s, true)"
        for i in range(6):
            conn.execute(sql, (i, f"v{i}"), prepare=True)
        # The first is planned in full, the second from the template, the rest not at all.
        assert len(planned) == 1
        assert environment.handle.coordinator.plan_cache.stats.prepared_hits == 4
        rows = conn.execute("SELECT * FROM f ORDER BY id").fetchall()
    assert rows == [(i, 7, f"v{i}", True) for i in range(6)]

    fields = "(id, n, v, ok)"
    text = f"INSERT INTO g {fields} VALUES ($1, $2, $3, true)"
    types = [20, 21, 25]
    statements: list[Statement] = [
        (text, ["1", "2", "a"], types),
        (text, ["2", "3", "b"], types),
        (text, [" 3 ", "4", "c"], types),  # spaces around an integer are read
        (text, ["4", "99999", "d"], types),  # out of smallint's range
        (text, ["x", "5", "e"], types),  # not an integer
        (text, [None, "6", "f"], types),  # NOT NULL
        (text, ["7", None, "g"], types),  # NULL where it may be
        (text, ["9223372036854775808", "1", "i"], types),  # out of bigint's range
        (text, ["10", "1_0", "j"], types),
        (text, ["11", "+11", ""], types),
    ]
    table = "CREATE TABLE g (id bigint NOT NULL, n smallint, v text, ok boolean)"
    select = "SELECT * FROM g ORDER BY id, n"

    def answers() -> list[Any]:
        return _answers(environment, table, statements * 2, select, moved=False)

    hits = environment.handle.coordinator.plan_cache.stats.prepared_hits
    fast = answers()
    assert environment.handle.coordinator.plan_cache.stats.prepared_hits > hits
    expected = [(1, 2, "a"), (2, 3, "b"), (3, 4, "c"), (7, None, "g"), (11, 11, "")]
    assert fast[-1] == [(*row, True) for row in expected for _ in range(4)]
    monkeypatch.setattr(environment.handle.coordinator.plan_cache, "get", lambda key: None)
    monkeypatch.setattr(
        environment.handle.coordinator.plan_cache, "prepared", lambda key: (True, None)
    )
    assert answers() == fast
