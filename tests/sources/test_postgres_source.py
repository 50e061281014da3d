"""PostgreSQL sources against a real upstream server (logical replication),
through pgwire as a user reaches Tidemark. Each check compares Tidemark's
answer with the same query run in PostgreSQL once the upstream is quiet."""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.sources.conftest import PASSWORD, REPLICATOR, connection_sql, wait_until

Conn = psycopg.Connection[Any]

# Run in both Tidemark (over the subsources) and PostgreSQL (over the tables).
QUERIES = (
    "SELECT id, v, n FROM a",
    "SELECT k, d, f, c FROM b",
    "SELECT a.id, a.v, b.d FROM a JOIN b ON b.k = a.id",
    "SELECT count(*), sum(n) FROM a",
)


def setup_upstream(upstream: Conn) -> None:
    upstream.execute("CREATE TABLE a (id int PRIMARY KEY, v text, n numeric)")
    upstream.execute("CREATE TABLE b (k bigint NOT NULL, d date, f double precision, c char(4))")
    for table in ("a", "b"):
        upstream.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
    upstream.execute(r"INSERT INTO a VALUES (1, 'one', 1.5), (2, E'tab\there\nnew\\line', NULL)")
    upstream.execute("INSERT INTO b VALUES (1, '2024-01-02', 0.25, 'ab'), (7, NULL, -1, NULL)")
    upstream.execute("CREATE PUBLICATION p FOR TABLE a, b")


def connect_tidemark(tidemark: Conn, upstream_url: str) -> None:
    tidemark.execute(f"CREATE SECRET pgpass AS '{PASSWORD}'")
    tidemark.execute(connection_sql(upstream_url))


def answers(conn: Conn, query: str) -> list[tuple[Any, ...]]:
    return sorted(conn.execute(query).fetchall(), key=repr)


def wait_for_match(tidemark: Conn, upstream: Conn, query: str) -> None:
    expected = answers(upstream, query)
    wait_until(lambda: answers(tidemark, query) == expected, f"{query} == {expected}")


# One upstream change: (action, key, small int, nullable small int, char(4) value).
CHANGE = st.tuples(
    st.sampled_from(("insert_a", "update_a", "delete_a", "insert_b", "update_b", "delete_b")),
    st.integers(1, 12),
    st.integers(-9, 9),
    st.one_of(st.none(), st.integers(-9, 9)),
    st.sampled_from(["x", "yz", None]),
)
TRANSACTION = st.lists(CHANGE, min_size=1, max_size=4)


def apply_transaction(upstream: Conn, changes: list[tuple[str, int, int, int | None, Any]]) -> None:
    """One upstream transaction of inserts, updates and deletes on a and b."""
    with upstream.transaction():
        for action, key, small, maybe, text in changes:
            if action == "insert_a":
                upstream.execute(
                    "INSERT INTO a VALUES (%s, %s, %s) ON CONFLICT (id) DO NOTHING",
                    (key, f"v{small}", None if maybe is None else maybe / 4),
                )
            elif action == "update_a":
                upstream.execute(
                    "UPDATE a SET v = %s, n = coalesce(n, 0) + 1 WHERE id = %s", (f"u{small}", key)
                )
            elif action == "delete_a":
                upstream.execute("DELETE FROM a WHERE id = %s", (key,))
            elif action == "insert_b":
                upstream.execute(
                    "INSERT INTO b VALUES (%s, %s, %s, %s)", (key, "2025-03-04", small / 8, text)
                )
            elif action == "update_b":
                upstream.execute("UPDATE b SET c = %s WHERE k = %s", (text, key))
            else:
                upstream.execute(
                    "DELETE FROM b WHERE ctid = (SELECT min(ctid) FROM b WHERE k = %s)", (key,)
                )


def test_snapshot_and_replicated_changes_match_upstream(
    upstream: Conn, tidemark: Conn, upstream_url: str
) -> None:
    setup_upstream(upstream)
    connect_tidemark(tidemark, upstream_url)
    tidemark.execute("CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR ALL TABLES")
    tidemark.execute(
        "CREATE MATERIALIZED VIEW joined AS SELECT a.id, a.v, b.d FROM a JOIN b ON b.k = a.id"
    )
    # The snapshot: readable as soon as CREATE SOURCE returns.
    for query in QUERIES:
        assert answers(tidemark, query) == answers(upstream, query), query

    # Few examples, each a batch of upstream transactions applied to what the
    # previous ones left: the source and the server are set up once.
    @settings(
        max_examples=5,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.lists(TRANSACTION, min_size=1, max_size=8))
    def batches_match(transactions: list[Any]) -> None:
        for changes in transactions:
            apply_transaction(upstream, changes)
        for query in QUERIES:
            wait_for_match(tidemark, upstream, query)
        assert answers(tidemark, "SELECT * FROM joined") == answers(upstream, QUERIES[2])

    batches_match()


