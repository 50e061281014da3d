"""Statements Materialize's users write that are not queries, over pgwire
(psycopg): SQL PREPARE / EXECUTE / DEALLOCATE as PostgreSQL answers them,
SHOW TABLES and SHOW SECRETS with Materialize's columns, CREATE CLUSTER with
an unmanaged cluster's REPLICAS or a bare SIZE, query hints (`OPTIONS
(AGGREGATE INPUT GROUP SIZE = ..)`), and FETCH 0 on a SUBSCRIBE cursor."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures.served import connect, served

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tidemark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[psycopg.Connection[Any]]:
    with served(tmp_path_factory.mktemp("statements") / "env") as env, connect(env) as conn:
        conn.execute("CREATE TABLE t (g int, v int)")
        conn.execute("INSERT INTO t VALUES (1, 1), (1, 2), (2, 3), (2, 4), (3, 5)")
        yield conn


def outcome(conn: psycopg.Connection[Any], statement: str) -> tuple[str, Any]:
    """("rows", rows or the command tag) or ("error", SQLSTATE)."""
    try:
        cursor = conn.execute(statement)
    except psycopg.Error as error:
        return "error", error.sqlstate
    if cursor.description is None:
        return "rows", cursor.statusmessage
    return "rows", sorted(cursor.fetchall(), key=repr)


PREPARED = [
    "PREPARE p AS SELECT $1::int + 1",
    "EXECUTE p(41)",
    "EXECUTE p ('7')",
    "EXECUTE p('x')",
    "EXECUTE p(1, 2)",
    "EXECUTE p",
    "PREPARE p AS SELECT 2",
    "PREPARE q (int, text) AS SELECT $2 || $1",
    "EXECUTE q(1, 'a')",
    "PREPARE r AS SELECT g, v FROM t WHERE v > $1 ORDER BY v",
    "EXECUTE r(3)",
    "DEALLOCATE p",
    "EXECUTE p(1)",
    "DEALLOCATE p",
    "DEALLOCATE PREPARE q",
    "DEALLOCATE ALL",
    "EXECUTE r(1)",
    "EXECUTE nope(1)",
]


def test_sql_prepare_execute_deallocate_as_postgres(
    tidemark: psycopg.Connection[Any], postgres_url: str
) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as postgres:
        postgres.execute("CREATE TEMP TABLE t (g int, v int)")
        postgres.execute("INSERT INTO t VALUES (1, 1), (1, 2), (2, 3), (2, 4), (3, 5)")
        for statement in PREPARED:
            expected = outcome(postgres, statement)
            assert (statement, outcome(tidemark, statement)) == (statement, expected)


def test_show_tables_and_secrets_have_materializes_columns(
    tidemark: psycopg.Connection[Any],
) -> None:
    """`name` and `comment` ('' without a COMMENT ON), as Materialize lists them."""
    tidemark.execute("CREATE SCHEMA shown")
    tidemark.execute("CREATE TABLE shown.b (x int)")
    tidemark.execute("CREATE TABLE shown.a (x int)")
    tidemark.execute("CREATE SECRET shown.key_one AS 'one'")
    tidemark.execute("CREATE SECRET shown.other AS 'two'")
    for statement, expected in [
        ("SHOW TABLES FROM shown", [("a", ""), ("b", "")]),
        ("SHOW SECRETS FROM shown", [("key_one", ""), ("other", "")]),
        ("SHOW SECRETS FROM shown LIKE 'key%'", [("key_one", "")]),
    ]:
        cursor = tidemark.execute(statement)
        assert [c.name for c in cursor.description or []] == ["name", "comment"]
        assert cursor.fetchall() == expected
    assert ("t", "") in tidemark.execute("SHOW TABLES").fetchall()


def test_create_cluster_replicas_and_bare_size(tidemark: psycopg.Connection[Any]) -> None:
    """An unmanaged cluster's REPLICAS is a cluster of as many workers; the
    option list's parentheses are optional, as in Materialize."""
    tidemark.execute("CREATE CLUSTER two REPLICAS (r1 (SIZE '1'), r2 (SIZE = '1'))")
    tidemark.execute("CREATE CLUSTER bare SIZE '1'")
    tidemark.execute("CREATE CLUSTER none_yet REPLICAS ()")
    shown = dict(tidemark.execute("SHOW CLUSTERS").fetchall())
    assert (shown["two"], shown["bare"], shown["none_yet"]) == ("2", "1", "0")
    tidemark.execute("DROP CLUSTER two, bare, none_yet")
    for statement, sqlstate, message in [
        ("CREATE CLUSTER c REPLICAS (r1 (SIZE '1'), r2 (SIZE '2'))", "0A000", "different sizes"),
        ("CREATE CLUSTER c REPLICAS (r1 (AVAILABILITY ZONE 'z'))", "0A000", "other than SIZE"),
        ("CREATE CLUSTER c (SIZE '1', DISK = true)", "0A000", "option DISK"),
        ("CREATE CLUSTER c SIZE '1', REPLICAS (r1 (SIZE '1'))", "22023", "REPLICAS cannot"),
        ("CREATE CLUSTER c REPLICAS (r1 (SIZE '1'), r1 (SIZE '1'))", "22023", "more than once"),
    ]:
        with pytest.raises(psycopg.Error) as caught:
            tidemark.execute(statement)
        assert caught.value.sqlstate == sqlstate, statement
        assert message in str(caught.value)
    assert "c" not in dict(tidemark.execute("SHOW CLUSTERS").fetchall())


