"""bench/ivm.py at a tiny scale, so the benchmark does not rot: it runs end
to end, reports one row per delta with real timings, its correctness check
ran, the view it maintained agrees with DuckDB over the same shards, and a
view that disagrees with the recompute makes it fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pytest

from bench import ivm
from coordinator_lib.persist import PersistClient

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TINY = ["--fact-rows", "20000", "--dim-rows", "1000", "--repeat", "1"]


def _duckdb_view(work: Path, as_of: int) -> dict[str, tuple[int, int]]:
    """The view's query over the shards' snapshots, by an independent engine."""
    client = PersistClient.open(work / "persist")
    try:
        fact = client.open_shard("fact", ivm.FACT_DESC).snapshot_table(as_of)
        dim = client.open_shard("dim", ivm.DIM_DESC).snapshot_table(as_of)
    finally:
        client.close()
    with duckdb.connect() as con:
        con.register("fact", fact)
        con.register("dim", dim)
        rows = con.execute(
            """SELECT d.category, sum(f.__diff * d.__diff), sum(f.amount * f.__diff * d.__diff)
               FROM fact f JOIN dim d ON f.dim_id = d.id GROUP BY d.category"""
        ).fetchall()
    return {category: (int(n), int(total)) for category, n, total in rows if n}


def _stored_view(work: Path, as_of: int) -> dict[str, tuple[int, int]]:
    client = PersistClient.open(work / "persist")
    try:
        desc = ivm.plan_view(0)[0].desc
        rows = client.open_shard("sales_by_category", desc).snapshot(as_of)
    finally:
        client.close()
    assert all(diff == 1 for _, diff in rows)
    return {category: (int(n), int(total)) for (category, n, total), _ in rows}


def test_ivm_bench_smoke(spark: SparkSession, tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    assert ivm.main([*TINY, "--out", str(out), "--work", str(work)]) == 0

    document = json.loads((out / "ivm.json").read_text())
    results = document["results"]
    assert [r["run"] for r in results] == ["fact 1%", "fact 0.1%", "fact 0.01%", "dim 1%"]
    groups = document["meta"]["groups"]
    assert groups == 100
    for r in [document["hydration"], *results]:
        assert r["step_s"] > 0 and r["recompute_s"] > 0 and r["ratio"] > 0, r
        assert r["checked_groups"] == groups, r  # the correctness check ran and matched
        assert r["delta_rows"] > 0 and r["rows_written"] > 0, r
    fact_deltas = [r["delta_rows"] for r in results[:3]]
    assert fact_deltas == sorted(fact_deltas, reverse=True)
    assert document["what_bounds_it"]
    markdown = (out / "ivm.md").read_text()
    assert "| fact 0.01% |" in markdown and "What bounds the step" in markdown

    # Independently of the bench's own check: the view it left behind equals
    # DuckDB's answer over the same shards at the last time.
    last = document["meta"]["final_time"] - 1
    view = _stored_view(work, last)
    assert len(view) == groups
    assert view == _duckdb_view(work, last)


def test_ivm_bench_fails_on_a_wrong_view(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Maintain a different view than the recompute computes: the check must say so.
    wrong = ivm.VIEW_SQL.replace("sum(f.amount)", "sum(f.qty)")
    assert wrong != ivm.VIEW_SQL
    monkeypatch.setattr(ivm, "VIEW_SQL", wrong)
    with pytest.raises(ivm.ViewMismatch, match="differs from the recompute"):
        ivm.main([*TINY, "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out" / "ivm.json").exists()
