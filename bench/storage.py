"""Storage benchmark: what Tidemark's durability protocol costs, measured
side by side with a baseline doing the same I/O without it.

- appends/s, 1-row and 100k-row batches (SQLite consensus), against writing
  the same table as a durable Parquet file (write + fsync) and nothing else;
- snapshot of N rows (default 10M) through pyarrow and through Spark, against
  DuckDB consolidating the very same Parquet files (an independent engine);
- compaction rows/s, against the same read-advance-consolidate-write done by
  DuckDB over the same files.

Writes bench/results/storage.json and storage.md. `--rows` scales the
snapshot size (the test suite runs it tiny to keep it from rotting).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from coordinator_lib.persist import PersistClient, Shard
from coordinator_lib.repr import Frontier, RelationDesc, Update

DESC = RelationDesc.of(
    ("id", "bigint", False), ("category", "integer", False), ("amount", "double")
)
RESULTS = Path(__file__).parent / "results"


def _median_seconds(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _table(rows: int, start_time: int, seed: int, times: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(rng.integers(0, max(rows // 2, 1), rows), pa.int64()),
            "category": pa.array(rng.integers(0, 100, rows), pa.int32()),
            "amount": pa.array(rng.random(rows) * 100, pa.float64()),
            "__time": pa.array(start_time + rng.integers(0, times, rows), pa.int64()),
            "__diff": pa.array(np.ones(rows, dtype=np.int64)),
        }
    )


def _durable_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, compression="zstd")
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def bench_appends(work: Path, small_count: int, large_count: int) -> list[dict]:
    client = PersistClient.open(work / "appends")
    results = []
    for label, rows, count in (("1-row", 1, small_count), ("100k-row", 100_000, large_count)):
        shard = client.open_shard(f"append-{rows}", DESC)
        tables = [_table(rows, i, seed=i) for i in range(count)]
        base_dir = work / f"baseline-{rows}"
        base_dir.mkdir()

        def tidemark(tables: list[pa.Table] = tables, shard: Shard = shard) -> None:
            for i, table in enumerate(tables):
                shard.compare_and_append_table(table, Frontier.at(i), Frontier.at(i + 1))

        def baseline(tables: list[pa.Table] = tables, base_dir: Path = base_dir) -> None:
            for i, table in enumerate(tables):
                _durable_parquet(table, base_dir / f"{i}.parquet")

        tidemark_s = _median_seconds(tidemark, 1)
        baseline_s = _median_seconds(baseline, 1)
        results.append(
            {
                "what": f"append, {label} batches",
                "tidemark_per_s": count / tidemark_s,
                "baseline_per_s": count / baseline_s,
                "baseline": "durable Parquet file write, no consensus",
                "ratio": tidemark_s / baseline_s,
            }
        )
    # The row-at-a-time API, for the small writes tables see.
    shard = client.open_shard("append-rows", DESC)
    start = time.perf_counter()
    for i in range(small_count):
        shard.compare_and_append([Update((i, 1, 1.0), i, 1)], Frontier.at(i), Frontier.at(i + 1))
    rows_s = time.perf_counter() - start
    results.append(
        {
            "what": "append, 1-row via compare_and_append(updates)",
            "tidemark_per_s": small_count / rows_s,
        }
    )
    client.close()
    return results


def _load_snapshot_shard(work: Path, rows: int, batches: int) -> tuple[Shard, list[str]]:
    client = PersistClient.open(work / "snapshot")
    shard = client.open_shard("snapshot", DESC)
    per_batch = rows // batches
    for i in range(batches):
        table = _table(per_batch, i * 10, seed=100 + i, times=10)
        shard.compare_and_append_table(table, Frontier.at(i * 10), Frontier.at(i * 10 + 10))
    state = shard.state()
    files = [str(f) for b in state.batches for f in shard.blob.batch_files(shard.shard_id, b.key)]
    return shard, files


def _duckdb_consolidate(files: list[str], as_of: int) -> int:
    query = """
        SELECT count(*) FROM (
            SELECT id, category, amount, sum(__diff) AS d
            FROM read_parquet($files) WHERE __time <= $as_of
            GROUP BY ALL HAVING sum(__diff) <> 0)
    """
    with duckdb.connect() as con:
        con.execute("SET threads TO 2")
        return con.execute(query, {"files": files, "as_of": as_of}).fetchone()[0]


def bench_snapshot(work: Path, rows: int, repeat: int, spark_too: bool) -> list[dict]:
    shard, files = _load_snapshot_shard(work, rows, batches=10)
    as_of = shard.upper().time - 1  # type: ignore[operator]
    duck_s = _median_seconds(lambda: _duckdb_consolidate(files, as_of), repeat)
    arrow_s = _median_seconds(lambda: shard.snapshot_table(as_of), repeat)
    arrow_rows = shard.snapshot_table(as_of).num_rows
    assert arrow_rows == _duckdb_consolidate(files, as_of), "pyarrow and DuckDB disagree"
    results = [
        {
            "what": f"snapshot of {rows:,} rows, pyarrow",
            "tidemark_s": arrow_s,
            "baseline_s": duck_s,
            "baseline": "DuckDB consolidating the same Parquet files",
            "ratio": arrow_s / duck_s,
            "rows_per_s": rows / arrow_s,
        }
    ]
    if spark_too:
        from coordinator_lib.persist.spark_shard import snapshot_dataframe
        from coordinator_lib.spark_session import get_or_create_spark

        spark = get_or_create_spark("local[2]", shuffle_partitions=2)
        try:

            def run_spark() -> None:
                df = snapshot_dataframe(shard, spark, as_of)
                df.write.format("noop").mode("overwrite").save()

            run_spark()  # warm the JVM
            spark_s = _median_seconds(run_spark, repeat)
            results.append(
                {
                    "what": f"snapshot of {rows:,} rows, Spark (local[2])",
                    "tidemark_s": spark_s,
                    "baseline_s": duck_s,
                    "baseline": "DuckDB consolidating the same Parquet files",
                    "ratio": spark_s / duck_s,
                    "rows_per_s": rows / spark_s,
                }
            )
        finally:
            spark.stop()
    return results


def bench_compaction(work: Path, rows: int, batches: int) -> dict:
    client = PersistClient.open(work / "compaction")
    shard = client.open_shard("compaction", DESC)
    per_batch = rows // batches
    for i in range(batches):
        table = _table(per_batch, i, seed=500 + i)
        shard.compare_and_append_table(table, Frontier.at(i), Frontier.at(i + 1))
    files = [
        str(f) for b in shard.state().batches for f in shard.blob.batch_files(shard.shard_id, b.key)
    ]
    out = work / "duck-compacted.parquet"
    start = time.perf_counter()
    with duckdb.connect() as con:
        con.execute("SET threads TO 2")
        con.execute(
            f"""COPY (SELECT id, category, amount, greatest(__time, {batches}) AS __time,
                       sum(__diff) AS __diff FROM read_parquet($files)
                       GROUP BY ALL HAVING sum(__diff) <> 0)
                TO '{out}' (FORMAT parquet, COMPRESSION zstd)""",
            {"files": files},
        )
    duck_s = time.perf_counter() - start
    shard.downgrade_critical_since("bench", Frontier.at(batches))
    start = time.perf_counter()
    replaced = shard.compact(target_rows=rows + 1, max_batches=1)
    tidemark_s = time.perf_counter() - start
    assert replaced == batches and shard.statistics().batches == 1
    client.close()
    return {
        "what": f"compaction of {rows:,} rows in {batches} batches",
        "tidemark_s": tidemark_s,
        "baseline_s": duck_s,
        "baseline": "DuckDB advance+consolidate+write of the same files",
        "ratio": tidemark_s / duck_s,
        "rows_per_s": rows / tidemark_s,
    }


def _markdown(results: list[dict], meta: dict) -> str:
    lines = [
        f"Storage benchmark ({meta['rows']:,}-row snapshot; {meta['machine']};"
        f" `{meta['command']}`)",
        "",
        "| what | Tidemark | baseline | Tidemark / baseline time | baseline is |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        if "tidemark_per_s" in r:
            tide = f"{r['tidemark_per_s']:,.0f}/s"
            base = f"{r['baseline_per_s']:,.0f}/s" if "baseline_per_s" in r else "-"
        else:
            tide = f"{r['tidemark_s']:.2f} s ({r['rows_per_s']:,.0f} rows/s)"
            base = f"{r['baseline_s']:.2f} s"
        ratio = f"{r['ratio']:.2f}x" if "ratio" in r else "-"
        lines.append(f"| {r['what']} | {tide} | {base} | {ratio} | {r.get('baseline', '-')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000, help="snapshot size")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--appends", type=int, default=200, help="1-row appends to time")
    parser.add_argument("--large-appends", type=int, default=10, help="100k-row appends")
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tidemark-bench-") as tmp:
        work = Path(tmp)
        results = bench_appends(work, args.appends, args.large_appends)
        results += bench_snapshot(work, args.rows, args.repeat, spark_too=not args.no_spark)
        results.append(bench_compaction(work, min(args.rows, 2_000_000), batches=100))
    meta = {
        "rows": args.rows,
        "machine": f"{os.cpu_count()} cores, {platform.machine()},"
        f" Python {platform.python_version()}",
        "command": "make bench-storage",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "storage.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    markdown = _markdown(results, meta)
    (args.out / "storage.md").write_text(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
