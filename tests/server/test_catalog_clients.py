"""What client libraries read from the catalog (issue 19): SQLAlchemy's
inspector (table, view and materialized view names, columns with types
and nullability), information_schema.tables / columns, and psycopg's named
(server-side) cursors fetching in batches (DECLARE, Describe of the cursor's
portal, FETCH, pg_cursors before CLOSE). Over pgwire on 127.0.0.1, in-process
engine."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from tests.fixtures.served import connect, served
from tests.fixtures.served import dsn as served_dsn

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("clients") / "env") as env:
        with connect(env) as conn:
            conn.execute("CREATE TABLE orders (id int NOT NULL, item text, price numeric)")
            conn.execute("INSERT INTO orders VALUES (1, 'a', 1), (2, 'b', 2), (3, 'a', 30)")
            conn.execute("INSERT INTO orders VALUES (4, 'c', 4), (5, 'a', 5), (6, 'b', 60)")
            conn.execute("INSERT INTO orders VALUES (7, 'c', 7)")
            conn.execute("CREATE VIEW cheap AS SELECT id, item FROM orders WHERE price < 10")
            conn.execute(
                "CREATE MATERIALIZED VIEW per_item AS "
                "SELECT item, count(*) AS n FROM orders GROUP BY item"
            )
        yield served_dsn(env)


def engine(dsn: str) -> sa.Engine:
    parts = dict(p.split("=") for p in dsn.split())
    url = f"postgresql+psycopg://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}"
    return sa.create_engine(url)


def test_sqlalchemy_inspector(dsn: str) -> None:
    inspector = sa.inspect(engine(dsn))
    assert inspector.get_table_names() == ["orders"]
    assert inspector.get_view_names() == ["cheap"]
    assert inspector.get_materialized_view_names() == ["per_item"]
    columns = [
        (c["name"], type(c["type"]).__name__, c["nullable"], c["default"])
        for c in inspector.get_columns("orders")
    ]
    assert columns == [
        ("id", "INTEGER", False, None),
        ("item", "TEXT", True, None),
        ("price", "NUMERIC", True, None),
    ]
    view_columns = [(c["name"], c["nullable"]) for c in inspector.get_columns("per_item")]
    assert view_columns == [("item", True), ("n", False)]
    assert inspector.has_table("orders") and not inspector.has_table("nope")


def test_information_schema(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_schema, table_name, table_type FROM information_schema.tables"
            " WHERE table_schema = 'public' ORDER BY table_name"
        ).fetchall()
        assert tables == [
            ("public", "cheap", "VIEW"),
            ("public", "orders", "BASE TABLE"),
            ("public", "per_item", "MATERIALIZED VIEW"),
        ]
        columns = conn.execute(
            "SELECT column_name, ordinal_position, is_nullable, data_type"
            " FROM information_schema.columns WHERE table_name = 'orders'"
            " ORDER BY ordinal_position"
        ).fetchall()
        assert columns == [
            ("id", 1, "NO", "integer"),
            ("item", 2, "YES", "text"),
            ("price", 3, "YES", "numeric"),
        ]


def test_psycopg_named_cursor_fetches_in_batches(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        with conn.cursor(name="orders_by_id") as cursor:
            cursor.itersize = 3
            cursor.execute("SELECT id, item FROM orders ORDER BY id")
            assert [c.name for c in cursor.description] == ["id", "item"]
            assert cursor.fetchmany(2) == [(1, "a"), (2, "b")]
            listed = conn.execute("SELECT name, is_holdable FROM pg_catalog.pg_cursors").fetchall()
            assert listed == [("orders_by_id", False)]
            assert cursor.fetchone() == (3, "a")
            assert list(cursor) == [(4, "c"), (5, "a"), (6, "b"), (7, "c")]
        # Closed: gone from pg_cursors.
        assert conn.execute("SELECT count(*) FROM pg_catalog.pg_cursors").fetchone() == (0,)
        conn.rollback()


def test_json_build_object(dsn: str) -> None:
    """SQLAlchemy's get_columns asks for a collation with json_build_object."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT json_build_object('name', 'x', 'n', 2, 'ok', true, 'none', NULL)"
        ).fetchone()
        assert row == ({"name": "x", "n": 2, "ok": True, "none": None},)
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute("SELECT json_build_object('a')")