def test_each_upstream_transaction_lands_at_one_time(
    upstream: Conn, tidemark: Conn, upstream_url: str, environment: Any
) -> None:
    """Money moves between two tables in one upstream transaction each time:
    the total over both, at every time a SUBSCRIBE reports, is the same."""
    upstream.execute("CREATE TABLE acct_a (id int PRIMARY KEY, bal int NOT NULL)")
    upstream.execute("CREATE TABLE acct_b (id int PRIMARY KEY, bal int NOT NULL)")
    for table in ("acct_a", "acct_b"):
        upstream.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
    upstream.execute("INSERT INTO acct_a SELECT g, 100 FROM generate_series(1, 5) g")
    upstream.execute("INSERT INTO acct_b SELECT g, 100 FROM generate_series(1, 5) g")
    upstream.execute("CREATE PUBLICATION p FOR TABLE acct_a, acct_b")
    connect_tidemark(tidemark, upstream_url)
    tidemark.execute(
        "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') "
        "FOR TABLES (acct_a, acct_b AS other)"
    )
    tidemark.execute(
        "CREATE MATERIALIZED VIEW balances AS SELECT 'a' AS side, id, bal FROM acct_a"
        " UNION ALL SELECT 'b', id, bal FROM other"
    )
    dsn = f"host=127.0.0.1 port={environment.pgwire.port} user=materialize dbname=materialize"
    with psycopg.connect(dsn) as watcher:
        watcher.execute("DECLARE c CURSOR FOR SUBSCRIBE balances")
        rng = random.Random(5)
        for step in range(25):
            with upstream.transaction():
                amount = rng.randint(1, 30)
                upstream.execute(
                    "UPDATE acct_a SET bal = bal - %s WHERE id = %s", (amount, step % 5 + 1)
                )
                upstream.execute(
                    "UPDATE acct_b SET bal = bal + %s WHERE id = %s", (amount, step % 3 + 1)
                )
            time.sleep(0.1)  # pacing: the changes reach Tidemark in many batches
        wait_for_match(tidemark, upstream, "SELECT sum(bal) FROM acct_a")
        updates: list[tuple[Any, ...]] = []
        while batch := watcher.execute("FETCH ALL c WITH (timeout = '1s')").fetchall():
            updates += batch
    contents: Counter[tuple[Any, ...]] = Counter()
    times = sorted({int(u[0]) for u in updates})
    assert len(times) > 3  # the changes arrived at many times
    for time_ in times:
        for u in updates:
            if int(u[0]) == time_:
                contents[tuple(u[2:])] += u[1]
        total = sum(row[2] * n for row, n in contents.items())
        assert total == 1000, f"at {time_} the accounts hold {total}"


def test_drop_source_drops_its_replication_slot(
    upstream: Conn, tidemark: Conn, upstream_url: str
) -> None:
    setup_upstream(upstream)
    connect_tidemark(tidemark, upstream_url)
    tidemark.execute("CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR TABLES (a)")
    slots = "SELECT slot_name FROM pg_replication_slots WHERE database = current_database()"
    wait_until(lambda: len(upstream.execute(slots).fetchall()) == 1, "the source's slot")
    assert [r[0] for r in tidemark.execute("SHOW SOURCES").fetchall()] == ["a", "s"]
    with pytest.raises(psycopg.errors.DependentObjectsStillExist):
        tidemark.execute("DROP SOURCE s")
    tidemark.execute("DROP SOURCE s CASCADE")
    assert upstream.execute(slots).fetchall() == []
    assert tidemark.execute("SHOW SOURCES").fetchall() == []


@pytest.mark.parametrize("changed_after_snapshot", [True, False])
def test_upstream_schema_change_stops_only_that_subsource(
    upstream: Conn, tidemark: Conn, upstream_url: str, changed_after_snapshot: bool
) -> None:
    setup_upstream(upstream)
    connect_tidemark(tidemark, upstream_url)
    tidemark.execute("CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR ALL TABLES")
    if changed_after_snapshot:  # else the snapshot may already see the new column
        wait_for_match(tidemark, upstream, "SELECT id, v, n FROM a")
    upstream.execute("ALTER TABLE a ADD COLUMN extra int")
    upstream.execute("INSERT INTO a VALUES (3, 'three', 3, 3)")
    upstream.execute("INSERT INTO b VALUES (3, NULL, 3)")
    wait_for_match(tidemark, upstream, "SELECT k, d, f, c FROM b")

    def a_fails() -> bool:
        try:
            tidemark.execute("SELECT * FROM a").fetchall()
        except psycopg.errors.ObjectNotInPrerequisiteState as error:
            assert "incompatible schema change" in str(error)
            assert "extra" in str(error)
            return True
        return False

    wait_until(a_fails, "reads of a to fail")
    upstream.execute("INSERT INTO b VALUES (4, NULL, 4)")
    wait_for_match(tidemark, upstream, "SELECT k, d, f, c FROM b")
    statuses = {
        name.split(".")[-1]: (status, error)
        for name, status, error in tidemark.execute(
            "SELECT name, status, error FROM mz_internal.mz_source_statuses"
        ).fetchall()
    }
    assert statuses["s"] == ("running", None)
    assert statuses["b"] == ("running", None)
    assert statuses["a"][0] == "ceased" and "incompatible schema change" in statuses["a"][1]


