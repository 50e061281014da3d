"""No materialized view stalls another (issue 18): a view of constants is
complete for all time (its upper is the empty frontier, NULL in
mz_frontiers), and views over empty tables, idle webhook sources and a
load generator that rarely ticks answer at once, whatever order they are
created in among ordinary views. Over pgwire against a served coordinator.

Every read runs under a statement timeout: a stalled view fails its read
with 57014 instead of hanging the test (nothing here asserts a duration)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config

pytestmark = pytest.mark.timeout(300)

Conn = psycopg.Connection[Any]

# kind -> (the view's query, its contents); `{n}` makes names unique per example.
VIEWS: dict[str, tuple[str, list[tuple[Any, ...]]]] = {
    "constant": ("SELECT 1 AS x", [(1,)]),
    "union": ("SELECT 1 AS x UNION SELECT 2", [(1,), (2,)]),
    "values": ("VALUES (1, 'a'), (2, 'b')", [(1, "a"), (2, "b")]),
    "grouped_constant": ("SELECT count(*) AS n FROM (VALUES (1), (2), (3)) AS v (a)", [(3,)]),
    "empty_table": ("SELECT a FROM empty_t", []),
    "idle_webhook": ("SELECT body FROM hook", []),
    "idle_load_generator": ("SELECT count(*) AS n FROM lg", None),  # compared with lg itself
    "ordinary": ("SELECT a FROM t", [(1,), (2,)]),
    "ordinary_grouped": ("SELECT count(*) AS n, sum(a) AS s FROM t", [(2, 3)]),
}
CONSTANT = {"constant", "union", "values", "grouped_constant"}

FRONTIERS = """
    SELECT v.name, f.read_frontier, f.write_frontier
    FROM mz_internal.mz_frontiers f JOIN mz_materialized_views v ON f.object_id = v.id
