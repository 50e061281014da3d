"""Spark and pyarrow read and write the same shards: a DataFrame append is a
compare_and_append like any other, and a Spark snapshot equals the pyarrow one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from coordinator_lib.persist import InvalidUpdates, PersistClient, UpperMismatch
from coordinator_lib.persist.spark_shard import compare_and_append_dataframe, snapshot_dataframe
from coordinator_lib.repr import Frontier, RelationDesc, Update

pytestmark = pytest.mark.spark

DESC = RelationDesc.of(("k", "bigint", False), ("v", "text"))
COLUMNS = ["k", "v", "__time", "__diff"]


@pytest.fixture
def shard(tmp_path: Path):
    client = PersistClient.open(tmp_path)
    yield client.open_shard("spark", DESC)
    client.close()


def _rows(df) -> list[tuple]:
    table = df.toArrow()
    return sorted(zip(*(table.column(n).to_pylist() for n in table.column_names), strict=True))


def test_dataframe_append_is_read_by_pyarrow_and_spark(spark: SparkSession, shard) -> None:
    shard.compare_and_append([Update((1, "a"), 0, 1)], Frontier.at(0), Frontier.at(5))
    rows = [(k, f"v{k % 7}", 5 + k % 3, 1) for k in range(1000)] + [(1, "a", 6, -1)]
    df = spark.createDataFrame(rows, COLUMNS)
    written = compare_and_append_dataframe(shard, df, Frontier.at(5), Frontier.at(10))
    assert written == len(rows)
    assert shard.upper() == Frontier.at(10)
    for as_of in (5, 6, 7, 9):
        expected = sorted((*row, diff) for row, diff in shard.snapshot(as_of))
        assert _rows(snapshot_dataframe(shard, spark, as_of)) == expected
    at_9 = dict(shard.snapshot(9))
    assert (1, "a") not in at_9  # retracted at 6
    assert sum(at_9.values()) == 1000 - 1 + 1  # 1000 inserted, (1, "a") retracted; (1, "v1") stays


def test_dataframe_with_times_outside_bounds_writes_nothing(spark: SparkSession, shard) -> None:
    df = spark.createDataFrame([(1, "x", 3, 1), (2, "y", 12, 1)], COLUMNS)
    with pytest.raises(InvalidUpdates, match=r"times \[3, 12\] lie outside \[0, 10\)"):
        compare_and_append_dataframe(shard, df, Frontier.at(0), Frontier.at(10))
    assert shard.upper() == Frontier.at(0)
    assert shard.blob.list_batches(shard.shard_id) == []


def test_dataframe_with_null_in_not_null_column_writes_nothing(spark, shard) -> None:
    df = spark.createDataFrame([(None, "x", 1, 1)], "k bigint, v string, __time long, __diff long")
    with pytest.raises(InvalidUpdates, match="NULL in NOT NULL column 'k'"):
        compare_and_append_dataframe(shard, df, Frontier.at(0), Frontier.at(10))
    assert shard.upper() == Frontier.at(0)
    assert shard.blob.list_batches(shard.shard_id) == []


def test_dataframe_append_with_wrong_expected_upper(spark: SparkSession, shard) -> None:
    shard.compare_and_append([], Frontier.at(0), Frontier.at(3))
    df = spark.createDataFrame([(1, "x", 1, 1)], COLUMNS)
    with pytest.raises(UpperMismatch) as error:
        compare_and_append_dataframe(shard, df, Frontier.at(0), Frontier.at(10))
    assert error.value.current == Frontier.at(3)
    assert shard.blob.list_batches(shard.shard_id) == []


def test_spark_write_that_outlives_its_lease_is_written_again(
    spark: SparkSession, shard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Spark job longer than the writer lease (a loaded machine) must not
    fail the step: the lapsed batch is dropped and written again."""
    from coordinator_lib.persist import spark_shard

    shard.writer_lease_ms = 3000
    real_write = spark_shard.write_batch_dataframe
    calls: list[str] = []

    def slow_first_write(df, batch_dir, desc):  # type: ignore[no-untyped-def]
        calls.append(batch_dir)
        result = real_write(df, batch_dir, desc)
        if len(calls) == 1:
            time.sleep(3.2)  # the lease lapses while "Spark" works
        return result

    monkeypatch.setattr(spark_shard, "write_batch_dataframe", slow_first_write)
    df = spark.createDataFrame([(k, "x", 1, 1) for k in range(5)], COLUMNS)
    assert compare_and_append_dataframe(shard, df, Frontier.at(0), Frontier.at(2)) == 5
    assert len(calls) == 2
    assert sorted(shard.snapshot(1)) == [((k, "x"), 1) for k in range(5)]
    # Only the second attempt's files remain.
    assert len(shard.blob.list_batches(shard.shard_id)) == 1


