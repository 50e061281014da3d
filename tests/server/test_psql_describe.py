"""psql's describe commands against Tidemark (issue 19, catalog for
clients): `\\d`, `\\dt`, `\\dv`, `\\dm`, `\\d name`, run with the psql
binary itself over pgwire on 127.0.0.1. psql sends its catalog queries for
the server version Tidemark reports (9.5.0): pg_class joined with
pg_namespace, `pg_get_userbyid`, `OPERATOR(pg_catalog.~)`, `format_type`,
pg_attribute with correlated subqueries over pg_attrdef and pg_collation,
`'oid'::regclass` and `::pg_catalog.char` casts. In-process engine."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures.served import connect, served

pytestmark = pytest.mark.timeout(120)
PSQL = "/usr/bin/psql"


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A served environment with a table, a view and a materialized view."""
    with served(tmp_path_factory.mktemp("describe") / "env") as env:
        with connect(env) as conn:
            conn.execute("CREATE TABLE orders (id int NOT NULL, item text, price numeric)")
            conn.execute("INSERT INTO orders VALUES (1, 'a', 1), (2, 'c', 20), (3, NULL, 3)")
            conn.execute("CREATE VIEW cheap AS SELECT id, item FROM orders WHERE price < 10")
            conn.execute(
                "CREATE MATERIALIZED VIEW per_item AS "
                "SELECT item, count(*) AS n FROM orders GROUP BY item"
            )
        yield env.pgwire.port


def run_psql(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    connection = ["-h", "127.0.0.1", "-p", str(port), "-U", "materialize", "-d", "materialize"]
    return subprocess.run(
        [PSQL, "-X", *connection, *args], capture_output=True, text=True, timeout=60, env=env
    )


def psql(port: int, command: str) -> list[str]:
    """psql's unaligned output of `command`, one line per row; fails on an error."""
    result = run_psql(port, "-A", "-F", "|", "-v", "ON_ERROR_STOP=1", "-c", command)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


LISTING = ["List of relations", "Schema|Name|Type|Owner"]


def test_backslash_d_lists_relations(port: int) -> None:
    assert psql(port, r"\d") == [
        *LISTING,
        "public|cheap|view|materialize",
        "public|orders|table|materialize",
        "public|per_item|materialized view|materialize",
        "(3 rows)",
    ]


def test_backslash_dt_dv_dm_list_each_kind(port: int) -> None:
    assert psql(port, r"\dt") == [*LISTING, "public|orders|table|materialize", "(1 row)"]
    assert psql(port, r"\dv") == [*LISTING, "public|cheap|view|materialize", "(1 row)"]
    assert psql(port, r"\dm") == [
        *LISTING,
        "public|per_item|materialized view|materialize",
        "(1 row)",
    ]
    # A pattern (psql's OPERATOR(pg_catalog.~) over relname).
    assert psql(port, r"\dt ord*") == [*LISTING, "public|orders|table|materialize", "(1 row)"]


def test_backslash_d_of_a_missing_relation(port: int) -> None:
    result = run_psql(port, "-c", r"\d nope")
    assert 'Did not find any relation named "nope".' in result.stderr


def test_backslash_d_view_lists_columns(port: int) -> None:
    assert psql(port, r"\d cheap") == [
        'View "public.cheap"',
        "Column|Type|Collation|Nullable|Default",
        "id|integer||not null|",
        "item|text|||",
    ]


def test_backslash_d_table_and_materialized_view(port: int) -> None:
    """psql also asks pg_policy (`array_to_string(ARRAY(subquery), ',')`,
    `oid = ANY (polroles)`, `polroles = '{0}'`) and pg_inherits here."""
    assert psql(port, r"\d orders") == [
        'Table "public.orders"',
        "Column|Type|Collation|Nullable|Default",
        "id|integer||not null|",
        "item|text|||",
        "price|numeric|||",
    ]
    assert psql(port, r"\d per_item") == [
        'Materialized view "public.per_item"',
        "Column|Type|Collation|Nullable|Default",
        "item|text|||",
        "n|bigint||not null|",
    ]


def test_arrays_psql_uses(port: int) -> None:
    """`x = ANY (array)` with PostgreSQL's NULLs, array literals, and
    array_to_string of an ARRAY(subquery)."""
    dsn = f"host=127.0.0.1 port={port} user=materialize dbname=materialize"
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT 3 = ANY('{1,NULL}'::int[]), 1 = ANY('{1,NULL}'::int[]),"
            " 3 = ANY('{1,2}'::int[]), 'b c' = ANY('{a,\"b c\"}'::text[])"
        ).fetchone()
        assert row == (None, True, False, True)
        joined = conn.execute(
            "SELECT array_to_string(ARRAY(SELECT item FROM orders ORDER BY 1 DESC), '+'),"
            " pg_catalog.array_to_string(ARRAY(SELECT item FROM orders WHERE false), ',')"
        ).fetchone()
        assert joined == ("c+a", "")  # NULL elements are skipped
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            conn.execute("SELECT '{1,x}'::int[]")
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute("SELECT 1 = ANY(5)")


def test_catalog_functions(port: int) -> None:
    """The functions and casts psql uses, as PostgreSQL answers them."""
    dsn = f"host=127.0.0.1 port={port} user=materialize dbname=materialize"
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows: list[Any] = conn.execute(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull,"
            " c.oid::pg_catalog.regclass::pg_catalog.text"
            " FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
            " WHERE a.attrelid = 'orders'::pg_catalog.regclass ORDER BY a.attnum"
        ).fetchall()
        assert rows == [
            ("id", "integer", True, "orders"),
            ("item", "text", False, "orders"),
            ("price", "numeric", False, "orders"),
        ]
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT 'nope'::regclass")
