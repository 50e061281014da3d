"""Types and tables of Materialize's SQL held to a real PostgreSQL over
pgwire (issue 19): the same statements run on both, each with the same
rows (and column names) or the same SQLSTATE, as one-off queries and
through views. In-process engine; the Spark view test is in
tests/compute/test_materialize_types_spark.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures.served import connect, served
from tests.server.test_psql_describe import psql
from tests.server.test_sql_answers_postgres import outcome

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def tidemark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[psycopg.Connection[Any]]:
    with served(tmp_path_factory.mktemp("mz_types") / "env") as env, connect(env) as conn:
        conn.port = env.pgwire.port  # type: ignore[attr-defined]
        yield conn


@pytest.fixture(scope="module")
def postgres(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


def _both(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any], steps: list[str]
) -> None:
    """Each step answers on Tidemark as on PostgreSQL (tables and views are
    temporary there, so reruns start clean)."""
    for step in steps:
        theirs = outcome(
            postgres,
            step.replace("CREATE TABLE", "CREATE TEMP TABLE").replace(
                "CREATE MATERIALIZED VIEW", "CREATE TEMP VIEW"
            ),
        )
        assert outcome(tidemark, step) == theirs, step


def test_a_table_without_columns(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """`CREATE TABLE t ()`: rows without columns, counted, inserted, deleted."""
    _both(
        tidemark,
        postgres,
        [
            "CREATE TABLE nullary ()",
            "SELECT * FROM nullary",
            "SELECT count(*) FROM nullary",
            "INSERT INTO nullary DEFAULT VALUES",
            "INSERT INTO nullary SELECT",
            "INSERT INTO nullary SELECT FROM generate_series(1, 3)",
            "CREATE MATERIALIZED VIEW nullary_count AS SELECT count(*) AS n FROM nullary",
            "CREATE VIEW nullary_all AS SELECT * FROM nullary",
            "SELECT * FROM nullary",
            "SELECT count(*) FROM nullary",
            "SELECT 1 AS x FROM nullary",
            "SELECT n FROM nullary_count",
            "SELECT * FROM nullary_all",
            "SELECT * FROM nullary, (VALUES (1), (2)) v (a)",
            "INSERT INTO nullary VALUES (1)",
            "DELETE FROM nullary",
            "SELECT count(*) FROM nullary",
            "SELECT n FROM nullary_count",
        ],
    )


def _described(conn: psycopg.Connection[Any], query: str) -> list[tuple[str, int, int | None]]:
    """Each result column's name, type OID and length (varchar(n)'s n), as
    RowDescription gives them."""
    cursor = conn.execute(query)
    assert cursor.description is not None
    return [(c.name, c.type_code, c.display_size) for c in cursor.description]


VARCHAR_TABLE = "CREATE TABLE vcs (a varchar(3), b varchar(5), c text, d char(2), e varchar(3))"
VARCHAR_QUERIES = [
    "SELECT a FROM vcs UNION SELECT b FROM vcs",
    "SELECT a FROM vcs UNION SELECT e FROM vcs",
    "SELECT a FROM vcs UNION ALL SELECT a FROM vcs",
    "SELECT a FROM vcs UNION ALL SELECT 'q'",
    "SELECT 'q' UNION SELECT b FROM vcs",
    "SELECT a FROM vcs UNION SELECT c FROM vcs",
    "SELECT c FROM vcs UNION SELECT a FROM vcs",
    "SELECT a FROM vcs EXCEPT SELECT b FROM vcs",
    "SELECT d FROM vcs UNION SELECT d FROM vcs",
    "SELECT coalesce(a, b) AS x, coalesce(a, e) AS y, coalesce(a, 'k') AS z,"
    " coalesce(a, c) AS w, coalesce(c, a) AS v, coalesce('k', e, a) AS u FROM vcs",
    "SELECT CASE WHEN a = 'x' THEN a ELSE b END AS x, CASE WHEN a = 'x' THEN a ELSE e END AS y,"
    " CASE WHEN a = 'x' THEN a END AS z, CASE WHEN a = 'x' THEN a ELSE 'k' END AS w FROM vcs",
    "SELECT greatest(a, b) AS x, least(a, e) AS y FROM vcs",
]


def test_varchar_results_keep_their_type(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """UNION / CASE / COALESCE of varchar(n) values are character varying
    (OID 1043), with the length only when every input has the same one, as
    PostgreSQL describes them; also through a view."""
    tidemark.execute(VARCHAR_TABLE)
    postgres.execute(VARCHAR_TABLE.replace("CREATE TABLE", "CREATE TEMP TABLE"))
    for conn in (tidemark, postgres):
        conn.execute("INSERT INTO vcs VALUES ('x', 'yy', 'z', 'w', 'x'), ('u', 'x', 'v', 'w', 't')")
    for query in VARCHAR_QUERIES:
        assert _described(tidemark, query) == _described(postgres, query), query
        assert outcome(tidemark, query) == outcome(postgres, query), query
    tidemark.execute(f"CREATE VIEW vcs_union AS {VARCHAR_QUERIES[0]}")
    tidemark.execute(f"CREATE MATERIALIZED VIEW vcs_case AS {VARCHAR_QUERIES[-2]}")
    for view, query in (("vcs_union", VARCHAR_QUERIES[0]), ("vcs_case", VARCHAR_QUERIES[-2])):
        assert _described(tidemark, f"SELECT * FROM {view}") == _described(postgres, query)
        assert outcome(tidemark, f"SELECT * FROM {view}") == outcome(postgres, query)
    tidemark.execute("CREATE VIEW vcs_same AS SELECT a FROM vcs UNION ALL SELECT e FROM vcs")
    port = tidemark.port  # type: ignore[attr-defined]
    assert psql(port, r"\d vcs_union")[2:3] == ["a|character varying|||"]
    assert psql(port, r"\d vcs_same")[2:3] == ["a|character varying(3)|||"]
    assert psql(port, r"\d vcs_case")[2:4] == [
        "x|character varying|||",
        "y|character varying(3)|||",
    ]


INTERVAL_TABLE = (
    "CREATE TABLE ivs (n int, h interval hour, d interval day, ds interval day to second(0),"
    " ym interval year to month, p interval(1), m interval minute)"
)


def test_an_interval_column_keeps_its_fields(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """A column declared `interval hour` (day to second(0), year to month,
    ...) restricts what INSERT, UPDATE and COPY write into it, and reads an
    untyped literal with its qualifier, as PostgreSQL does; a view reads the
    restricted values."""
    value = "1 year 2 mons 3 days 4 hours 5 minutes 6.789 seconds"
    steps = [
        INTERVAL_TABLE,
        f"INSERT INTO ivs VALUES (1, '{value}', '{value}', '{value}', '{value}', '{value}',"
        f" '{value}')",
        "INSERT INTO ivs (n, h) VALUES (2, '1 day 3 hours 5 minutes'), (3, '5')",
        "INSERT INTO ivs (n, m, d) VALUES (4, '90', '2')",
        f"INSERT INTO ivs SELECT 5, i, i, i, i, i, i FROM (SELECT interval '{value}' AS i) s",
        "UPDATE ivs SET h = h + interval '59 minutes', ds = '7', p = '0.25' WHERE n = 2",
        "SELECT * FROM ivs",
        "CREATE MATERIALIZED VIEW ivs_sum AS SELECT sum(h) AS h, max(ym) AS ym FROM ivs",
        "SELECT * FROM ivs_sum",
        "SELECT n, h::text, ds::text FROM ivs WHERE h > interval '1 day'",
    ]
    _both(tidemark, postgres, steps)
    rows = [(6, value, value, value, value, value, value), (7, "7", "7", "7", "7", "7", "7")]
    for conn in (tidemark, postgres):
        with conn.cursor().copy("COPY ivs FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    _both(tidemark, postgres, ["SELECT * FROM ivs WHERE n >= 6", "SELECT * FROM ivs_sum"])


def test_psql_describes_an_interval_column_with_its_fields(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """pg_attribute.atttypmod and format_type as PostgreSQL encodes and names
    an interval's qualifier and precision, and psql's `\\d` shows them."""
    table = (
        "CREATE TABLE ivd (a interval hour, b interval day to second(0), c interval year to month,"
        " d interval(2), e interval, f interval minute to second(3))"
    )
    tidemark.execute(table)
    postgres.execute(table.replace("CREATE TABLE", "CREATE TEMP TABLE"))
    query = (
        "SELECT attname, atttypmod, format_type(atttypid, atttypmod) FROM pg_attribute"
        " WHERE attrelid = 'ivd'::regclass AND attnum > 0 ORDER BY attnum"
    )
    assert outcome(tidemark, query) == outcome(postgres, query)
    assert psql(tidemark.port, r"\d ivd")[2:4] == [  # type: ignore[attr-defined]
        "a|interval hour|||",
        "b|interval day to second(0)|||",
    ]


def test_array_columns_declared_with_dimensions(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """`int[][]` and `text[3][2]` are `int[]` and `text[]` (PostgreSQL and
    Materialize ignore a type's dimensions): declared, written, read, cast
    and subscripted in a view as in PostgreSQL."""
    _both(
        tidemark,
        postgres,
        [
            "CREATE TABLE arr_dims (a int[][], b text[3][2])",
            "INSERT INTO arr_dims VALUES ('{1,2}', '{x}'), (NULL, '{}'), ('{3}', NULL)",
            "CREATE MATERIALIZED VIEW arr_dims_v AS SELECT a, b, a[1][1] AS e,"
            " array_upper(a, 1) AS u, a::bigint[][] AS c, array_dims(b) AS d FROM arr_dims",
            "SELECT * FROM arr_dims_v",
            "INSERT INTO arr_dims VALUES ('{4,5,6}', '{y,z}')",
            "SELECT * FROM arr_dims_v",
        ],
    )


def test_arrays_of_mixed_element_types_in_a_view(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """`||`, array_cat, array_append and array_prepend of arrays and elements
    of different numeric types give the common type's array (PostgreSQL's
    anycompatible), in a view kept up to date across INSERT and DELETE."""
    _both(
        tidemark,
        postgres,
        [
            "CREATE TABLE arr_mix (i int, a int[], n numeric, f float8)",
            "INSERT INTO arr_mix VALUES (1, '{1,2}', 1.5, 0.25), (2, NULL, NULL, 2)",
            "CREATE MATERIALIZED VIEW arr_mix_v AS SELECT i, a || ARRAY[n] AS an, n || a AS na,"
            " array_cat(a, ARRAY[f]) AS af, array_append(a, i::bigint) AS ab,"
            " ARRAY[i] || ARRAY[n] || f AS inf FROM arr_mix",
            "SELECT * FROM arr_mix_v",
            "INSERT INTO arr_mix VALUES (3, '{3,NULL}', 2.75, -1), (4, '{}', 0.5, NULL)",
            "SELECT * FROM arr_mix_v",
            "DELETE FROM arr_mix WHERE i IN (1, 4)",
            "SELECT * FROM arr_mix_v",
        ],
    )


def test_row_constructors_in_a_view(
    tidemark: psycopg.Connection[Any], postgres: psycopg.Connection[Any]
) -> None:
    """`ROW(...)` and `(...)` compared (=, <>, <, IN, = ANY, IS [NOT] NULL,
    IS DISTINCT FROM), `GROUP BY (a, b)` and `GROUP BY ()`, in views kept up
    to date across INSERT and DELETE."""
    _both(
        tidemark,
        postgres,
        [
            "CREATE TABLE rows_t (a int, b int, c text)",
            "CREATE TABLE rows_u (a int, b int)",
            "INSERT INTO rows_t VALUES (1, 2, 'x'), (4, 1, 'y'), (NULL, 3, NULL)",
            "INSERT INTO rows_u VALUES (1, 2), (4, NULL)",
            "CREATE MATERIALIZED VIEW rows_v AS SELECT a, b, c, ROW(a, b) = ROW(1, 2) AS e,"
            " (a, b, c) != (4, 1, 'y') AS ne, ROW(a, b) < (4, 0) AS lt,"
            " (a, b) IN (SELECT a, b FROM rows_u) AS i, ROW(a, b) = ANY (SELECT a, b FROM rows_u)"
            " AS an, (a, c) IS NULL AS n, (a, c) IS NOT NULL AS nn, NOT (a, c) IS NULL AS nt,"
            " (a, b) IS DISTINCT FROM ROW(NULL, 3) AS d, (a, b) < ANY (SELECT a, b FROM rows_u)"
            " AS la, ROW(a, b) >= ALL (SELECT a, b FROM rows_u) AS ga FROM rows_t",
            "CREATE MATERIALIZED VIEW rows_g AS SELECT a, b, count(*) AS n FROM rows_t"
            " GROUP BY (a, b)",
            "CREATE MATERIALIZED VIEW rows_none AS SELECT count(*) AS n, max(c) AS m FROM rows_t"
            " WHERE a > 3 GROUP BY ()",
            "SELECT * FROM rows_v",
            "SELECT * FROM rows_g",
            "SELECT * FROM rows_none",
            "INSERT INTO rows_t VALUES (NULL, NULL, NULL), (4, 0, 'z')",
            "INSERT INTO rows_u VALUES (4, 0)",
            "SELECT * FROM rows_v",
            "DELETE FROM rows_t WHERE a = 1",
            "DELETE FROM rows_u WHERE b IS NULL",
            "SELECT * FROM rows_v",
            "SELECT * FROM rows_g",
            "DELETE FROM rows_t WHERE a = 4",
            "SELECT * FROM rows_none",
        ],
    )


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT ARRAY[[1, 2], [3, 4]]",
        "SELECT '{{1,2},{3,4}}'::int[]",
        "SELECT ('{{1}}' || '')::int[]",
    ],
)
def test_multidimensional_array_values_are_refused(
    tidemark: psycopg.Connection[Any], statement: str
) -> None:
    """PostgreSQL (and Materialize) answer these (`{{1,2},{3,4}}`); Tidemark's
    arrays are one-dimensional (a tuple, an Arrow list), so a value of more
    dimensions is 0A000 saying so, never a malformed-literal error."""
    with pytest.raises(psycopg.errors.FeatureNotSupported) as info:
        tidemark.execute(statement)
    assert info.value.diag.message_primary == "multidimensional arrays are not supported"
    if "||" not in statement:  # a constant's (a per-row cast's error has no detail)
        assert "one-dimensional" in (info.value.diag.message_detail or "")
