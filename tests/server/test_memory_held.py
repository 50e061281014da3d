"""What a finished statement leaves behind in the server: nothing that grows
with the number of statements run (issue 18's soak: the demo server's heap
grew with every round of a scripted user's queries)."""

from __future__ import annotations

import gc

import requests

from coordinator_lib.expr import relation as rel
from coordinator_lib.persist.machine import _DECODED, _KNOWN, SHARD_KEY_PREFIX
from coordinator_lib.server.environment import Environment
from tests.fixtures.served import connect


def _live_plans() -> int:
    """Aggregation plans alive in this process (the served server's included)."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, rel.Reduce))


def test_aggregate_queries_run_leave_no_plan_alive(environment: Environment) -> None:
    with connect(environment) as conn:
        conn.execute("CREATE TABLE t (k int, v int)")
        conn.execute("INSERT INTO t VALUES (1, 2), (1, 3), (2, 5)")

        def run(first: int, last: int) -> None:
            for i in range(first, last):  # distinct texts, as an ad-hoc user types them
                rows = conn.execute(f"SELECT k, sum(v) + {i}, count(*) FROM t GROUP BY k")
                assert sorted(rows.fetchall()) == [(1, 5 + i, 2), (2, 5 + i, 1)]

        run(0, 5)
        after_few = _live_plans()
        run(5, 45)
        assert _live_plans() <= after_few


def _cached_shards(environment: Environment) -> set[str]:
    """The shards whose state this process keeps cached, as bytes or decoded
    (persist/machine.py)."""
    consensus = environment.handle.coordinator.storage.persist.consensus
    keys = {*_KNOWN.get(consensus, {}), *_DECODED.get(consensus, {})}
    return {key for key in keys if key.startswith(SHARD_KEY_PREFIX)}


def test_dropped_tables_leave_no_cached_shard_state(environment: Environment) -> None:
    with connect(environment) as conn:
        conn.execute("CREATE TABLE kept (x int)")
        conn.execute("INSERT INTO kept VALUES (1)")
        before = _cached_shards(environment)
        for i in range(3):
            conn.execute(f"CREATE TABLE gone{i} (x int)")
            conn.execute(f"INSERT INTO gone{i} VALUES (1)")
            assert len(_cached_shards(environment)) == len(before) + 1
            conn.execute(f"DROP TABLE gone{i}")
        assert conn.execute("SELECT * FROM kept").fetchall() == [(1,)]
    assert _cached_shards(environment) == before


def test_metrics_show_the_servers_memory_by_allocator(environment: Environment) -> None:
    """GET /metrics says where the server's memory is (glibc, SQLite, Arrow,
    Python), so a soak's plot can show which part grows, not just RSS."""
    with connect(environment) as conn:
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("INSERT INTO t VALUES (1)")
        assert conn.execute("SELECT * FROM t").fetchall() == [(1,)]
    text = requests.get(f"http://127.0.0.1:{environment.http.port}/metrics", timeout=10).text
    parts = {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("tidemark_process_memory_bytes{")
    }
    assert set(parts) == {
        "rss",
        "rss_anon",
        "malloc_in_use",
        "malloc_free",
        "sqlite",
        "arrow",
        "python_blocks",
    }
    assert parts["rss"] > parts["rss_anon"] > 0 and parts["malloc_in_use"] > 0
    assert parts["sqlite"] > 0  # consensus's connections, the statement log's file
    assert parts["python_blocks"] > 10_000
