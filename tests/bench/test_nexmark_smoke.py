"""bench/nexmark.py at a tiny scale, so the benchmark does not rot: every
engine (Tidemark, Spark, Spark Declarative Pipelines, DuckDB) runs, the
outputs (JSON, Markdown, PNG) exist, every engine's view equals Tidemark's
(checked here again from the files each engine left behind), freshness was
measured over a real `tidemark serve`, and a Tidemark view that computes a
different answer makes the bench fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
import pytest

from bench import nexmark
from bench.nexmark_queries import QUERIES, Query

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

QUERIES_UNDER_TEST = ["q5", "q9"]  # hop windows; join + top-1
TINY = ["--events", "3000", "--repeat", "1", "--fractions", "0.01", "--no-sdp-cli"]


def test_nexmark_bench_smoke(spark: SparkSession, tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    argv = [*TINY, "--queries", ",".join(QUERIES_UNDER_TEST), "--fresh-samples", "3"]
    assert nexmark.main([*argv, "--out", str(out), "--work", str(work)]) == 0

    document = json.loads((out / "nexmark.json").read_text())
    run = document["run"]
    planned = run["planned"]
    assert planned == QUERIES_UNDER_TEST  # a query that does not plan fails the run
    assert run["sdp_error"] is None, run["sdp_error"]
    for name in planned:
        for cell in [run["hydration"][name], *run["results"][name].values()]:
            assert set(cell["seconds"]) == set(nexmark.ENGINES), cell
            assert all(s > 0 for s in cell["seconds"].values()), cell
            assert all(mb > 0 for mb in cell["peak_rss_mb"].values()), cell
            assert set(cell["memory_mb"]) == set(nexmark.ENGINES), cell
            # DuckDB is measured in its own process, not the tree holding the
            # Spark JVM: its peak is far below that tree's (JVM alone > 300 MB).
            assert cell["peak_rss_mb"]["duckdb"] < cell["peak_rss_mb"]["spark"] / 2, cell
            assert cell["checked_rows"] is not None  # the bench's own check ran
        assert run["results"][name]["1%"]["delta_events"] == 30
    markdown = (out / "nexmark.md").read_text()
    assert "| q5 | 1% (30 ev) |" in markdown and "SDP refresh" in markdown
    assert "tidemark growth / spark growth / sdp peak / duckdb peak" in markdown
    assert (out / "nexmark.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fresh = document["freshness"]
    assert "error" not in fresh, fresh
    assert [p["samples"] for p in fresh["paths"]] == [3, 3]
    assert all(0 < p["p50_ms"] <= p["p99_ms"] for p in fresh["paths"])

    # Independently of the bench's own check: each engine's stored result
    # equals Tidemark's view (its persist shard) at the last time, row for row.
    queries = [q for q in QUERIES if q.name in planned]
    tidemark = nexmark.Tidemark(work, queries)
    try:
        tidemark.plan(0)  # reopens the existing shards with their planned schemas
        last = tidemark.shards["bid"].upper().time - 1
        for name in planned:
            view = tidemark.contents(name, last)
            assert view, name  # every query under test has rows at this size
            others = {
                "spark": pq.read_table(work / "spark-out" / name),
                "duckdb": pq.read_table(work / "duckdb-out" / f"{name}.parquet"),
                "sdp": pq.read_table(work / "sdp" / "spark-warehouse" / name),
            }
            for engine, table in others.items():
                assert nexmark.canonical(table) == view, (name, engine)
    finally:
        tidemark.close()


class _WrongForTidemark(Query):
    """q2 with another modulus for Tidemark only: its view is then wrong."""

    def render(self, engine: str) -> str:
        sql = super().render(engine)
        return sql.replace("% 123", "% 124") if engine == "tidemark" else sql


def test_nexmark_bench_fails_on_a_wrong_view(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    q2 = next(q for q in QUERIES if q.name == "q2")
    wrong = _WrongForTidemark(q2.name, q2.title, q2.sql)
    assert wrong.render("tidemark") != q2.render("tidemark")
    monkeypatch.setattr(nexmark, "QUERIES", (wrong,))
    argv = [*TINY, "--queries", "q2", "--engines", "tidemark,duckdb", "--no-freshness"]
    with pytest.raises(nexmark.ViewMismatch, match="q2 after hydration: duckdb"):
        nexmark.main([*argv, "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out" / "nexmark.json").exists()
