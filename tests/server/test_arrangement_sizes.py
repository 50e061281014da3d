"""A view's arranged state is visible over pgwire (issue 14):
mz_internal.mz_arrangement_sizes lists each stateful operator of a
materialized view with the entries and bytes it keeps, which follow the data;
DROP takes the state away with the view's data."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from coordinator_lib.persist.arrangement_store import ArrangementStore
from tests.server.test_view_errors import running

pytestmark = pytest.mark.timeout(120)

SIZES = (
    "SELECT operator, records, size FROM mz_internal.mz_arrangement_sizes"
    " WHERE name = 'best' ORDER BY operator"
)


def _wait_for(conn: psycopg.Connection[Any], sql: str, want: list[tuple[Any, ...]]) -> None:
    deadline = time.monotonic() + 60
    while conn.execute(sql).fetchall() != want:
        assert time.monotonic() < deadline, (sql, conn.execute(sql).fetchall(), want)
        time.sleep(0.1)


def test_arrangement_sizes_show_each_operators_state(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running(tmp_path / "env") as conn:
        conn.execute("CREATE TABLE item (id int, category text)")
        conn.execute("CREATE TABLE bid (item int, price int)")
        conn.execute(
            "CREATE MATERIALIZED VIEW best AS SELECT category, max(price) AS top"
            " FROM item JOIN bid ON item.id = bid.item GROUP BY category"
        )
        conn.execute("INSERT INTO item VALUES (1, 'a'), (2, 'a'), (3, 'b')")
        conn.execute("INSERT INTO bid VALUES (1, 10), (1, 12), (2, 7), (3, 5)")
        _wait_for(conn, "SELECT * FROM best ORDER BY category", [("a", 12), ("b", 5)])
        sizes = conn.execute(SIZES).fetchall()
        # The join's two inputs by item id; the Reduce's accumulators (one
        # per category) and its max's values in order.
        assert [(op, records) for op, records, _ in sizes] == [
            ("1.join left", 3),
            ("2.join right", 4),
            ("3.accumulators", 2),
            ("4.in order", 4),
        ]
        assert all(size > 0 for _, _, size in sizes)
        conn.execute("DELETE FROM bid WHERE price > 6")
        _wait_for(conn, "SELECT * FROM best ORDER BY category", [("b", 5)])
        assert [r[:2] for r in conn.execute(SIZES).fetchall()] == [
            ("1.join left", 3),
            ("2.join right", 1),
            ("3.accumulators", 1),
            ("4.in order", 1),
        ]
        store = ArrangementStore(tmp_path / "env" / "blob" / "_arrangements" / "arrangements.db")
        assert len(store.dataflows()) == 1
        conn.execute("DROP MATERIALIZED VIEW best")
        # The state goes with the view's data (its shard is finalized).
        deadline = time.monotonic() + 60
        while store.dataflows():
            assert time.monotonic() < deadline, store.dataflows()
            time.sleep(0.1)


def test_a_join_arranges_only_the_rows_its_where_clause_keeps(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A WHERE predicate on one join input filters that input before the
    join arranges it: the state holds the cheap bids, not every bid."""
    sizes = (
        "SELECT operator, records FROM mz_internal.mz_arrangement_sizes"
        " WHERE name = 'cheap' ORDER BY operator"
    )
    with running(tmp_path / "env") as conn:
        conn.execute("CREATE TABLE item (id int, category text)")
        conn.execute("CREATE TABLE bid (item int, price int)")
        conn.execute(
            "CREATE MATERIALIZED VIEW cheap AS SELECT category, price"
            " FROM item JOIN bid ON item.id = bid.item WHERE bid.price < 8"
        )
        conn.execute("INSERT INTO item VALUES (1, 'a'), (2, 'a'), (3, 'b')")
        conn.execute("INSERT INTO bid VALUES (1, 10), (1, 12), (2, 7), (3, 5)")
        _wait_for(conn, "SELECT * FROM cheap ORDER BY price", [("b", 5), ("a", 7)])
        assert conn.execute(sizes).fetchall() == [("1.join left", 3), ("2.join right", 2)]