"""


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    env = Environment(
        fast_config(tmp_path_factory.mktemp("views") / "env"), pgwire_port=0, http_port=0
    )
    env.start()
    try:
        with connect(env) as conn:
            conn.execute("CREATE TABLE t (a int)")
            conn.execute("INSERT INTO t VALUES (1), (2)")
            conn.execute("CREATE TABLE empty_t (a int)")
            conn.execute("CREATE SOURCE hook FROM WEBHOOK BODY FORMAT TEXT")
            # One tick when created, the next in an hour: its upper still
            # moves (the source is complete up to now), its contents do not.
            conn.execute("CREATE SOURCE lg FROM LOAD GENERATOR COUNTER (TICK INTERVAL '1h')")
        yield env
    finally:
        env.stop()


def connect(env: Environment) -> Conn:
    conn = psycopg.connect(
        f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize "
        "connect_timeout=10",
        autocommit=True,
    )
    conn.execute("SET statement_timeout = '30s'")
    return conn


def frontiers(conn: Conn) -> dict[str, tuple[int | None, int | None]]:
    return {name: (since, upper) for name, since, upper in conn.execute(FRONTIERS).fetchall()}


def check_contents(conn: Conn, kind: str, name: str) -> None:
    rows = sorted(conn.execute(f"SELECT * FROM {name}").fetchall())
    expected = VIEWS[kind][1]
    if expected is None:  # the load generator's view: its source at the same time
        conn.execute("BEGIN")
        (view,) = conn.execute(f"SELECT n FROM {name}").fetchone() or (None,)
        (source,) = conn.execute("SELECT count(*) FROM lg").fetchone() or (None,)
        conn.execute("COMMIT")
        assert view == source, (name, view, source)
        return
    assert rows == expected, (name, rows)


def create_and_check(conn: Conn, order: list[str], n: int) -> None:
    names = {kind: f"{kind}_{n}" for kind in order}
    try:
        for kind in order:
            conn.execute(f"CREATE MATERIALIZED VIEW {names[kind]} AS {VIEWS[kind][0]}")
        # Every view answers, in the order made and then in reverse.
        for kind in order + order[::-1]:
            check_contents(conn, kind, names[kind])
        seen = frontiers(conn)
        for kind, name in names.items():
            since, upper = seen[name]
            assert since is not None, (name, since, upper)
            if kind in CONSTANT:
                assert upper is None, (name, since, upper)  # complete for all time
            else:
                assert upper is not None and since <= upper, (name, since, upper)
        # Views over tables still follow their input: a new row shows up.
        conn.execute("INSERT INTO t VALUES (10)")
        try:
            if "ordinary" in names:
                rows = sorted(conn.execute(f"SELECT a FROM {names['ordinary']}").fetchall())
                assert rows == [(1,), (2,), (10,)]
            if "ordinary_grouped" in names:
                row = conn.execute(f"SELECT n, s FROM {names['ordinary_grouped']}").fetchone()
                assert row == (3, 13)
        finally:
            conn.execute("DELETE FROM t WHERE a = 10")
        # Their uppers keep moving, past the constant views' since.
        later = frontiers(conn)
        for kind, name in names.items():
            if kind not in CONSTANT:
                assert later[name][1] is not None and later[name][1] >= seen[name][1]
    finally:
        for name in names.values():
            conn.execute(f"DROP MATERIALIZED VIEW IF EXISTS {name}")


def test_the_issue_scenario_constant_view_first(environment: Environment) -> None:
    """The report: a view of constants created first stalled every view after it."""
    with connect(environment) as conn:
        conn.execute("CREATE MATERIALIZED VIEW cmv AS SELECT 1")
        conn.execute("CREATE MATERIALIZED VIEW mv1 AS SELECT a FROM t")
        try:
            assert sorted(conn.execute("SELECT * FROM mv1").fetchall()) == [(1,), (2,)]
            assert conn.execute("SELECT * FROM cmv").fetchall() == [(1,)]
            seen = frontiers(conn)
            assert seen["cmv"][1] is None
            assert seen["mv1"][1] is not None and seen["mv1"][0] < seen["mv1"][1]
        finally:
            conn.execute("DROP MATERIALIZED VIEW cmv")
            conn.execute("DROP MATERIALIZED VIEW mv1")


@pytest.mark.parametrize(
    "order",
    [
        sorted(VIEWS, key=lambda k: k not in CONSTANT),  # constants first
        sorted(VIEWS, key=lambda k: k in CONSTANT),  # constants last
    ],
    ids=["constants-first", "constants-last"],
)
def test_views_in_fixed_orders(environment: Environment, order: list[str]) -> None:
    with connect(environment) as conn:
        create_and_check(conn, order, 0)


_example = iter(range(1, 10_000))


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(order=st.permutations(list(VIEWS)))
def test_views_in_any_order(environment: Environment, order: list[str]) -> None:
    with connect(environment) as conn:
        create_and_check(conn, order, next(_example))


def test_a_constant_view_reads_at_any_time(environment: Environment) -> None:
    """Readable from its since on at every time, AS OF far in the future too,
    without waiting; a temporal filter over constants is exact at each time;
    views over it are complete for all time as well."""
    far = 4102444800000  # 2100-01-01
    with connect(environment) as conn:
        conn.execute("CREATE MATERIALIZED VIEW c AS VALUES (1), (2)")
        conn.execute(
            "CREATE MATERIALIZED VIEW tf AS SELECT * FROM (VALUES (1), (2)) AS v (a) "
            f"WHERE mz_now() < {far} - 1000 * a"
        )
        conn.execute("CREATE MATERIALIZED VIEW over_c AS SELECT column1 * 10 AS y FROM c")
        conn.execute("CREATE MATERIALIZED VIEW mixed AS SELECT a, column1 FROM t, c")
        try:
            assert sorted(conn.execute("SELECT * FROM c").fetchall()) == [(1,), (2,)]
            since, upper = frontiers(conn)["c"]
            assert since is not None and upper is None
            for at in (since, since + 1, int(time.time() * 1000), far, 2**40 * 1000):
                rows = conn.execute(f"SELECT * FROM c AS OF {at}").fetchall()
                assert sorted(rows) == [(1,), (2,)], at
            rows = conn.execute("SELECT * FROM c AS OF AT LEAST 0").fetchall()
            assert sorted(rows) == [(1,), (2,)]
            conn.execute("SET transaction_isolation = 'serializable'")
            assert sorted(conn.execute("SELECT * FROM c").fetchall()) == [(1,), (2,)]
            conn.execute("SET transaction_isolation = 'strict serializable'")
            conn.execute("BEGIN")
            assert sorted(conn.execute("SELECT * FROM c").fetchall()) == [(1,), (2,)]
            assert sorted(conn.execute("SELECT * FROM t").fetchall()) == [(1,), (2,)]
            conn.execute("COMMIT")
            # The temporal filter: each row leaves at its own time, all known now.
            assert sorted(conn.execute("SELECT * FROM tf").fetchall()) == [(1,), (2,)]
            assert conn.execute(f"SELECT * FROM tf AS OF {far - 1500}").fetchall() == [(1,)]
            assert conn.execute(f"SELECT * FROM tf AS OF {far}").fetchall() == []
            assert sorted(conn.execute("SELECT * FROM over_c").fetchall()) == [(10,), (20,)]
            seen = frontiers(conn)
            assert seen["tf"][1] is None and seen["over_c"][1] is None
            assert seen["mixed"][1] is not None  # follows t
            rows = sorted(conn.execute("SELECT * FROM mixed").fetchall())
            assert rows == [(1, 1), (1, 2), (2, 1), (2, 2)]
        finally:
            for name in ("mixed", "over_c", "tf", "c"):
                conn.execute(f"DROP MATERIALIZED VIEW {name}")


def test_a_closed_view_survives_a_restart(tmp_path: Path) -> None:
    config = fast_config(tmp_path / "env")
    env = Environment(config, pgwire_port=0, http_port=0)
    env.start()
    try:
        with connect(env) as conn:
            conn.execute("CREATE MATERIALIZED VIEW c AS SELECT 1 AS x UNION SELECT 2")
            assert sorted(conn.execute("SELECT * FROM c").fetchall()) == [(1,), (2,)]
            before = frontiers(conn)["c"]
    finally:
        env.stop()
    env = Environment(config, pgwire_port=0, http_port=0)
    env.start()
    try:
        with connect(env) as conn:
            conn.execute("CREATE TABLE t (a int)")
            conn.execute("INSERT INTO t VALUES (5)")
            conn.execute("CREATE MATERIALIZED VIEW after AS SELECT a FROM t")
            assert sorted(conn.execute("SELECT * FROM c").fetchall()) == [(1,), (2,)]
            assert conn.execute("SELECT * FROM after").fetchall() == [(5,)]
            assert frontiers(conn)["c"] == before
    finally:
        env.stop()


@pytest.mark.spark
def test_closed_views_and_their_index_on_spark(tmp_path: Path, spark: Any) -> None:
    """The same on the Spark engine (every step on Spark): a grouped view of
    constants (no accumulated state for a closing step), an index on a view
    of constants (its arrangement closes too), an ordinary view after them."""
    config = fast_config(tmp_path / "env", local_max_rows=0)
    env = Environment(config, pgwire_port=0, http_port=0, spark=spark)
    env.start()
    try:
        with connect(env) as conn:
            conn.execute("SET statement_timeout = '120s'")
            conn.execute(
                "CREATE MATERIALIZED VIEW g AS "
                "SELECT count(*) AS n, sum(a) AS s FROM (VALUES (1), (2), (3)) AS v (a)"
            )
            conn.execute("CREATE MATERIALIZED VIEW u AS SELECT 1 AS x UNION SELECT 2")
            conn.execute("CREATE INDEX u_idx ON u (x)")
            conn.execute("CREATE TABLE t (a int)")
            conn.execute("INSERT INTO t VALUES (7)")
            conn.execute("CREATE MATERIALIZED VIEW after AS SELECT a FROM t")
            assert conn.execute("SELECT * FROM after").fetchall() == [(7,)]
            assert conn.execute("SELECT * FROM g").fetchall() == [(3, 6)]
            assert sorted(conn.execute("SELECT * FROM u").fetchall()) == [(1,), (2,)]
            seen = frontiers(conn)
            assert seen["g"][1] is None and seen["u"][1] is None
            (index_upper,) = conn.execute(
                "SELECT f.write_frontier FROM mz_internal.mz_frontiers f "
                "JOIN mz_indexes i ON f.object_id = i.id WHERE i.name = 'u_idx'"
            ).fetchone() or (0,)
            assert index_upper is None
    finally:
        env.stop()