def test_planned_spark_snapshot_survives_compaction_elsewhere(
    spark: SparkSession, shard, tmp_path: Path
) -> None:
    """A Spark snapshot planned before another client compacts the shard and
    collects its garbage still runs (Spark listed the replaced files when it
    planned; before seqno holds this failed with FILE_NOT_EXIST)."""
    from coordinator_lib.persist.read_scope import held_reads

    for t in range(6):
        shard.compare_and_append([((t, "x"), t, 1)], Frontier.at(t), Frontier.at(t + 1))
    shard.downgrade_critical_since("c", Frontier.at(5))
    other = PersistClient.open(tmp_path)
    try:
        compactor = other.open_shard("spark", DESC)
        with held_reads():
            df = snapshot_dataframe(shard, spark, 5)
            assert compactor.compact() == 6
            compactor.collect_garbage()
            assert sorted(_rows(df)) == [(k, "x", 1) for k in range(6)]
        assert len(compactor.collect_garbage()) == 6  # released: now they go
    finally:
        other.close()


def test_footer_check_reads_times_past_an_interval_struct(tmp_path: Path) -> None:
    """An interval column is a struct of three Parquet leaves: the footer
    check must read `__time` by leaf, not by field (it read the struct's
    fields as times and refused every Spark batch of an interval view)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from coordinator_lib.persist.spark_shard import _check_footers
    from coordinator_lib.repr.interval import Interval

    desc = RelationDesc.of(("i", "interval"), ("k", "bigint", False))
    client = PersistClient.open(tmp_path)
    try:
        shard = client.open_shard("footers", desc)
        batch_dir = shard.blob.batch_path(shard.shard_id, shard.reserve_batch_key())
        batch_dir.mkdir(parents=True)
        rows = [Interval(-14, 40, 5).as_struct()]
        table = pa.table(
            {"i": rows, "k": [7], "__time": [3], "__diff": [1]},
            schema=desc.arrow_schema(with_time_diff=True),
        )
        pq.write_table(table, batch_dir / "part-0.parquet")
        _check_footers(shard, batch_dir, Frontier.at(3), Frontier.at(4))  # times [3, 3]
        with pytest.raises(InvalidUpdates, match=r"times \[3, 3\] lie outside \[4, 5\)"):
            _check_footers(shard, batch_dir, Frontier.at(4), Frontier.at(5))
    finally:
        client.close()


def test_footer_check_allows_empty_lists_and_null_elements(tmp_path: Path) -> None:
    """A NOT NULL array column may hold `{}` and `{NULL}`, which Parquet
    counts as nulls of the column's leaf: the footer check refused every
    Spark batch of `COALESCE(<array_agg subquery>, '{}')` with "NULL in NOT
    NULL column". A NULL array is still refused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from coordinator_lib.persist.spark_shard import _check_footers

    desc = RelationDesc.of(("a", "integer[]", False), ("k", "bigint", False))
    client = PersistClient.open(tmp_path)
    try:
        shard = client.open_shard("lists", desc)
        for name, arrays, refused in [
            ("kept", [(), (None,), (1, None)], False),
            ("null", [(), None, (1,)], True),
        ]:
            batch_dir = shard.blob.batch_path(shard.shard_id, shard.reserve_batch_key())
            batch_dir.mkdir(parents=True)
            table = pa.table(
                {
                    "a": [None if a is None else list(a) for a in arrays],
                    "k": [1, 2, 3],
                    "__time": [3, 3, 3],
                    "__diff": [1, 1, 1],
                },
                schema=desc.arrow_schema(with_time_diff=True).set(
                    0, pa.field("a", pa.list_(pa.int32()), nullable=True)
                ),
            )
            pq.write_table(table, batch_dir / f"part-{name}.parquet")
            if refused:
                with pytest.raises(InvalidUpdates, match="NULL in NOT NULL column 'a'"):
                    _check_footers(shard, batch_dir, Frontier.at(3), Frontier.at(4))
            else:
                _check_footers(shard, batch_dir, Frontier.at(3), Frontier.at(4))
    finally:
        client.close()