def test_a_source_that_cannot_reach_upstream_is_stalled_then_resumes(
    upstream: Conn, tidemark: Conn, upstream_url: str
) -> None:
    setup_upstream(upstream)
    connect_tidemark(tidemark, upstream_url)
    tidemark.execute("CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR TABLES (a)")
    wait_for_match(tidemark, upstream, "SELECT id, v, n FROM a")
    status = "SELECT status, error FROM mz_internal.mz_source_statuses WHERE name LIKE '%.s'"
    assert tidemark.execute(status).fetchall() == [("running", None)]
    try:
        upstream.execute(f"ALTER ROLE {REPLICATOR} NOLOGIN")
        upstream.execute(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
            " WHERE database = current_database() AND active_pid IS NOT NULL"
        )
        upstream.execute("INSERT INTO a VALUES (40, 'while away', 4)")

        def stalled() -> bool:
            rows = tidemark.execute(status).fetchall()
            return rows[0][0] == "stalled" and "not permitted to log in" in rows[0][1]

        wait_until(stalled, "the source to report it cannot log in")
    finally:
        upstream.execute(f"ALTER ROLE {REPLICATOR} LOGIN")
    wait_for_match(tidemark, upstream, "SELECT id, v, n FROM a")
    wait_until(lambda: tidemark.execute(status).fetchall() == [("running", None)], "running")


def test_an_idle_source_lets_its_slot_release_other_tables_wal(
    upstream: Conn, tidemark: Conn, upstream_url: str
) -> None:
    setup_upstream(upstream)
    upstream.execute("CREATE TABLE unpublished (x int)")
    connect_tidemark(tidemark, upstream_url)
    tidemark.execute("CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR TABLES (a)")
    wait_for_match(tidemark, upstream, "SELECT id, v, n FROM a")
    upstream.execute("INSERT INTO unpublished SELECT generate_series(1, 1000)")
    written = upstream.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    confirmed = (
        "SELECT confirmed_flush_lsn >= %s FROM pg_replication_slots"
        " WHERE database = current_database()"
    )
    wait_until(
        lambda: upstream.execute(confirmed, (written,)).fetchone() == (True,),
        "the slot to confirm past the unpublished table's writes",
    )


def test_upstream_truncate_stops_only_that_subsource(
    upstream: Conn, tidemark: Conn, upstream_url: str
) -> None:
    setup_upstream(upstream)
    connect_tidemark(tidemark, upstream_url)
    tidemark.execute("CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR ALL TABLES")
    wait_for_match(tidemark, upstream, "SELECT id, v, n FROM a")
    upstream.execute("TRUNCATE a")
    upstream.execute("INSERT INTO b VALUES (5, NULL, 5)")
    wait_for_match(tidemark, upstream, "SELECT k, d, f, c FROM b")

    def a_fails() -> bool:
        try:
            tidemark.execute("SELECT * FROM a").fetchall()
        except psycopg.errors.ObjectNotInPrerequisiteState as error:
            assert "truncated upstream" in str(error)
            return True
        return False

    wait_until(a_fails, "reads of a to fail")
    upstream.execute("INSERT INTO b VALUES (6, NULL, 6)")
    wait_for_match(tidemark, upstream, "SELECT k, d, f, c FROM b")


def test_for_schemas_takes_the_published_tables_of_those_schemas(
    upstream: Conn, tidemark: Conn, upstream_url: str
) -> None:
    setup_upstream(upstream)
    upstream.execute("CREATE SCHEMA sales")
    upstream.execute("CREATE TABLE sales.orders (id int, item text)")
    upstream.execute("ALTER TABLE sales.orders REPLICA IDENTITY FULL")
    upstream.execute("INSERT INTO sales.orders VALUES (1, 'lamp')")
    upstream.execute(f"GRANT USAGE ON SCHEMA sales TO {REPLICATOR}")
    upstream.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA sales TO {REPLICATOR}")
    upstream.execute("ALTER PUBLICATION p ADD TABLE sales.orders")
    connect_tidemark(tidemark, upstream_url)
    with pytest.raises(psycopg.errors.UndefinedTable, match="no tables in schemas nope"):
        tidemark.execute(
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR SCHEMAS (nope)"
        )
    tidemark.execute("CREATE CLUSTER c (REPLICATION FACTOR 0)")
    tidemark.execute(
        "CREATE SOURCE s IN CLUSTER c FROM POSTGRES CONNECTION pg (PUBLICATION 'p') "
        "FOR SCHEMAS (sales)"
    )
    assert tidemark.execute("SHOW SOURCES").fetchall() == [("orders", "c"), ("s", "c")]
    upstream.execute("INSERT INTO sales.orders VALUES (2, 'desk')")
    upstream.execute("INSERT INTO a VALUES (9, 'not in sales', 9)")
    wait_until(
        lambda: answers(tidemark, "SELECT id, item FROM orders") == [(1, "lamp"), (2, "desk")],
        "orders to replicate",
    )
