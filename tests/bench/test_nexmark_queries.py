"""Every Nexmark query the benchmark runs (q0-q9, q20) plans through the real
SQL front end and its view, maintained by Tidemark's in-process engine, equals
DuckDB's answer over the same events, after hydration and after a delta. At a
few thousand events (no Spark), so a query that stops planning or starts
computing something else fails the suite, not only `make bench`."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from bench import nexmark
from bench.nexmark_queries import QUERIES, Query
from coordinator_lib.storage.nexmark import NexmarkBatch, NexmarkGenerator

# 200 events per second of event time: 3,000 events span 15 s, so the 10 s
# tumbling and hopping windows (q5, q7, q8) see more than one window.
BASE, DELTA, RATE = 3_000, 300, 200


def _duckdb(query: Query, batch: NexmarkBatch) -> object:
    con = duckdb.connect()
    try:
        for name, table in batch.tables().items():
            con.register(name, table)
        return nexmark.canonical(con.sql(query.render("duckdb")).to_arrow_table())
    finally:
        con.close()


def test_all_queries_plan_and_match_duckdb(tmp_path: Path) -> None:
    assert [q.name for q in QUERIES] == [f"q{i}" for i in range(10)] + ["q20"]
    generator = NexmarkGenerator(seed=3, rate=RATE)
    tidemark = nexmark.Tidemark(tmp_path, list(QUERIES))
    try:
        base = generator.events(0, BASE)
        t0 = tidemark.append(base)
        tidemark.plan(t0)
        assert list(tidemark.views) == [q.name for q in QUERIES]
        delta = generator.events(BASE, DELTA)
        everything = NexmarkBatch.concat([base, delta])
        for when, t, events in (("hydration", t0, base), ("delta", None, everything)):
            if t is None:
                t = tidemark.append(delta)
            for name, view in tidemark.views.items():
                assert tidemark.step(None, name)["where"] == "local"  # type: ignore[arg-type]
                got = tidemark.contents(name, t)
                assert got == _duckdb(view.query, events), f"{name} after {when}"
                assert got, f"{name} is empty after {when}: the check would prove nothing"
        starts = {row[2] for row in tidemark.contents("q5", t)}
        assert len(starts) > 1  # q5's hopping windows: hot items in more than one window
    finally:
        tidemark.close()


def test_a_query_the_planner_refuses_fails_the_bench(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pending query is an error (non-zero exit), found before any engine runs."""
    refused = Query("q99", "names a column bid lacks", "SELECT auction, no_such_column FROM bid")
    monkeypatch.setattr(nexmark, "QUERIES", (*QUERIES[:1], refused))
    out = tmp_path / "out"
    with pytest.raises(nexmark.QueryNotPlanned, match="q99"):
        nexmark.main(["--queries", "q0,q99", "--events", "100", "--out", str(out)])
    assert not out.exists()
