"""varchar(n) and char(n) held to a real PostgreSQL over pgwire (issue 19,
types): the same statements run on both, each with the same rows or the
same SQLSTATE. A write past the length is 22001 (INSERT, UPDATE, COPY), an
explicit cast cuts, char(n) is blank-padded and compares and measures
without its blanks, and the catalog (information_schema.columns,
pg_attribute.atttypmod, format_type, psql's `\\d`) shows the modifier.
In-process engine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures.served import connect, served
from tests.server.test_psql_describe import psql
from tests.server.test_sql_answers_postgres import outcome

pytestmark = pytest.mark.timeout(180)

TABLE = "CREATE TABLE vc (v varchar(3), c char(3), b char, n int)"

# Run in order on both servers; each answer (rows or SQLSTATE) must agree.
STEPS = [
    "INSERT INTO vc VALUES ('abc', 'ab', 'x', 1)",
    "INSERT INTO vc VALUES ('abcd', 'a', 'y', 2)",
    "INSERT INTO vc VALUES ('ab  ', 'a   ', 'z ', 3)",
    "INSERT INTO vc VALUES ('a', 'abcd', 'q', 4)",
    "INSERT INTO vc VALUES ('a', 'a', 'qq', 5)",
    "INSERT INTO vc SELECT 'abcdef', 'a', 'a', 6",
    "INSERT INTO vc SELECT v || 'x', c, b, 7 FROM vc WHERE n = 3",
    "INSERT INTO vc SELECT v, c, b, 8 FROM vc WHERE n = 1",
    "UPDATE vc SET v = 'wxyz' WHERE n = 1",
    "UPDATE vc SET v = 'wx' WHERE n = 1",
    "UPDATE vc SET c = c || 'zz' WHERE n = 8",
    "UPDATE vc SET c = 'z' WHERE n = 8",
    "SELECT v, c, b, n FROM vc",
    "SELECT n, length(v), length(c), length(b), c || '|', c::text, v || c FROM vc",
    "SELECT n, octet_length(c), octet_length(b), octet_length(v), bit_length(c),"
    " octet_length('ab '::char(4)), octet_length(c::text) FROM vc",
    "SELECT n FROM vc WHERE c = 'ab'",
    "SELECT n FROM vc WHERE c = 'ab   '",
    "SELECT n FROM vc WHERE c = 'ab'::text",
    "SELECT a.n, b.n FROM vc a JOIN vc b ON a.c = b.b",
    "SELECT c, count(*) FROM vc GROUP BY c",
    "SELECT 'abcdef'::varchar(3), 'ab'::char(4), 'abcdef'::char(2), 'abc'::char,"
    " 'ab '::bpchar || 'x', cast('xy' AS character(3))",
    "SELECT 'a'::char(3) = 'a'::char(5), 'a '::char(3) < 'a'::char(3), length('ab  '::char(4))",
    "CREATE VIEW vv AS SELECT v, c, n FROM vc",
    "SELECT v, c, c || '|' FROM vv",
    "SELECT column_name, data_type, character_maximum_length FROM information_schema.columns"
    " WHERE table_name IN ('vc', 'vv') ORDER BY table_name, ordinal_position",
    "SELECT attname, atttypmod, format_type(atttypid, atttypmod) FROM pg_attribute"
    " WHERE attrelid = 'vc'::regclass AND attnum > 0 ORDER BY attnum",
]


@pytest.fixture(scope="module")
def tidemark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[psycopg.Connection[Any]]:
    with served(tmp_path_factory.mktemp("chars") / "env") as env, connect(env) as conn:
        conn.execute(TABLE)
        conn.port = env.pgwire.port  # type: ignore[attr-defined]
        yield conn


@pytest.fixture(scope="module")
def postgres(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(TABLE.replace("CREATE TABLE", "CREATE TEMP TABLE"))
        yield conn


def test_steps_answer_as_postgres(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    for step in STEPS:
        ours = outcome(tidemark, step)
        theirs = outcome(postgres, step.replace("CREATE VIEW", "CREATE TEMP VIEW"))
        assert ours == theirs, step


def test_materialized_view_over_the_columns_as_postgres(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """A materialized view keeps char(n) padded and compares it without the
    blanks, as a query on PostgreSQL answers."""
    query = "SELECT n, c, c || '|' AS cc, length(c) AS lc, v FROM vc WHERE c = 'ab'"
    tidemark.execute(f"CREATE MATERIALIZED VIEW mvc AS {query}")
    assert outcome(tidemark, "SELECT * FROM mvc") == outcome(postgres, query)


def _copy(conn: psycopg.Connection[Any], rows: list[tuple[Any, ...]]) -> tuple[str, Any]:
    try:
        with conn.cursor().copy("COPY vc (v, c, b, n) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    except psycopg.Error as error:
        return "error", (error.sqlstate, str(error).splitlines()[0])
    return outcome(conn, "SELECT v, c, b FROM vc WHERE n >= 100")


@pytest.mark.parametrize(
    "rows",
    [
        [("abcd", "a", "b", 100)],
        [("abc", "a", "b", 100), ("a", "abcd", "b", 101)],
        [("abc", "a", "bc", 100)],
        [("ab   ", "a   ", "b ", 100), ("x", None, "c", 101)],
    ],
)
def test_copy_fits_values_as_postgres(
    tidemark: psycopg.Connection[Any],
    postgres: psycopg.Connection[Any],
    rows: list[tuple[Any, ...]],
) -> None:
    try:
        assert _copy(tidemark, rows) == _copy(postgres, rows)
    finally:
        for conn in (tidemark, postgres):
            conn.execute("DELETE FROM vc WHERE n >= 100")


def test_psql_describe_shows_the_modifiers(tidemark: psycopg.Connection[Any]) -> None:
    lines = psql(tidemark.port, r"\d vc")  # type: ignore[attr-defined]
    assert lines[2:6] == [
        "v|character varying(3)|||",
        "c|character(3)|||",
        "b|character(1)|||",
        "n|integer|||",
    ]


# varchar keeps its name without a length too; casts show the type they name
DECLARED = "CREATE TABLE vt (a varchar, b varchar(5), c char(3), d text, e character varying(2))"
DECLARED_QUERY = (
    "SELECT a, b, c, d, e, b || 'x' AS f, 'x'::varchar(3) AS g, 'x'::varchar AS h,"
    " 'x'::char(2) AS i, a::text AS j FROM vt"
)


def _described(conn: psycopg.Connection[Any], query: str) -> list[tuple[Any, ...]]:
    """Each result column as psycopg sees it: name, type OID, length from the typmod."""
    description = conn.execute(query).description
    assert description is not None
    return [(c.name, c.type_code, c.display_size) for c in description]


def _format_types(conn: psycopg.Connection[Any], relation: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT attname, atttypid::int, atttypmod, format_type(atttypid, atttypmod)"
        f" FROM pg_attribute WHERE attrelid = '{relation}'::regclass AND attnum > 0"
        " ORDER BY attnum"
    ).fetchall()


def test_declared_types_reach_clients_as_postgres(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """varchar (1043) and char(n) (1042) with typmod n + 4 in RowDescription,
    for a table's columns, casts, and a view's and a materialized view's
    columns; pg_attribute and psql's `\\d` name them as PostgreSQL does."""
    tidemark.execute(DECLARED)
    postgres.execute(DECLARED.replace("CREATE TABLE", "CREATE TEMP TABLE"))
    for conn in (tidemark, postgres):
        conn.execute("INSERT INTO vt VALUES ('x', 'yy', 'z', 'w', 'q')")
    expected = _described(postgres, DECLARED_QUERY)
    assert _described(tidemark, DECLARED_QUERY) == expected
    postgres.execute(f"CREATE TEMP VIEW vt_view AS {DECLARED_QUERY}")
    tidemark.execute(f"CREATE VIEW vt_view AS {DECLARED_QUERY}")
    tidemark.execute(f"CREATE MATERIALIZED VIEW vt_mv AS {DECLARED_QUERY}")
    assert _described(tidemark, "SELECT * FROM vt_view") == expected
    assert _described(tidemark, "SELECT * FROM vt_mv") == expected
    assert _format_types(tidemark, "vt") == _format_types(postgres, "vt")
    assert _format_types(tidemark, "vt_mv") == _format_types(postgres, "vt_view")
    lines = psql(tidemark.port, r"\d vt")  # type: ignore[attr-defined]
    assert lines[2:7] == [
        "a|character varying|||",
        "b|character varying(5)|||",
        "c|character(3)|||",
        "d|text|||",
        "e|character varying(2)|||",
    ]