HINTED = [
    (
        "SELECT g, count(*), min(v) FROM t GROUP BY g OPTIONS (AGGREGATE INPUT GROUP SIZE = 10)",
        "SELECT g, count(*), min(v) FROM t GROUP BY g",
    ),
    (
        "SELECT g, max(v) FROM t GROUP BY g OPTIONS (AGGREGATE INPUT GROUP SIZE = 10,"
        " LIMIT INPUT GROUP SIZE 5) HAVING count(*) > 1 ORDER BY g",
        "SELECT g, max(v) FROM t GROUP BY g HAVING count(*) > 1 ORDER BY g",
    ),
    (
        "SELECT g, max(v) FROM t GROUP BY g HAVING count(*) > 1"
        " OPTIONS (AGGREGATE INPUT GROUP SIZE = 10)",
        "SELECT g, max(v) FROM t GROUP BY g HAVING count(*) > 1",
    ),
    (
        "SELECT DISTINCT ON (g) g, v FROM t OPTIONS (DISTINCT ON INPUT GROUP SIZE = 2)"
        " ORDER BY g, v DESC",
        "SELECT DISTINCT ON (g) g, v FROM t ORDER BY g, v DESC",
    ),
    (
        "SELECT v FROM t OPTIONS (LIMIT INPUT GROUP SIZE = 3) ORDER BY v LIMIT 2",
        "SELECT v FROM t ORDER BY v LIMIT 2",
    ),
]


@pytest.mark.parametrize(("hinted", "plain"), HINTED)
def test_query_hints_change_no_answer(
    tidemark: psycopg.Connection[Any], hinted: str, plain: str
) -> None:
    """A hint sizes Materialize's reduction trees; the answer is the query's
    without it, as a one-off query and as a materialized view."""
    expected = tidemark.execute(plain).fetchall()
    assert expected and tidemark.execute(hinted).fetchall() == expected
    name = f"hinted_{HINTED.index((hinted, plain))}"
    tidemark.execute(f"CREATE MATERIALIZED VIEW {name} AS {hinted}")
    assert sorted(tidemark.execute(f"SELECT * FROM {name}").fetchall()) == sorted(expected)


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT g FROM t OPTIONS (FOO = 1)",
        "SELECT g FROM t OPTIONS (AGGREGATE INPUT GROUP SIZE = 'x')",
        "SELECT g FROM t OPTIONS (AGGREGATE INPUT GROUP SIZE = -1)",
        "SELECT g FROM t OPTIONS (AGGREGATE INPUT GROUP SIZE = 1",
    ],
)
def test_bad_query_hints_are_syntax_errors(
    tidemark: psycopg.Connection[Any], statement: str
) -> None:
    with pytest.raises(psycopg.errors.SyntaxError) as caught:
        tidemark.execute(statement)
    assert caught.value.diag.statement_position is not None


def test_options_is_still_a_name(tidemark: psycopg.Connection[Any]) -> None:
    rows = tidemark.execute("SELECT options FROM (SELECT 1 AS options) options").fetchall()
    assert rows == [(1,)]


def test_fetch_zero_answers_at_once(tidemark: psycopg.Connection[Any]) -> None:
    """FETCH 0 returns no rows without waiting, on a SUBSCRIBE cursor (it
    waited for a row forever) and on a SELECT's (it returned one)."""
    with tidemark.transaction():
        tidemark.execute("DECLARE c CURSOR FOR SUBSCRIBE t")
        assert len(tidemark.execute("FETCH 1 c").fetchall()) == 1
        assert tidemark.execute("FETCH 0 c").fetchall() == []
        assert tidemark.execute("FETCH FORWARD 0 FROM c").fetchall() == []
        assert len(tidemark.execute("FETCH 4 c").fetchall()) == 4
        assert tidemark.execute("FETCH 0 c").fetchall() == []  # nothing buffered: waited
    with tidemark.transaction():
        tidemark.execute("DECLARE d CURSOR FOR SELECT v FROM t ORDER BY v")
        assert tidemark.execute("FETCH 0 d").fetchall() == []
        assert tidemark.execute("FETCH 2 d").fetchall() == [(1,), (2,)]
        assert tidemark.execute("FETCH 0 d").fetchall() == []
        assert tidemark.execute("FETCH ALL d").fetchall() == [(3,), (4,), (5,)]


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT v FROM t ORDER BY g FETCH FIRST 2 ROWS WITH TIES",
        "SELECT v FROM t ORDER BY g FETCH FIRST 50 PERCENT ROWS ONLY",
    ],
)
def test_fetch_first_options_not_dropped(tidemark: psycopg.Connection[Any], statement: str) -> None:
    """WITH TIES and PERCENT are refused (0A000, Materialize's words), not
    read as a plain FETCH FIRST n: that answered 2 rows where there are 3 ties."""
    with pytest.raises(psycopg.errors.FeatureNotSupported) as caught:
        tidemark.execute(statement)
    assert "not yet supported" in str(caught.value)
