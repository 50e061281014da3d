"""Nexmark as a SQL source: `CREATE SOURCE ... FROM LOAD GENERATOR NEXMARK
FOR ALL TABLES` through the coordinator (in-process, no Spark), its
subsources person, auction and bid in the 1:3:46 proportions, the same
events as the generator the benchmark uses, and the same again after a
restart (nothing lost, nothing duplicated)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

from coordinator_lib.adapter.client import serve
from coordinator_lib.storage.nexmark import NexmarkGenerator
from tests.adapter.conftest import Run, fast_config, run_on

SEED, PER_TICK = 7, 50
CREATE = (
    "CREATE SOURCE nx FROM LOAD GENERATOR NEXMARK"
    f" (TICK INTERVAL '100ms', SEED {SEED}, EVENTS PER TICK {PER_TICK}) FOR ALL TABLES"
)
COUNTS = (
    "SELECT (SELECT count(*) FROM person), (SELECT count(*) FROM auction),"
    " (SELECT count(*) FROM bid)"
)


def _rows(table: pa.Table) -> Counter:
    return Counter(tuple(r.values()) for r in table.to_pylist())


def _counts_after(sql: Run, least_persons: int) -> tuple[int, int, int]:
    """The three counts at one timestamp, once at least `least_persons` ticks ran."""
    deadline = time.monotonic() + 60
    while True:
        ((persons, auctions, bids),) = sql(COUNTS)
        if persons >= least_persons or time.monotonic() > deadline:
            return persons, auctions, bids
        time.sleep(0.1)


def _check_is_the_stream(sql: Run) -> int:
    """Each subsource holds exactly the generator's first ticks; returns how many."""
    ticks = {}
    for name in ("person", "auction", "bid"):
        got = Counter(sql(f"SELECT * FROM {name}"))
        per_tick = {"person": 1, "auction": 3, "bid": 46}[name]
        n, rest = divmod(sum(got.values()), per_tick)
        assert rest == 0, (name, sum(got.values()))
        expected = getattr(NexmarkGenerator(SEED).events(0, n * PER_TICK), name)
        assert got == _rows(expected), name
        ticks[name] = n
    return min(ticks.values())


def test_nexmark_load_generator_source(tmp_path: Path) -> None:
    env = tmp_path / "env"
    handle = serve(fast_config(env))
    try:
        sql = run_on(handle.client.startup("materialize"))
        sql(CREATE)
        names = {name for name, *_ in sql("SHOW SOURCES")}
        assert {"nx", "person", "auction", "bid"} <= names
        persons, auctions, bids = _counts_after(sql, 3)
        assert persons >= 3
        # One timestamp, every tick's 50 events: exactly 1:3:46.
        assert (auctions, bids) == (3 * persons, 46 * persons)
        # Every person is unique (one statement: the source ticks on meanwhile).
        ((total, distinct),) = sql("SELECT count(*), count(DISTINCT id) FROM person")
        assert total == distinct >= persons
        before = _check_is_the_stream(sql)
        assert handle.coordinator.compute.spark.started is False
    finally:
        handle.shutdown()

    handle = serve(fast_config(env))  # a restart on the same environment
    try:
        sql = run_on(handle.client.startup("materialize"))
        persons, auctions, bids = _counts_after(sql, before + 3)
        assert persons >= before + 3  # ingestion resumed
        assert (auctions, bids) == (3 * persons, 46 * persons)
        # The same events as before the restart, then the next ones, once each.
        assert _check_is_the_stream(sql) >= before + 3
    finally:
        handle.shutdown()
